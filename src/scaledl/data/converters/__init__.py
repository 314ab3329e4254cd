"""Registry of converters, raw dataset → prepared HDF5 file: `CONVERTERS[name].convert(raw, out, opts)`.

A converter module defines `convert(raw, out, opts)`, a one-line `DESCRIPTION`,
`RAW_HELP` (what `--raw` must hold; empty when the data is embedded or
generated) and `DEFAULT_IMAGE_SIZE` (None: images keep their native size and
`--image-size` does not apply). Adding a dataset = one module + one line below.

A dataset of your own needs neither: a converter function in your module,
named by `scaledl prepare NAME --converter module:function` (a config's
`plugins.datasets`) or by an installed package's `scaledl.datasets` entry
point (`converter_for`, scaledl.plugins).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from scaledl import plugins
from scaledl.data.converters import cifar10, digits, imagenet, mnist, synthetic
from scaledl.errors import UserError


@dataclass(frozen=True)
class Converter:
    """One raw format: how to convert it and what it needs."""

    name: str
    convert: Callable[..., None]  # (raw: Path | None, out: Path, opts: PrepareOptions) -> None
    description: str
    raw_help: str
    default_image_size: int | None
    plugin: bool = False  # a user's converter: it reads --raw if given, and only the options it wants

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


def converter_for(name: str, converter_from: str | None = None) -> Converter:
    """The converter of dataset `name`: a built-in, the plug-in function `converter_from` (module:function),
    or an installed package's `scaledl.datasets` entry point; UserError with the names known if none."""
    if converter_from is not None and name in CONVERTERS:
        raise UserError(f"{name} is a built-in dataset: give your dataset from {converter_from} another name")
    if converter_from is None and name in CONVERTERS:
        return CONVERTERS[name]
    found = plugins.installed("datasets")
    target = converter_from or found.get(name)
    if target is None:
        known = [*CONVERTERS, *found]
        near = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {near[0]}?)" if near else f"; known: {', '.join(known)}"
        raise UserError(f"no dataset {name!r}{hint}; a dataset of your own: --converter MODULE:FUNCTION")
    convert = plugins.load(target, f"dataset {name}")
    return Converter(name, convert, f"{target} (a plug-in)", "", None, plugin=True)


__all__ = ["CONVERTERS", "Converter", "converter_for"]
