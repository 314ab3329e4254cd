"""The shipped configs as the workflow sees them, for the grid's unit tests: config/NAME merged over
config/config.yaml and completed with the schema's defaults (Snakemake's own validate, no workflow run)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _validated(name: str) -> dict:
    from snakemake.utils import update_config, validate

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    if name != "config.yaml":
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    validate(config, schema=str(REPO / "workflow/schemas/config.schema.yaml"))
    return config


def shipped(name: str) -> dict:
    """config/NAME, validated (a copy: a test may change it)."""
    return copy.deepcopy(_validated(name))
