"""Settings of a conversion (`scaledl prepare` options); each converter reads the ones that concern it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaledl.errors import UserError


@dataclass(frozen=True)
class PrepareOptions:
    """Converter settings; each converter reads the ones that concern it."""

    image_size: int | None = None  # None: the converter's default (digits 28, imagenet 224)
    seed: int = 0  # train/test split (digits), pre-shuffle of train, generated data
    test_fraction: float = 0.2  # digits only: it ships without a test split
    train_count: int = 512  # synthetic
    test_count: int = 128  # synthetic
    shape: tuple[int, int, int] = (1, 28, 28)  # synthetic, C,H,W
    classes: int = 10  # synthetic
    val_labels: Path | None = None  # imagenet, flat val/: file name → wnid mapping
    devkit: Path | None = None  # imagenet, flat val/: ILSVRC2012_devkit_t12 folder
    skip_corrupt: bool = False  # imagenet: skip undecodable images instead of failing
    workers: int = 1  # imagenet: decoding processes

    def __post_init__(self):
        checks = [
            (self.image_size is None or self.image_size >= 1, f"--image-size must be >= 1, got {self.image_size}"),
            (0.0 < self.test_fraction < 1.0, f"--test-fraction must be between 0 and 1, got {self.test_fraction}"),
            (self.train_count >= 1 and self.test_count >= 1, "--train-count and --test-count must be >= 1"),
            (
                len(self.shape) == 3 and min(self.shape) >= 1,
                f"--shape must be three positive sizes C,H,W, got {self.shape}",
            ),
            (self.classes >= 2, f"--classes must be >= 2, got {self.classes}"),
            (self.workers >= 1, f"--workers must be >= 1, got {self.workers}"),
        ]
        for ok, message in checks:
            if not ok:
                raise UserError(message)
