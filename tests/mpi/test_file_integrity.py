"""Outputs follow the umask; a prepared file whose payload was damaged is refused in one line, never trained on."""

import os
import shutil
import stat

import h5py
import numpy as np
import pytest

from scaledl.atomic import atomic_path, current_umask, write_text
from scaledl.data import hdf5
from scaledl.data.hdf5 import read_info, write_dataset
from scaledl.data.loader import ShardLoader, iter_split
from scaledl.errors import DataError

DAMAGE_BYTES = 200_000


@pytest.fixture
def umask():
    """Set the process umask for one test; the old one comes back afterwards."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def small_dataset(out, n_train=600, n_test=200, shape=(3, 32, 32)):
    """A prepared file of random images (several chunks per split)."""
    rng = np.random.default_rng(0)
    split = lambda n: (rng.integers(0, 256, (n, *shape), dtype=np.uint8), rng.integers(0, 4, n))  # noqa: E731
    write_dataset(
        out,
        dataset="toy",
        train=split(n_train),
        test=split(n_test),
        classes=4,
        class_names=None,
        source_sha256="ab" * 32,
    )
    return out


def payload_extent(path, name):
    """[start, end) bytes of `name`'s stored data: its chunks, which must lie back to back (pure payload)."""
    with h5py.File(path, "r") as f:
        ds = f[name]
        if ds.chunks is None:
            return ds.id.get_offset(), ds.id.get_offset() + ds.id.get_storage_size()
        chunks = sorted((c.byte_offset, c.size) for c in map(ds.id.get_chunk_info, range(ds.id.get_num_chunks())))
    start, end = chunks[0][0], chunks[-1][0] + chunks[-1][1]
    assert sum(size for _, size in chunks) == end - start, "chunks are not back to back: the damage could miss them"
    return start, end


def damage(path, name="/train/images", nbytes=DAMAGE_BYTES):
    """Overwrite `nbytes` random bytes in the middle of `name`'s payload, as a bad disk or copy would."""
    start, end = payload_extent(path, name)
    nbytes = min(nbytes, (end - start) // 2)
    at = start + (end - start - nbytes) // 2
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8).tobytes())


def assert_refused(err, path, dataset="toy"):
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: damaged file: ")
    assert "checksum" in message and f"re-run `scaledl prepare {dataset} --out {path}`" in message


# --- file modes ----------------------------------------------------------------------


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_follow_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    assert current_umask() == mask
    write_text(tmp_path / "run.json", "{}\n")
    small_dataset(tmp_path / "toy.h5", n_train=8, n_test=4, shape=(1, 4, 4))
    assert mode(tmp_path / "run.json") == expected
    assert mode(tmp_path / "toy.h5") == expected


def test_a_failed_write_leaves_neither_output_nor_temporary_file(tmp_path, umask):
    umask(0o022)
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "table.csv") as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer failed")
    assert list(tmp_path.iterdir()) == []


# --- checksums ---------------------------------------------------------------------


def test_prepared_files_checksum_every_dataset(tmp_path, digits_h5):
    info = read_info(digits_h5)
    assert (info.format_version, info.checksummed) == (hdf5.FORMAT_VERSION, True)
    with h5py.File(digits_h5, "r") as f:
        for split in ("train", "test"):
            for key in ("images", "labels"):
                assert f[split][key].fletcher32 and f[split][key].chunks is not None


def test_damaged_train_images_are_refused_by_the_in_memory_shard(tmp_path):
    path = small_dataset(tmp_path / "toy.h5")
    damage(path)
    read_info(path)  # the metadata is intact: only reading the payload shows the damage
    with pytest.raises(DataError) as err:
        ShardLoader(path, shard=0, num_shards=1, batch_size=10, seed=0)
    assert_refused(err, path)
    assert "/train/images" in str(err.value)


def test_damaged_train_images_are_refused_by_the_streamed_shard(tmp_path):
    path = small_dataset(tmp_path / "toy.h5")
    damage(path)
    loader = ShardLoader(path, shard=0, num_shards=1, batch_size=10, seed=0, in_memory_max_bytes=0)
    assert not loader.in_memory
    with pytest.raises(DataError) as err:
        for _ in range(loader.steps_per_epoch):  # one epoch reads every block
            loader.next_batch()
    assert_refused(err, path)


@pytest.mark.parametrize("in_memory_max_bytes", [hdf5.CHUNK_BYTES * 64, 0])
def test_damaged_test_images_are_refused_by_evaluation(tmp_path, in_memory_max_bytes):
    path = small_dataset(tmp_path / "toy.h5")
    damage(path, "/test/images", nbytes=60_000)
    with pytest.raises(DataError) as err:
        for _ in iter_split(path, "test", 50, in_memory_max_bytes=in_memory_max_bytes):
            pass
    assert_refused(err, path)
    ShardLoader(path, shard=0, num_shards=1, batch_size=10, seed=0)  # the train split is whole and still reads


@pytest.mark.parametrize("in_memory_max_bytes", [hdf5.CHUNK_BYTES * 64, 0])
def test_undamaged_files_read_back_unchanged(tmp_path, in_memory_max_bytes):
    path = small_dataset(tmp_path / "toy.h5")
    with h5py.File(path, "r") as f:
        shard = f["train/images"][200:400]
    loader = ShardLoader(path, shard=1, num_shards=3, batch_size=10, seed=0, in_memory_max_bytes=in_memory_max_bytes)
    images, _ = loader.next_batch()
    np.testing.assert_array_equal(images.numpy(), shard[loader.epoch_order(0)[:10]])


@pytest.mark.mpi
def test_training_on_a_damaged_file_stops_with_one_line(tmp_path, digits_h5):
    from mpi_run import run_train

    path = tmp_path / "digits.h5"
    shutil.copyfile(digits_h5, path)
    damage(path)
    result = run_train(
        1,
        [
            "--data",
            str(path),
            "--model",
            "lenet",
            "--algorithm",
            "sync_sgd",
            "--out-dir",
            str(tmp_path / "run"),
            "--max-steps",
            "5",
        ],
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and str(path) in lines[0] and "checksum" in lines[0], result.stderr
    assert f"re-run `scaledl prepare digits --out {path}`" in lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "run").exists()


# --- files from before checksums ----------------------------------------------------


def write_format_1(out, n_train=40, n_test=10, shape=(1, 8, 8)):
    """A file as scaledl wrote small sets before format 2: contiguous, no checksums, no format_version."""
    rng = np.random.default_rng(2)
    with h5py.File(out, "w") as f:
        for split, n in (("train", n_train), ("test", n_test)):
            f.create_dataset(f"{split}/images", data=rng.integers(0, 256, (n, *shape), dtype=np.uint8))
            f.create_dataset(f"{split}/labels", data=rng.integers(0, 4, n, dtype=np.int64))
        f.attrs.update(dataset="toy", classes=4, mean=[0.5], std=[0.3], source_sha256="ab" * 32, scaledl_version="0.1")
    return out


def test_files_without_checksums_are_still_read(tmp_path):
    path = write_format_1(tmp_path / "old.h5")
    info = read_info(path)
    assert (info.format_version, info.checksummed, info.chunked) == (1, False, False)
    images, labels = ShardLoader(path, shard=0, num_shards=2, batch_size=5, seed=0).next_batch()
    assert images.shape == (5, 1, 8, 8) and labels.shape == (5,)


def test_a_newer_format_or_missing_checksums_are_refused(tmp_path):
    newer = small_dataset(tmp_path / "newer.h5", n_train=8, n_test=4, shape=(1, 4, 4))
    with h5py.File(newer, "r+") as f:
        f.attrs[hdf5.ATTR_FORMAT] = hdf5.FORMAT_VERSION + 1
    with pytest.raises(DataError, match="is newer than this scaledl reads"):
        read_info(newer)
    stripped = write_format_1(tmp_path / "stripped.h5")
    with h5py.File(stripped, "r+") as f:
        f.attrs[hdf5.ATTR_FORMAT] = hdf5.FORMAT_VERSION
    with pytest.raises(DataError, match="has no checksums although format_version is 2"):
        read_info(stripped)


def test_a_damaged_test_split_ends_a_two_rank_run_in_one_line(tmp_path, digits_h5):
    """Found mid-run by the evaluating rank alone: the job ends (it does not hang in an exchange)."""
    from mpi_run import run_train

    path = tmp_path / "digits.h5"
    shutil.copyfile(digits_h5, path)
    damage(path, "/test/images", nbytes=64 << 10)
    result = run_train(
        2,
        [
            "--data",
            str(path),
            "--model",
            "lenet",
            "--algorithm",
            "sync_sgd",
            "--out-dir",
            str(tmp_path / "run"),
            "--max-steps",
            "40",
            "--eval-every",
            "5",
        ],
    )
    ours = [line for line in result.stderr.splitlines() if "scaledl train: error:" in line]
    assert result.returncode != 0, result.stderr
    assert len(ours) == 1 and str(path) in ours[0] and "/test/images" in ours[0], result.stderr
    assert "Traceback" not in result.stdout + result.stderr
