"""A workflow config checked against its schema, with one line per problem a person can act on.

Snakemake's own validation prints the whole schema of the failing part; this
check runs first and names the key, what is wrong with it and, for an
unknown key, the nearest known one. A model or dataset is checked against
the names the config may use, the built-ins (the schema's enums) and its
plug-ins' (scaledl.grid.plugins), so a misspelt one is refused with the
nearest although the schema itself takes any well-formed name for a plug-in.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from scaledl.grid import plugins
from scaledl.plugins import TARGET

NUMBER_LIKE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


# libyaml's loader where PyYAML was built with it: the schema is read on every parse of the workflow, and
# the pure-Python loader takes most of a second over its thousand lines.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_schema(path: str | Path) -> dict:
    return yaml.load(Path(path).read_text(), Loader=SAFE_LOADER)


def where(path) -> str:
    """`train.lr`, `experiments[1].algorithms[0]`: the place of a value in the config."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the config"


def _allowed_keys(error) -> list[str]:
    schema = error.schema
    return sorted(schema.get("properties", {}))


def explain(error) -> str:
    """One line for one jsonschema ValidationError."""
    at = where(error.absolute_path)
    value = error.instance
    if error.validator == "additionalProperties" and isinstance(value, dict):
        known = _allowed_keys(error)
        unknown = [k for k in value if k not in known]
        if unknown and known:
            key = unknown[0]
            near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f" (did you mean '{near[0]}'?)" if near else f"; known keys: {', '.join(known)}"
            also = f" (also unknown here: {', '.join(map(str, unknown[1:]))})" if len(unknown) > 1 else ""
            return f"config: {where([*error.absolute_path, key])}: unknown key{hint}{also}"
    if error.validator == "type" and isinstance(value, str) and NUMBER_LIKE.match(value.strip()):
        return (
            f"config: {at}: {value!r} is a string, not a number: YAML reads a number like 1e-3 as text; "
            f"write it with a decimal point and a signed exponent (1.0e-3) or as 0.001"
        )
    if error.validator == "enum":
        choices = [str(c) for c in error.validator_value]
        near = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        return f"config: {at}: {value!r} is not one of {', '.join(choices)}{hint}"
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        wanted = [w for w in wanted if w != "null"]
        return f"config: {at}: {value!r} is not {' or '.join(wanted)}"
    if error.validator == "pattern" and error.validator_value == f"^{TARGET}$":
        return f"config: {at}: {value!r} is not MODULE:FUNCTION (a function of your module, e.g. my_models:tiny_mlp)"
    if error.validator == "required":
        return f"config: {at}: {error.message}"
    return f"config: {at}: {error.message}"


def problems(config: dict, schema: dict) -> list[str]:
    """Every problem of `config`, one line each, deepest first (the most specific explanation)."""
    validator = Draft202012Validator(schema)
    lines = []
    for error in sorted(validator.iter_errors(config), key=lambda e: (-len(e.absolute_path), str(e.absolute_path))):
        leaf = error
        while leaf.context:  # oneOf/anyOf: explain the branch that got furthest
            leaf = max(leaf.context, key=lambda e: len(e.absolute_path))
        line = explain(leaf)
        if line not in lines:
            lines.append(line)
    return lines


def builtin_names(schema: dict) -> tuple[list[str], list[str]]:
    """(built-in models, built-in datasets): the enums of the schema's experiment block (the registries')."""
    experiment = schema["$defs"]["experiment"]["properties"]
    return experiment["models"]["items"]["anyOf"][0]["enum"], experiment["dataset"]["anyOf"][0]["enum"]


def with_known_names(schema: dict, config: dict) -> dict:
    """The schema with an experiment's `models` and `dataset` limited to the names this config may use."""
    models, datasets = plugins.known_names(config, *builtin_names(schema))
    experiment = {**schema["$defs"]["experiment"]["properties"]}
    experiment["models"] = {**experiment["models"], "items": {"enum": models}}
    experiment["dataset"] = {key: value for key, value in experiment["dataset"].items() if key != "anyOf"}
    experiment["dataset"]["enum"] = datasets
    block = {**schema["$defs"]["experiment"], "properties": experiment}
    return {**schema, "$defs": {**schema["$defs"], "experiment": block}}


def first_problem(config: dict, schema_path: str | Path) -> str | None:
    """The first problem of `config` as one line, or None when it is valid."""
    schema = load_schema(schema_path)
    found = problems(config, with_known_names(schema, config)) or plugins.problems(config, *builtin_names(schema))
    if not found:
        return None
    more = f" (and {len(found) - 1} more: fix this one and rerun)" if len(found) > 1 else ""
    return found[0] + more
