"""Generated images of any shape and count, for tests and quick runs: learnable, seeded, no --raw.

Each class has a random mean image (a "prototype"); a sample is its class's
prototype plus Gaussian noise, so a small model beats chance within a few
steps. Labels are balanced and shuffled.
Generation and writing go block by block (`DatasetWriter`), so any size fits
in memory; large sets are chunked like ImageNet.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np

from scaledl.data.converters.options import PrepareOptions
from scaledl.data.hdf5 import TEST, TRAIN, DatasetWriter, rows_per_chunk

DESCRIPTION = "seeded generated images: --train-count, --test-count, --shape C,H,W, --classes (no --raw)"
RAW_HELP = ""
DEFAULT_IMAGE_SIZE = None
NOISE_STD = 80.0  # pixel units; about the spread of prototypes, so one pixel alone is ambiguous
CHUNKED_ABOVE_BYTES = 1 << 30
BLOCK_BYTES = 32 << 20


def convert(
    raw: Path | None, out: Path, opts: PrepareOptions, name: str = "synthetic", generated: int | None = None
) -> None:
    """Write `opts.train_count` + `opts.test_count` generated images of `opts.shape` to `out`, as dataset `name`;
    `generated`: only a split's first rows are generated, the others left blank (SplitWriter.write_blank)."""
    shape, k = tuple(opts.shape), opts.classes
    prototypes = np.random.default_rng([opts.seed, 0]).uniform(32, 224, size=(k, *shape)).astype(np.float32)
    counts = {TRAIN: opts.train_count, TEST: opts.test_count}
    total_bytes = sum(counts.values()) * int(np.prod(shape))
    block = rows_per_chunk(shape) * max(1, BLOCK_BYTES // (rows_per_chunk(shape) * int(np.prod(shape))))
    digest = hashlib.sha256()  # of the generated arrays, in write order: per block, images then labels
    with DatasetWriter(
        out,
        dataset=name,
        classes=k,
        class_names=[f"class{c}" for c in range(k)],
        chunked=total_bytes > CHUNKED_ABOVE_BYTES,
        attrs={"seed": opts.seed},
    ) as w:
        for split_index, (split, n) in enumerate(counts.items(), start=1):
            labels = np.random.default_rng([opts.seed, split_index]).permutation(np.arange(n) % k)
            writer = w.create_split(split, n, shape)
            for b, lo in enumerate(range(0, n, block)):
                hi = min(lo + block, n)
                real = hi if generated is None else min(hi, max(generated, lo))
                if real > lo:
                    # one generator per (seed, split, block): the data does not depend on how it is consumed
                    rng = np.random.default_rng([opts.seed, split_index, b + 1])
                    y = labels[lo:real]
                    noise = rng.standard_normal(size=(len(y), *shape), dtype=np.float32) * NOISE_STD
                    x = np.clip(prototypes[y] + noise, 0, 255).round().astype(np.uint8)
                    writer.write(x, y)
                    digest.update(x.tobytes())
                    digest.update(y.astype(np.int64).tobytes())
                if hi > real:
                    writer.write_blank(labels[real:hi])
                    digest.update(labels[real:hi].astype(np.int64).tobytes())
        w.source_sha256 = digest.hexdigest()


IMAGENET_SHAPED = {"shape": (3, 224, 224), "classes": 1000, "train_count": 4096, "test_count": 64}


def imagenet_shaped(raw: Path | None, out: Path, opts: PrepareOptions) -> None:
    """ImageNet-shaped generated images (3×224×224, 1000 classes; 4096 for training: 64 workers' batches of
    64) for a time-only simulation of an ImageNet network, whose seconds per step depend only on shapes. A
    plug-in converter (`plugins.datasets.NAME.converter: scaledl.data.converters.synthetic:imagenet_shaped`),
    so that a config can hold it beside a CIFAR-sized `synthetic`; the dataset is named by its file
    (data/hdf5/NAME.h5)."""
    convert(raw, out, replace(opts, **IMAGENET_SHAPED), name=out.stem)


IMAGENET_TRAIN_COUNT = 1_281_167  # ImageNet-1k's training set
SIZED_GENERATED = 256  # generated rows of imagenet_sized's train split: a non-zero spread, few bytes


def imagenet_sized(raw: Path | None, out: Path, opts: PrepareOptions) -> None:
    """imagenet_shaped at ImageNet's training-set size (1,281,167 images), for time-only simulations at any node
    count (1,024 workers' batches of 64 need 65,536 images): the first SIZED_GENERATED training images and the
    test images generated as imagenet_shaped's, the rest blank (all zero and never written: about 50 MB on
    disk; a time-only run never reads pixels). Not a set to train on."""
    sized = replace(opts, **{**IMAGENET_SHAPED, "train_count": IMAGENET_TRAIN_COUNT})
    convert(raw, out, sized, name=out.stem, generated=SIZED_GENERATED)
