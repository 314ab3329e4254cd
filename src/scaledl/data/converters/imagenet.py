"""ImageNet (ILSVRC-2012) from its JPEG folders, streamed into a chunked file in bounded memory.

Layout under `--raw`:

- `train/<wnid>/*.JPEG`; the classes are the sorted wnids found here.
- `val/<wnid>/*.JPEG` (val sorted into class folders, e.g. by the usual
  `valprep.sh`), or flat `val/*.JPEG` plus its labels, from the first of:
  `--val-labels FILE` (lines `FILENAME,WNID` or `FILENAME WNID`, extension
  optional; Kaggle's `LOC_val_solution.csv` works as is: its header is skipped
  and the first word of the prediction string is the wnid), `--devkit DIR`
  (the official `ILSVRC2012_devkit_t12`: `data/ILSVRC2012_validation_ground_truth.txt`
  holds 1-based ILSVRC2012_IDs in the sorted order of the val file names, and
  `data/meta.mat` maps those ids to wnids; read with scipy, which scikit-learn
  installs), or `LOC_val_solution.csv` / `ILSVRC2012_devkit_t12/` inside `--raw`.
  The ground-truth ids are NOT indices into the sorted wnids, so a sorted wnid
  list (`LOC_synset_mapping.txt`, Caffe's `synsets.txt`) cannot stand in for meta.mat.

Each image is decoded with Pillow, converted to RGB, resized so its shorter
side is round(S*256/224) (bilinear) and center-cropped to S x S, S =
`--image-size` (default 224): torchvision's `Resize(round(S*256/224))` +
`CenterCrop(S)`. JPEG decoding uses Pillow's draft mode (DCT scaling to no
less than the resize target), several times faster on large photos.

The train split is written in a seeded random order (pre-shuffled) so the
loader can read contiguous blocks; the val split ("test") in file-name order.
A file that does not decode is a DataError naming it, unless `--skip-corrupt`,
which leaves it out, reports it on stderr and counts it in the `skipped_corrupt`
attribute. `source_sha256` is the `manifest_sha256` of every image (paths
relative to `--raw`; train then val, class folders sorted, files sorted within
each), followed by the val label files used (base names).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import warnings
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from itertools import chain
from pathlib import Path

import numpy as np

from scaledl.data.converters.options import PrepareOptions
from scaledl.data.hdf5 import TEST, TRAIN, DatasetWriter, SplitWriter, manifest_sha256, sha256_file
from scaledl.errors import DataError, UserError
from scaledl.progress import Progress

DESCRIPTION = "ILSVRC-2012 JPEG folders under --raw (train/<wnid>/, val/ sorted or flat + labels)"
RAW_HELP = (
    "train/<wnid>/*.JPEG and val/ (val/<wnid>/*.JPEG, or flat val/*.JPEG with --val-labels FILE "
    "or --devkit DIR); see data/raw/README.md"
)
DEFAULT_IMAGE_SIZE = 224
IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png"}
BLOCK_IMAGES = 512  # decoded per round: bounds memory (512 x 147 KiB = 75 MiB at 224)
KAGGLE_VAL_LABELS = "LOC_val_solution.csv"
DEVKIT = "ILSVRC2012_devkit_t12"
GROUND_TRUTH = "ILSVRC2012_validation_ground_truth.txt"


# --- listing and labels -------------------------------------------------------------


def list_images(folder: Path) -> list[str]:
    """Image file names in `folder`, sorted; hidden and non-image files are ignored."""
    # scandir knows file types without one stat per file: 1.3M stats are slow on parallel file systems
    with os.scandir(folder) as entries:
        return sorted(
            e.name
            for e in entries
            if Path(e.name).suffix.lower() in IMAGE_SUFFIXES and not e.name.startswith(".") and e.is_file()
        )


def scan_classes(root: Path, wnids: Sequence[str] | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """(class names, image paths relative to root's parent, labels) of a `<wnid>/*.JPEG` tree.

    With `wnids` given (val), every folder must be one of them and labels index them.
    """
    folders = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    classes = list(wnids) if wnids is not None else folders
    index = {w: i for i, w in enumerate(classes)}
    files, labels = [], []
    for folder in folders:
        if folder not in index:
            raise DataError(
                f"{root / folder}: class not among the {len(classes)} in train/; val must use the train class folders"
            )
        names = list_images(root / folder)
        if not names and wnids is None:
            raise DataError(f"{root / folder}: no images (.JPEG/.jpg/.png); remove the folder or re-extract it")
        files += [f"{root.name}/{folder}/{n}" for n in names]
        labels += [index[folder]] * len(names)
    if not files:
        raise DataError(f"{root}: no images in class folders; expected {root.name}/<wnid>/*.JPEG")
    return classes, files, np.asarray(labels, dtype=np.int64)


def read_val_labels(path: Path, wnids: Sequence[str]) -> dict[str, str]:
    """File stem → wnid from lines `FILENAME,WNID[ ...]` or `FILENAME WNID`; a header line is skipped."""
    known = set(wnids)
    mapping = {}
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read val labels ({err})") from None
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, rest = line.split(",", 1) if "," in line else (line.split(None, 1) + [""])[:2]
        wnid = rest.split()[0] if rest.split() else ""
        if wnid not in known:
            if number == 1:  # a header such as Kaggle's `ImageId,PredictionString`
                continue
            raise DataError(
                f"{path}:{number}: {wnid or 'no wnid'!r} is not a train class; "
                "expected lines `FILENAME,WNID` with WNIDs from train/"
            )
        mapping[Path(name.strip()).stem] = wnid
    return mapping


def read_devkit(devkit: Path, n_val: int) -> tuple[list[str], list[Path]]:
    """Wnid of each flat val image (sorted names) from the devkit, and the devkit files read."""
    data = devkit / "data" if (devkit / "data").is_dir() else devkit
    truth, meta = data / GROUND_TRUTH, data / "meta.mat"
    for path in (truth, meta):
        if not path.is_file():
            raise DataError(f"{path}: missing; --devkit must be the extracted {DEVKIT} folder")
    try:
        from scipy.io import loadmat  # lazy and optional: only a flat val/ with --devkit needs scipy
    except ImportError:
        raise UserError(f"reading {meta} needs scipy (pip install scipy); or pass --val-labels FILE instead") from None
    try:
        synsets = loadmat(meta, squeeze_me=True)["synsets"]
        id_to_wnid = {int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in synsets if int(s["num_children"]) == 0}
    except Exception as err:  # scipy raises many kinds on a damaged .mat
        raise DataError(
            f"{meta}: not a readable devkit meta.mat ({type(err).__name__}: {err}); re-extract the devkit"
        ) from None
    try:
        ids = [int(line) for line in truth.read_text().split()]
    except ValueError:
        raise DataError(f"{truth}: expected one integer class id per line; re-extract the devkit") from None
    if len(ids) != n_val:
        raise DataError(
            f"{truth}: {len(ids)} labels for {n_val} images in val/; the folder is incomplete or not ILSVRC-2012"
        )
    unknown = sorted(set(ids) - set(id_to_wnid))
    if unknown:
        raise DataError(f"{truth}: class id {unknown[0]} is not in {meta}; re-extract the devkit")
    return [id_to_wnid[i] for i in ids], [truth, meta]


def scan_val(raw: Path, wnids: list[str], opts: PrepareOptions) -> tuple[list[str], np.ndarray, list[Path]]:
    """(val image paths relative to raw, labels, label files used) for either val layout."""
    val = raw / "val"
    if not val.is_dir():
        raise DataError(f"{val}: no such folder; expected val/<wnid>/*.JPEG or flat val/*.JPEG")
    if any(p.is_dir() for p in val.iterdir()):
        _, files, labels = scan_classes(val, wnids)
        return files, labels, []
    names = list_images(val)
    if not names:
        raise DataError(f"{val}: no images (.JPEG/.jpg/.png)")
    index = {w: i for i, w in enumerate(wnids)}
    val_labels = opts.val_labels or (raw / KAGGLE_VAL_LABELS if (raw / KAGGLE_VAL_LABELS).is_file() else None)
    devkit = opts.devkit or (raw / DEVKIT if (raw / DEVKIT).is_dir() else None)
    if val_labels is not None:
        if not val_labels.is_file():
            raise DataError(f"{val_labels}: no such file (--val-labels)")
        mapping = read_val_labels(val_labels, wnids)
        missing = [n for n in names if Path(n).stem not in mapping]
        if missing:
            raise DataError(f"{val_labels}: no label for val/{missing[0]} ({len(missing)} val images unlabelled)")
        found, used = [mapping[Path(n).stem] for n in names], [val_labels]
    elif devkit is not None:
        found, used = read_devkit(devkit, len(names))
    else:
        raise UserError(
            f"{val}: flat val/ needs labels: pass --val-labels FILE (lines FILENAME,WNID) or "
            f"--devkit {DEVKIT}/, or sort val/ into class folders"
        )
    not_in_train = sorted(set(found) - set(index))
    if not_in_train:
        raise DataError(f"{used[0]}: val class {not_in_train[0]} has no train/ folder; train/ is incomplete")
    return [f"val/{n}" for n in names], np.asarray([index[w] for w in found], dtype=np.int64), used


# --- decoding -----------------------------------------------------------------------


def load_image(data: bytes, size: int) -> np.ndarray:
    """Decode image bytes to uint8 (3, size, size): RGB, shorter side to round(size*256/224), center crop."""
    from PIL import Image  # lazy: only ImageNet decodes JPEGs

    resize_to = round(size * 256 / 224)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EXIF and large-image warnings say nothing about the pixels
        with Image.open(io.BytesIO(data)) as img:
            img.draft("RGB", (resize_to, resize_to))
            img = img.convert("RGB")
    w, h = img.size
    # torchvision Resize(int): the shorter side becomes resize_to, the longer one is truncated
    new_w, new_h = (resize_to, int(resize_to * h / w)) if w <= h else (int(resize_to * w / h), resize_to)
    img = img.resize((new_w, new_h), Image.Resampling.BILINEAR)
    left, top = int(round((new_w - size) / 2.0)), int(round((new_h - size) / 2.0))
    img = img.crop((left, top, left + size, top + size))
    return np.asarray(img, dtype=np.uint8).transpose(2, 0, 1).copy()


def decode_file(task: tuple[str, int]) -> tuple[np.ndarray | None, str, str | None]:
    """(image or None, sha256 hex of the file, error or None); runs in worker processes, so it never raises."""
    path, size = task
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        return None, hashlib.sha256(b"").hexdigest(), f"cannot read ({err})"
    digest = hashlib.sha256(data).hexdigest()
    try:
        return load_image(data, size), digest, None
    except Exception as err:  # Pillow raises OSError, SyntaxError, ValueError, DecompressionBombError, ...
        return None, digest, f"cannot decode image ({type(err).__name__}: {err})"


# --- writing ------------------------------------------------------------------------


def decode_all(tasks: list[tuple[str, int]], pool: Executor | None) -> list:
    """`decode_file` over tasks, in order, in the pool's processes if any."""
    return list(pool.map(decode_file, tasks, chunksize=8) if pool is not None else map(decode_file, tasks))


def write_split(
    writer: SplitWriter,
    raw: Path,
    files: list[str],
    labels: np.ndarray,
    order: np.ndarray,
    size: int,
    pool: Executor | None,
    digests: np.ndarray,
    skip_corrupt: bool,
    split: str = "images",
) -> list[str]:
    """Decode files in `order`, block by block, into `writer`; fills `digests` (N, 32); returns the skipped files."""
    skipped = []
    progress = Progress(f"scaledl prepare: {split}", total=len(order))
    for lo in range(0, len(order), BLOCK_IMAGES):
        block = order[lo : lo + BLOCK_IMAGES]
        images, kept = [], []
        for i, (image, digest, error) in zip(block, decode_all([(str(raw / files[i]), size) for i in block], pool)):
            digests[i] = np.frombuffer(bytes.fromhex(digest), np.uint8)
            if error is not None:
                if not skip_corrupt:
                    raise DataError(
                        f"{raw / files[i]}: {error}; re-extract the file, or pass --skip-corrupt to leave it out"
                    )
                print(f"scaledl prepare: skipping {raw / files[i]}: {error}", file=sys.stderr)
                skipped.append(files[i])
                continue
            images.append(image)
            kept.append(i)
        if images:
            writer.write(np.stack(images), labels[kept])
        progress.advance(len(block))
    progress.finish()
    if skipped:
        if writer.written == 0:
            raise DataError(f"{raw}: no image of this split decodes; re-extract the dataset")
        writer.shrink_to_written()
    return skipped


def convert(raw: Path, out: Path, opts: PrepareOptions) -> None:
    """Write the ImageNet tree under `raw` to `out` (chunked, train pre-shuffled with `opts.seed`)."""
    train_dir = raw / "train"
    if not train_dir.is_dir():
        raise DataError(f"{train_dir}: no such folder; expected {RAW_HELP}")
    wnids, train_files, train_labels = scan_classes(train_dir)
    val_files, val_labels, label_files = scan_val(raw, wnids, opts)
    size = opts.image_size or DEFAULT_IMAGE_SIZE
    splits = {
        TRAIN: (train_files, train_labels, np.random.default_rng(opts.seed).permutation(len(train_files))),
        TEST: (val_files, val_labels, np.arange(len(val_files))),
    }
    pool = ProcessPoolExecutor(opts.workers) if opts.workers > 1 else None
    skipped = 0
    try:
        with DatasetWriter(
            out,
            dataset="imagenet",
            classes=len(wnids),
            class_names=wnids,
            chunked=True,
            attrs={"seed": opts.seed, "resize": round(size * 256 / 224), "crop": size},
        ) as w:
            digests = {}  # raw sha256 per file, in listing order (32 bytes each: ImageNet has 1.3M files)
            for split, (files, labels, order) in splits.items():
                digests[split] = np.zeros((len(files), 32), np.uint8)
                writer = w.create_split(split, len(files), (3, size, size))
                skipped += len(
                    write_split(writer, raw, files, labels, order, size, pool, digests[split], opts.skip_corrupt, split)
                )
            w.attrs["skipped_corrupt"] = skipped
            w.source_sha256 = manifest_sha256(
                chain(
                    (
                        (f, d.tobytes().hex())
                        for split in (TRAIN, TEST)
                        for f, d in zip(splits[split][0], digests[split])
                    ),
                    ((p.name, sha256_file(p)) for p in label_files),
                )
            )
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
