"""Hogwild EASGD (You, Buluç, Demmel, SC'17 §4): Async EASGD without the lock.

Rules and pattern exactly as `async_easgd`, except that workers open their
epoch on the master's window with a shared lock: several workers' elastic
updates W ← W + η·ρ·(W^i − W) proceed on the master's memory at once, each
computed from a W that others may be changing (the paper removes the lock
"just as Hogwild SGD removes the lock from Async SGD").
"""

from scaledl.algorithms.async_easgd import AsyncEASGD


class HogwildEASGD(AsyncEASGD):
    key = "hogwild_easgd"
    locked = False


ALGORITHM = HogwildEASGD
