"""glibc's allocator, set up for model-sized messages before the first one is allocated.

Above its mmap threshold glibc maps fresh memory for every allocation and unmaps it on free, so each
large ZeroMQ message pays for page faults: a 44 MB round trip takes ≈ 50–60 ms instead of ≈ 42 ms here
(docs/benchmarks.md). Processes the runtime starts get `constants.MALLOC_ENV`; every `edgesync`
command also sets the same thresholds with mallopt(3) at start-up, so a coordinator or a client started
by hand on a lab machine behaves alike. Thresholds the user exported are left as they are.
"""
from __future__ import annotations

import ctypes
import logging
import os
import sys

from edgesync.constants import MALLOC_ENV

log = logging.getLogger(__name__)

# mallopt(3) parameter numbers, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_PARAMS = {"MALLOC_MMAP_THRESHOLD_": _M_MMAP_THRESHOLD, "MALLOC_TRIM_THRESHOLD_": _M_TRIM_THRESHOLD}


def glibc() -> ctypes.CDLL | None:
    """This process's C library if it is glibc (musl has a mallopt that does nothing), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # only glibc has this
    except (OSError, AttributeError):
        return None
    return libc


def tune_allocator() -> bool:
    """Set MALLOC_ENV's thresholds in this process; False where this is not glibc (nothing to do)."""
    libc = glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    for name, param in _PARAMS.items():
        if name in os.environ:  # the user's own setting wins; glibc has read it already
            continue
        if mallopt(param, int(MALLOC_ENV[name])) != 1:
            log.debug("mallopt refused %s=%s", name, MALLOC_ENV[name])
            return False
    return True


def release_free_memory() -> None:
    """Give the heap's free pages back to the system (malloc_trim(3)). With the thresholds above freed
    model-sized blocks stay in the heap, and a long sweep of large models (a variant after another in one
    process) would fragment it into gigabytes nobody uses; the simulator calls this after each algorithm."""
    libc = glibc()
    if libc is not None:
        libc.malloc_trim(0)
