"""Top-k selection by magnitude: which coordinates a sparsified message carries.

Used by DGS (Yan, "Gradient Sparsification for Asynchronous Distributed Training"), GD-async (Aji & Heafield) and DGC-async
(Lin et al., "Deep Gradient Compression"). Two methods:

- ``"exact"``: ``torch.topk`` on |x|, the reference.
- ``"sampled"``: DGC's sampled threshold. The threshold is read off a random sample of |x|, set
  deliberately low (see `_sample_rank`) so that the entries with |x| >= threshold include the true
  top-k with high probability; the k largest of those candidates are kept. When the candidates
  number at least k, the result is therefore *the* top-k set (up to ties), at the cost of one pass
  over x plus a top-k over a few times k candidates. When there are fewer than k (a bad sample:
  about 1e-4 of calls, whatever the distribution of x), it falls back to exact, so it always
  returns k entries when k <= numel. Ties and all-zero tensors give a zero threshold, every entry
  is a candidate, and the trim keeps exactly k: correct, as slow as exact.

Indices come back int64, 1-D, sorted ascending, and unique; never more than k of them.

`select` applies either per layer (each parameter tensor's slice of the flat vector keeps its own
top k, dgs.txt Alg. 1–3) or over the whole vector (one layer).
"""
from __future__ import annotations

import math

import torch

METHODS = ("exact", "sampled")


def k_for(numel: int, rate: float) -> int:
    """Entries to keep at `rate` (fraction in (0, 1]): max(1, floor(rate * numel)); numel if rate >= 1.

    0 when numel is 0. The floor forgives float error (0.29 * 100 is 28.999..., and gives 29).
    """
    if numel < 0:
        raise ValueError(f"k_for: numel must be >= 0, got {numel}")
    if not rate > 0:  # also rejects NaN
        raise ValueError(f"k_for: rate must be in (0, 1], got {rate}")
    if numel == 0:
        return 0
    if rate >= 1.0:
        return numel
    product = rate * numel
    nearest = round(product)
    k = nearest if abs(product - nearest) <= 1e-9 * max(1.0, product) else math.floor(product)
    return min(numel, max(1, k))


def _exact(magnitude: torch.Tensor, k: int) -> torch.Tensor:
    return torch.topk(magnitude, k, sorted=False).indices


def _sample_rank(k: int, numel: int, sample_size: int) -> int:
    """Rank in the sample whose value is the threshold: a few standard deviations past the expected one.

    The number of sample points that fall in the true top-k is ~ Binomial(s, k/n), mean t = s·k/n.
    Taking the (t + 4·sqrt(t) + 2)-th largest sample value as the threshold makes "fewer than k
    candidates" a ~4-sigma event for any continuous distribution, while the candidates number
    about k·(1 + 4/sqrt(t)) (≈ 2.5k at t = 10, 1.4k at t = 100), cheap to trim.
    """
    t = sample_size * k / numel
    return min(sample_size, math.ceil(t + 4.0 * math.sqrt(t) + 2.0))


def _sampled(magnitude: torch.Tensor, k: int, sample_size: int,
             generator: torch.Generator | None) -> torch.Tensor:
    numel = magnitude.numel()
    if numel <= sample_size:  # sampling cannot beat reading everything
        return _exact(magnitude, k)
    rank = _sample_rank(k, numel, sample_size)
    device = generator.device if generator is not None else magnitude.device
    picks = torch.randint(0, numel, (sample_size,), generator=generator, device=device)
    sample = magnitude[picks.to(magnitude.device)]                          # (s,)
    threshold = torch.topk(sample, rank, sorted=False).values.min()
    candidates = torch.nonzero(magnitude >= threshold).squeeze(1)        # (c,)
    if candidates.numel() < k:  # unlucky sample: threshold above the k-th value
        return _exact(magnitude, k)
    if candidates.numel() == k:
        return candidates
    keep = torch.topk(magnitude[candidates], k, sorted=False).indices
    return candidates[keep]


def topk_indices(x: torch.Tensor, k: int, method: str = "exact", sample_size: int = 10_000,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Indices (int64, 1-D, sorted ascending) of at most k entries of flat float tensor x with the largest |x|.

    method "exact": torch.topk on |x| (the reference). method "sampled": DGC's sampled threshold from
    `sample_size` entries drawn (with replacement) with `generator`; see the module docstring for
    what happens with too many candidates (trim to the k largest) or too few (fall back to exact).
    k >= numel returns every index; numel == 0 or k == 0 returns an empty tensor. Ties are broken
    arbitrarily, but exactly k entries are kept.
    """
    if x.dim() != 1:
        raise ValueError(f"topk_indices: x must be flat (1-D), got shape {tuple(x.shape)}")
    if method not in METHODS:
        raise ValueError(f"topk_indices: unknown method {method!r}, expected one of {METHODS}")
    if k < 0:
        raise ValueError(f"topk_indices: k must be >= 0, got {k}")
    if sample_size < 1:
        raise ValueError(f"topk_indices: sample_size must be >= 1, got {sample_size}")
    numel = x.numel()
    if k >= numel:
        return torch.arange(numel, dtype=torch.int64, device=x.device)
    if k == 0:
        return torch.empty(0, dtype=torch.int64, device=x.device)
    magnitude = x.detach().abs()
    if method == "exact":
        indices = _exact(magnitude, k)
    else:
        indices = _sampled(magnitude, k, sample_size, generator)
    return indices.sort().values


def select(x: torch.Tensor, rate: float, method: str = "exact", generator=None,
           sizes: tuple[int, ...] = ()) -> torch.Tensor:
    """The entries of flat x to send at `rate`: indices (int64, 1-D, sorted ascending, unique).

    `sizes` splits x into consecutive layers (parameter tensors, in flat order) and each layer keeps its
    own top k_for(size, rate) (dgs.txt Alg. 1–3: a threshold per layer; at least one entry each); () is
    one layer: topk_indices(x, k_for(x.numel(), rate), method). rate >= 1.0 returns torch.arange(numel)
    (the dense path). ValueError if `sizes` does not add up to x.numel().
    """
    if sizes and sum(sizes) != x.numel():
        raise ValueError(f"select: layer sizes add up to {sum(sizes)}, the vector has {x.numel()} entries")
    if rate >= 1.0:
        return torch.arange(x.numel(), dtype=torch.int64, device=x.device)
    if len(sizes) <= 1:
        return topk_indices(x, k_for(x.numel(), rate), method, generator=generator)
    parts, offset = [torch.empty(0, dtype=torch.int64, device=x.device)], 0
    for n in sizes:
        if n:
            layer = x[offset:offset + n]                                       # (n,)
            parts.append(topk_indices(layer, k_for(n, rate), method, generator=generator) + offset)
        offset += n
    return torch.cat(parts)  # each part sorted, the offsets increasing: sorted
