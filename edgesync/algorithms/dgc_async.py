"""DGC-async: deep gradient compression (Lin et al. 2018) with DGS's model-difference download
(dgs.txt §"Experimental Evaluation": the paper's baseline; docs/algorithms.md, "the DGS family").

The client keeps a learning-rate-free momentum u and an accumulator v in parameter units:

    u ← m·u + g                          (momentum correction: the momentum is accumulated, not g)
    v ← v + η·u
    send the top-R of |v|;  zero u and v at the sent coordinates (momentum-factor masking)

Where η is applied: to u as it enters v, with the η the master sends for this instruction (the
warm-up's, if on). At a constant η this sends η × DGC's v exactly (Lin et al. apply η to the sparse
sum on the server); under a changing η, v holds steps already scaled and u needs no correction. The
master (M ← M − payload) and the client's model keeping (θ_k ← θ_k + G) are DGS's (`dgs`); only the
client's `sparsify` hook differs.

Sparsity warm-up (Lin et al. §3.3): with `warmup_rates` [R₀, R₁, …] the client sends the top-R_e
fraction during training epoch e (e = ⌊epochs⌋, the master's progress over the whole training data,
sent with every instruction), and `rate` afterwards; e.g. [0.25, 0.0625, 0.015625, 0.004].
`topk: sampled` is DGC's sampled threshold (`compression.topk`).

Choices fixed here: local gradient clipping (another of Lin et al.'s tricks) is not applied; with m = 0
the rule is GD-async's exactly; at rate 1.0 masking clears u after every step, so momentum never
builds up and DGC-async is plain ASGD — a property of the algorithm, kept as is.
"""
from __future__ import annotations

from typing import Annotated, Literal

import torch
from pydantic import Field

from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.algorithms.dgs import DGSClient, DGSServer, SparseAsyncConfig
from edgesync.compression.topk import select


class DGCAsyncConfig(SparseAsyncConfig):
    name: Literal["dgc_async"] = "dgc_async"
    momentum: float = Field(0.9, ge=0, lt=1, description="m, the momentum (corrected: accumulated locally)")
    warmup_rates: tuple[Annotated[float, Field(gt=0, le=1)], ...] = Field(
        (), description="sparsity warm-up: the rate in epoch 0, 1, …; then `rate`; empty = off")


def warmup_rate(rates: tuple[float, ...], rate: float, epochs: float) -> float:
    """The rate during training epoch ⌊epochs⌋: rates[e] while e < len(rates), then `rate`."""
    e = int(epochs)
    return rates[e] if 0 <= e < len(rates) else rate


def dgc_step(u, v, g, lr: float, m: float, rate: float, method: str = "exact", sizes: tuple[int, ...] = ()):
    """u ← m·u + g; v ← v + η·u; top-R of v (per layer of `sizes`) sent; u, v zeroed there.
    Returns (v, indices, u_kept, v_kept)."""
    u = g if u is None else m * u + g
    v = lr * u if v is None else v + lr * u
    if rate >= 1:
        return v, None, torch.zeros_like(u), torch.zeros_like(v)
    idx = select(v, rate, method, sizes=sizes)
    u_kept, v_kept = u.clone(), v.clone()
    u_kept[idx] = 0
    v_kept[idx] = 0
    return v, idx, u_kept, v_kept


class DGCAsyncClient(DGSClient):
    config: DGCAsyncConfig

    def sparsify(self, g, lr, meta):
        cfg = self.config
        rate = warmup_rate(cfg.warmup_rates, cfg.rate, float(meta.get("epochs", 0.0)))
        v, idx, self.memory["u"], self.memory["v"] = dgc_step(
            self.memory.get("u"), self.memory.get("v"), g, lr, cfg.momentum, rate, cfg.topk, self.layer_sizes())
        return v, idx


SPEC = AlgorithmSpec(
    name="dgc_async", config=DGCAsyncConfig, server=DGSServer, client=DGCAsyncClient, family="asynchronous",
    paper="Deep gradient compression (Lin et al. 2018) with DGS's model-difference download, dgs.txt's DGC-async",
)
