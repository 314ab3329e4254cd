"""W_0 in a simulation: built once, copied to each later rank, the same bits as building it again."""

import torch

from scaledl.comm import transport
from scaledl.config import TrainConfig
from scaledl.train.setup import initial_model


class Shared:
    """A transport whose ranks share this process (a simulation's): its dict of initial models."""

    def __init__(self):
        self.built = {}

    def models(self):
        return self.built


def test_later_ranks_get_a_copy_of_the_first_build_bit_for_bit(monkeypatch, tmp_path):
    cfg = TrainConfig(data=tmp_path / "x.h5", algorithm="sync_sgd", out_dir=tmp_path / "run", model="lenet", seed=3)
    alone = initial_model(cfg, (1, 28, 28), 10)  # one rank per process: built
    shared = Shared()
    monkeypatch.setattr(transport, "_current", shared)
    first, second = initial_model(cfg, (1, 28, 28), 10), initial_model(cfg, (1, 28, 28), 10)
    assert len(shared.built) == 1 and first is not second
    for a, b, c in zip(alone.state_dict().values(), first.state_dict().values(), second.state_dict().values()):
        assert torch.equal(a, b) and torch.equal(a, c) and b.data_ptr() != c.data_ptr()
    other = TrainConfig(**{**cfg.__dict__, "seed": 4})
    assert not torch.equal(next(initial_model(other, (1, 28, 28), 10).parameters()), next(first.parameters()))
