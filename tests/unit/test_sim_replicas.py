"""Time-only replicas: the ranks' large buffers are one per job, a rank's own never alias."""

import gc

import numpy as np
import torch

from scaledl.sim.replicas import Replicas

BIG = 1 << 20  # float32 elements: 4 MiB, above the pool's threshold


def test_ranks_share_their_kth_buffer_of_a_size_and_a_ranks_own_buffers_never_alias():
    pool = Replicas()
    with pool.mode():
        a = [torch.zeros(BIG), torch.empty(BIG), torch.empty_like(torch.empty(3)).new_zeros(BIG)]
    with pool.mode():
        b = [torch.zeros(BIG), torch.empty(BIG)]
    pointers = [t.data_ptr() for t in a]
    assert len(set(pointers)) == 3  # one rank's live buffers: three memories
    assert [t.data_ptr() for t in b] == pointers[:2]  # the other rank's first two: the same two
    assert pool.nbytes == 3 * 4 * BIG and all(pool.holds(t.numpy()) for t in a + b)


def test_a_slot_returns_to_its_rank_when_its_last_tensor_dies_and_small_tensors_stay_the_ranks_own():
    pool = Replicas()
    with pool.mode() as rank:
        first = torch.empty(BIG)
        view = first[10:]  # a view keeps the storage, so the slot stays taken
        address = first.data_ptr()
        del first
        gc.collect()
        assert torch.empty(BIG).data_ptr() != address  # taken: a second slot (the temporary dies at once)
        del view
        gc.collect()
        again = torch.empty(BIG)
        small = torch.zeros(16)
    assert again.data_ptr() == address and rank.live == {4 * BIG: {0}}
    assert not pool.holds(small.numpy()) and torch.equal(small, torch.zeros(16))
    assert not pool.holds(np.zeros(BIG, dtype=np.float32))


def test_shapes_strides_and_dtypes_are_kept():
    pool = Replicas()
    with pool.mode():
        t = torch.empty_strided((512, 1024), (1, 512), dtype=torch.float64)
        c = torch.empty((64, 3, 64, 64)).clone(memory_format=torch.channels_last)
    assert (t.shape, t.stride(), t.dtype) == ((512, 1024), (1, 512), torch.float64)
    assert c.is_contiguous(memory_format=torch.channels_last) and pool.holds(c.numpy())
