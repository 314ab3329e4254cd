"""claims.yaml: the claims as data, checked against the rules and the registry."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from scaledl.algorithms import ALGORITHMS
from scaledl.errors import UserError
from scaledl.report.claims.context import DEVICE_KINDS
from scaledl.report.claims.rules import RULES
from scaledl.report.claims.words import Claim, algorithms_of
from scaledl.report.runs import SETTING

CLAIM_KEYS = {"id", "figure", "claim", "compares", "paper", "metric", "rule", "per", "needs", "note", "stable"}
NEEDS_KEYS = {"device", "dataset", "model", "target_accuracy", "min_workers"}


def default_claims_text() -> str:
    return resources.files("scaledl.report").joinpath("claims.yaml").read_text(encoding="utf-8")


def load_claims(path: str | Path | None = None) -> list[Claim]:
    """The claims of `path` (default: the packaged claims.yaml), checked; UserError naming what is wrong."""
    where = str(path) if path is not None else "claims.yaml (packaged)"
    try:
        text = Path(path).read_text(encoding="utf-8") if path is not None else default_claims_text()
    except FileNotFoundError:
        raise UserError(f"{where}: no such claims file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{where}: not readable ({error})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UserError(f"{where}: not valid YAML ({' '.join(str(error).split())})") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) or not data["claims"]:
        raise UserError(f"{where}: expected a mapping with a non-empty list under 'claims'")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise UserError(f"{where}: 'defaults' must be a mapping of rule parameters")
    claims = [parse_claim(entry, defaults, where, i) for i, entry in enumerate(data["claims"])]
    ids = [c.id for c in claims]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise UserError(f"{where}: claim ids must be unique ({', '.join(duplicates)} repeated)")
    return claims


def parse_claim(entry, defaults: dict, where: str, index: int) -> Claim:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: claim {index + 1} is not a mapping")
    name = entry.get("id", f"#{index + 1}")

    def fail(problem: str) -> UserError:
        return UserError(f"{where}: claim {name}: {problem}")

    missing = [k for k in ("id", "figure", "claim", "compares", "paper", "metric", "rule") if k not in entry]
    if missing:
        raise fail(f"lacks {', '.join(missing)}")
    unknown = sorted(set(entry) - CLAIM_KEYS)
    if unknown:
        raise fail(f"unknown key{'s' * (len(unknown) > 1)} {', '.join(unknown)}")
    rule = entry["rule"] if isinstance(entry["rule"], dict) else {"name": entry["rule"]}
    if rule.get("name") not in RULES:
        raise fail(f"unknown rule {rule.get('name')!r}; known rules: {', '.join(RULES)}")
    compares = entry["compares"]
    expected = RULES[rule["name"]].sides
    if not isinstance(compares, dict) or set(compares) != set(expected):
        raise fail(f"rule {rule['name']} compares {{{', '.join(expected)}}}, got {compares!r}")
    paper = entry["paper"] if isinstance(entry["paper"], dict) else {"text": str(entry["paper"])}
    needs = entry.get("needs") or {}
    if not isinstance(needs, dict) or set(needs) - NEEDS_KEYS:
        raise fail(f"needs takes {', '.join(sorted(NEEDS_KEYS))}")
    if "device" in needs and needs["device"] not in DEVICE_KINDS:
        raise fail(f"needs.device must be one of {', '.join(DEVICE_KINDS)}")
    per = tuple(entry.get("per") or SETTING)
    claim = Claim(
        id=str(entry["id"]),
        figure=str(entry["figure"]),
        text=" ".join(str(entry["claim"]).split()),
        compares=compares,
        paper_text=str(paper.get("text", "")),
        paper_value=paper.get("value"),
        metric=str(entry["metric"]),
        rule=rule["name"],
        params={**defaults, **{k: v for k, v in rule.items() if k != "name"}},
        per=per,
        needs=needs,
        note=" ".join(str(entry.get("note", "")).split()),
    )
    unknown_algorithms = [a for a in algorithms_of(claim) if a not in ALGORITHMS]
    if unknown_algorithms:
        raise fail(
            f"unknown algorithm{'s' * (len(unknown_algorithms) > 1)} {', '.join(unknown_algorithms)}; "
            f"known: {', '.join(ALGORITHMS)}"
        )
    if rule["name"] == "same_numerics":
        numerics = {ALGORITHMS[a].numerics_of or a for a in algorithms_of(claim)}
        if len(numerics) != 1:
            raise fail("same_numerics compares algorithms that do the same arithmetic (the registry's numerics_of)")
    if rule["name"] == "weak_scaling_efficiency" and claim.paper_value is None:
        raise fail("weak_scaling_efficiency compares with the paper's value; give paper.value")
    return claim
