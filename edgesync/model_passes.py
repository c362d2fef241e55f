"""Single passes over model-sized vectors for the coordinator's server halves: the staleness gap's squared
distance, an SGD-like step with that distance read in the same pass, a round's float64 running sum and its
mean (applied as θ + ε·mean without storing it), momentum (SSGD, FedAvgM, NAG/Multi-ASGD; with DANA's running sum
of the velocities), DC-ASGD's compensated gradient, FedAdam/FedYogi/FedAdagrad's step, SHAT's step with its mirror
of the client's model, EASGD's pull (torch.lerp's), SCAFFOLD's paired update split, and the DGS family's master step
with its reply's entries.

They run in C (`edgesync/_model_passes.c`, built by `pip install` where a compiler is at hand) on contiguous CPU
tensors of the dtypes below, else in torch, with the same rounding (each value rounded where the torch code
rounds it; the C loops use no fused multiply-add, torch's vector kernels may, so the two can differ in a float32
value's last bit). Why C: the coordinator meets these vectors from memory, and each torch call that writes a new
vector beside two it reads is a pass of its own (docs/benchmarks.md, "The coordinator against its floor")."""
from __future__ import annotations

import numpy as np
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
    d = a.double()  # two passes in float64, not five: a widened, b subtracted as it is read, then a dot product
    return float(torch.dot(d.sub_(b), d))


def step(x: torch.Tensor, y: torch.Tensor, alpha: float, gap_of: tuple[torch.Tensor, torch.Tensor] | None = None,
         scale: float = 1.0) -> tuple[torch.Tensor, float | None]:
    """A new vector scale·x + alpha·y (x is not changed: it may still be on its way to a client; scale 1 leaves x's
    values as they are), and, when `gap_of` = (a, b) is given, Σ (a − b)² read in the same pass (else None)."""
    a, b = gap_of if gap_of is not None else (None, None)
    if _native_ok(x, y, a, b, dtypes=(F32,) * 4):
        out = torch.empty_like(x)
        total = _native.step(out.data_ptr(), x.data_ptr(), y.data_ptr(), scale, alpha,
                             0 if a is None else a.data_ptr(), 0 if b is None else b.data_ptr(), x.numel())
        return out, (total if gap_of is not None else None)
    total = sq_dist(a, b) if gap_of is not None else None
    if scale == 1.0:
        return torch.add(x, y, alpha=alpha), total
    return x.mul(scale).add_(y, alpha=alpha), total


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


def delay_compensated(g: torch.Tensor, theta: torch.Tensor, sent: torch.Tensor,
                      lam: float) -> tuple[torch.Tensor, float]:
    """DC-ASGD's ĝ = g + λ·g⊙g⊙(θ − θ_sent), a new vector, and Σ (θ − θ_sent)² (the gap), in one pass: no drift
    vector is made."""
    if _native_ok(g, theta, sent, dtypes=(F32,) * 3):
        out = torch.empty_like(g)
        sq = _native.delay_compensated(out.data_ptr(), g.data_ptr(), theta.data_ptr(), sent.data_ptr(), lam, g.numel())
        return out, sq
    out = torch.mul(g, g)
    return torch.addcmul(g, out, theta - sent, value=lam, out=out), sq_dist(theta, sent)


def split_pairs(pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A float32 tensor of shape (n, 2) into its two columns, new contiguous tensors, in one pass (SCAFFOLD's update
    carries Δy and Δc as pairs)."""
    if pairs.dim() == 2 and pairs.shape[1] == 2 and _native_ok(pairs, dtypes=(F32,)):
        a, b = torch.empty(pairs.shape[0]), torch.empty(pairs.shape[0])
        _native.split_pairs(a.data_ptr(), b.data_ptr(), pairs.data_ptr(), pairs.shape[0])
        return a, b
    return pairs[:, 0].clone(), pairs[:, 1].clone()


def momentum(theta: torch.Tensor, v: torch.Tensor, g: torch.Tensor, mu: float, c: float, b: float = 1.0,
             gap_of: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, float | None]:
    """Momentum's two new vectors in one pass: v' = mu·v + b·g, θ' = θ + c·v' (SSGD's velocity with c = −η,
    FedAvgM's server momentum with c = ε, NAG-ASGD's u ← γ·u + η·g with b = η, c = −1); and Σ (θ − gap_of)² read
    in the same pass when `gap_of` is given (else None)."""
    if _native_ok(theta, v, g, gap_of, dtypes=(F32,) * 4):
        theta_out, v_out = torch.empty_like(theta), torch.empty_like(v)
        sq = _native.momentum(theta_out.data_ptr(), v_out.data_ptr(), theta.data_ptr(), v.data_ptr(), g.data_ptr(),
                              mu, b, c, 0 if gap_of is None else gap_of.data_ptr(), theta.numel())
        return theta_out, v_out, (sq if gap_of is not None else None)
    sq = sq_dist(theta, gap_of) if gap_of is not None else None
    v_out = mu * v + (g if b == 1.0 else b * g)  # × 1.0 changes no bit
    return theta + c * v_out, v_out, sq


def momentum_sum(theta: torch.Tensor, v: torch.Tensor, g: torch.Tensor, total: torch.Tensor, mu: float, c: float,
                 b: float = 1.0, gap_of: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float | None]:
    """`momentum` with a running sum of every key's velocity beside it (DANA's Σ_j u_j), in one pass: new θ', v' and
    total' = total + (v' − v); and Σ (θ − gap_of)² when `gap_of` is given (else None)."""
    if _native_ok(theta, v, g, total, gap_of, dtypes=(F32,) * 5):
        theta_out, v_out, total_out = torch.empty_like(theta), torch.empty_like(v), torch.empty_like(total)
        sq = _native.momentum_sum(theta_out.data_ptr(), v_out.data_ptr(), total_out.data_ptr(), theta.data_ptr(),
                                  v.data_ptr(), g.data_ptr(), total.data_ptr(), mu, b, c,
                                  0 if gap_of is None else gap_of.data_ptr(), theta.numel())
        return theta_out, v_out, total_out, (sq if gap_of is not None else None)
    theta_out, v_out, sq = momentum(theta, v, g, mu, c, b, gap_of)
    return theta_out, v_out, total + (v_out - v), sq


def lerp(theta: torch.Tensor, x: torch.Tensor, w: float, gap_of: torch.Tensor | None = None,
         with_step: bool = False) -> tuple[torch.Tensor, torch.Tensor | None, float | None, float | None]:
    """θ' = θ + w·(x − θ) as torch.lerp computes it, in one pass with, when asked, the step θ' − θ (a new vector, and
    its Σ of squares) and Σ (θ − gap_of)²: (θ', step or None, Σ (θ − gap_of)² or None, Σ step² or None)."""
    if _native_ok(theta, x, gap_of, dtypes=(F32,) * 3):
        theta_out = torch.empty_like(theta)
        step_out = torch.empty_like(theta) if with_step else None
        sq_gap, sq_step = _native.lerp(theta_out.data_ptr(), 0 if step_out is None else step_out.data_ptr(),
                                       theta.data_ptr(), x.data_ptr(), w, 0 if gap_of is None else gap_of.data_ptr(),
                                       theta.numel())
    else:
        sq_gap = sq_dist(theta, gap_of) if gap_of is not None else None
        theta_out = torch.lerp(theta, x, w)
        step_out = theta_out - theta if with_step else None
        sq_step = float(step_out.double().square().sum()) if with_step else None
    return theta_out, step_out, (sq_gap if gap_of is not None else None), (sq_step if with_step else None)


ADAPTIVE_KINDS = {"fedadam": 0, "fedyogi": 1, "fedadagrad": 2}


def adaptive(x: torch.Tensor, m: torch.Tensor, v: torch.Tensor, d: torch.Tensor, rule: str, beta1: float,
             beta2: float, tau: float, lr: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reddi et al.'s server step in one pass, new x, m and v (fed_adaptive.py): m' = β1·m + (1 − β1)·Δ, v' by
    `rule` (fedadam: β2·v + (1 − β2)·Δ²; fedyogi: v − (1 − β2)·Δ²·sign(v − Δ²); fedadagrad: v + Δ²),
    x' = x + lr·m'/(√v' + τ)."""
    if _native_ok(x, m, v, d, dtypes=(F32,) * 4):
        x_out, m_out, v_out = torch.empty_like(x), torch.empty_like(m), torch.empty_like(v)
        _native.adaptive(x_out.data_ptr(), m_out.data_ptr(), v_out.data_ptr(), x.data_ptr(), m.data_ptr(),
                         v.data_ptr(), d.data_ptr(), beta1, 1 - beta1, beta2, 1 - beta2, tau, lr,
                         ADAPTIVE_KINDS[rule], x.numel())
        return x_out, m_out, v_out
    m_out = torch.mul(m, beta1).add_(d, alpha=1 - beta1)
    if rule == "fedadagrad":
        v_out = torch.addcmul(v, d, d)
    elif rule == "fedyogi":
        d2 = d * d
        v_out = torch.addcmul(v, d2, torch.sign(v - d2), value=-(1 - beta2))
    else:
        v_out = torch.mul(v, beta2).addcmul_(d, d, value=1 - beta2)
    return torch.addcdiv(x, m_out, v_out.sqrt().add_(tau), value=lr), m_out, v_out


def mirrored(theta: torch.Tensor, mirror: torch.Tensor, g: torch.Tensor, a: float, b: float,
             mix: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """SHAT's master step and its mirror of the client's model in one pass (shat.py): θ' = θ + a·g, the mirror's
    own step s = mirror + b·g, mirror' = (1 − mix)·s + mix·θ' (torch.lerp; mix ≤ 0 gives s, mix ≥ 1 θ' itself);
    and Σ (θ − mirror)², the gap's square read in the same pass."""
    if _native_ok(theta, mirror, g, dtypes=(F32,) * 3):
        theta_out = torch.empty_like(theta)
        mirror_out = None if mix >= 1.0 else torch.empty_like(mirror)
        sq = _native.mirrored(theta_out.data_ptr(), 0 if mirror_out is None else mirror_out.data_ptr(),
                              theta.data_ptr(), mirror.data_ptr(), g.data_ptr(), a, b, min(max(mix, 0.0), 1.0),
                              theta.numel())
        return theta_out, (theta_out if mirror_out is None else mirror_out), sq
    sq = sq_dist(theta, mirror)
    theta_out, stepped = torch.add(theta, g, alpha=a), torch.add(mirror, g, alpha=b)
    if mix >= 1.0:
        return theta_out, theta_out, sq
    return theta_out, (stepped if mix <= 0.0 else torch.lerp(stepped, theta_out, mix)), sq


def sparse_difference(m: torch.Tensor, v: torch.Tensor, idx: torch.Tensor,
                      values: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor, torch.Tensor]:
    """The DGS family's master step in one pass (dgs.DGSServer): a new m' = m − the update (`values` at `idx`,
    int64, ascending and unique, as every client sends them), Σ (m − v)² (the gap's square, before the update), and
    G = m' − v's nonzero entries: (m', Σ, G's coordinates ascending as int64, G's values)."""
    if (_native_ok(m, v, dtypes=(F32, F32)) and _native_ok(idx, dtypes=(torch.int64,))
            and _native_ok(values, dtypes=(F32,)) and idx.numel() == values.numel()):
        out, where, g = torch.empty_like(m), torch.empty(m.numel(), dtype=torch.int64), torch.empty_like(m)
        count, sq = _native.sparse_difference(out.data_ptr(), m.data_ptr(), v.data_ptr(), idx.data_ptr(),
                                              values.data_ptr(), idx.numel(), where.data_ptr(), g.data_ptr(),
                                              m.numel())
        if count >= 0:  # else idx was not ascending and unique: torch's index_add below sums it as given
            # copies of G's few entries: a reply waits for its client, and views would keep two model-sized buffers
            return out, sq, where[:count].clone(), g[:count].clone()
    out, d, sq = m.index_add(0, idx, values, alpha=-1), m - v, sq_dist(m, v)
    d.index_fill_(0, idx, 1.0)  # G is 0 off D's support and the update's; numpy's search of a bool array is faster
    where = torch.from_numpy(np.flatnonzero(d.numpy() != 0)) if d.is_cpu else torch.nonzero(d).squeeze(1)
    g = out.index_select(0, where) - v.index_select(0, where)
    keep = g != 0
    return (out, sq, where, g) if bool(keep.all()) else (out, sq, where[keep], g[keep])
