"""The config's download lists as the download rule's jobs: which files, into which raw folder, from where.

A dataset read from raw files (mnist, cifar10, imagenet: its settings have a
`raw` key) reads them from its raw folder, `raw` or data/raw/{dataset}. With
a `download` list ({file name: {urls, sha256}}), the download rule fetches
each listed file into that folder, one job per file; without one, the folder
is filled by hand. A file put in place by hand is taken as done, so `prepare`
first checks every listed sha256 (`verify_command`).

Plain functions of the validated config (the schema's defaults filled in); a
list that cannot work is a `DownloadError` (a GridError) of one line naming
the dataset. No torch, no MPI, no Snakemake: the workflow imports this while
it parses.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

from scaledl.grid.keys import GridError, one_of


class DownloadError(GridError):
    """A download list that cannot work: a file with nowhere to come from, two lists filling one folder."""


def needs_raw(config: Mapping, dataset: str) -> bool:
    """Whether `dataset` is read from raw files (digits is embedded, synthetic generated)."""
    return "raw" in config["datasets"][dataset]


def raw_dir(config: Mapping, dataset: str) -> str:
    return config["datasets"][dataset]["raw"] or f"data/raw/{dataset}"


def download_files(config: Mapping, dataset: str) -> dict[str, Any]:
    """{file name: {urls, sha256}} the download rule fetches for `dataset`; {} for none."""
    return config["datasets"][dataset].get("download") or {}


def download_folder(config: Mapping, dataset: str) -> str:
    """The raw folder, normalised so the download rule's outputs and prepare's inputs match."""
    return os.path.normpath(raw_dir(config, dataset))


def download_targets(config: Mapping, dataset: str) -> list[str]:
    """The download rule's outputs for `dataset`: its listed files in its raw folder."""
    return [f"{download_folder(config, dataset)}/{name}" for name in download_files(config, dataset)]


def downloads_by_folder(config: Mapping) -> dict[str, str]:
    """Raw folder → the dataset whose download list fills it. A listed file with neither a URL nor
    a sha256, or two lists filling one folder, raise DownloadError."""
    folders: dict[str, str] = {}
    for dataset in config["datasets"]:
        files = download_files(config, dataset)
        for name, spec in files.items():
            if not spec["urls"] and not spec["sha256"]:
                raise DownloadError(f"datasets.{dataset}.download.{name}: give it urls or a sha256, or leave it out")
        if not files:
            continue
        folder = download_folder(config, dataset)
        if folder in folders:
            raise DownloadError(
                f"datasets {folders[folder]} and {dataset} both download into {folder}: "
                f"give one of them its own `raw` folder"
            )
        folders[folder] = dataset
    return folders


def download_wildcard_constraints(config: Mapping) -> dict[str, str]:
    """The download rule's `{rawdir}/{filename}` matches the listed files and nothing else."""
    folders = downloads_by_folder(config)
    return {
        "rawdir": one_of(folders),
        "filename": one_of(name for dataset in folders.values() for name in download_files(config, dataset)),
    }


def _sha256_flag(name: str, sha256: str) -> str:
    return f"--sha256 {shlex.quote(name)}={sha256}"


def source_flags(config: Mapping, dataset: str, name: str) -> str:
    """`scaledl download`'s --url (each mirror, in order) and --sha256 for one listed file."""
    spec = download_files(config, dataset)[name]
    flags = [f"--url {shlex.quote(f'{name}={url}')}" for url in spec["urls"]]
    if spec["sha256"]:
        flags.append(_sha256_flag(name, spec["sha256"]))
    return " ".join(flags)


def verify_command(config: Mapping, dataset: str) -> str:
    """The command (ending in `&& `) that checks the listed files against their sha256 before `prepare`
    reads them, since Snakemake takes a file put in place by hand as done; "" without a download list."""
    files = download_files(config, dataset)
    if not files:
        return ""
    checksums = [_sha256_flag(name, spec["sha256"]) for name, spec in files.items() if spec["sha256"]]
    names = " ".join(shlex.quote(name) for name in files)
    folder = shlex.quote(download_folder(config, dataset))
    return f"python -m scaledl download {dataset} {names} --out-dir {folder} --verify-only {' '.join(checksums)} && "
