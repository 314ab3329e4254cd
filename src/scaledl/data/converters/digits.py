"""scikit-learn's bundled handwritten digits (1797 real 8x8 images): the embedded default, no download.

Pixels 0..16 are scaled to 0..255 and bilinearly resized to `--image-size`
(default 28, so the MNIST networks run unchanged). The set has no test split:
a stratified split with `--seed` holds out `--test-fraction`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from scaledl.data.converters.options import PrepareOptions
from scaledl.data.hdf5 import write_dataset

DESCRIPTION = "scikit-learn's 1797 handwritten 8x8 digits, resized (embedded, no --raw)"
RAW_HELP = ""
DEFAULT_IMAGE_SIZE = 28
MAX_PIXEL = 16.0


def resize_bilinear(images: np.ndarray, size: int) -> np.ndarray:
    """Resize float images (N, C, H, W) in [0, 1] to size x size; returns uint8 0..255 (deterministic, CPU)."""
    import torch  # imported here: listing the converters should not load torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
    if x.shape[-2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return x.mul(255.0).round_().clamp_(0, 255).to(torch.uint8).numpy()


def convert(raw: Path | None, out: Path, opts: PrepareOptions) -> None:
    """Write the digits to `out`; `raw` is unused."""
    # lazy: scikit-learn takes a second to import, and only this converter needs it
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    pixels, labels = bunch.images, bunch.target.astype(np.int64)
    source = hashlib.sha256(pixels.astype(np.float64).tobytes() + labels.tobytes()).hexdigest()
    images = resize_bilinear(pixels[:, None] / MAX_PIXEL, opts.image_size or DEFAULT_IMAGE_SIZE)
    # train_test_split shuffles both parts, so the train split is pre-shuffled as well
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=opts.test_fraction, stratify=labels, random_state=opts.seed
    )
    write_dataset(
        out,
        dataset="digits",
        train=(x_train, y_train),
        test=(x_test, y_test),
        classes=10,
        class_names=[str(d) for d in range(10)],
        source_sha256=source,
        attrs={"seed": opts.seed},
    )
