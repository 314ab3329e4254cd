"""What is known of a dataset before it is prepared (scaledl.data.datasets)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from scaledl.data import datasets
from scaledl.data.converters.options import PrepareOptions
from scaledl.errors import DataError


def test_the_training_images_follow_the_converters_settings_and_defaults():
    defaults = PrepareOptions()
    assert datasets.train_images("digits", {}) == 1797 - math.ceil(defaults.test_fraction * 1797) == 1437
    assert datasets.train_images("digits", {"test_fraction": 0.5}) == 898
    assert datasets.train_images("synthetic", {}) == defaults.train_count
    assert datasets.train_images("synthetic", {"train_count": 64}) == 64


def test_without_a_prepared_file_the_published_count_or_unknown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (datasets.train_images("mnist", {}), datasets.train_images("cifar10", {})) == (60_000, 50_000)
    assert datasets.train_images("imagenet", {}) is None and datasets.train_images("survey", {}) is None


def test_a_prepared_file_gives_its_count_and_must_carry_its_name(tmp_path, monkeypatch):
    from scaledl.data.hdf5 import write_dataset

    monkeypatch.chdir(tmp_path)

    def put(name: str, n_train: int) -> None:
        images, labels = np.zeros((n_train, 1, 4, 4), np.uint8), np.arange(n_train) % 2
        write_dataset(datasets.PREPARED.format(dataset="mnist"), dataset=name, train=(images, labels),
                      test=(images[:2], labels[:2]), classes=2, class_names=None, source_sha256="0" * 64)  # fmt: skip

    put("mnist", 30)
    assert datasets.train_images("mnist", {}) == 30  # the file's count, not the published one
    put("other", 40)
    with pytest.raises(DataError, match="holds dataset 'other'"):
        datasets.train_images("mnist", {})
    (tmp_path / "data/hdf5/mnist.h5").write_bytes(b"not hdf5")
    with pytest.raises(DataError, match="not an HDF5 file"):
        datasets.train_images("mnist", {})


def test_a_prepare_job_grows_with_the_images_it_decodes():
    assert datasets.decoders({}) == datasets.decoders({"workers": None}) == 1
    assert datasets.prepare_mem_mb({"workers": 8}) == datasets.PREPARE_MEM_MB + 7 * datasets.PREPARE_MEM_MB_PER_DECODER
    assert datasets.prepare_minutes("mnist", {"workers": 1}) == datasets.PREPARE_RUNTIME
    one, sixteen = (
        datasets.prepare_minutes("imagenet", {"workers": 1}),
        datasets.prepare_minutes("imagenet", {"workers": 16}),
    )
    assert one == 60 + math.ceil(1_331_167 / 50 / 60) == 504 and sixteen == datasets.PREPARE_RUNTIME


def test_importing_it_loads_neither_torch_nor_h5py_nor_the_grid():
    code = "import sys, scaledl.data.datasets; print(sorted(m for m in ('torch', 'h5py', 'scaledl.grid', 'scaledl.data.converters') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
