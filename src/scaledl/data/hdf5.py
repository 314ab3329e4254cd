"""The HDF5 layout of a prepared dataset, in one place.

One file per dataset::

    /train/images   uint8  (N, C, H, W)   dims labelled batch, channel, height, width
    /train/labels   int64  (N,)
    /test/images, /test/labels            as /train
    /class_names    utf-8 strings (K,)    when the converter knows them
    root attributes: dataset, classes, mean, std, source_sha256, scaledl_version,
                     format_version (+ converter provenance such as seed)

`mean` and `std` are per channel, of the train images scaled to [0, 1]
(population std). Images and labels are chunked along the sample axis (~1 MiB
per chunk, uncompressed); large sets are written in streamed slices, so memory
stays bounded, and their train split is pre-shuffled by the converter so that
contiguous block reads give a random enough order.

Integrity (format_version 2): every chunk carries HDF5's Fletcher-32 checksum,
which HDF5 checks on every read of the chunk, so a damaged chunk is refused
by whatever reads it (an in-memory shard, a streamed block, an evaluation
batch) and `read_rows` turns that into one DataError line naming the file.
This costs no extra pass over a 100+ GB file (a whole-split digest would) and
covers partial reads, which a digest of the split cannot. The price is chunked
layout for small sets too: a shard is read as ~1 MiB pieces, each checksummed
and copied once, instead of one contiguous read. Reading 73 MiB from the page
cache on 2 shared cores took (medians of 7, two runs) 16-17 ms contiguous,
30-32 ms chunked and 65-75 ms chunked with checksums, i.e. about 0.7 s more
per GiB, paid once per run by an in-memory shard and per 64 MiB block by a
streamed one. Files written before format_version 2 (no such attribute:
contiguous small sets, chunked large sets, no checksums) are still read,
without verification; re-prepare them to get it.

Every write goes to a temporary file beside the output that is renamed at the
end, so a reader never sees a partial file. Because finished files are never
modified, readers open them without HDF5 file locking (which fails on some
parallel file systems).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

import scaledl
from scaledl.atomic import atomic_path
from scaledl.errors import DataError

TRAIN, TEST = "train", "test"
SPLITS = (TRAIN, TEST)
IMAGES, LABELS = "images", "labels"
CLASS_NAMES = "class_names"
IMAGE_DTYPE = np.dtype(np.uint8)
LABEL_DTYPE = np.dtype(np.int64)
IMAGE_DIMS = ("batch", "channel", "height", "width")

ATTR_DATASET = "dataset"
ATTR_CLASSES = "classes"
ATTR_MEAN = "mean"
ATTR_STD = "std"
ATTR_SOURCE_SHA256 = "source_sha256"
ATTR_VERSION = "scaledl_version"
ATTR_FORMAT = "format_version"
FORMAT_VERSION = 2  # 2: every dataset chunked with Fletcher-32 checksums; 1 (attribute absent): none
REQUIRED_ATTRS = (ATTR_DATASET, ATTR_CLASSES, ATTR_MEAN, ATTR_STD, ATTR_SOURCE_SHA256, ATTR_VERSION)

CHUNK_BYTES = 1 << 20  # h5py advice: 10 KiB-1 MiB per chunk; one chunk ≈ a few ImageNet images


def rows_per_chunk(image_shape: Sequence[int]) -> int:
    """Images per ~1 MiB chunk (at least one)."""
    return max(1, CHUNK_BYTES // int(np.prod(image_shape)))


def open_h5(path: str | os.PathLike) -> h5py.File:
    """Open a prepared file read-only, without file locking (finished files never change)."""
    return h5py.File(path, "r", locking=False)


def read_rows(
    path: str | os.PathLike, dataset: h5py.Dataset, lo: int | None = None, hi: int | None = None
) -> np.ndarray:
    """`dataset[lo:hi]`; a chunk that fails its checksum (or cannot be read) becomes one DataError line
    naming `path`."""
    try:
        return dataset[lo:hi]
    except OSError as err:  # h5py's error for a filter failure: "Can't read data (filter returned failure ...)"
        raise DataError(_damaged(path, dataset, lo, hi, err)) from None


def _damaged(path, dataset: h5py.Dataset, lo: int | None, hi: int | None, err: OSError) -> str:
    rows = f"{lo or 0}..{len(dataset) if hi is None else min(hi, len(dataset))}"
    try:
        name = str(dataset.file.attrs.get(ATTR_DATASET, "DATASET"))
    except (OSError, KeyError):
        name = "DATASET"
    why = " ".join(str(err).split())  # HDF5 messages are one line, but make sure
    check = "fails its checksum or cannot be read" if dataset.fletcher32 else "cannot be read"
    return (
        f"{path}: damaged file: a chunk of {dataset.name} within rows {rows} {check} (HDF5: {why}); "
        f"delete it and re-run `scaledl prepare {name} --out {path}`"
    )


# --- source hashes -----------------------------------------------------------------


def manifest_sha256(entries: Iterable[tuple[str, str]]) -> str:
    """sha256 of the lines `<sha256 hex>  <name>\\n` in the given order (the output format of `sha256sum`).

    This is how several raw files become one `source_sha256`: the `sha256sum`
    manifest of the files, sorted by relative name, hashed again. Callers pass
    the entries sorted by name (`sha256_files` does), so the result does not
    depend on the order the files were read in.
    """
    outer = hashlib.sha256()
    for name, digest in entries:
        outer.update(f"{digest}  {name}\n".encode())
    return outer.hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 hex of one file's bytes, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(1 << 20):
            h.update(piece)
    return h.hexdigest()


def sha256_files(paths: Iterable[str | os.PathLike], root: str | os.PathLike | None = None) -> str:
    """Combined sha256 of raw input files (`manifest_sha256`, sorted by name; names relative to `root`,
    else base names)."""
    named = sorted((Path(p).relative_to(root).as_posix() if root is not None else Path(p).name, Path(p)) for p in paths)
    return manifest_sha256((name, sha256_file(p)) for name, p in named)


def identity(path: str | os.PathLike) -> str:
    """sha256 of what tells one prepared file from another, read without its images: every root attribute
    (the raw source's sha256, the converter's options, the preparing version, and the train images' exact
    per-channel mean and std, which almost any edit of them moves), each dataset's shape, dtype and
    chunking, and every label in order (the pre-shuffle's order too).

    What a checkpoint is tied to (scaledl.train.checkpoint). Reading it costs the labels alone (10 MB for
    ImageNet's 1.28 M images), where a digest of the bytes would read the whole file (100+ GB) at every
    resume; a copy of the file elsewhere (staged to a node's local disk, say) has the same identity. Not
    seen: an edit in place that keeps every statistic (two train pixels swapped, a test image changed);
    prepared files are written once, atomically, and never modified. A damaged chunk is HDF5's to refuse
    (Fletcher-32, checked on every read), not this digest's."""
    digest = hashlib.sha256()
    with open_h5(path) as f:
        attrs = {name: np.asarray(value).tolist() for name, value in sorted(f.attrs.items())}
        digest.update(json.dumps(attrs, sort_keys=True, default=str).encode())
        for split in SPLITS:
            for key in (IMAGES, LABELS):
                data = f[split][key]
                digest.update(f"\n/{split}/{key} {data.dtype} {data.shape} {data.chunks}".encode())
            digest.update(np.ascontiguousarray(read_rows(path, f[split][LABELS]), dtype=LABEL_DTYPE).tobytes())
    return digest.hexdigest()


# --- writing -----------------------------------------------------------------------


class _ChannelStats:
    """Exact per-channel mean/std of uint8 images: integer sums, so the result does not depend on chunking."""

    def __init__(self, channels: int):
        self.sum = np.zeros(channels, np.int64)
        self.sum_sq = np.zeros(channels, np.int64)  # ImageNet: 1.3e6*224*224*255² ≈ 4e15 < 9e18
        self.values_per_channel = 0

    def add(self, images: np.ndarray) -> None:
        self.sum += images.sum(axis=(0, 2, 3), dtype=np.int64)
        self.sum_sq += np.square(images, dtype=np.uint16).sum(axis=(0, 2, 3), dtype=np.int64)
        self.values_per_channel += images.shape[0] * images.shape[2] * images.shape[3]

    def add_blank(self, count: int, height: int, width: int) -> None:
        """`count` all-zero images: they add values to the count and nothing to the sums."""
        self.values_per_channel += count * height * width

    def mean_std(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.values_per_channel
        mean = self.sum / (255.0 * n)
        var = self.sum_sq / (255.0**2 * n) - mean**2
        return mean, np.sqrt(np.maximum(var, 0.0))


class SplitWriter:
    """Writes one split's images and labels in consecutive slices (`DatasetWriter.create_split`).

    Both datasets are chunked with Fletcher-32 checksums; `chunked=True` (the
    large-set layout) also makes them extendable, so a streaming converter can
    cut a split short (`shrink_to_written`).
    """

    def __init__(
        self,
        group: h5py.Group,
        n: int,
        image_shape: tuple[int, int, int],
        classes: int,
        chunked: bool,
        stats: _ChannelStats | None,
    ):
        self.n, self.image_shape, self.classes = n, image_shape, classes
        self.written = 0
        self._stats = stats
        img_opts = dict(chunks=(min(n, rows_per_chunk(image_shape)), *image_shape), fletcher32=True)
        lab_opts = dict(chunks=(min(n, CHUNK_BYTES // LABEL_DTYPE.itemsize),), fletcher32=True)
        if chunked:
            img_opts["maxshape"], lab_opts["maxshape"] = (None, *image_shape), (None,)
        self.images = group.create_dataset(IMAGES, (n, *image_shape), IMAGE_DTYPE, **img_opts)
        self.labels = group.create_dataset(LABELS, (n,), LABEL_DTYPE, **lab_opts)
        for dim, label in zip(self.images.dims, IMAGE_DIMS):
            dim.label = label
        self.labels.dims[0].label = IMAGE_DIMS[0]

    def write(self, images: np.ndarray, labels: np.ndarray) -> None:
        """Append a slice: `images` uint8 (B, C, H, W), `labels` integers in [0, classes)."""
        images = np.asarray(images)
        labels = np.asarray(labels, dtype=LABEL_DTYPE)
        b = len(images)
        if images.dtype != IMAGE_DTYPE or images.shape[1:] != self.image_shape or labels.shape != (b,):
            raise ValueError(
                f"expected uint8 images (B, {self.image_shape}) and B labels, "
                f"got {images.dtype} {images.shape} and {labels.shape}"
            )
        if self.written + b > self.n:
            raise ValueError(f"split holds {self.n} images; cannot write {b} more after {self.written}")
        if b and (labels.min() < 0 or labels.max() >= self.classes):
            raise ValueError(f"labels must lie in [0, {self.classes}); got {labels.min()}..{labels.max()}")
        self.images[self.written : self.written + b] = images
        self.labels[self.written : self.written + b] = labels
        if self._stats is not None:
            self._stats.add(images)
        self.written += b

    def write_blank(self, labels: np.ndarray) -> None:
        """Append rows whose images are left at the fill value (all zero): never written, so their chunks take
        no space on disk (a time-only dataset of a large set's size); their labels are written."""
        labels = np.asarray(labels, dtype=LABEL_DTYPE)
        b = len(labels)
        if self.written + b > self.n:
            raise ValueError(f"split holds {self.n} images; cannot write {b} more after {self.written}")
        self.labels[self.written : self.written + b] = labels
        if self._stats is not None:
            self._stats.add_blank(b, *self.image_shape[1:])
        self.written += b

    def shrink_to_written(self) -> None:
        """Cut the split to what was written (chunked splits only: images skipped on purpose)."""
        self.images.resize(self.written, axis=0)
        self.labels.resize(self.written, axis=0)
        self.n = self.written


class DatasetWriter:
    """Context manager that writes a prepared file atomically, split by split, in bounded memory.

    >>> with DatasetWriter(out, dataset="mnist", classes=10, source_sha256=h) as w:
    ...     train = w.create_split("train", n, (1, 28, 28))
    ...     train.write(images, labels)          # as many slices as needed
    ...     ...
    On leaving, mean/std of the train images are stored and the file is renamed
    onto `out`; on any exception (KeyboardInterrupt included) nothing is left.
    `source_sha256` and `attrs` may be filled in while writing.
    """

    def __init__(
        self,
        out: str | os.PathLike,
        *,
        dataset: str,
        classes: int,
        class_names: Sequence[str] | None = None,
        source_sha256: str = "",
        chunked: bool = False,
        attrs: Mapping[str, object] | None = None,
    ):
        self.out = Path(out)
        self.dataset, self.classes, self.chunked = dataset, int(classes), chunked
        self.class_names = list(class_names) if class_names is not None else None
        self.source_sha256 = source_sha256
        self.attrs = dict(attrs or {})
        self.splits: dict[str, SplitWriter] = {}
        self._stats: _ChannelStats | None = None
        self._stack: ExitStack | None = None
        self._file: h5py.File | None = None

    def __enter__(self) -> DatasetWriter:
        if self.class_names is not None and len(self.class_names) != self.classes:
            raise ValueError(f"{len(self.class_names)} class names for {self.classes} classes")
        with ExitStack() as stack:  # if opening fails, the temp file goes too
            tmp = stack.enter_context(atomic_path(self.out))
            self._file = stack.enter_context(h5py.File(tmp, "w"))
            self._stack = stack.pop_all()
        return self

    def create_split(self, split: str, n: int, image_shape: Sequence[int]) -> SplitWriter:
        """Create `/split/images` (n, *image_shape) and `/split/labels` (n,)."""
        if split not in SPLITS or split in self.splits:
            raise ValueError(f"split must be one of {SPLITS}, once each; got {split!r}")
        if n < 1:
            raise ValueError(f"split {split!r} needs at least one image, got {n}")
        image_shape = tuple(int(s) for s in image_shape)
        if split == TRAIN:
            self._stats = _ChannelStats(image_shape[0])
        writer = SplitWriter(
            self._file.create_group(split),
            n,
            image_shape,
            self.classes,
            self.chunked,
            self._stats if split == TRAIN else None,
        )
        self.splits[split] = writer
        return writer

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                self._finalize()
        except BaseException as err:
            self._stack.__exit__(type(err), err, err.__traceback__)
            raise
        return self._stack.__exit__(exc_type, exc, tb)

    def _finalize(self) -> None:
        if set(self.splits) != set(SPLITS):
            raise ValueError(f"both splits must be written; have {sorted(self.splits)}")
        for name, s in self.splits.items():
            if s.written != s.n:
                raise ValueError(f"split {name!r}: {s.written} of {s.n} images written")
        if self.splits[TRAIN].image_shape != self.splits[TEST].image_shape:
            raise ValueError("train and test images must have the same shape")
        if not self.source_sha256:
            raise ValueError("source_sha256 was not set")
        mean, std = self._stats.mean_std()
        a = self._file.attrs
        a[ATTR_DATASET] = self.dataset
        a[ATTR_CLASSES] = self.classes
        a[ATTR_MEAN] = mean
        a[ATTR_STD] = std
        a[ATTR_SOURCE_SHA256] = self.source_sha256
        a[ATTR_VERSION] = scaledl.__version__
        a[ATTR_FORMAT] = FORMAT_VERSION
        for key, value in self.attrs.items():
            a[key] = value
        if self.class_names is not None:
            self._file.create_dataset(CLASS_NAMES, data=self.class_names, dtype=h5py.string_dtype())


def write_dataset(
    out: str | os.PathLike,
    *,
    dataset: str,
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    classes: int,
    class_names: Sequence[str] | None,
    source_sha256: str,
    chunked: bool = False,
    attrs: Mapping[str, object] | None = None,
) -> None:
    """Write in-memory splits `(images uint8 NCHW, labels)` as a prepared file, atomically."""
    with DatasetWriter(
        out,
        dataset=dataset,
        classes=classes,
        class_names=class_names,
        source_sha256=source_sha256,
        chunked=chunked,
        attrs=attrs,
    ) as w:
        for name, (images, labels) in ((TRAIN, train), (TEST, test)):
            w.create_split(name, len(images), images.shape[1:]).write(images, labels)


# --- reading -----------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetInfo:
    """What a prepared file holds, read from its attributes and dataset shapes."""

    path: Path
    dataset: str
    classes: int
    class_names: tuple[str, ...] | None
    image_shape: tuple[int, int, int]
    n_train: int
    n_test: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source_sha256: str
    scaledl_version: str
    chunked: bool
    format_version: int
    checksummed: bool  # Fletcher-32 on every chunk, verified by HDF5 on read (format_version >= 2)

    def count(self, split: str) -> int:
        """Number of images in `split`."""
        return {TRAIN: self.n_train, TEST: self.n_test}[split]

    @property
    def image_nbytes(self) -> int:
        """Bytes of one uint8 image."""
        return int(np.prod(self.image_shape))


def read_info(path: str | os.PathLike) -> DatasetInfo:
    """Read and check a prepared file's layout; a DataError (one line, naming the file and the fix) if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file; create it with `scaledl prepare DATASET --out {path}`")
    if not h5py.is_hdf5(path):
        raise DataError(f"{path}: not an HDF5 file; re-run `scaledl prepare DATASET --out {path}`")
    try:
        with open_h5(path) as f:
            return _read_info(path, f)
    except OSError as err:  # damaged after the header (e.g. a truncated copy)
        raise DataError(
            f"{path}: unreadable HDF5 file ({err}); re-run `scaledl prepare DATASET --out {path}`"
        ) from None


def _read_info(path: Path, f: h5py.File) -> DatasetInfo:
    name = f.attrs.get(ATTR_DATASET, "DATASET")

    def bad(what: str) -> DataError:
        return DataError(f"{path}: {what}; not a scaledl dataset file, re-run `scaledl prepare {name} --out {path}`")

    missing = [a for a in REQUIRED_ATTRS if a not in f.attrs]
    if missing:
        raise bad(f"missing root attribute(s) {', '.join(missing)}")
    fmt = int(f.attrs.get(ATTR_FORMAT, 1))
    if fmt > FORMAT_VERSION:
        raise DataError(
            f"{path}: format_version {fmt} is newer than this scaledl reads ({FORMAT_VERSION}); "
            f"upgrade scaledl or re-run `scaledl prepare {name} --out {path}`"
        )
    shapes, counts = {}, {}
    for split in SPLITS:
        for key, dtype, ndim in ((IMAGES, IMAGE_DTYPE, 4), (LABELS, LABEL_DTYPE, 1)):
            obj = f.get(f"{split}/{key}")
            if not isinstance(obj, h5py.Dataset):
                raise bad(f"missing dataset /{split}/{key}")
            if obj.dtype != dtype or obj.ndim != ndim:
                raise bad(f"/{split}/{key} is {obj.dtype} with {obj.ndim} dims, expected {dtype} with {ndim}")
        images, labels = f[split][IMAGES], f[split][LABELS]
        if len(images) != len(labels):
            raise bad(f"/{split} has {len(images)} images but {len(labels)} labels")
        if len(images) == 0:
            raise bad(f"/{split} is empty")
        if fmt >= 2 and not (images.fletcher32 and labels.fletcher32):
            raise bad(f"/{split} has no checksums although format_version is {fmt}")
        shapes[split], counts[split] = images.shape[1:], len(images)
    if shapes[TRAIN] != shapes[TEST]:
        raise bad(f"train images are {shapes[TRAIN]} but test images are {shapes[TEST]}")
    channels = shapes[TRAIN][0]
    mean = tuple(float(m) for m in np.atleast_1d(f.attrs[ATTR_MEAN]))
    std = tuple(float(s) for s in np.atleast_1d(f.attrs[ATTR_STD]))
    if len(mean) != channels or len(std) != channels:
        raise bad(f"mean/std have {len(mean)}/{len(std)} values for {channels} channels")
    classes = int(f.attrs[ATTR_CLASSES])
    class_names = None
    if CLASS_NAMES in f:
        class_names = tuple(s.decode() if isinstance(s, bytes) else str(s) for s in f[CLASS_NAMES][()])
        if len(class_names) != classes:
            raise bad(f"{len(class_names)} class names for {classes} classes")
    return DatasetInfo(
        path=path,
        dataset=str(name),
        classes=classes,
        class_names=class_names,
        image_shape=tuple(int(s) for s in shapes[TRAIN]),
        n_train=counts[TRAIN],
        n_test=counts[TEST],
        mean=mean,
        std=std,
        source_sha256=str(f.attrs[ATTR_SOURCE_SHA256]),
        scaledl_version=str(f.attrs[ATTR_VERSION]),
        chunked=f[TRAIN][IMAGES].chunks is not None,
        format_version=fmt,
        checksummed=fmt >= 2,
    )
