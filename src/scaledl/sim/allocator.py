"""Freed memory kept in the simulating process, where the C library is glibc.

A simulation runs every rank's steps in one process: the same activations are allocated and freed thousands
of times. glibc's malloc hands the top of its heap back to the kernel whenever a free leaves more than its
trim threshold there, and the next step's activations fault it back in page by page, in the kernel's time.
Measured on a tune trial of config/paper_simulated.yaml (LeNet, 9 ranks, 100 steps, two interleaved runs of
each on the 2-core machine): the kernel's time fell from 8.3 to 4.3 s and the wall time 11 % (34.9 → 31.0 s),
the peak resident memory rose from 1.05 to 1.28 GB. Set before torch is imported: set after it (its start-up
has by then raised glibc's own thresholds, which the setting freezes), the kernel took 4.1 s of a 60-step trial,
3.1 s set first. The simulated clock is the cost model's, so nothing it
prices changes (the same simulated seconds to the bit). Real runs (`scaledl train`) keep the allocator as it
is: their step times are measurements of the machine as users run it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_TOP_PAD = -1, -2  # glibc's mallopt parameters (malloc.h)
TRIM_BYTES = 1 << 30  # free memory at the heap's top returned to the kernel only beyond this
PAD_BYTES = 256 << 20  # and the heap grown this much beyond each request, so it grows rarely


def keep_freed_memory() -> bool:
    """Raise glibc's trim threshold and top pad for this process; False, changing nothing, where the C library
    has no mallopt (macOS, or an allocator that ignores it)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_TRIM_THRESHOLD, TRIM_BYTES) == 1 and mallopt(M_TOP_PAD, PAD_BYTES) == 1
