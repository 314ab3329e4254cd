"""Hogwild EASGD (You, Buluç, Demmel, SC'17 §4): Async EASGD without the lock.

Rules and pattern exactly as `async_easgd`, except that workers open their
epoch on the master's window with a shared lock: several workers' elastic
updates W ← W + η·ρ·(W^i_t − W_t) proceed on the master's memory at once,
each computed from a W_t that others may be changing (the paper removes the
lock "just as Hogwild SGD removes the lock from Async SGD"). As in Async
EASGD, the epoch (lock shared · Get W_t · Flush · Accumulate · unlock) runs
by default on a helper thread while the batch is fetched and ΔW^i_t computed
(codesign.overlap; --no-overlap for the ablation). The class is Async
EASGD's; the lock comes from this key's registry pattern, lock_free_window
(`AlgorithmInfo.locked` is False), the one difference.
"""

from scaledl.algorithms.async_easgd import AsyncEASGD


class HogwildEASGD(AsyncEASGD):
    key = "hogwild_easgd"


ALGORITHM = HogwildEASGD
