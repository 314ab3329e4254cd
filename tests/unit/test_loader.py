"""The per-worker loader, the normalizer and evaluation batches."""

from collections import Counter

import numpy as np
import pytest
import torch

from scaledl.data import hdf5
from scaledl.data import loader as loader_module
from scaledl.data.hdf5 import read_info, write_dataset
from scaledl.data.loader import Normalizer, ShardLoader, iter_split, shard_bounds
from scaledl.errors import UserError

N_TRAIN, N_TEST, SHAPE = 103, 37, (3, 4, 5)


@pytest.fixture(scope="module")
def toy_h5(tmp_path_factory):
    """Images whose first pixel is the sample's index (mod 256): batches show which samples they hold.

    Chunked with 4 images per chunk, as a large set would be, so streaming reads several blocks.
    """
    rng = np.random.default_rng(0)
    splits = {}
    for name, n in (("train", N_TRAIN), ("test", N_TEST)):
        images = rng.integers(0, 256, size=(n, *SHAPE), dtype=np.uint8)
        images[:, 0, 0, 0] = np.arange(n)
        splits[name] = (images, np.arange(n) % 7)
    path = tmp_path_factory.mktemp("data") / "toy.h5"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hdf5, "CHUNK_BYTES", 4 * int(np.prod(SHAPE)))
        write_dataset(
            path,
            dataset="toy",
            train=splits["train"],
            test=splits["test"],
            classes=7,
            class_names=None,
            source_sha256="x",
            chunked=True,
        )
    return path


def epoch_ids(loader):
    """Sample ids (first pixel) of one epoch's batches, checking images and labels stay paired."""
    ids = []
    for _ in range(loader.steps_per_epoch):
        images, labels = loader.next_batch()
        batch_ids = images[:, 0, 0, 0].long()
        assert torch.equal(labels, batch_ids % 7)
        ids += batch_ids.tolist()
    return ids


def test_shards_are_disjoint_contiguous_and_cover_the_split():
    bounds = [shard_bounds(N_TRAIN, s, 4) for s in range(4)]
    assert bounds[0][0] == 0 and bounds[-1][1] == N_TRAIN
    assert all(hi == next_lo for (_, hi), (next_lo, _) in zip(bounds, bounds[1:]))
    assert {hi - lo for lo, hi in bounds} == {25, 26}


def test_workers_read_only_their_shard_in_lockstep(toy_h5):
    loaders = [ShardLoader(toy_h5, shard=s, num_shards=4, batch_size=5, seed=0) for s in range(4)]
    assert {ld.steps_per_epoch for ld in loaders} == {25 // 5}  # the smallest shard decides
    seen = []
    for ld in loaders:
        lo, hi = shard_bounds(N_TRAIN, ld.shard, 4)
        ids = epoch_ids(ld)
        assert len(ids) == 25 and set(ids) <= set(range(lo, hi)) and len(set(ids)) == 25
        assert (ld.epoch, ld.step_in_epoch, ld.samples_seen) == (1, 0, 25)
        seen += ids
    assert len(seen) == len(set(seen))


def test_epochs_reshuffle_and_the_sequence_repeats_for_a_seed(toy_h5):
    a = ShardLoader(toy_h5, shard=1, num_shards=2, batch_size=10, seed=3)
    b = ShardLoader(toy_h5, shard=1, num_shards=2, batch_size=10, seed=3)
    c = ShardLoader(toy_h5, shard=1, num_shards=2, batch_size=10, seed=4)
    a_epochs = [epoch_ids(a) for _ in range(3)]
    assert a_epochs == [epoch_ids(b) for _ in range(3)]
    assert a_epochs[0] != a_epochs[1] != a_epochs[2]
    assert epoch_ids(c) != a_epochs[0]
    assert a.epoch_order(7).tolist() == b.epoch_order(7).tolist()  # order of epoch e: (seed, shard, e) only


def test_state_dict_resumes_the_same_sequence(toy_h5):
    a = ShardLoader(toy_h5, shard=0, num_shards=1, batch_size=8, seed=0)
    for _ in range(17):
        a.next_batch()
    b = ShardLoader(toy_h5, shard=0, num_shards=1, batch_size=8, seed=0)
    b.load_state_dict(a.state_dict())
    for _ in range(20):
        assert all(torch.equal(x, y) for x, y in zip(a.next_batch(), b.next_batch()))


def test_batch_larger_than_a_shard_is_a_user_error(toy_h5):
    with pytest.raises(UserError, match="batch size 64 is larger than a worker's shard of 25 images.*--batch-size"):
        ShardLoader(toy_h5, shard=0, num_shards=4, batch_size=64, seed=0)


def test_streamed_shard_yields_the_same_samples_in_bounded_blocks(toy_h5, monkeypatch):
    monkeypatch.setattr(loader_module, "BLOCK_BYTES", 10 * 60)  # ~10 images per block
    # shard 0 of 2: 51 images, batch 17: every epoch holds the whole shard
    memory = ShardLoader(toy_h5, shard=0, num_shards=2, batch_size=17, seed=0)
    streamed = ShardLoader(toy_h5, shard=0, num_shards=2, batch_size=17, seed=0, in_memory_max_bytes=0)
    assert memory.in_memory and not streamed.in_memory
    assert streamed.block_rows == 20  # whole chunks of 4, at least a batch
    first, second = epoch_ids(streamed), epoch_ids(streamed)
    assert Counter(first) == Counter(second) == Counter(epoch_ids(memory)) == Counter(range(51))
    assert first != second
    assert len(streamed._blocks) <= 2
    streamed.close()


def test_normalizer_matches_mean_and_std(toy_h5):
    info = read_info(toy_h5)
    images, labels = ShardLoader(toy_h5, shard=0, num_shards=1, batch_size=16, seed=0).next_batch()
    assert images.dtype == torch.uint8 and labels.dtype == torch.int64
    x, y = Normalizer(info.mean, info.std, "cpu")(images, labels)
    mean, std = (torch.tensor(v, dtype=torch.float64).view(1, -1, 1, 1) for v in (info.mean, info.std))
    expected = (images.double() / 255 - mean) / std
    assert x.dtype == torch.float32 and torch.allclose(x.double(), expected, atol=1e-5)
    assert torch.equal(y, labels)
    # over the whole train split, normalized channels have mean 0 and std 1
    everything = torch.cat([b for b, _ in iter_split(toy_h5, "train", 50)])
    z = Normalizer(info.mean, info.std, "cpu")(everything, torch.zeros(len(everything)))[0].double()
    assert torch.allclose(z.mean(dim=(0, 2, 3)), torch.zeros(3, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(z.std(dim=(0, 2, 3), unbiased=False), torch.ones(3, dtype=torch.float64), atol=1e-5)


@pytest.mark.parametrize("in_memory_max_bytes", [1 << 30, 0])
def test_iter_split_yields_the_split_in_order(toy_h5, in_memory_max_bytes):
    batches = list(iter_split(toy_h5, "test", 10, in_memory_max_bytes=in_memory_max_bytes))
    assert [len(b[0]) for b in batches] == [10, 10, 10, 7]
    assert torch.cat([b[0] for b in batches])[:, 0, 0, 0].tolist() == list(range(N_TEST))
    assert torch.cat([b[1] for b in batches]).tolist() == [i % 7 for i in range(N_TEST)]


def test_a_copied_streamed_loader_opens_its_own_file(toy_h5):
    import pickle

    loader = ShardLoader(toy_h5, shard=0, num_shards=1, batch_size=8, seed=0, in_memory_max_bytes=0)
    loader.next_batch()
    assert loader._file is not None
    copy = pickle.loads(pickle.dumps(loader))  # what spawn-started processes get; fork is caught by the pid check
    assert copy._file is None
    assert all(torch.equal(x, y) for x, y in zip(copy.next_batch(), loader.next_batch()))
    loader.close()
    copy.close()


def test_pin_memory_is_harmless_without_cuda(toy_h5):
    loader = ShardLoader(toy_h5, shard=0, num_shards=1, batch_size=8, seed=0, pin_memory=True)
    images, labels = loader.next_batch()
    assert images.is_pinned() == torch.cuda.is_available() and images.shape == (8, *SHAPE)


def test_a_loader_that_reads_no_images_gives_the_same_batches_in_shape_and_labels(toy_h5):
    """Time-only: the batches' shapes and labels, the order and the epochs as ever, without reading a pixel."""
    for in_memory in (1 << 30, 0):  # a shard kept in memory, and one streamed block by block
        kwargs = dict(shard=1, num_shards=3, batch_size=8, seed=2, in_memory_max_bytes=in_memory)
        reading, blind = ShardLoader(toy_h5, **kwargs), ShardLoader(toy_h5, **kwargs, read_images=False)
        for _ in range(2 * reading.steps_per_epoch):
            (images, labels), (shaped, same) = reading.next_batch(), blind.next_batch()
            assert shaped.shape == images.shape and shaped.dtype == images.dtype and torch.equal(same, labels)
        assert blind.state_dict() == reading.state_dict()
