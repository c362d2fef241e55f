"""The allocator tuning: after it, a model-sized buffer comes from the heap, not a fresh mapping."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from edgesync.transport.allocator import glibc

# mallopt's thresholds and mallinfo2 are glibc's: elsewhere there is nothing to tune or to measure.
pytestmark = pytest.mark.skipif(glibc() is None, reason="needs glibc (mallopt, mallinfo2)")

# The probe loads transport/allocator.py alone, not through the edgesync.transport package (which imports
# torch): a fresh process whose heap is glibc's own, at the cost of an interpreter start, not a torch import.
_PROBE = """
import ctypes, importlib.util, sys
import edgesync
spec = importlib.util.spec_from_file_location("allocator", edgesync.__path__[0] + "/transport/allocator.py")
allocator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(allocator)
tune_allocator = allocator.tune_allocator

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
tuned = tune_allocator() if sys.argv[1] == "tune" else None
before = libc.mallinfo2().hblks
block = libc.malloc(44_000_000)  # a ResNet-18-sized message
mapped = libc.mallinfo2().hblks - before
libc.free(block)
print(tuned, mapped)
"""


def _probe(mode: str, env: dict | None = None) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True, env=env)
    tuned, mapped = out.stdout.split()
    return tuned, int(mapped)


def test_a_large_buffer_is_mapped_afresh_without_tuning_and_taken_from_the_heap_with_it():
    # Execute
    plain = _probe("plain")
    tuned = _probe("tune")
    # Assert
    assert plain == ("None", 1)  # glibc's default: above 32 MB, a mapping of its own
    assert tuned == ("True", 0)


def test_thresholds_the_user_exported_are_left_alone():
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 20)}
    # The user's 1 MB threshold stays: the 44 MB buffer is still mapped.
    assert _probe("tune", env) == ("True", 1)
