"""`scaledl download` and the workflow's download rule, against an HTTP server on 127.0.0.1.

The server (http.server in a thread, port 0) serves bytes from a table of
routes the tests edit: a body, optionally a Content-Length larger than the
body (the connection then closes early, like an interrupted transfer).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from scaledl.cli import main
from scaledl.data.download import BUILT_IN, RemoteFile, ensure_file
from scaledl.errors import DataError
from scaledl.grid import downloads
from scaledl.grid.keys import GridError
from workflow_env import snakemake_env

REPO = Path(__file__).resolve().parents[2]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Route:
    body: bytes
    claimed_length: int | None = None  # Content-Length sent; None: the body's true length


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.hits[self.path] += 1
        route = self.server.routes.get(self.path)
        if route is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(route.claimed_length or len(route.body)))
        self.end_headers()
        self.wfile.write(route.body)
        self.close_connection = True  # a short body then ends the transfer early

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A local HTTP server: `.routes` maps a path to a Route, `.hits` counts requests, `.url(path)`."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.routes, httpd.hits = {}, Counter()
    httpd.url = lambda path: f"http://127.0.0.1:{httpd.server_address[1]}{path}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """urllib honours *_proxy variables; the local server must be reached directly."""
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def closed_port_url(path="/x") -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


DATA = bytes(range(256)) * 40  # 10 KB


def fetch(f: RemoteFile, folder: Path, **kwargs) -> str:
    return ensure_file(f, folder, progress_every=3600, stream=io.StringIO(), **kwargs)


def one_line_error(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message
    return message


# ---- ensure_file -------------------------------------------------------------


def test_good_file_downloads_and_verifies(server, tmp_path):
    server.routes["/a.bin"] = Route(DATA)
    summary = fetch(RemoteFile("a.bin", (server.url("/a.bin"),), sha256(DATA)), tmp_path)
    assert (tmp_path / "a.bin").read_bytes() == DATA
    assert os.listdir(tmp_path) == ["a.bin"]  # no temporary file left beside it
    assert "sha256 verified" in summary and str(tmp_path / "a.bin") in summary


def test_corrupt_download_is_refused_and_not_kept(server, tmp_path):
    corrupted = DATA[:-1] + b"\x00"
    server.routes["/a.bin"] = Route(corrupted)
    with pytest.raises(DataError) as exc:
        fetch(RemoteFile("a.bin", (server.url("/a.bin"),), sha256(DATA)), tmp_path)
    message = one_line_error(exc)
    assert sha256(DATA) in message and sha256(corrupted) in message
    assert f"put a.bin at {tmp_path / 'a.bin'}" in message
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("checksum", [True, False], ids=["with_sha256", "without_sha256"])
def test_interrupted_transfer_leaves_nothing_and_a_rerun_succeeds(server, tmp_path, checksum):
    server.routes["/a.bin"] = Route(DATA[:3000], claimed_length=len(DATA))
    f = RemoteFile("a.bin", (server.url("/a.bin"),), sha256(DATA) if checksum else None)
    with pytest.raises(DataError) as exc:
        fetch(f, tmp_path)
    assert "closed after 3000 of 10240 bytes" in one_line_error(exc)
    assert os.listdir(tmp_path) == []
    server.routes["/a.bin"] = Route(DATA)  # the server is fixed
    fetch(f, tmp_path)
    assert (tmp_path / "a.bin").read_bytes() == DATA and os.listdir(tmp_path) == ["a.bin"]


def test_present_good_file_is_not_downloaded_again(server, tmp_path):
    server.routes["/a.bin"] = Route(DATA)
    (tmp_path / "a.bin").write_bytes(DATA)
    summary = fetch(RemoteFile("a.bin", (server.url("/a.bin"),), sha256(DATA)), tmp_path)
    assert "already present, sha256 verified" in summary
    assert server.hits["/a.bin"] == 0


def test_a_gzip_file_is_verified_by_its_content_whatever_gzip_wrote_it(server, tmp_path):
    """MNIST's checksums are the official ones of the uncompressed files: another gzip run's bytes pass."""
    packed = gzip.compress(DATA, mtime=12345)
    assert sha256(packed) != sha256(DATA)
    (tmp_path / "a.gz").write_bytes(packed)
    summary = fetch(RemoteFile("a.gz", (server.url("/a.gz"),), sha256(DATA)), tmp_path)
    assert "already present, sha256 of its gunzipped content verified" in summary
    server.routes["/b.gz"] = Route(gzip.compress(DATA, mtime=1))  # a download, gzipped elsewhere
    assert "downloaded" in fetch(RemoteFile("b.gz", (server.url("/b.gz"),), sha256(DATA)), tmp_path)
    (tmp_path / "c.gz").write_bytes(gzip.compress(DATA[:-1] + b"\x00"))  # the wrong content, gzipped
    with pytest.raises(DataError) as exc:
        fetch(RemoteFile("c.gz", (server.url("/c.gz"),), sha256(DATA)), tmp_path)
    assert "nor does its content match" in one_line_error(exc) and server.hits["/c.gz"] == 0


def test_a_gunzipped_copy_is_verified_and_gzipped_in_place(server, tmp_path):
    (tmp_path / "a").write_bytes(DATA)
    summary = fetch(RemoteFile("a.gz", (server.url("/a.gz"),), sha256(DATA)), tmp_path)
    assert "found the gunzipped copy" in summary and "verified" in summary and server.hits["/a.gz"] == 0
    assert gzip.decompress((tmp_path / "a.gz").read_bytes()) == DATA
    (tmp_path / "b").write_bytes(DATA[:100])
    with pytest.raises(DataError) as exc:
        fetch(RemoteFile("b.gz", (server.url("/b.gz"),), sha256(DATA)), tmp_path)
    assert f"sha256 is {sha256(DATA[:100])}, expected {sha256(DATA)}" in one_line_error(exc)
    assert not (tmp_path / "b.gz").exists()


def test_present_file_with_wrong_checksum_is_refused_and_kept(server, tmp_path):
    server.routes["/a.bin"] = Route(DATA)
    (tmp_path / "a.bin").write_bytes(DATA[:100])
    with pytest.raises(DataError) as exc:
        fetch(RemoteFile("a.bin", (server.url("/a.bin"),), sha256(DATA)), tmp_path)
    message = one_line_error(exc)
    assert str(tmp_path / "a.bin") in message
    assert f"sha256 is {sha256(DATA[:100])}, expected {sha256(DATA)}" in message
    assert "delete it" in message
    assert (tmp_path / "a.bin").read_bytes() == DATA[:100] and server.hits["/a.bin"] == 0


def test_unreachable_url_says_which_file_to_put_where(tmp_path):
    with pytest.raises(DataError) as exc:
        fetch(RemoteFile("a.bin", (closed_port_url(),), sha256(DATA)), tmp_path / "raw")
    message = one_line_error(exc)
    assert message.endswith(f"put a.bin at {tmp_path / 'raw' / 'a.bin'} (sha256 {sha256(DATA)}) and rerun")
    assert not (tmp_path / "raw" / "a.bin").exists()


def test_second_mirror_is_used_when_the_first_fails(server, tmp_path):
    server.routes["/b/a.bin"] = Route(DATA)
    f = RemoteFile("a.bin", (server.url("/a/a.bin"), server.url("/b/a.bin")), sha256(DATA))
    summary = fetch(f, tmp_path)
    assert f"from {server.url('/b/a.bin')}" in summary
    assert (server.hits["/a/a.bin"], server.hits["/b/a.bin"]) == (1, 1)
    assert (tmp_path / "a.bin").read_bytes() == DATA


def test_file_url_serves_as_a_mirror(tmp_path):
    """A copy on a shared filesystem works as a mirror: file:// URLs."""
    (tmp_path / "share").mkdir()
    (tmp_path / "share/a.bin").write_bytes(DATA)
    fetch(RemoteFile("a.bin", ((tmp_path / "share/a.bin").as_uri(),), sha256(DATA)), tmp_path / "raw")
    assert (tmp_path / "raw/a.bin").read_bytes() == DATA


def test_every_mirror_failing_names_each_reason(server, tmp_path):
    server.routes["/b/a.bin"] = Route(b"wrong")
    f = RemoteFile("a.bin", (server.url("/a/a.bin"), server.url("/b/a.bin")), sha256(DATA))
    with pytest.raises(DataError) as exc:
        fetch(f, tmp_path)
    message = one_line_error(exc)
    assert "HTTP 404" in message and f"sha256 is {sha256(b'wrong')}" in message
    assert os.listdir(tmp_path) == []


def test_progress_lines_give_bytes_total_and_rate(server, tmp_path):
    big = os.urandom(3 * 2**20)
    server.routes["/big.bin"] = Route(big)
    stream = io.StringIO()
    ensure_file(
        RemoteFile("big.bin", (server.url("/big.bin"),), sha256(big)), tmp_path, progress_every=0, stream=stream
    )
    lines = stream.getvalue().splitlines()
    assert lines and all(
        re.fullmatch(r"scaledl download: big\.bin: [\d.]+ MB of 3\.1 MB \(\d+%\), [\d.]+ MB/s", line) for line in lines
    ), lines
    assert lines[-1].startswith("scaledl download: big.bin: 3.1 MB of 3.1 MB (100%)")


def test_verify_only_never_downloads(server, tmp_path):
    server.routes["/a.bin"] = Route(DATA)
    with pytest.raises(DataError) as exc:
        fetch(RemoteFile("a.bin", (server.url("/a.bin"),), sha256(DATA)), tmp_path, verify_only=True)
    assert f"{tmp_path / 'a.bin'} is missing: put a.bin at" in one_line_error(exc)
    assert server.hits["/a.bin"] == 0


# ---- command line --------------------------------------------------------------


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    status = main(["download", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_downloads_then_skips(server, tmp_path, capsys):
    server.routes["/x.gz"] = Route(DATA)
    argv = [
        "mnist",
        "--out-dir",
        str(tmp_path),
        "--url",
        f"x.gz={server.url('/x.gz')}",
        "--sha256",
        f"x.gz={sha256(DATA)}",
    ]
    status, out, _ = run_cli(capsys, *argv)
    assert status == 0 and "x.gz: downloaded" in out
    status, out, _ = run_cli(capsys, *argv)
    assert status == 0 and "x.gz: already present" in out and server.hits["/x.gz"] == 1


@pytest.mark.parametrize(
    "case", ["unreachable", "corrupt", "present_wrong", "missing_verify_only", "bad_sha256", "unknown_file"]
)
def test_cli_errors_are_one_line_and_non_zero(server, tmp_path, capsys, case):
    server.routes["/x.gz"] = Route(b"not the data")
    url = closed_port_url() if case == "unreachable" else server.url("/x.gz")
    argv = ["mnist", "--out-dir", str(tmp_path), "--url", f"x.gz={url}", "--sha256", f"x.gz={sha256(DATA)}"]
    if case == "present_wrong":
        (tmp_path / "x.gz").write_bytes(b"stale")
    if case == "missing_verify_only":
        argv.append("--verify-only")
    if case == "bad_sha256":
        argv[-1] = "x.gz=abc"
    if case == "unknown_file":
        argv.insert(1, "y.gz")
    status, out, err = run_cli(capsys, *argv)
    assert status != 0 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("scaledl download: error: "), err
    assert "Traceback" not in err
    if case in ("unreachable", "corrupt", "missing_verify_only"):
        assert f"put x.gz at {tmp_path / 'x.gz'} (sha256 {sha256(DATA)})" in err
        assert not (tmp_path / "x.gz").exists()


def test_cli_process_offline_exit_status_and_stderr(tmp_path):
    """The real process: non-zero status, one stderr line, no traceback."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaledl",
            "download",
            "cifar10",
            "--out-dir",
            str(tmp_path),
            "--url",
            f"cifar-10-python.tar.gz={closed_port_url()}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode != 0 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert f"put cifar-10-python.tar.gz at {tmp_path / 'cifar-10-python.tar.gz'} (no sha256 given)" in result.stderr


def test_cli_list_prints_the_built_in_files(capsys):
    status, out, _ = run_cli(capsys, "mnist", "--list")
    assert status == 0
    for f in BUILT_IN["mnist"]:
        assert f"data/raw/mnist/{f.name}  sha256 {f.sha256}" in out


# ---- the lists -------------------------------------------------------------------


def test_built_in_lists_hold_what_the_converters_read():
    assert {f.name for f in BUILT_IN["mnist"]} == {
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    }
    assert [f.name for f in BUILT_IN["cifar10"]] == ["cifar-10-python.tar.gz"]
    for files in BUILT_IN.values():
        for f in files:
            assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.urls
            assert all(url.endswith("/" + f.name) for url in f.urls)


@pytest.mark.parametrize("config", ["config/paper.yaml", "config/cluster.yaml"])
def test_config_download_lists_are_the_built_in_ones(config):
    datasets = yaml.safe_load((REPO / config).read_text())["datasets"]
    assert any("download" in settings for settings in datasets.values())
    for dataset, settings in datasets.items():
        if "download" in settings:
            assert settings["download"] == {
                f.name: {"urls": list(f.urls), "sha256": f.sha256} for f in BUILT_IN[dataset]
            }


def test_raw_readme_lists_the_built_in_checksums():
    text = (REPO / "data/raw/README.md").read_text()
    documented = dict(re.findall(r"^\| `(\w+/[\w.-]+)` \| `([0-9a-f]{64})` \|$", text, flags=re.M))
    assert documented == {f"{dataset}/{f.name}": f.sha256 for dataset, files in BUILT_IN.items() for f in files}


# ---- the download lists as the download rule's jobs (scaledl.grid.downloads) -------


SHA = "ab" * 32


def datasets_config(mnist=None, cifar10=None, cifar10_raw=None):
    """A validated config's `datasets`: digits embedded, mnist and cifar10 with these download lists."""
    return {
        "datasets": {
            "digits": {"image_size": None, "test_fraction": 0.2, "seed": 0},
            "mnist": {"raw": None, "download": mnist or {}, "seed": 0},
            "cifar10": {"raw": cifar10_raw, "download": cifar10 or {}, "seed": 0},
        }
    }


MNIST_LIST = {
    "train images.gz": {"urls": ["http://a/x.gz", "http://b/x.gz"], "sha256": SHA},
    "t10k-labels-idx1-ubyte.gz": {"urls": [], "sha256": SHA},
    "extra.gz": {"urls": ["file:///tmp/extra.gz"], "sha256": None},
}


def test_a_download_list_fills_its_datasets_raw_folder():
    config = datasets_config(mnist=MNIST_LIST, cifar10_raw="data/raw//c10/")
    assert not downloads.needs_raw(config, "digits") and downloads.needs_raw(config, "mnist")
    assert downloads.raw_dir(config, "mnist") == "data/raw/mnist"
    assert downloads.download_folder(config, "cifar10") == "data/raw/c10"  # normalised: outputs match inputs
    assert downloads.download_targets(config, "mnist") == [f"data/raw/mnist/{name}" for name in MNIST_LIST]
    assert downloads.download_targets(config, "cifar10") == []
    assert downloads.downloads_by_folder(config) == {"data/raw/mnist": "mnist"}


def test_the_download_rule_matches_the_listed_files_and_nothing_else():
    constraints = downloads.download_wildcard_constraints(datasets_config(mnist=MNIST_LIST))
    assert re.fullmatch(constraints["rawdir"], "data/raw/mnist")
    assert not re.fullmatch(constraints["rawdir"], "data/raw/mnistX")
    for name in MNIST_LIST:
        assert re.fullmatch(constraints["filename"], name)
    assert not re.fullmatch(constraints["filename"], "extraXgz")  # the dot is escaped
    nothing = downloads.download_wildcard_constraints(datasets_config())
    assert nothing == {"rawdir": "(?!)", "filename": "(?!)"}
    assert not re.fullmatch(nothing["rawdir"], "") and not re.fullmatch(nothing["filename"], "data")


def test_a_listed_file_with_nowhere_to_come_from_is_refused_in_one_line():
    config = datasets_config(mnist={"a.gz": {"urls": [], "sha256": None}})
    with pytest.raises(downloads.DownloadError) as error:
        downloads.downloads_by_folder(config)
    assert str(error.value) == "datasets.mnist.download.a.gz: give it urls or a sha256, or leave it out"
    assert isinstance(error.value, GridError) and isinstance(error.value, ValueError)


def test_two_lists_filling_one_folder_are_refused_naming_both():
    config = datasets_config(
        mnist=MNIST_LIST, cifar10={"b.gz": {"urls": ["http://b/b.gz"], "sha256": None}}, cifar10_raw="data/raw/mnist/"
    )
    with pytest.raises(
        downloads.DownloadError,
        match=r"^datasets mnist and cifar10 both download into "
        r"data/raw/mnist: give one of them its own `raw` folder$",
    ):
        downloads.downloads_by_folder(config)


def test_a_download_job_gets_every_mirror_in_order_and_the_checksum():
    config = datasets_config(mnist=MNIST_LIST)
    assert downloads.source_flags(config, "mnist", "train images.gz") == (
        f"--url 'train images.gz=http://a/x.gz' --url 'train images.gz=http://b/x.gz' --sha256 'train images.gz'={SHA}"
    )
    assert downloads.source_flags(config, "mnist", "extra.gz") == "--url extra.gz=file:///tmp/extra.gz"


def test_prepare_first_verifies_the_listed_files_that_have_a_checksum():
    config = datasets_config(mnist=MNIST_LIST)
    assert downloads.verify_command(config, "cifar10") == ""
    assert downloads.verify_command(config, "mnist") == (
        "python -m scaledl download mnist 'train images.gz' t10k-labels-idx1-ubyte.gz extra.gz "
        f"--out-dir data/raw/mnist --verify-only --sha256 'train images.gz'={SHA} "
        f"--sha256 t10k-labels-idx1-ubyte.gz={SHA} && "
    )


# ---- the workflow ----------------------------------------------------------------


def idx_gz(array: np.ndarray, magic: int) -> bytes:
    """A gzipped IDX file of unsigned bytes, as the MNIST mirrors serve it."""
    return gzip.compress(np.array([magic, *array.shape], ">i4").tobytes() + array.astype(np.uint8).tobytes())


def tiny_mnist() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    return {
        "train-images-idx3-ubyte.gz": idx_gz(rng.integers(0, 256, (20, 28, 28)), 2051),
        "train-labels-idx1-ubyte.gz": idx_gz(rng.integers(0, 10, 20), 2049),
        "t10k-images-idx3-ubyte.gz": idx_gz(rng.integers(0, 256, (10, 28, 28)), 2051),
        "t10k-labels-idx1-ubyte.gz": idx_gz(rng.integers(0, 10, 10), 2049),
    }


def snakemake(workdir: Path, *args):
    env = {k: v for k, v in snakemake_env().items() if "proxy" not in k.lower()}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.workflow
def test_workflow_downloads_verifies_and_prepares(server, tmp_path):
    files = tiny_mnist()
    for name, data in files.items():
        server.routes[f"/mnist/{name}"] = Route(data)
    for name in ("Snakefile", "workflow", "config"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, tmp_path / name)
    # the first mirror is down, so every file comes from the second
    download = {
        name: {"urls": [closed_port_url(f"/{name}"), server.url(f"/mnist/{name}")], "sha256": sha256(data)}
        for name, data in files.items()
    }
    config = {
        # a batch the 20-image file's shards hold: once prepared, the grid checks its shards against it
        "experiments": [{"dataset": "mnist", "algorithms": ["sync_sgd"], "train": {"max_steps": 2, "batch_size": 4}}],
        "datasets": {"mnist": {"download": download}},
    }
    (tmp_path / "config/custom.yaml").write_text(yaml.safe_dump(config))
    args = ("data/hdf5/mnist.h5", "--configfile", "config/custom.yaml")  # targets before the nargs option

    result = snakemake(tmp_path, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    for name, data in files.items():
        assert (tmp_path / "data/raw/mnist" / name).read_bytes() == data
        assert server.hits[f"/mnist/{name}"] == 1
    with h5py.File(tmp_path / "data/hdf5/mnist.h5") as h5:
        assert h5["train/images"].shape[0] == 20

    # A file put in place by hand satisfies the download rule (nothing is fetched
    # again), and prepare checks its sha256 before reading it.
    (tmp_path / "data/raw/mnist/t10k-labels-idx1-ubyte.gz").write_bytes(files["train-labels-idx1-ubyte.gz"])
    failed = snakemake(tmp_path, "--forcerun", "prepare", *args)
    assert failed.returncode != 0
    assert sum(server.hits.values()) == 4
    log = (tmp_path / "logs/prepare/mnist.log").read_text()
    assert "Traceback" not in log and "prepared mnist" not in log
    assert log.splitlines()[-1].startswith(
        "scaledl download: error: data/raw/mnist/t10k-labels-idx1-ubyte.gz is there but its sha256 is"
    ), log
