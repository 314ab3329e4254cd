"""CIFAR-10 from the "python version" batches: `cifar-10-python.tar.gz`, or its extracted files.

`--raw` may be the archive itself, a folder holding it, a folder holding
`cifar-10-batches-py/`, or that folder. Each batch is a pickled dict with
`data` (N x 3072 uint8, channel-major rows) and `labels` (N ints in 0..9).
The batches come from the internet, so they are unpickled with an unpickler
that only rebuilds numpy arrays: a tampered file cannot run code.
Images keep their native size (3x32x32). The train split is pre-shuffled with `--seed`.
"""

from __future__ import annotations

import pickle
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from scaledl.data.converters.options import PrepareOptions
from scaledl.data.hdf5 import sha256_file, sha256_files, write_dataset
from scaledl.errors import DataError

DESCRIPTION = "CIFAR-10 python batches under --raw (cifar-10-python.tar.gz or extracted)"
RAW_HELP = "cifar-10-python.tar.gz or the extracted cifar-10-batches-py/ (data_batch_1..5, test_batch)"
DEFAULT_IMAGE_SIZE = None
ARCHIVE = "cifar-10-python.tar.gz"
FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCHES = ("test_batch",)
META = "batches.meta"
CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)
DEFAULT_CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
REDOWNLOAD = f"re-download {ARCHIVE}"

# What a CIFAR batch pickle may refer to: numpy's array reconstruction, nothing else.
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # how Python 3 writes bytes at protocol 2 (re-pickled copies)
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refers to {module}.{name}, which a CIFAR batch never does")
        try:  # numpy 2 renamed numpy.core to numpy._core; the old name warns
            return super().find_class(module.replace("numpy.core.", "numpy._core."), name)
        except ImportError:  # numpy 1.x
            return super().find_class(module.replace("numpy._core.", "numpy.core."), name)


def load_pickle(f: IO[bytes], where: str) -> dict:
    """Unpickle one batch (Python 2 pickles: encoding="bytes"); any failure is a DataError naming `where`."""
    try:
        obj = _ArrayUnpickler(f, encoding="bytes").load()
    except Exception as err:  # corrupt pickles fail in many ways (EOFError, UnpicklingError, ValueError, ...)
        raise DataError(f"{where}: not a readable CIFAR batch ({type(err).__name__}: {err}); {REDOWNLOAD}") from None
    if not isinstance(obj, dict):
        raise DataError(f"{where}: holds a {type(obj).__name__}, expected a dict; {REDOWNLOAD}")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in obj.items()}


def check_batch(batch: dict, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, 32, 32) uint8 and labels (N,) int64 from a batch dict, validated."""
    data, labels = batch.get("data"), batch.get("labels")
    if not isinstance(data, np.ndarray) or labels is None:
        raise DataError(f"{where}: no `data` array or no `labels` list; not a CIFAR-10 batch, {REDOWNLOAD}")
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != np.prod(IMAGE_SHAPE):
        raise DataError(f"{where}: `data` is {data.dtype} {data.shape}, expected uint8 (N, 3072); {REDOWNLOAD}")
    try:
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise DataError(f"{where}: `labels` are not integers; {REDOWNLOAD}") from None
    if len(labels) != len(data):
        raise DataError(f"{where}: {len(data)} images but {len(labels)} labels; {REDOWNLOAD}")
    if len(labels) and (labels.min() < 0 or labels.max() >= CLASSES):
        raise DataError(f"{where}: labels {labels.min()}..{labels.max()} outside 0..{CLASSES - 1}; {REDOWNLOAD}")
    return data.reshape(-1, *IMAGE_SHAPE), labels


def class_names(meta: dict | None) -> list[str]:
    """`label_names` from batches.meta when present and sane, else CIFAR-10's published names."""
    names = (meta or {}).get("label_names")
    if isinstance(names, list) and len(names) == CLASSES:
        return [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    return list(DEFAULT_CLASS_NAMES)


def locate(raw: Path) -> tuple[Path, bool]:
    """(batches folder, False) or (archive, True), preferring extracted files."""
    for folder in (raw / FOLDER, raw):
        if (folder / TRAIN_BATCHES[0]).is_file():
            return folder, False
    for archive in (raw, raw / ARCHIVE):
        if archive.is_file():
            return archive, True
    raise DataError(
        f"{raw}: found neither {ARCHIVE} nor {FOLDER}/{TRAIN_BATCHES[0]}; "
        f"download {ARCHIVE} (python version) into this folder"
    )


def read_folder(folder: Path) -> tuple[Callable[[str], dict | None], str]:
    """A batch reader over extracted files, and their combined sha256."""
    missing = [n for n in TRAIN_BATCHES + TEST_BATCHES if not (folder / n).is_file()]
    if missing:
        raise DataError(f"{folder}: missing {', '.join(missing)}; extract {ARCHIVE} again")

    def read(name: str) -> dict | None:
        path = folder / name
        if not path.is_file():
            return None
        with open(path, "rb") as f:
            return load_pickle(f, str(path))

    present = [folder / n for n in TRAIN_BATCHES + TEST_BATCHES + (META,) if (folder / n).is_file()]
    return read, sha256_files(present, folder)


def read_archive(archive: Path) -> tuple[Callable[[str], dict | None], str, tarfile.TarFile]:
    """A batch reader over the tar.gz members (matched by base name), the archive's sha256, the open archive."""
    try:
        tar = tarfile.open(archive, "r:gz")
        members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise DataError(f"{archive}: not a readable tar.gz ({err}); {REDOWNLOAD}") from None
    missing = [n for n in TRAIN_BATCHES + TEST_BATCHES if n not in members]
    if missing:
        tar.close()
        raise DataError(f"{archive}: has no {', '.join(missing)}; is this the python version? {REDOWNLOAD}")

    def read(name: str) -> dict | None:
        if name not in members:
            return None
        where = f"{archive}:{members[name].name}"
        try:
            f = tar.extractfile(members[name])
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise DataError(f"{where}: cannot extract ({err}); {REDOWNLOAD}") from None
        return load_pickle(f, where)

    return read, sha256_file(archive), tar


def convert(raw: Path, out: Path, opts: PrepareOptions) -> None:
    """Write CIFAR-10 from the batches found under `raw` to `out`."""
    source, is_archive = locate(raw)
    tar = None
    if is_archive:
        read, digest, tar = read_archive(source)
    else:
        read, digest = read_folder(source)
    try:
        splits = {}
        for split, names in (("train", TRAIN_BATCHES), ("test", TEST_BATCHES)):
            parts = [check_batch(read(n), f"{source}:{n}" if is_archive else str(source / n)) for n in names]
            splits[split] = tuple(np.concatenate(p) for p in zip(*parts))
        names = class_names(read(META))
    finally:
        if tar is not None:
            tar.close()
    images, labels = splits["train"]
    order = np.random.default_rng(opts.seed).permutation(len(labels))
    write_dataset(
        out,
        dataset="cifar10",
        train=(images[order], labels[order]),
        test=splits["test"],
        classes=CLASSES,
        class_names=names,
        source_sha256=digest,
        attrs={"seed": opts.seed},
    )
