"""Converters on small files written in the real raw formats (IDX, CIFAR pickles, JPEG trees)."""

import argparse
import gzip
import io
import os
import pickle
import subprocess
import sys
import tarfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from PIL import Image

from scaledl.data.converters import CONVERTERS, cifar10, imagenet, mnist
from scaledl.data.converters.options import PrepareOptions
from scaledl.data.hdf5 import read_info
from scaledl.data.prepare import add_arguments as add_prepare_arguments
from scaledl.data.prepare import run as run_prepare
from scaledl.errors import DataError, UserError


def read_h5(path):
    with h5py.File(path) as f:
        return {k: f[k][()] for k in ("train/images", "train/labels", "test/images", "test/labels")}


def assert_nothing_written(folder: Path):
    """No output and no temp file beside it (the raw inputs live elsewhere)."""
    assert sorted(p.name for p in folder.iterdir()) == []


@pytest.fixture
def out_dir(tmp_path):
    folder = tmp_path / "hdf5"
    folder.mkdir()
    return folder


def prepare(argv):
    parser = argparse.ArgumentParser()
    add_prepare_arguments(parser)
    return run_prepare(parser.parse_args(argv))


# --- digits, synthetic --------------------------------------------------------------


def test_digits_default_is_28x28_stratified_and_deterministic(out_dir, capsys):
    assert prepare(["digits", "--out", str(out_dir / "d.h5")]) == 0
    assert "prepared digits: 1437 train + 360 test images of 1x28x28, 10 classes" in capsys.readouterr().out
    info = read_info(out_dir / "d.h5")
    assert info.n_train + info.n_test == 1797 and info.class_names == tuple("0123456789")
    data = read_h5(out_dir / "d.h5")
    assert data["train/images"].max() == 255  # 0..16 scaled to 0..255
    train_share = np.bincount(data["train/labels"]) / np.bincount(np.r_[data["train/labels"], data["test/labels"]])
    assert np.all(np.abs(train_share - 0.8) < 0.02)  # stratified
    prepare(["digits", "--out", str(out_dir / "again.h5")])
    again = read_h5(out_dir / "again.h5")
    assert all(np.array_equal(data[k], again[k]) for k in data)
    assert read_info(out_dir / "again.h5").source_sha256 == info.source_sha256


def test_digits_image_size_and_test_fraction(out_dir):
    prepare(["digits", "--out", str(out_dir / "d.h5"), "--image-size", "16", "--test-fraction", "0.5"])
    info = read_info(out_dir / "d.h5")
    assert info.image_shape == (1, 16, 16) and abs(info.n_test - 1797 / 2) <= 1


def test_synthetic_shape_counts_determinism_and_learnability(out_dir):
    argv = ["synthetic", "--train-count", "300", "--test-count", "100", "--shape", "3,5,7", "--classes", "3"]
    prepare(argv + ["--out", str(out_dir / "a.h5")])
    prepare(argv + ["--out", str(out_dir / "b.h5")])
    prepare(argv + ["--out", str(out_dir / "c.h5"), "--seed", "1"])
    info = read_info(out_dir / "a.h5")
    assert (info.image_shape, info.n_train, info.n_test, info.classes) == ((3, 5, 7), 300, 100, 3)
    a, b, c = (read_h5(out_dir / n) for n in ("a.h5", "b.h5", "c.h5"))
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["train/images"], c["train/images"])
    assert np.bincount(a["train/labels"]).tolist() == [100, 100, 100]
    # nearest class mean, fitted on train, beats chance (1/3) by far on test
    x_train, x_test = (a[k].reshape(len(a[k]), -1).astype(float) for k in ("train/images", "test/images"))
    centroids = np.stack([x_train[a["train/labels"] == k].mean(0) for k in range(3)])
    predicted = np.argmin(((x_test[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (predicted == a["test/labels"]).mean() > 0.8


def test_imagenet_shaped_is_a_plug_in_converter_named_by_its_file(out_dir, monkeypatch):
    """The workflow's plug-in prepare path: `scaledl prepare NAME --converter ...:imagenet_shaped`."""
    from scaledl.data.converters import synthetic

    monkeypatch.setitem(synthetic.IMAGENET_SHAPED, "train_count", 16)  # the shape is the point, not 4096 images
    monkeypatch.setitem(synthetic.IMAGENET_SHAPED, "test_count", 4)
    out = out_dir / "imagenet_shaped.h5"
    prepare(["imagenet_shaped", "--converter", "scaledl.data.converters.synthetic:imagenet_shaped", "--out", str(out)])
    info = read_info(out)
    assert (info.dataset, info.image_shape, info.classes, info.n_train) == ("imagenet_shaped", (3, 224, 224), 1000, 16)


def test_options_are_checked():
    with pytest.raises(UserError, match="--test-fraction"):
        PrepareOptions(test_fraction=1.5)
    with pytest.raises(UserError, match="--classes"):
        PrepareOptions(classes=1)


def test_raw_is_required_where_needed_and_image_size_where_it_applies(tmp_path):
    with pytest.raises(UserError, match="mnist needs --raw DIR holding the four MNIST IDX files"):
        prepare(["mnist", "--out", str(tmp_path / "m.h5")])
    with pytest.raises(DataError, match="no such file or directory"):
        prepare(["cifar10", "--out", str(tmp_path / "c.h5"), "--raw", str(tmp_path / "absent")])
    with pytest.raises(UserError, match="cifar10 images keep their native size"):
        prepare(["cifar10", "--out", str(tmp_path / "c.h5"), "--raw", str(tmp_path), "--image-size", "64"])


def test_every_converter_describes_itself():
    for name, converter in CONVERTERS.items():
        assert converter.name == name and converter.description and "\n" not in converter.description


# --- MNIST ---------------------------------------------------------------------------


def idx_bytes(array: np.ndarray, magic: int) -> bytes:
    header = np.array([magic, *array.shape], dtype=">i4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def write_mnist(folder: Path, rng, n_train=30, n_test=10, gz=True, overrides=None):
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": idx_bytes(rng.integers(0, 256, (n_train, 28, 28)), 2051),
        "train-labels-idx1-ubyte": idx_bytes(rng.integers(0, 10, n_train), 2049),
        "t10k-images-idx3-ubyte": idx_bytes(rng.integers(0, 256, (n_test, 28, 28)), 2051),
        "t10k-labels-idx1-ubyte": idx_bytes(rng.integers(0, 10, n_test), 2049),
    }
    arrays.update(overrides or {})
    for name, data in arrays.items():
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return arrays


def parse_plain(data: bytes, ndim: int) -> np.ndarray:
    dims = np.frombuffer(data, ">i4", count=1 + ndim)[1:]
    return np.frombuffer(data, np.uint8, offset=4 * (1 + ndim)).reshape(dims)


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_round_trip(tmp_path, out_dir, gz):
    raw = tmp_path / "raw"
    files = write_mnist(raw, np.random.default_rng(0), gz=gz)
    prepare(["mnist", "--raw", str(raw), "--out", str(out_dir / "m.h5")])
    data, info = read_h5(out_dir / "m.h5"), read_info(out_dir / "m.h5")
    assert (info.dataset, info.classes, info.image_shape, info.n_train, info.n_test) == (
        "mnist",
        10,
        (1, 28, 28),
        30,
        10,
    )
    test_images = parse_plain(files["t10k-images-idx3-ubyte"], 3)
    np.testing.assert_array_equal(data["test/images"][:, 0], test_images)  # test keeps file order
    np.testing.assert_array_equal(data["test/labels"], parse_plain(files["t10k-labels-idx1-ubyte"], 1))
    # train is pre-shuffled: the same (image, label) pairs, another order
    train_images = parse_plain(files["train-images-idx3-ubyte"], 3)
    train_labels = parse_plain(files["train-labels-idx1-ubyte"], 1)
    pairs = sorted((img.tobytes(), int(lab)) for img, lab in zip(train_images, train_labels))
    assert sorted((img[0].tobytes(), int(lab)) for img, lab in zip(data["train/images"], data["train/labels"])) == pairs
    np.testing.assert_allclose(info.mean, [(train_images / 255.0).mean()])
    np.testing.assert_allclose(info.std, [(train_images / 255.0).std()])


def test_mnist_source_hash_changes_with_the_files(tmp_path, out_dir):
    write_mnist(tmp_path / "a", np.random.default_rng(0))
    write_mnist(tmp_path / "b", np.random.default_rng(1))
    for name in "ab":
        prepare(["mnist", "--raw", str(tmp_path / name), "--out", str(out_dir / f"{name}.h5")])
    assert read_info(out_dir / "a.h5").source_sha256 != read_info(out_dir / "b.h5").source_sha256


def mnist_error(tmp_path, out_dir, overrides=None, gz=True, remove=None, garble=None):
    raw = tmp_path / "raw"
    write_mnist(raw, np.random.default_rng(0), gz=gz, overrides=overrides)
    if remove:
        (raw / remove).unlink()
    if garble:
        (raw / garble).write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(DataError) as err:
        mnist.convert(raw, out_dir / "m.h5", PrepareOptions())
    assert_nothing_written(out_dir)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_mnist_truncated_images(tmp_path, out_dir):
    full = idx_bytes(np.zeros((30, 28, 28)), 2051)
    message = mnist_error(tmp_path, out_dir, {"train-images-idx3-ubyte": full[:1250]})
    assert (
        "train-images-idx3-ubyte.gz: truncated: header says 30 images of 28x28 (23520 bytes) but 1234 bytes follow"
        in message
    )
    assert "re-download" in message


def test_mnist_wrong_magic(tmp_path, out_dir):
    message = mnist_error(tmp_path, out_dir, {"t10k-labels-idx1-ubyte": idx_bytes(np.zeros(10), 2051)}, gz=False)
    assert "t10k-labels-idx1-ubyte: magic number 2051, expected 2049" in message


def test_mnist_label_out_of_range(tmp_path, out_dir):
    labels = np.zeros(30)
    labels[7] = 12
    message = mnist_error(tmp_path, out_dir, {"train-labels-idx1-ubyte": idx_bytes(labels, 2049)})
    assert "train-labels-idx1-ubyte.gz: label 12 at index 7 is outside 0..9" in message


def test_mnist_counts_disagree(tmp_path, out_dir):
    message = mnist_error(tmp_path, out_dir, {"t10k-labels-idx1-ubyte": idx_bytes(np.zeros(9), 2049)})
    assert "t10k-labels-idx1-ubyte.gz: 9 labels but t10k-images-idx3-ubyte.gz holds 10 images" in message


def test_mnist_missing_and_broken_files(tmp_path, out_dir):
    message = mnist_error(tmp_path, out_dir, remove="t10k-images-idx3-ubyte.gz")
    assert "missing t10k-images-idx3-ubyte (or .gz)" in message
    message = mnist_error(tmp_path / "again", out_dir, garble="train-labels-idx1-ubyte.gz")
    assert "train-labels-idx1-ubyte.gz: cannot read" in message


# --- CIFAR-10 ------------------------------------------------------------------------


def cifar_batch(rng, n):
    # what the real files hold: bytes keys, a uint8 array, a list of ints, protocol 2 (Python 2 era)
    return {
        b"batch_label": b"batch",
        b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
        b"labels": rng.integers(0, 10, n).tolist(),
        b"filenames": [b"x.png"] * n,
    }


def write_cifar(folder: Path, rng, n=8, meta=True, overrides=None):
    batches = {f"data_batch_{i}": cifar_batch(rng, n) for i in range(1, 6)}
    batches["test_batch"] = cifar_batch(rng, n)
    if meta:
        batches["batches.meta"] = {b"label_names": [f"name{i}".encode() for i in range(10)], b"num_vis": 3072}
    files = {name: pickle.dumps(b, protocol=2) for name, b in batches.items()}
    files.update(overrides or {})
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return batches


def cifar_archive(tmp_path, batches_dir: Path) -> Path:
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(batches_dir, arcname="cifar-10-batches-py")
    return archive


def test_cifar_round_trip_from_folder_and_archive(tmp_path, out_dir):
    batches_dir = tmp_path / "raw" / "cifar-10-batches-py"
    batches = write_cifar(batches_dir, np.random.default_rng(0))
    archive_root = tmp_path / "archived"
    archive_root.mkdir()
    cifar_archive(archive_root, batches_dir)
    for name, raw in (
        ("nested", tmp_path / "raw"),
        ("folder", batches_dir),
        ("archive", archive_root),
        ("archive-file", archive_root / "cifar-10-python.tar.gz"),
    ):
        prepare(["cifar10", "--raw", str(raw), "--out", str(out_dir / f"{name}.h5")])
    data, info = read_h5(out_dir / "nested.h5"), read_info(out_dir / "nested.h5")
    assert (info.image_shape, info.n_train, info.n_test) == ((3, 32, 32), 40, 8)
    assert info.class_names == tuple(f"name{i}" for i in range(10))
    test = batches["test_batch"]
    np.testing.assert_array_equal(data["test/images"], test[b"data"].reshape(-1, 3, 32, 32))
    np.testing.assert_array_equal(data["test/labels"], test[b"labels"])
    train = np.concatenate([batches[f"data_batch_{i}"][b"data"] for i in range(1, 6)]).reshape(-1, 3, 32, 32)
    np.testing.assert_allclose(info.mean, (train / 255.0).mean(axis=(0, 2, 3)))
    np.testing.assert_allclose(info.std, (train / 255.0).std(axis=(0, 2, 3)))
    for name in ("folder", "archive", "archive-file"):
        other = read_h5(out_dir / f"{name}.h5")
        assert all(np.array_equal(data[k], other[k]) for k in data)
    assert read_info(out_dir / "archive.h5").source_sha256 == read_info(out_dir / "archive-file.h5").source_sha256


def test_cifar_without_meta_uses_the_published_names(tmp_path, out_dir):
    write_cifar(tmp_path / "raw", np.random.default_rng(0), meta=False)
    cifar10.convert(tmp_path / "raw", out_dir / "c.h5", PrepareOptions())
    assert read_info(out_dir / "c.h5").class_names[:2] == ("airplane", "automobile")


def cifar_error(tmp_path, out_dir, overrides, archive=False):
    raw = tmp_path / "raw"
    write_cifar(raw / "cifar-10-batches-py", np.random.default_rng(0), overrides=overrides)
    if archive:
        raw = tmp_path / "archived"
        raw.mkdir()
        cifar_archive(raw, tmp_path / "raw" / "cifar-10-batches-py")
    with pytest.raises(DataError) as err:
        cifar10.convert(raw, out_dir / "c.h5", PrepareOptions())
    assert_nothing_written(out_dir)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("archive", [False, True])
def test_cifar_corrupt_pickle_names_the_file(tmp_path, out_dir, archive):
    good = pickle.dumps(cifar_batch(np.random.default_rng(0), 8), protocol=2)
    message = cifar_error(tmp_path, out_dir, {"data_batch_3": good[: len(good) // 2]}, archive=archive)
    assert "data_batch_3: not a readable CIFAR batch" in message


def test_cifar_bad_batches(tmp_path, out_dir):
    rng = np.random.default_rng(0)
    short = cifar_batch(rng, 8)
    short[b"data"] = short[b"data"][:, :3000]
    assert "data_batch_2: `data` is uint8 (8, 3000)" in cifar_error(
        tmp_path / "a", out_dir, {"data_batch_2": pickle.dumps(short, protocol=2)}
    )
    bad_labels = cifar_batch(rng, 8)
    bad_labels[b"labels"] = [10] + [0] * 7
    assert "test_batch: labels 0..10 outside 0..9" in cifar_error(
        tmp_path / "b", out_dir, {"test_batch": pickle.dumps(bad_labels, protocol=2)}
    )


def test_cifar_pickle_cannot_run_code(tmp_path, out_dir):
    class Exploit:
        def __reduce__(self):
            return (os.system, ("touch pwned",))

    message = cifar_error(tmp_path, out_dir, {"data_batch_1": pickle.dumps(Exploit())})
    assert "data_batch_1: not a readable CIFAR batch" in message and "posix.system" in message


def test_cifar_missing_and_corrupt_archive(tmp_path, out_dir):
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="cifar-10-python.tar.gz: not a readable tar.gz"):
        cifar10.convert(tmp_path, out_dir / "c.h5", PrepareOptions())
    with pytest.raises(DataError, match="found neither cifar-10-python.tar.gz"):
        cifar10.convert(out_dir, out_dir / "c.h5", PrepareOptions())
    assert_nothing_written(out_dir)


# --- ImageNet ------------------------------------------------------------------------

WNIDS = ("n01440764", "n01443537", "n01484850")


def jpeg(rng, corrupt=False) -> bytes:
    w, h = (int(v) for v in rng.integers(12, 40, size=2))
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, "JPEG")
    data = buf.getvalue()
    return data[: len(data) // 2] if corrupt else data


def write_imagenet(root: Path, rng, val_layout="sorted", per_class=4, per_val_class=2):
    """3 classes x 4 train JPEGs of random sizes; val sorted or flat with both label files."""
    truth = []
    for wnid in WNIDS:
        (root / "train" / wnid).mkdir(parents=True)
        for i in range(per_class):
            (root / "train" / wnid / f"{wnid}_{i}.JPEG").write_bytes(jpeg(rng))
    (root / "val").mkdir()
    names = [f"ILSVRC2012_val_{i:08d}.JPEG" for i in range(1, per_val_class * len(WNIDS) + 1)]
    for i, name in enumerate(names):
        wnid = WNIDS[(i * 2) % len(WNIDS)]
        truth.append(wnid)
        folder = root / "val" / wnid if val_layout == "sorted" else root / "val"
        folder.mkdir(exist_ok=True)
        (folder / name).write_bytes(jpeg(rng))
    (root / "labels.csv").write_text(
        "ImageId,PredictionString\n" + "".join(f"{Path(n).stem},{w} 1 2 3 4\n" for n, w in zip(names, truth))
    )
    return names, truth


def test_imagenet_sorted_val(tmp_path, out_dir):
    names, truth = write_imagenet(tmp_path / "raw", np.random.default_rng(0))
    prepare(["imagenet", "--raw", str(tmp_path / "raw"), "--out", str(out_dir / "i.h5"), "--image-size", "16"])
    info = read_info(out_dir / "i.h5")
    assert (info.classes, info.class_names, info.image_shape) == (3, WNIDS, (3, 16, 16))
    assert (info.n_train, info.n_test, info.chunked) == (12, 6, True)
    data = read_h5(out_dir / "i.h5")
    assert sorted(data["train/labels"].tolist()) == [0] * 4 + [1] * 4 + [2] * 4
    assert data["train/labels"].tolist() != sorted(data["train/labels"].tolist())  # pre-shuffled
    # val (= test) in sorted folder order: class by class
    assert data["test/labels"].tolist() == sorted(WNIDS.index(w) for w in truth)
    np.testing.assert_allclose(info.mean, (data["train/images"] / 255.0).mean(axis=(0, 2, 3)))
    with h5py.File(out_dir / "i.h5") as f:
        assert f.attrs["skipped_corrupt"] == 0 and f.attrs["resize"] == 18 and f.attrs["crop"] == 16


def test_imagenet_flat_val_with_a_label_file_and_workers(tmp_path, out_dir):
    names, truth = write_imagenet(tmp_path / "raw", np.random.default_rng(0), val_layout="flat")
    raw = tmp_path / "raw"
    with pytest.raises(UserError, match="flat val/ needs labels"):
        imagenet.convert(raw, out_dir / "i.h5", PrepareOptions(image_size=8))
    base = ["imagenet", "--raw", str(raw), "--image-size", "8", "--val-labels", str(raw / "labels.csv")]
    prepare(base + ["--out", str(out_dir / "one.h5")])
    prepare(base + ["--out", str(out_dir / "two.h5"), "--workers", "2"])
    one, two = read_h5(out_dir / "one.h5"), read_h5(out_dir / "two.h5")
    assert one["test/labels"].tolist() == [WNIDS.index(w) for w in truth]  # file-name order
    assert all(np.array_equal(one[k], two[k]) for k in one)
    assert read_info(out_dir / "one.h5").source_sha256 == read_info(out_dir / "two.h5").source_sha256


def test_imagenet_flat_val_with_the_devkit(tmp_path, out_dir):
    scipy_io = pytest.importorskip("scipy.io")
    names, truth = write_imagenet(tmp_path / "raw", np.random.default_rng(0), val_layout="flat")
    data = tmp_path / "raw" / "ILSVRC2012_devkit_t12" / "data"
    data.mkdir(parents=True)
    # meta.mat ids follow WordNet order, not sorted wnids: id 1 is the last wnid here; id 4 is an inner node
    ids = {WNIDS[2]: 1, WNIDS[0]: 2, WNIDS[1]: 3}
    synsets = np.zeros(4, dtype=[("ILSVRC2012_ID", "O"), ("WNID", "O"), ("words", "O"), ("num_children", "O")])
    for row, (wnid, i) in enumerate(ids.items()):
        synsets[row] = (i, wnid, "words", 0)
    synsets[3] = (4, "n00001740", "entity", 3)
    scipy_io.savemat(data / "meta.mat", {"synsets": synsets})
    (data / "ILSVRC2012_validation_ground_truth.txt").write_text("".join(f"{ids[w]}\n" for w in truth))
    prepare(["imagenet", "--raw", str(tmp_path / "raw"), "--out", str(out_dir / "i.h5"), "--image-size", "8"])
    assert read_h5(out_dir / "i.h5")["test/labels"].tolist() == [WNIDS.index(w) for w in truth]


def test_imagenet_corrupt_jpeg_fails_or_is_skipped(tmp_path, out_dir):
    raw = tmp_path / "raw"
    write_imagenet(raw, np.random.default_rng(0))
    bad = raw / "train" / WNIDS[1] / f"{WNIDS[1]}_2.JPEG"
    bad.write_bytes(jpeg(np.random.default_rng(1), corrupt=True))
    with pytest.raises(DataError) as err:
        prepare(["imagenet", "--raw", str(raw), "--out", str(out_dir / "i.h5"), "--image-size", "8"])
    assert str(bad) in str(err.value) and "--skip-corrupt" in str(err.value) and "\n" not in str(err.value)
    assert_nothing_written(out_dir)
    prepare(["imagenet", "--raw", str(raw), "--out", str(out_dir / "i.h5"), "--image-size", "8", "--skip-corrupt"])
    assert read_info(out_dir / "i.h5").n_train == 11
    with h5py.File(out_dir / "i.h5") as f:
        assert f.attrs["skipped_corrupt"] == 1


def test_imagenet_layout_errors(tmp_path, out_dir):
    raw = tmp_path / "raw"
    write_imagenet(raw, np.random.default_rng(0))
    (raw / "val" / "n99999999").mkdir()
    with pytest.raises(DataError, match="n99999999: class not among the 3 in train/"):
        imagenet.convert(raw, out_dir / "i.h5", PrepareOptions(image_size=8))
    with pytest.raises(DataError, match="train: no such folder"):
        imagenet.convert(tmp_path, out_dir / "i.h5", PrepareOptions(image_size=8))
    assert_nothing_written(out_dir)


def test_load_image_matches_torchvision_resize_and_center_crop():
    from torchvision.transforms import CenterCrop, Compose, Resize

    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (37, 53, 3), dtype=np.uint8))
    buf = io.BytesIO()
    image.save(buf, "PNG")  # lossless, so both sides see the same pixels
    expected = np.asarray(Compose([Resize(18), CenterCrop(16)])(image)).transpose(2, 0, 1)
    np.testing.assert_array_equal(imagenet.load_image(buf.getvalue(), 16), expected)


# --- the CLI -------------------------------------------------------------------------


def test_cli_prepare_digits(tmp_path):
    out = tmp_path / "digits.h5"
    done = subprocess.run(
        [sys.executable, "-m", "scaledl", "prepare", "digits", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("prepared digits: 1437 train + 360 test images of 1x28x28")
    assert read_info(out).n_train == 1437


def test_cli_prepare_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    from scaledl.cli import main

    raw = tmp_path / "raw"
    write_mnist(raw, np.random.default_rng(0), overrides={"train-images-idx3-ubyte": b"\x00\x00\x08\x03"})
    assert main(["prepare", "mnist", "--raw", str(raw), "--out", str(tmp_path / "out" / "m.h5")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train-images-idx3-ubyte.gz: truncated" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_imagenet_sized_holds_imagenets_rows_with_most_left_blank_on_disk(out_dir, monkeypatch):
    """Time-only runs at a thousand nodes need ImageNet's row count, not its pixels: the rows past the
    generated ones are never written (zeros on read, no space on disk) and count in the pixel statistics."""
    from scaledl.data.converters import synthetic

    monkeypatch.setattr(synthetic, "IMAGENET_TRAIN_COUNT", 5000)
    monkeypatch.setattr(synthetic, "SIZED_GENERATED", 8)
    monkeypatch.setitem(synthetic.IMAGENET_SHAPED, "test_count", 4)
    out = out_dir / "imagenet_sized.h5"
    prepare(["imagenet_sized", "--converter", "scaledl.data.converters.synthetic:imagenet_sized", "--out", str(out)])
    info = read_info(out)
    assert (info.n_train, info.n_test, info.image_shape) == (5000, 4, (3, 224, 224))
    assert out.stat().st_size < 5000 * 3 * 224 * 224 // 20  # the 4,992 blank images take no space
    with h5py.File(out) as f:
        images, labels = f["train/images"], f["train/labels"][:]
        assert images[:8].any() and not images[8:200].any()
        assert labels.min() >= 0 and labels.max() < 1000 and len(set(labels[8:].tolist())) > 100
        # the mean over all 5,000 rows: the 8 generated images' pixels, the 4,992 blank ones counting as zeros
        assert np.allclose(np.array(info.mean) * 5000 / 8, images[:8].mean(axis=(0, 2, 3)) / 255)
