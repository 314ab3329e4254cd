"""What is known of a dataset before its file is prepared: its training images, and what its `prepare` job needs.

The workflow checks every run's batch against a worker's shard while Snakemake
parses it, before `scaledl prepare` has written data/hdf5/DATASET.h5, and sizes
each prepare job from its dataset. The training images come from the
converter's settings where they decide the count (digits' test split,
synthetic's train_count, with `scaledl prepare`'s defaults: PrepareOptions),
else from the prepared file once it exists, else from the published count.

Imported while Snakemake parses the workflow: nothing heavy at import (h5py
only to read a prepared file, the converters' package only for a default the
config left out, which a validated config never does). A file that cannot be
used is a DataError of one line; the grid says which experiment asked for it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaledl.errors import DataError

if TYPE_CHECKING:
    from scaledl.data.hdf5 import DatasetInfo

PREPARED = "data/hdf5/{dataset}.h5"  # the prepare rule's output, the train rule's input

# Published training-split sizes of the built-in datasets whose size no setting changes.
TRAIN_IMAGES = {"mnist": 60_000, "cifar10": 50_000}
DIGITS_IMAGES = 1797  # scikit-learn's digits, which the converter splits into train and test itself
# The images `prepare` decodes, where that takes hours: ILSVRC-2012's 1,281,167 train + 50,000 val JPEGs.
DECODED_IMAGES = {"imagenet": 1_331_167}

# The prepare job: memory for the converter's blocks of images (bounded) plus each extra decoding process's
# own block and libraries, and a time limit that grows with the images to decode.
PREPARE_RUNTIME = 120  # minutes: the small datasets take seconds to minutes
PREPARE_MEM_MB = 4000
PREPARE_MEM_MB_PER_DECODER = 500
# Decoded, resized and written per second by one process: a pessimistic rate (Pillow's draft mode does
# several times more on a local disk), since a job that hits its time limit loses all its work.
IMAGES_PER_SECOND = 50
PREPARE_OVERHEAD_MIN = 60  # listing and hashing the files, writing the HDF5 file


def prepare_default(name: str) -> Any:
    """`scaledl prepare`'s default for a converter setting (PrepareOptions, the schema's source too)."""
    from scaledl.data.converters.options import PrepareOptions  # the package loads every converter

    return getattr(PrepareOptions(), name)


def setting(settings: Mapping, name: str) -> Any:
    """A converter setting of the config's `datasets.<name>`, else `scaledl prepare`'s default."""
    return settings[name] if name in settings else prepare_default(name)


def train_images(dataset: str, settings: Mapping) -> int | None:
    """How many training images `dataset` will have once prepared with its `datasets.<name>` settings:
    computed from them (digits, synthetic), else its prepared file's own count where the file exists (any
    other dataset, a plug-in's too), else the published count (mnist, cifar10). None: unknown until its file
    exists (ImageNet, a plug-in's). DataError for a prepared file that cannot be used."""
    if dataset == "digits":
        return DIGITS_IMAGES - math.ceil(setting(settings, "test_fraction") * DIGITS_IMAGES)
    if dataset == "synthetic":
        return setting(settings, "train_count")
    info = prepared_info(dataset)
    return info.n_train if info is not None else TRAIN_IMAGES.get(dataset)


def prepared_info(dataset: str) -> DatasetInfo | None:
    """The layout of data/hdf5/DATASET.h5 where it exists (None where not); DataError for a file that is not
    in the layout or names another dataset (runs, tables and tuned settings know a dataset by that name)."""
    path = Path(PREPARED.format(dataset=dataset))
    if not path.exists():
        return None
    info = _read_prepared(str(path), path.stat().st_mtime_ns)
    if isinstance(info, str):
        raise DataError(info)
    if info.dataset != dataset:
        raise DataError(
            f"{path} holds dataset {info.dataset!r} (its `dataset` attribute): the file of dataset {dataset} must "
            f"carry its name; prepare it again, or write it with dataset={dataset!r}"
        )
    return info


@functools.lru_cache(maxsize=64)
def _read_prepared(path: str, mtime_ns: int) -> DatasetInfo | str:
    """read_info once per file version (every run of the grid asks); its one-line error as a string."""
    from scaledl.data.hdf5 import read_info  # h5py: only where a prepared file exists

    try:
        return read_info(path)
    except DataError as error:
        return str(error)


def decoders(settings: Mapping) -> int:
    """The processes a dataset's `prepare` job decodes with: ImageNet's `workers`, one elsewhere."""
    return settings.get("workers") or 1


def prepare_mem_mb(settings: Mapping) -> int:
    """Memory of a dataset's `prepare` job, in MB."""
    return PREPARE_MEM_MB + PREPARE_MEM_MB_PER_DECODER * (decoders(settings) - 1)


def prepare_minutes(dataset: str, settings: Mapping) -> int:
    """The time limit of a dataset's `prepare` job: the default, or what decoding its images takes."""
    if dataset not in DECODED_IMAGES:
        return PREPARE_RUNTIME
    decoding = math.ceil(DECODED_IMAGES[dataset] / (IMAGES_PER_SECOND * decoders(settings)) / 60)
    return max(PREPARE_RUNTIME, PREPARE_OVERHEAD_MIN + decoding)
