"""Registry of converters, raw dataset → prepared HDF5 file: `CONVERTERS[name].convert(raw, out, opts)`.

A converter module defines `convert(raw, out, opts)`, a one-line `DESCRIPTION`,
`RAW_HELP` (what `--raw` must hold; empty when the data is embedded or
generated) and `DEFAULT_IMAGE_SIZE` (None: images keep their native size and
`--image-size` does not apply). Adding a dataset = one module + one line below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from scaledl.data.converters import cifar10, digits, imagenet, mnist, synthetic


@dataclass(frozen=True)
class Converter:
    """One raw format: how to convert it and what it needs."""

    name: str
    convert: Callable[..., None]  # (raw: Path | None, out: Path, opts: PrepareOptions) -> None
    description: str
    raw_help: str
    default_image_size: int | None

    @property
    def needs_raw(self) -> bool:
        return bool(self.raw_help)

    @classmethod
    def from_module(cls, name: str, module: ModuleType) -> Converter:
        return cls(name, module.convert, module.DESCRIPTION, module.RAW_HELP, module.DEFAULT_IMAGE_SIZE)


CONVERTERS: dict[str, Converter] = {
    name: Converter.from_module(name, module)
    for name, module in (
        ("digits", digits),
        ("mnist", mnist),
        ("cifar10", cifar10),
        ("imagenet", imagenet),
        ("synthetic", synthetic),
    )
}

__all__ = ["CONVERTERS", "Converter"]
