"""Messages of a sharded coordinator cut into slices and put back together (models/shard_plan.py's bounds).

Shard j owns params[lo_j:hi_j]. A message's tensors are cut so:
- a dense tensor of the model's length (θ, a gradient, a delta) → its slice [lo_j:hi_j] for shard j;
- a sparse pair `NAME.idx` / `NAME.val` (compression/codec.py) → the entries whose index falls in shard
  j's range, the indices made relative to lo_j;
- anything else (the BatchNorm buffers, small tensors) → the lead (shard 0) alone, with the metadata
  going to every shard.
Joining the parts of a message the shards sent is the inverse: a tensor every part carries is
concatenated in shard order (indices shifted back by each shard's lo); one only the lead's part
carries is the lead's.

A slice's server half sees a `ModelState` of its own: its params, the buffers if it is the lead, and
the sizes of the parameter tensors (or their pieces) within its range, for per-tensor top-k.
"""
from __future__ import annotations

import itertools

import torch

from edgesync.algorithms.machinery.base import ModelState

Bounds = tuple[tuple[int, int], ...]


def sliced_state(initial: ModelState, bounds: Bounds, j: int) -> ModelState:
    lo, hi = bounds[j]
    edges = list(itertools.accumulate(initial.sizes or (initial.params.numel(),), initial=0))
    sizes = tuple(min(b, hi) - max(a, lo) for a, b in zip(edges[:-1], edges[1:]) if min(b, hi) > max(a, lo))
    buffers = initial.buffers if j == 0 else initial.buffers[:0]
    return ModelState(initial.params[lo:hi].clone(), buffers.clone(), sizes)


def split(tensors: dict[str, torch.Tensor], bounds: Bounds) -> list[dict[str, torch.Tensor]]:
    """One message's tensors as each shard's part."""
    total = bounds[-1][1]
    parts: list[dict[str, torch.Tensor]] = [{} for _ in bounds]
    for name, t in tensors.items():
        if name.endswith(".val") and f"{name[:-4]}.idx" in tensors:
            continue  # with its indices
        if name.endswith(".idx") and f"{name[:-4]}.val" in tensors:
            base, values = name[:-4], tensors[f"{name[:-4]}.val"]
            idx = t.long()
            for part, (lo, hi) in zip(parts, bounds):
                keep = (idx >= lo) & (idx < hi)
                part[name] = (idx[keep] - lo).to(t.dtype)
                part[f"{base}.val"] = values[keep]
        elif t.dim() == 1 and t.numel() == total:
            for part, (lo, hi) in zip(parts, bounds):
                part[name] = t[lo:hi]
        else:
            parts[0][name] = t
    return parts


def join(parts: list[dict[str, torch.Tensor]], bounds: Bounds) -> dict[str, torch.Tensor]:
    """The shards' parts of one message as the whole message's tensors."""
    out: dict[str, torch.Tensor] = {}
    for name, t in parts[0].items():
        if not all(name in p for p in parts[1:]):
            out[name] = t
        elif name.endswith(".idx"):
            out[name] = torch.cat([p[name].long() + lo for p, (lo, _) in zip(parts, bounds)]).to(t.dtype)
        else:
            out[name] = torch.cat([p[name] for p in parts])
    return out
