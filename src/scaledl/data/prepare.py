"""`scaledl prepare DATASET --out FILE [--raw DIR] [--converter MODULE:FUNCTION]`: raw dataset → prepared HDF5 file."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from scaledl.data.converters import CONVERTERS, converter_for
from scaledl.data.converters.options import PrepareOptions
from scaledl.data.hdf5 import read_info
from scaledl.errors import DataError, UserError

HELP = "convert a raw dataset into scaledl's HDF5 layout"


def options_from_args(args: argparse.Namespace) -> PrepareOptions:
    """Converter options from parsed `prepare` arguments."""
    return PrepareOptions(
        image_size=args.image_size,
        seed=args.seed,
        test_fraction=args.test_fraction,
        train_count=args.train_count,
        test_count=args.test_count,
        shape=args.shape,
        classes=args.classes,
        val_labels=args.val_labels,
        devkit=args.devkit,
        skip_corrupt=args.skip_corrupt,
        workers=args.workers,
    )


def _shape(text: str) -> tuple[int, int, int]:
    try:
        c, h, w = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected C,H,W such as 3,32,32, got {text!r}") from None
    return c, h, w


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `prepare` subcommand's arguments to `parser`."""
    d = PrepareOptions()
    parser.epilog = (
        "datasets:\n"
        + "\n".join(f"  {n:10} {c.description}" for n, c in CONVERTERS.items())
        + "\n  NAME       your own: --converter MODULE:FUNCTION, or an installed package's scaledl.datasets entry point"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "dataset",
        help="raw format to convert (see below), an installed plug-in's, or your own with --converter",
    )
    parser.add_argument("--out", type=Path, required=True, help="output HDF5 file, e.g. data/hdf5/DATASET.h5")
    parser.add_argument("--raw", type=Path, help="folder holding the raw files (mnist, cifar10, imagenet)")
    parser.add_argument(
        "--converter",
        metavar="MODULE:FUNCTION",
        help="your own converter, (raw, out, options) -> None, writing scaledl's HDF5 layout named DATASET",
    )
    parser.add_argument("--image-size", type=int, help="output height = width (digits: 28, imagenet: 224)")
    parser.add_argument(
        "--seed", type=int, default=d.seed, help="seed of splits, pre-shuffle and generated data (default %(default)s)"
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=d.test_fraction,
        help="digits: share held out for test (default %(default)s)",
    )
    syn = parser.add_argument_group("synthetic")
    syn.add_argument("--train-count", type=int, default=d.train_count, help="(default %(default)s)")
    syn.add_argument("--test-count", type=int, default=d.test_count, help="(default %(default)s)")
    syn.add_argument("--shape", type=_shape, default=d.shape, metavar="C,H,W", help="image shape (default 1,28,28)")
    syn.add_argument("--classes", type=int, default=d.classes, help="(default %(default)s)")
    inet = parser.add_argument_group("imagenet (see data/raw/README.md)")
    inet.add_argument(
        "--val-labels",
        type=Path,
        metavar="FILE",
        help="flat val/: lines `FILENAME,WNID` (Kaggle's LOC_val_solution.csv works as is)",
    )
    inet.add_argument(
        "--devkit",
        type=Path,
        metavar="DIR",
        help="flat val/: ILSVRC2012_devkit_t12 folder (ground truth + meta.mat; needs scipy)",
    )
    inet.add_argument(
        "--skip-corrupt",
        action="store_true",
        help="skip images that do not decode (count kept in the file's `skipped_corrupt` attribute)",
    )
    inet.add_argument("--workers", type=int, default=d.workers, help="decoding processes (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    """Convert `args.dataset` into `args.out`, print one summary line, return 0. Raises UserError on bad input."""
    converter = converter_for(args.dataset, args.converter)
    opts = options_from_args(args)
    raw = args.raw
    if converter.plugin:
        if raw is not None and not raw.exists():
            raise DataError(f"{raw}: no such file or directory (--raw for {converter.name})")
    elif converter.needs_raw:
        if raw is None:
            raise UserError(f"{converter.name} needs --raw DIR holding {converter.raw_help}")
        if not raw.exists():
            raise DataError(f"{raw}: no such file or directory; it should hold {converter.raw_help}")
    elif raw is not None:
        print(f"scaledl prepare: note: {converter.name} does not read --raw; ignoring {raw}", file=sys.stderr)
        raw = None
    if args.out.is_dir():
        raise UserError(f"--out {args.out} is a folder; give a file name such as {args.out / (converter.name + '.h5')}")
    if opts.image_size is not None and converter.default_image_size is None:
        raise UserError(
            f"{converter.name} images keep their native size; --image-size applies to "
            + ", ".join(n for n, c in CONVERTERS.items() if c.default_image_size is not None)
        )
    start = time.perf_counter()
    converter.convert(raw, args.out, opts)
    seconds = time.perf_counter() - start
    info = checked_output(converter, args.out)
    c, h, w = info.image_shape
    print(
        f"prepared {info.dataset}: {info.n_train} train + {info.n_test} test images of {c}x{h}x{w}, "
        f"{info.classes} classes in {seconds:.1f} s -> {os.fspath(args.out)}"
    )
    return 0


def checked_output(converter, out: Path):
    """The converted file's layout (read_info); a plug-in's file must exist, be in the layout and carry
    its dataset's name (the runs' tables and tuned settings know a dataset by it), else it is removed."""
    if not converter.plugin:
        return read_info(out)
    try:
        info = read_info(out)
        if info.dataset != converter.name:
            raise DataError(
                f"{out}: {converter.description} wrote dataset {info.dataset!r}; write the file with "
                f"dataset={converter.name!r} (scaledl.data.hdf5.write_dataset)"
            )
    except DataError as error:
        out.unlink(missing_ok=True)  # no partial or mislabelled output behind
        raise UserError(f"dataset {converter.name}: {error}") from None
    return info
