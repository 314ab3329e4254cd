"""A simulation keeps the memory it frees (scaledl.sim.allocator): glibc's trim threshold and top pad raised, so
the next step's allocations reuse the heap instead of faulting it back in from the kernel."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys

import pytest

from scaledl.sim import allocator

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# 3,000 blocks of 64 KiB (under the mmap threshold: on the heap, under its top), all freed last to first; then what
# the heap still holds free. 187.5 MiB: beyond the 64 MiB glibc's own trim threshold can grow to
HELD_AFTER_FREE = """
import ctypes, sys
from scaledl.sim.allocator import keep_freed_memory
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
blocks = [0] * 3000  # the list first: nothing else lands on the heap between the blocks and its top
for i in range(3000):
    blocks[i] = libc.malloc(64 << 10)
for block in reversed(blocks):
    libc.free(block)
print(applied, libc.mallinfo2().fordblks)
"""


def held_after_free(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", HELD_AFTER_FREE, mode], capture_output=True, text=True, check=True)
    applied, held = out.stdout.split()
    return applied, int(held)


@pytest.mark.skipif(not GLIBC or not hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2"), reason="glibc ≥ 2.33 only")
def test_freed_memory_stays_in_the_process_only_when_kept():
    applied, kept = held_after_free("keep")
    _, returned = held_after_free("default")
    assert applied == "True"
    assert kept >= 180 << 20  # the 187.5 MiB freed are still the heap's
    assert returned < 8 << 20  # by default the heap's top went back to the kernel as it grew


def test_a_c_library_without_mallopt_is_left_as_it_is(monkeypatch):
    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(allocator.ctypes, "CDLL", NoMallopt)
    assert allocator.keep_freed_memory() is False
