"""MNIST from its four IDX files (gzipped or not), as distributed by LeCun et al. and its mirrors.

IDX format: a big-endian int32 magic (2051 images, 2049 labels), one int32 per
dimension, then the unsigned bytes. Every header is checked against the bytes
that follow, so a truncated download is caught here and not at training time.
Images keep their native size (28x28). The train split is pre-shuffled with `--seed`.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from scaledl.data.converters.options import PrepareOptions
from scaledl.data.hdf5 import sha256_files, write_dataset
from scaledl.errors import DataError

DESCRIPTION = "MNIST from the four IDX files under --raw (.gz or not)"
RAW_HELP = (
    "the four MNIST IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, "
    "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each .gz or not)"
)
DEFAULT_IMAGE_SIZE = None
CLASSES = 10
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049
FILES = {  # (split, kind) → standard file name
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
REDOWNLOAD = "re-download the file"


def find_file(raw: Path, name: str) -> Path | None:
    """`name`, `name.gz`, or the mirrors' spelling with a dot (`train-images.idx3-ubyte`)."""
    dotted = name.replace("-idx", ".idx")
    for candidate in (name, name + ".gz", dotted, dotted + ".gz"):
        if (raw / candidate).is_file():
            return raw / candidate
    return None


def read_bytes(path: Path) -> bytes:
    """The file's content, gunzipped when it ends in .gz; a broken archive is a DataError."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"{path}: cannot read ({err}); {REDOWNLOAD}") from None


def parse_idx(path: Path, magic: int) -> np.ndarray:
    """An IDX array of unsigned bytes whose header must carry `magic` (ndim = magic - 2048)."""
    data = read_bytes(path)
    ndim = magic - 2048
    header = 4 * (1 + ndim)
    if len(data) < header:
        raise DataError(f"{path}: truncated: {len(data)} bytes, shorter than the IDX header; {REDOWNLOAD}")
    found, *dims = np.frombuffer(data, dtype=">i4", count=1 + ndim).tolist()
    if found != magic:
        what = "images" if magic == IMAGES_MAGIC else "labels"
        raise DataError(
            f"{path}: magic number {found}, expected {magic} for IDX {what}; "
            "is this the right file? otherwise " + REDOWNLOAD
        )
    if min(dims) < 1:
        raise DataError(f"{path}: header gives dimensions {dims}; {REDOWNLOAD}")
    expected, got = int(np.prod(dims)), len(data) - header
    if got != expected:
        problem = "truncated" if got < expected else "too long"
        shape = f"{dims[0]} images of {dims[1]}x{dims[2]}" if ndim == 3 else f"{dims[0]} labels"
        raise DataError(
            f"{path}: {problem}: header says {shape} ({expected} bytes) but {got} bytes follow; {REDOWNLOAD}"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def read_split(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 1, H, W) uint8 and labels (N,) int64 of one split, cross-checked."""
    images = parse_idx(images_path, IMAGES_MAGIC)
    labels = parse_idx(labels_path, LABELS_MAGIC).astype(np.int64)
    if len(images) != len(labels):
        raise DataError(
            f"{labels_path}: {len(labels)} labels but {images_path.name} holds {len(images)} images; "
            "the two files do not belong together, re-download them"
        )
    if labels.max() >= CLASSES:
        bad = int(np.argmax(labels >= CLASSES))
        raise DataError(f"{labels_path}: label {labels[bad]} at index {bad} is outside 0..{CLASSES - 1}; {REDOWNLOAD}")
    return images[:, None], labels


def convert(raw: Path, out: Path, opts: PrepareOptions) -> None:
    """Write MNIST from the IDX files in `raw` to `out`."""
    paths = {key: find_file(raw, name) for key, name in FILES.items()}
    missing = [name for key, name in FILES.items() if paths[key] is None]
    if missing:
        raise DataError(f"{raw}: missing {', '.join(missing)} (or .gz); download the MNIST IDX files into this folder")
    train = read_split(paths["train", "images"], paths["train", "labels"])
    test = read_split(paths["test", "images"], paths["test", "labels"])
    if train[0].shape[1:] != test[0].shape[1:]:
        raise DataError(
            f"{paths['test', 'images']}: images are {test[0].shape[2:]} but train images are "
            f"{train[0].shape[2:]}; the files come from different datasets"
        )
    order = np.random.default_rng(opts.seed).permutation(len(train[1]))
    write_dataset(
        out,
        dataset="mnist",
        train=(train[0][order], train[1][order]),
        test=test,
        classes=CLASSES,
        class_names=[str(d) for d in range(CLASSES)],
        source_sha256=sha256_files(paths.values(), raw),
        attrs={"seed": opts.seed},
    )
