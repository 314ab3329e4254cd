"""`scaledl download DATASET`: fetch a dataset's raw files into data/raw/DATASET, verified by sha256.

Each file has one or more mirror URLs, tried in order, and its sha256. A file is
written into a temporary file beside its final name and renamed only once every
byte arrived and the checksum matched, so an interrupted or corrupt download
never looks complete. A gzip file also matches by the sha256 of its content
(MNIST's checksums are the official ones of the uncompressed files, so any
gzip run of the same images passes), and a gunzipped copy put where the .gz
is expected is verified by its content and gzipped in place. A file already
there with the right checksum is kept; one with a wrong checksum is refused,
never overwritten. With the network out of
reach, the error says which file to put where, with its checksum.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import http.client
import shutil
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from scaledl import __version__
from scaledl.atomic import atomic_path
from scaledl.data.converters import CONVERTERS
from scaledl.data.hdf5 import sha256_file
from scaledl.errors import DataError, UserError

HELP = "download a dataset's raw files into data/raw/DATASET, verified by sha256"

CHUNK = 1 << 20
PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class RemoteFile:
    """One raw file: its name in the raw folder, the URLs to try in order, its sha256 (None: unverified)."""

    name: str
    urls: tuple[str, ...]
    sha256: str | None


# torchvision's mirror first (the original site has been slow or refusing at times).
MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
# The official checksums of the *uncompressed* IDX files: a .gz is verified by its content, so a copy gzipped
# by another gzip run (other bytes, the same images) is accepted, and so is a gunzipped copy.
MNIST_SHA256 = {
    "train-images-idx3-ubyte.gz": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte.gz": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte.gz": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte.gz": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}

# The files `scaledl download DATASET` fetches without --url; config/paper.yaml and
# config/cluster.yaml repeat them for the workflow (a test keeps them equal).
BUILT_IN: dict[str, tuple[RemoteFile, ...]] = {
    "mnist": tuple(
        RemoteFile(name, tuple(mirror + name for mirror in MNIST_MIRRORS), sha256)
        for name, sha256 in MNIST_SHA256.items()
    ),
    "cifar10": (
        RemoteFile(
            "cifar-10-python.tar.gz",
            ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
            "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
        ),
    ),
}


class _MirrorFailed(Exception):
    """One URL did not deliver the file; the message says why, and the next mirror is tried."""


# ---- command line ------------------------------------------------------------


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `download` subcommand's arguments to `parser`."""
    parser.epilog = "built-in file lists: " + ", ".join(BUILT_IN) + " (see data/raw/README.md for offline use)"
    parser.add_argument("dataset", choices=[n for n, c in CONVERTERS.items() if c.needs_raw])
    parser.add_argument("files", nargs="*", metavar="FILE", help="only these files of the list (default: all)")
    parser.add_argument("--out-dir", type=Path, help="raw folder to fill (default data/raw/DATASET)")
    parser.add_argument(
        "--url",
        type=_pair,
        action="append",
        default=[],
        metavar="NAME=URL",
        help="a URL of file NAME; repeat for mirrors, tried in order. With --url or --sha256 "
        "the files are the names they give, instead of the built-in list",
    )
    parser.add_argument(
        "--sha256",
        type=_pair,
        action="append",
        default=[],
        metavar="NAME=HEX",
        help="expected sha256 of file NAME (a file without one is not verified)",
    )
    parser.add_argument(
        "--verify-only", action="store_true", help="download nothing: check that every file is present with its sha256"
    )
    parser.add_argument("--list", action="store_true", help="print each file's path, sha256 and URLs, and exit")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds without an answer before a URL is given up (default %(default)s)",
    )


def files_from_args(args: argparse.Namespace) -> tuple[RemoteFile, ...]:
    """The files to fetch: those named by --url/--sha256 if any, else the built-in list; FILEs pick some."""
    if args.url or args.sha256:
        listed, source = _files_from_flags(args.url, args.sha256), "--url/--sha256"
    elif args.dataset in BUILT_IN:
        listed, source = {f.name: f for f in BUILT_IN[args.dataset]}, f"{args.dataset}'s built-in list"
    else:
        raise UserError(
            f"no built-in download list for {args.dataset}: give --url NAME=URL (and --sha256 NAME=HEX), "
            f"or put its files in data/raw/{args.dataset} by hand (see data/raw/README.md)"
        )
    unknown = [name for name in args.files if name not in listed]
    if unknown:
        raise UserError(f"{unknown[0]!r} is not in {source}, which holds {', '.join(listed)}")
    return tuple(listed[name] for name in args.files) or tuple(listed.values())


def _files_from_flags(urls: list[tuple[str, str]], sha256s: list[tuple[str, str]]) -> dict[str, RemoteFile]:
    checksums: dict[str, str] = {}
    for name, value in sha256s:
        checksums[name] = _checked_sha256(name, value, checksums.get(name))
    names = dict.fromkeys(name for name, _ in [*urls, *sha256s])
    return {
        name: RemoteFile(_plain(name), tuple(u for n, u in urls if n == name), checksums.get(name)) for name in names
    }


def _plain(name: str) -> str:
    if Path(name).name != name or name in (".", ".."):
        raise UserError(f"file name {name!r} must be a plain name without a folder; --out-dir sets the folder")
    return name


def _checked_sha256(name: str, value: str, earlier: str | None) -> str:
    value = value.lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise UserError(f"--sha256 {name}={value}: a sha256 is 64 hexadecimal digits")
    if earlier is not None and earlier != value:
        raise UserError(f"--sha256 given twice for {name}, with different values")
    return value


def run(args: argparse.Namespace) -> int:
    """Fetch or check every file of `args.dataset`; print one line per file, return 0. Raises UserError."""
    files = files_from_args(args)
    out_dir = args.out_dir if args.out_dir is not None else Path("data/raw") / args.dataset
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out-dir {out_dir} is a file; give the folder the raw files go in")
    if args.list:
        for f in files:
            print(f"{out_dir / f.name}  sha256 {f.sha256 or '(none given)'}  from {' or '.join(f.urls) or '(no URL)'}")
        return 0
    for f in files:
        print(ensure_file(f, out_dir, verify_only=args.verify_only, timeout=args.timeout), flush=True)
    return 0


# ---- fetching ----------------------------------------------------------------


def _expected(f: RemoteFile) -> str:
    return f"sha256 {f.sha256}" if f.sha256 else "no sha256 given"


def put_by_hand(f: RemoteFile, target: Path) -> str:
    """What an offline user does about `f`: the exact path and checksum."""
    return f"put {f.name} at {target} ({_expected(f)}) and rerun"


def ensure_file(
    f: RemoteFile,
    out_dir: Path,
    *,
    verify_only: bool = False,
    timeout: float = 60.0,
    progress_every: float = PROGRESS_EVERY_S,
    stream: TextIO | None = None,
) -> str:
    """Make `out_dir / f.name` hold the right bytes, downloading it unless present; return a summary line.

    Raises DataError, in one line, when the file present has the wrong checksum, when it is
    missing with `verify_only`, or when no URL delivers it.
    """
    target = out_dir / f.name
    if target.is_file():
        return _check_present(f, target)
    unpacked = target.with_suffix("") if target.suffix == ".gz" else None
    if unpacked is not None and unpacked.is_file():
        return _pack_unpacked(f, unpacked, target)
    if target.exists():
        raise DataError(f"{target} is not a regular file; move it away, then {put_by_hand(f, target)}")
    if verify_only:
        raise DataError(
            f"{target} is missing: {put_by_hand(f, target)}, or run `scaledl download` where the network is reachable"
        )
    if not f.urls:
        raise DataError(f"no URL given for {f.name}: {put_by_hand(f, target)}")
    reasons = []
    for url in f.urls:
        try:
            size, seconds = download(
                url, target, f.sha256, timeout=timeout, progress_every=progress_every, stream=stream or sys.stderr
            )
        except _MirrorFailed as exc:
            reasons.append(str(exc))
            continue
        verified = "sha256 verified" if f.sha256 else "no sha256 given, not verified"
        return (
            f"{f.name}: downloaded {_megabytes(size)} from {url} in {seconds:.1f} s "
            f"({_megabytes(size / max(seconds, 1e-9))}/s), {verified} -> {target}"
        )
    raise DataError(f"could not download {f.name} ({'; '.join(reasons)}): {put_by_hand(f, target)}")


def _check_present(f: RemoteFile, target: Path) -> str:
    if f.sha256 is None:
        return f"{f.name}: already present, no sha256 given, not verified -> {target}"
    how = verified(target, f.sha256)
    if how is None:
        raise DataError(
            f"{target} is there but its sha256 is {sha256_file(target)}, expected {f.sha256} (nor does "
            "its content match, gunzipped; incomplete, corrupt or another version): delete it to "
            "download it again, or replace it with the right file"
        )
    return f"{f.name}: already present, {how} -> {target}"


def verified(path: Path, sha256: str) -> str | None:
    """How `path` matches `sha256`: by its bytes, or, for a gzip file, by its gunzipped content; None if not."""
    if sha256_file(path) == sha256:
        return "sha256 verified"
    if _is_gzip(path) and _gunzipped_sha256(path) == sha256:
        return "sha256 of its gunzipped content verified"
    return None


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _gunzipped_sha256(path: Path) -> str | None:
    """The sha256 of a gzip file's content; None for a broken archive."""
    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            while block := f.read(CHUNK):
                digest.update(block)
    except (OSError, EOFError):
        return None
    return digest.hexdigest()


def _pack_unpacked(f: RemoteFile, unpacked: Path, target: Path) -> str:
    """A gunzipped copy put by hand: verified by its content, then gzipped into the file the pipeline reads."""
    if f.sha256 is not None and sha256_file(unpacked) != f.sha256:
        raise DataError(
            f"{unpacked} is there but its sha256 is {sha256_file(unpacked)}, expected {f.sha256} for "
            f"the content of {f.name}: replace it with the right file, or {put_by_hand(f, target)}"
        )
    with atomic_path(target) as tmp, open(unpacked, "rb") as source, gzip.open(tmp, "wb") as out:
        shutil.copyfileobj(source, out, CHUNK)
    verdict = "its content's sha256 verified" if f.sha256 else "no sha256 given, not verified"
    return f"{f.name}: found the gunzipped copy {unpacked}, {verdict}, gzipped -> {target}"


def download(
    url: str, target: Path, sha256: str | None, *, timeout: float, progress_every: float, stream: TextIO
) -> tuple[int, float]:
    """Fetch `url` into `target` atomically; return (bytes, seconds). Raises _MirrorFailed, leaving no `target`."""
    start = time.monotonic()
    request = urllib.request.Request(url, headers={"User-Agent": f"scaledl/{__version__}"})
    try:
        # atomic_path renames the temporary file onto `target` only if the block ends without an exception.
        with atomic_path(target) as tmp, urllib.request.urlopen(request, timeout=timeout) as response:
            total = _content_length(response)
            progress = _Progress(target.name, total, progress_every, stream)
            got, size = _copy_hashing(response, tmp, progress)
            if total is not None and size < total:
                raise _MirrorFailed(f"{url}: the connection closed after {size} of {total} bytes")
            if sha256 is not None and got != sha256 and not (_is_gzip(tmp) and _gunzipped_sha256(tmp) == sha256):
                raise _MirrorFailed(f"{url} sent {size} bytes whose sha256 is {got}, expected {sha256}; not kept")
    except urllib.error.HTTPError as exc:
        raise _MirrorFailed(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise _MirrorFailed(f"{url}: {exc.reason}") from None
    except TimeoutError:
        raise _MirrorFailed(f"{url}: no answer within {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise _MirrorFailed(f"{url}: transfer failed ({type(exc).__name__}: {exc})") from None
    except ValueError as exc:  # not a URL urllib can open
        raise _MirrorFailed(f"{url}: {exc}") from None
    return size, time.monotonic() - start


def _content_length(response) -> int | None:
    """The announced size (HTTP Content-Length, a file URL's size); None when not said."""
    value = response.headers.get("Content-Length")
    return int(value) if value is not None and value.isdigit() else None


def _copy_hashing(response, tmp: Path, progress: _Progress) -> tuple[str, int]:
    """Copy the response body into `tmp` in chunks; return (sha256 hex, bytes)."""
    digest = hashlib.sha256()
    size = 0
    with open(tmp, "wb") as out:
        while chunk := response.read(CHUNK):
            out.write(chunk)
            digest.update(chunk)
            size += len(chunk)
            progress.update(size)
    return digest.hexdigest(), size


class _Progress:
    """A stderr line every `every` seconds (bytes so far, of the total, and the mean rate)."""

    def __init__(self, name: str, total: int | None, every: float, stream: TextIO):
        self.name, self.total, self.every, self.stream = name, total, every, stream
        self.start = self.last = time.monotonic()

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        of_total = f" of {_megabytes(self.total)} ({100 * done / self.total:.0f}%)" if self.total else ""
        rate = done / max(now - self.start, 1e-9)
        print(
            f"scaledl download: {self.name}: {_megabytes(done)}{of_total}, {_megabytes(rate)}/s",
            file=self.stream,
            flush=True,
        )


def _megabytes(n: float) -> str:
    return f"{n / 1e6:.1f} MB"
