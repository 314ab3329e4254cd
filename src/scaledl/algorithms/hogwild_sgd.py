"""Hogwild SGD: Async SGD without the lock (Niu et al.; the paper's lock-free baseline).

Rule and pattern exactly as `async_sgd`, except that workers open their
epoch on the master's window with a shared lock: several gradients are
accumulated into W at the same time (element-wise atomic, no ordering),
and a worker may read a W that another worker is halfway through updating.
The class is Async SGD's; the lock comes from this key's registry pattern,
lock_free_window (`AlgorithmInfo.locked` is False), the one difference.
"""

from scaledl.algorithms.async_sgd import AsyncSGD


class HogwildSGD(AsyncSGD):
    key = "hogwild_sgd"


ALGORITHM = HogwildSGD
