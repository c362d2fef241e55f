"""Which slice of the model each parameter-server shard owns (shat.txt §3.3, Fig. 3).

A sharded coordinator splits the flat parameter vector (params.py's order: `model.parameters()`) into
K contiguous ranges, one per shard:

- `layer` (layer-wise parameter sharding, LPS): every shard owns the same number of whole layers (a
  layer: the parameters of one module, weight and bias together), consecutive in the model's order, the
  first shards taking one more when K does not divide the count. Shards then hold different numbers of
  parameters: on a VGG-like model nearly all of them land on the shard with the large linear layer.
- `memory` (memory-wise parameter sharding, MPS): every shard owns the same number of parameters (±1),
  large layers split between shards.

The floating buffers (BatchNorm statistics, a fraction of a percent of a model) stay with shard 0, the
lead, which also evaluates and keeps the run's records. A shard's share of an update's or a model's bytes
is its share of the parameters (`fractions`): the simulator charges each shard that share of the
coordinator's work and its link that share of the bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from edgesync.models import build_model

Sharding = Literal["layer", "memory"]
SHARDINGS: tuple[str, ...] = ("layer", "memory")


@dataclass(frozen=True)
class ShardPlan:
    bounds: tuple[tuple[int, int], ...]  # shard j owns params[lo:hi], in order, covering the vector

    @property
    def shards(self) -> int:
        return len(self.bounds)

    @property
    def total(self) -> int:
        return self.bounds[-1][1]

    @property
    def fractions(self) -> tuple[float, ...]:
        """Each shard's share of the parameters (they sum to 1)."""
        return tuple((hi - lo) / self.total for lo, hi in self.bounds) if self.total else (1.0,) * self.shards

    def describe(self) -> str:
        return ", ".join(f"{100 * f:.1f}%" for f in self.fractions)


def layer_sizes(model: nn.Module) -> list[int]:
    """Parameters per layer (per module that owns parameters), in the flat vector's order."""
    return [n for m in model.modules() if (n := sum(p.numel() for p in m.parameters(recurse=False)))]


def plan(layers: list[int], shards: int, how: Sharding, name: str = "the model") -> ShardPlan:
    """Shard `layers` (parameters per layer, in order) over `shards` servers, layer- or memory-wise;
    `name` is the model as an error calls it."""
    if shards < 1:
        raise ValueError(f"shards must be ≥ 1, got {shards}")
    total = sum(layers)
    if shards == 1:
        return ShardPlan(((0, total),))
    if how == "layer":
        if len(layers) < shards:
            raise ValueError(f"sharding: layer gives each shard whole layers, but {name} has {len(layers)} "
                             f"layers for {shards} shards: use sharding: memory or fewer shards")
        per, extra = divmod(len(layers), shards)
        bounds, lo, i = [], 0, 0
        for j in range(shards):
            count = per + (j < extra)
            hi = lo + sum(layers[i:i + count])
            bounds.append((lo, hi))
            lo, i = hi, i + count
        return ShardPlan(tuple(bounds))
    if how == "memory":
        if total < shards:
            raise ValueError(f"sharding: memory needs at least one parameter per shard: {total} for {shards}")
        cuts = [total * j // shards for j in range(shards + 1)]
        return ShardPlan(tuple(zip(cuts[:-1], cuts[1:])))
    raise ValueError(f"sharding must be one of {', '.join(SHARDINGS)}, got {how!r}")


def model_plan(model: nn.Module, shards: int, how: Sharding, name: str = "the model") -> ShardPlan:
    return plan(layer_sizes(model), shards, how, name)


def plan_for(model_name: str, shards: int, how: str, num_classes: int = 10, in_channels: int = 1) -> ShardPlan:
    """The plan for a scenario's model (built on no memory: only its layers' sizes are read); one shard
    owns everything when `shards` is 1, whatever `how` says."""
    with torch.device("meta"):
        model = build_model(model_name, num_classes=num_classes, in_channels=in_channels)
    return model_plan(model, shards, how, f"model {model_name}")
