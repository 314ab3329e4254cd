"""Hogwild EASGD (You, Buluç, Demmel, SC'17 §4): Async EASGD without the lock.

Rules and pattern exactly as `async_easgd`, except that workers open their
epoch on the master's window with a shared lock: several workers' elastic
updates W ← W + η·ρ·(W^i − W) proceed on the master's memory at once, each
computed from a W that others may be changing (the paper removes the lock
"just as Hogwild SGD removes the lock from Async SGD"). The class is Async
EASGD's; the lock comes from this key's registry pattern, lock_free_window
(`AlgorithmInfo.locked` is False), the one difference.
"""

from scaledl.algorithms.async_easgd import AsyncEASGD


class HogwildEASGD(AsyncEASGD):
    key = "hogwild_easgd"


ALGORITHM = HogwildEASGD
