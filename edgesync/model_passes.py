"""Single passes over model-sized vectors for the coordinator's server halves: the staleness gap's squared
distance, an SGD-like step with that distance read in the same pass, and a round's float64 running sum and its
mean (applied as θ + ε·mean without storing it).

They run in C (`edgesync/_model_passes.c`, built by `pip install` where a compiler is at hand) on contiguous CPU
tensors of the dtypes below, else in torch, with the same rounding (each value rounded where the torch code
rounds it; the C loops use no fused multiply-add, torch's vector kernels may, so the two can differ in a float32
value's last bit). Why C: the coordinator meets these vectors from memory, and each torch call that writes a new
vector beside two it reads is a pass of its own (docs/benchmarks.md, "The coordinator against its floor")."""
from __future__ import annotations

import torch

try:
    from edgesync import _model_passes as _native
except ImportError:  # no compiler where edgesync was installed: the torch code below
    _native = None

NATIVE = _native is not None


def _native_ok(*tensors: torch.Tensor | None, dtypes: tuple[torch.dtype, ...]) -> bool:
    """Whether C can take these tensors: each (None: absent) a contiguous CPU tensor of its dtype, all the same numel."""
    if not NATIVE:
        return False
    numel = None
    for t, dtype in zip(tensors, dtypes):
        if t is None:
            continue
        if t.dtype != dtype or not t.is_cpu or not t.is_contiguous() or t.requires_grad:
            return False
        if numel is None:
            numel = t.numel()
        elif t.numel() != numel:
            return False
    return True


F32, F64 = torch.float32, torch.float64


def sq_dist(a: torch.Tensor, b: torch.Tensor) -> float:
    """Σ (a − b)² of two flat float vectors, accumulated in float64, with no temporary vector in C."""
    if _native_ok(a, b, dtypes=(F32, F32)):
        return _native.sq_dist(a.data_ptr(), b.data_ptr(), a.numel())
    return float((a.double() - b.double()).square_().sum())


def step(x: torch.Tensor, y: torch.Tensor, alpha: float,
         gap_of: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, float | None]:
    """A new vector x + alpha·y (x is not changed: it may still be on its way to a client), and, when `gap_of`
    = (a, b) is given, Σ (a − b)² read in the same pass (else None)."""
    a, b = gap_of if gap_of is not None else (None, None)
    if _native_ok(x, y, a, b, dtypes=(F32,) * 4):
        out = torch.empty_like(x)
        total = _native.step(out.data_ptr(), x.data_ptr(), y.data_ptr(), alpha,
                             0 if a is None else a.data_ptr(), 0 if b is None else b.data_ptr(), x.numel())
        return out, (total if gap_of is not None else None)
    total = sq_dist(a, b) if gap_of is not None else None
    return torch.add(x, y, alpha=alpha), total


def accumulate(total: torch.Tensor | None, x: torch.Tensor, weight: float) -> torch.Tensor:
    """A float64 running sum plus weight·x (x float32, widened as it is read): `total` changed in place, or a new
    sum when it is None."""
    first = total is None
    if first:
        if _native_ok(x, dtypes=(F32,)):
            total = torch.empty(x.shape, dtype=F64)
            _native.accumulate(total.data_ptr(), x.data_ptr(), float(weight), True, x.numel())
            return total
        return x.double().mul_(weight)
    if _native_ok(total, x, dtypes=(F64, F32)):
        _native.accumulate(total.data_ptr(), x.data_ptr(), float(weight), False, x.numel())
        return total
    return total.add_(x, alpha=weight)


def mean(total: torch.Tensor, divisor: float, multiplier: float = 1.0,
         theta: torch.Tensor | None = None, eps: float = 1.0) -> torch.Tensor:
    """The float64 sum's mean, (total / divisor · multiplier) rounded to float32 once; with `theta`, a new
    θ + eps·mean instead (the mean itself is not kept)."""
    if _native_ok(total, theta, dtypes=(F64, F32)):
        out = torch.empty(total.shape, dtype=F32)
        _native.mean(out.data_ptr(), total.data_ptr(), float(divisor), float(multiplier),
                     0 if theta is None else theta.data_ptr(), eps, total.numel())
        return out
    m = total / divisor
    m = (m if multiplier == 1.0 else m.mul_(multiplier)).float()  # × 1.0 changes no bit: not a pass
    return m if theta is None else torch.add(theta, m, alpha=eps)
