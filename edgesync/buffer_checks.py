"""Whether a tensor's values are all finite, and the range of an index tensor: the checks every received update
goes through (runtime/bookkeeping/update_check.py), each one pass over the tensor's memory.

They run in C (`edgesync/_buffer_checks.c`, built by `pip install` where a compiler is at hand) over the frame a
received tensor views (`Message.raw`) or a contiguous CPU tensor's memory, else in torch. Why C on the frame: a
coordinator meets these checks cold, after a training step or a socket read has pushed torch's code out of the
CPU's caches, and a DGS-family update is only about 15 KB: three or four torch calls (or the tensor's getters the
C call would need) cost several times a copy of the message; one call into a small loop over the frame does not
(docs/benchmarks.md, "The coordinator against its floor")."""
from __future__ import annotations

import math
from typing import Any

import torch

try:
    from edgesync import _buffer_checks as _native
except ImportError:  # no compiler where edgesync was installed: the torch path below (same answers)
    _native = None

NATIVE = _native is not None
_FLOAT_KINDS = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32",
                torch.float64: "float64"}
_INDEX_KINDS = {torch.int32: "int32", torch.int64: "int64"}


def _native_count(t: torch.Tensor, raw: Any) -> int | None:
    """Non-finite values of `t`, in C: over `raw` (the frame `t` views) when given, else over `t`'s memory if it
    is contiguous and on the CPU; None where C cannot count them (no extension, a dtype or layout it does not read)."""
    kind = _FLOAT_KINDS.get(t.dtype)
    if kind is None or not NATIVE:
        return None
    if raw is not None:
        return _native.count_nonfinite(raw, kind)
    if t.is_cpu and t.is_contiguous():
        return _native.count_nonfinite(t.data_ptr(), kind, t.numel())
    return None


def nonfinite_count(t: torch.Tensor, raw: Any = None) -> int:
    """How many values of `t` are NaN or ±Inf (0 for an integer tensor). `raw`: the received frame `t` views."""
    if not t.is_floating_point() or t.numel() == 0:
        return 0
    bad = _native_count(t, raw)
    return int((~torch.isfinite(t)).sum()) if bad is None else bad


def all_finite(t: torch.Tensor, raw: Any = None) -> bool:
    """Whether every value of `t` is finite (`raw`: the received frame `t` views). In torch, one summing pass
    decides the common case: a NaN or an Inf anywhere makes the sum NaN or ±Inf, so a finite sum proves every value
    finite (`isfinite(t).all()` costs about twenty copies of t: a bool tensor, then its reduction); only a
    non-finite sum (a bad value, or finite values whose sum overflows) takes the exact test."""
    if (bad := _native_count(t, raw)) is not None:
        return bad == 0
    if not t.is_floating_point() or t.numel() == 0:
        return True
    return math.isfinite(t.sum().item()) or bool(torch.isfinite(t).all())


def index_range(idx: torch.Tensor, raw: Any = None) -> tuple[int, int]:
    """(smallest, largest) of a non-empty integer index tensor (`raw`: the received frame it views)."""
    kind = _INDEX_KINDS.get(idx.dtype)
    if kind is not None and NATIVE:
        if raw is not None:
            return _native.index_range(raw, kind)
        if idx.is_cpu and idx.is_contiguous():
            return _native.index_range(idx.data_ptr(), kind, idx.numel())
    if idx.numel() == 0:
        raise ValueError("index_range needs at least one index")
    low, high = torch.aminmax(idx)  # one pass, not two
    return int(low), int(high)
