"""The HDF5 layout: round trip, statistics, atomic writes, and read_info's checks."""

import h5py
import numpy as np
import pytest

import scaledl
from scaledl.data import hdf5
from scaledl.data.hdf5 import DatasetWriter, read_info, sha256_files, write_dataset
from scaledl.errors import DataError


def make_split(rng, n, shape=(3, 8, 6), classes=4):
    return rng.integers(0, 256, size=(n, *shape), dtype=np.uint8), rng.integers(0, classes, size=n)


def write_small(out, rng, chunked=False, **overrides):
    kwargs = dict(
        dataset="toy",
        train=make_split(rng, 50),
        test=make_split(rng, 20),
        classes=4,
        class_names=["a", "b", "c", "d"],
        source_sha256="ab" * 32,
        chunked=chunked,
    )
    kwargs.update(overrides)
    write_dataset(out, **kwargs)
    return kwargs


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("chunked", [False, True])
def test_round_trip(tmp_path, chunked):
    out = tmp_path / "toy.h5"
    written = write_small(out, np.random.default_rng(0), chunked=chunked, attrs={"seed": 7})
    info = read_info(out)
    assert (info.dataset, info.classes, info.class_names) == ("toy", 4, ("a", "b", "c", "d"))
    assert (info.image_shape, info.n_train, info.n_test) == ((3, 8, 6), 50, 20)
    assert (info.chunked, info.checksummed, info.format_version) == (True, True, hdf5.FORMAT_VERSION)
    assert info.source_sha256 == "ab" * 32 and info.scaledl_version == scaledl.__version__
    train_images = written["train"][0] / 255.0
    np.testing.assert_allclose(info.mean, train_images.mean(axis=(0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(info.std, train_images.std(axis=(0, 2, 3)), rtol=1e-9)
    with h5py.File(out) as f:
        for split in ("train", "test"):
            images, labels = f[split]["images"], f[split]["labels"]
            assert images.dtype == np.uint8 and labels.dtype == np.int64
            np.testing.assert_array_equal(images[()], written[split][0])
            np.testing.assert_array_equal(labels[()], written[split][1])
            assert [d.label for d in images.dims] == ["batch", "channel", "height", "width"]
            assert images.compression is None
            assert images.chunks is not None and images.fletcher32 and labels.fletcher32
            assert (images.maxshape[0] is None) == chunked  # the large-set layout can be cut short
        assert f.attrs["seed"] == 7


def test_chunks_hold_about_one_mebibyte():
    assert hdf5.rows_per_chunk((3, 224, 224)) == 6  # 6 x 147 KiB ≈ 0.9 MiB
    assert hdf5.rows_per_chunk((3, 2048, 2048)) == 1


def test_streamed_writes_give_the_same_file_contents_and_stats(tmp_path):
    rng = np.random.default_rng(1)
    train, test = make_split(rng, 103), make_split(rng, 9)
    write_dataset(
        tmp_path / "whole.h5", dataset="toy", train=train, test=test, classes=4, class_names=None, source_sha256="x"
    )
    with DatasetWriter(tmp_path / "streamed.h5", dataset="toy", classes=4, chunked=True) as w:
        split = w.create_split("train", 103, (3, 8, 6))
        for lo in range(0, 103, 10):
            split.write(train[0][lo : lo + 10], train[1][lo : lo + 10])
        w.create_split("test", 9, (3, 8, 6)).write(*test)
        w.source_sha256 = "x"
    whole, streamed = read_info(tmp_path / "whole.h5"), read_info(tmp_path / "streamed.h5")
    assert whole.mean == streamed.mean and whole.std == streamed.std and whole.class_names is None
    with h5py.File(tmp_path / "streamed.h5") as f:
        np.testing.assert_array_equal(f["train/images"][()], train[0])


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failed_write_leaves_nothing(tmp_path, error):
    out = tmp_path / "toy.h5"
    with pytest.raises(type(error)):
        with DatasetWriter(out, dataset="toy", classes=4, source_sha256="x") as w:
            w.create_split("train", 10, (1, 2, 2)).write(np.zeros((5, 1, 2, 2), np.uint8), np.zeros(5))
            raise error
    assert leftovers(tmp_path) == []


def test_incomplete_write_is_refused_and_leaves_nothing(tmp_path):
    with pytest.raises(ValueError, match="5 of 10"):
        with DatasetWriter(tmp_path / "toy.h5", dataset="toy", classes=4, source_sha256="x") as w:
            w.create_split("train", 10, (1, 2, 2)).write(np.zeros((5, 1, 2, 2), np.uint8), np.zeros(5))
            w.create_split("test", 1, (1, 2, 2)).write(np.zeros((1, 1, 2, 2), np.uint8), np.zeros(1))
    assert leftovers(tmp_path) == []


def test_labels_outside_classes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="labels must lie"):
        write_small(tmp_path / "toy.h5", np.random.default_rng(0), classes=3, class_names=None)
    assert leftovers(tmp_path) == []


def test_existing_output_survives_a_failed_rewrite(tmp_path):
    out = tmp_path / "toy.h5"
    write_small(out, np.random.default_rng(0))
    with pytest.raises(RuntimeError):
        with DatasetWriter(out, dataset="toy", classes=4, source_sha256="x"):
            raise RuntimeError
    assert read_info(out).dataset == "toy" and leftovers(tmp_path) == ["toy.h5"]


def test_read_info_rejects_a_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file.*scaledl prepare"):
        read_info(tmp_path / "absent.h5")


def test_read_info_rejects_a_file_that_is_not_hdf5(tmp_path):
    path = tmp_path / "fake.h5"
    path.write_text("not hdf5 at all\n")
    with pytest.raises(DataError, match=f"{path}: not an HDF5 file.*scaledl prepare"):
        read_info(path)


def test_read_info_rejects_a_truncated_hdf5_file(tmp_path):
    out = tmp_path / "toy.h5"
    write_small(out, np.random.default_rng(0))
    out.write_bytes(out.read_bytes()[:3000])
    with pytest.raises(DataError, match=str(out)):
        read_info(out)


def corrupt(path, edit):
    with h5py.File(path, "a") as f:
        edit(f)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda f: f["test"].pop("labels"), "missing dataset /test/labels"),
        (lambda f: f.attrs.pop("mean"), "missing root attribute.*mean"),
        (lambda f: f.attrs.__setitem__("std", [0.1, 0.2]), "mean/std have 3/2 values for 3 channels"),
        (
            lambda f: (f["train"].pop("labels"), f["train"].create_dataset("labels", data=np.zeros(50, np.int32))),
            "/train/labels is int32",
        ),
        (
            lambda f: (f["test"].pop("labels"), f["test"].create_dataset("labels", data=np.zeros(19, np.int64))),
            "/test has 20 images but 19 labels",
        ),
    ],
)
def test_read_info_rejects_a_broken_layout(tmp_path, edit, message):
    out = tmp_path / "toy.h5"
    write_small(out, np.random.default_rng(0))
    corrupt(out, edit)
    with pytest.raises(DataError, match=message) as err:
        read_info(out)
    assert str(out) in str(err.value) and "scaledl prepare toy" in str(err.value)
    assert "\n" not in str(err.value)


def test_sha256_files_is_the_sha256sum_manifest_sorted_by_name(tmp_path):
    import hashlib

    (tmp_path / "b").write_bytes(b"bee")
    (tmp_path / "a").write_bytes(b"ay")
    manifest = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in (("a", b"ay"), ("b", b"bee")))
    expected = hashlib.sha256(manifest.encode()).hexdigest()
    assert sha256_files([tmp_path / "b", tmp_path / "a"]) == expected
    assert sha256_files([tmp_path / "a", tmp_path / "b"], root=tmp_path) == expected
