"""DGS: dual-way gradient sparsification with SAMomentum (Z. Yan, "Gradient Sparsification for
Asynchronous Distributed Training"; dgs.txt Alg. 1–3, Eq. 1–13; docs/algorithms.md, "the DGS family").

Master (`DGSServer`, Alg. 2). It keeps M, the sum of every update applied (θ_global = θ₀ + M, Eq. 2),
and per client k the vector v_k of what k has been sent so far. On an update from k:

    M ← M − payload;   G = M − v_k;   [G ← top-R₂(G)];   v_k ← v_k + G;   reply G     (Eq. 1, 3, 6a, 6b)

(Alg. 2 line 13 writes v_k ← v_k − G: a sign typo; Eq. 6b has +, as docs/algorithms.md reads it.) The client moves
θ_k ← θ_k + G, so θ_k = θ₀ + v_k at all times (Eq. 5); without R₂ that is θ₀ + M, ASGD's model.
The first instruction, and every resync, carries the dense θ₀ + M and sets v_k ← M.

Client (`DGSClient`, Alg. 3, SAMomentum). It keeps its own model θ_k and velocity u. Per instruction it
applies the reply (θ_k ← θ_k + G, or θ_k ← the dense model), loads θ_k into the trainer, computes g
(weight decay included), then

    u ← m·u + η·g;  mask = top-R of |u|;  send u⊙mask;  u ← u + (1/m − 1)·(u⊙¬mask)   (Eq. 11–12)

unsent coordinates are divided by m so that the next m·u restores them (Eq. 13); sent ones stay in u
as ordinary momentum; there is no separate residual. The client's own step reaches θ_k only through G.

Choices fixed here:
- m = 0: the limit m → 0⁺ of SAMomentum, which is gradient dropping: u ← u + η·g, send top-R, zero the
  sent coordinates (unsent ones carry over whole, as m·(u/m) = u for every m > 0; sent ones decay as
  m·u → 0). So DGS with m = 0 is `gd_async` exactly, and the m > 0 rule tends to it continuously.
- η is applied at the client (the paper's u = m·u + η·∇); the master sends the current η (`lr` in the
  instruction's meta) and, with the learning-rate warm-up, the client rescales u by η_new/η_old when
  η changes (the warm-up's momentum correction; never for m = 0, where u is a residual, not momentum).
- Resync (`resync_every` = P, the authors' code uses ≈150): when client k is answered and P or more
  global versions have passed since it last got the dense model, it gets θ₀ + M dense and v_k ← M.
  Counting per client (not "at versions that are multiples of P") keeps one client from getting every
  resync when the clients take turns.
- Without R₂ the reply is M − v_k exactly (the nonzero entries). With float32 values the master sets
  v_k ← M at the coordinates sent (v_k + G in exact arithmetic), so untouched coordinates stay exactly
  0 in the next G instead of float residue; with float16 values v_k ← v_k + (G as received), so the
  rounding error is sent later and θ_k = θ₀ + v_k still holds.
- Wire format (`edgesync.compression.codec`): update "delta.idx"/"delta.val", reply "G.idx"/"G.val";
  a payload goes dense ("delta", "G") when that is no bigger (rate 1.0 always); dense model "params".
  BatchNorm statistics travel dense with every update; the master keeps the latest and sends them with
  every reply (as ASGD). Instruction meta: version, lr, epochs (the master's training progress).
- The sampled top-k draws from torch's global generator (seeded by the runtimes).
- Top-k scope (`topk_scope`): `layer` (default) as Alg. 1–3 (`for j = 0..J: thr ← R% of |u[j]|`): each
  parameter tensor keeps its own top k = max(1, ⌊R·numel_j⌋) (docs/algorithms.md's k, per tensor), on both
  sides — the client reads the tensors from its trainer's model, the master from `ModelState.sizes`
  (() = one layer). `global` is one top-k over the flattened model (large layers crowd out small ones).
  Per layer, an update carries Σ_j max(1, ⌊R·numel_j⌋) entries: a few more than ⌊R·numel⌋.

Per update the master logs, besides the lag τ and the gap ‖θ₀ + M − (θ₀ + v_k)‖/√k of the async family
(normalised, as for every algorithm, by the RMS of the client's raw gradient g, which the client reports
in its meta: the sparse update with its momentum or residual is not a gradient's scale; `staleness`):
`density_up`/`density_down` (fraction of coordinates each payload carries), `bytes_up`/`bytes_down`
(their payload bytes, BatchNorm statistics excluded), `resync` and `v_bytes`, the master's memory for
the N v_k vectors (N × numel × 4; also `DGSServer.v_bytes()`).

`gd_async` and `dgc_async` (the paper's baselines) reuse this master and this client, overriding the
client's `sparsify` hook.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import AlgorithmSpec, ClientAlgorithm, Instruction, Update, UpdateFormat
from edgesync.algorithms.machinery.staleness import GRAD_RMS, gap_of_sq_dist, rms
from edgesync.algorithms.machinery.warmup import WarmupConfig, correct_momentum, instruction_lr
from edgesync.compression.codec import add_into, encode, entries, index_dtype, payload_bytes
from edgesync.compression.topk import select

DTYPES = {"float32": torch.float32, "float16": torch.float16}


class SparseAsyncConfig(WarmupConfig):
    """Keys shared by DGS, GD-async and DGC-async (one master, one model-difference download)."""

    rate: float = Field(0.01, gt=0, le=1, description="R, fraction of the entries a client sends per update")
    secondary_rate: float | None = Field(None, gt=0, le=1, description="R₂, fraction of G the master sends "
                                         "(secondary compression); null = all of G")
    resync_every: int | None = Field(None, ge=0, description="send a client the dense model once this many "
                                     "global versions have passed since its last one; null/0 = never")
    value_dtype: Literal["float32", "float16"] = Field("float32", description="dtype of the values sent")
    topk: Literal["exact", "sampled"] = Field("exact", description="top-k by torch.topk, or DGC's sampled threshold")
    topk_scope: Literal["layer", "global"] = Field("layer", description="top-k per parameter tensor (dgs.txt "
                                                   "Alg. 1–3), or over the whole flattened model")


class DGSConfig(SparseAsyncConfig):
    name: Literal["dgs"] = "dgs"
    momentum: float = Field(0.9, ge=0, lt=1, description="m, the SAMomentum coefficient")


def samomentum_step(u: torch.Tensor | None, step: torch.Tensor, m: float, rate: float, method: str = "exact",
                    sizes: tuple[int, ...] = ()) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """One SAMomentum step (Alg. 3 lines 6–11) on `step` = η·g: returns (u, indices, u_stored).

    u = m·u_prev + step is the vector whose entries at `indices` are sent (None: all, the dense path);
    u_stored is what the client keeps: u on the sent coordinates, u/m on the others (Eq. 12). m = 0 is
    the limit m → 0⁺: u = u_prev + step, and u_stored is u with the sent coordinates zeroed (gradient
    dropping's residual). `sizes`: the layers top-R is taken in (`compression.topk.select`).
    """
    if u is None:
        u = step
    else:
        u = u + step if m == 0 else m * u + step
    if rate >= 1:
        return u, None, (u if m > 0 else torch.zeros_like(u))
    idx = select(u, rate, method, sizes=sizes)
    if m > 0:
        stored = u / m  # u + (1/m − 1)·u on the unsent coordinates
        stored[idx] = u[idx]
    else:
        stored = u.clone()
        stored[idx] = 0
    return u, idx, stored


def pack(name: str, x: torch.Tensor, idx: torch.Tensor | None, value_dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The entries of x at idx as message tensors: sparse, or dense (x masked to idx) when that is no bigger."""
    if idx is None:
        return encode(name, x, None, value_dtype)
    return pack_entries(name, idx, x[idx], x.numel(), value_dtype)


def nonzero_coordinates(x: torch.Tensor) -> torch.Tensor:
    """The indices (int64, ascending) of x's nonzero entries. On the CPU through numpy, whose search of a bool
    array is vectorised: a comparison and that search take about half of `torch.nonzero`'s time on a float
    vector (measured cold, benchmarks/coordinator_floor.py's conditions)."""
    if x.device.type != "cpu":
        return torch.nonzero(x).squeeze(1)
    return torch.from_numpy(np.flatnonzero(x.numpy() != 0))


def pack_entries(name: str, idx: torch.Tensor, values: torch.Tensor, numel: int,
                 value_dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The vector that holds `values` at `idx` (unique) and zeros elsewhere as message tensors, from the entries
    alone: sparse, or dense when that is no bigger (then the dense vector is built)."""
    sparse = idx.numel() * (torch.empty(0, dtype=index_dtype(numel)).element_size()
                            + torch.empty(0, dtype=value_dtype).element_size())
    if sparse < numel * torch.empty(0, dtype=value_dtype).element_size():
        return {f"{name}.idx": idx.to(index_dtype(numel)), f"{name}.val": values.to(value_dtype)}
    dense = torch.zeros(numel, dtype=values.dtype, device=values.device)
    dense[idx] = values
    return encode(name, dense, None, value_dtype)


def density(tensors: dict[str, torch.Tensor], name: str, numel: int) -> float:
    """Fraction of the coordinates a payload carries (a dense payload: its nonzero entries)."""
    carried = tensors[f"{name}.idx"].numel() if f"{name}.idx" in tensors else int(torch.count_nonzero(tensors[name]))
    return round(carried / max(1, numel), 6)


def has_payload(tensors: dict[str, torch.Tensor], name: str) -> bool:
    return any(k in tensors for k in (name, f"{name}.idx", f"{name}.val"))


class DGSServer(AsyncServer):
    """Alg. 2: M, one v_k per client, replies G = M − v_k (optionally top-R₂), or the dense model.

    Per update, where the reply is all of G in float32 (no R₂, the default), one pass over M and v_k reads the gap
    ‖M − v_k‖ before the update, writes M's new copy with the update subtracted, and collects G = M − v_k's nonzero
    entries (model_passes.sparse_difference; then v_k is M itself, no copy). Otherwise D = M − v_k is taken once: the
    gap is its RMS, and G = D − δ is nonzero only where D is or where the update wrote, so G's coordinates are found
    in D with the update's own marked, and its values read from M and v_k there (the same bits as M − v_k).
    θ = θ₀ + M is built only when something reads it (an evaluation, a resync), not per update."""

    config: SparseAsyncConfig
    update_key = "delta"  # on_update hands the loop the payload's values under this name
    _NOT_STATE = AsyncServer._NOT_STATE | {"sizes"}  # from the initial model, not state

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        sizes = tuple(initial.sizes)
        if sizes and sum(sizes) != self.params.numel():
            raise ValueError(f"{config.name}: layer sizes add up to {sum(sizes)}, the model has "
                             f"{self.params.numel()} parameters")
        self.sizes = sizes if config.topk_scope == "layer" else ()  # layers of R₂'s top-k; () = one
        self.theta0 = self.params  # θ₀
        self.M = torch.zeros_like(self.params)  # replaced, never changed in place: a v_k may be it
        self.v: dict[int, torch.Tensor] = {}          # v_k: what client k has been sent (θ_k = θ₀ + v_k)
        self.synced_at: dict[int, int] = {}           # version of the last dense model each client got
        self.pending: dict[int, dict[str, torch.Tensor]] = {}  # the reply built by apply()
        self.value_dtype = DTYPES[config.value_dtype]
        self.whole = self.value_dtype == torch.float32 and (config.secondary_rate or 1) >= 1  # v_k + G = M
        self._payload: tuple[torch.Tensor | None, torch.Tensor] | None = None  # the update being applied
        self._behind: torch.Tensor | None = None  # its D = M − v_k
        self._up: dict[str, Any] = {}

    @property
    def params(self) -> torch.Tensor:
        """θ = θ₀ + M, built when read after M changed."""
        if self._params is None:
            self._params = self.theta0 + self.M
        return self._params

    @params.setter
    def params(self, value: torch.Tensor) -> None:
        self._params = value

    def update_format(self) -> UpdateFormat:
        """"delta", dense or sparse (delta.idx + delta.val), values float32 or the configured value_dtype."""
        return UpdateFormat(self.update_key, True, frozenset({torch.float32, self.value_dtype}))

    def v_bytes(self) -> int:
        """The master's memory for the N v_k vectors (N × numel × 4 bytes; every v_k is a float32 model-sized vector,
        so no sum over N per update)."""
        return len(self.v) * self.M.numel() * self.M.element_size()

    # -- the reply ---------------------------------------------------------------------------------
    def dense(self, client: int, version: int) -> dict[str, torch.Tensor]:
        """The dense model θ₀ + M; v_k ← M (first instruction and resyncs)."""
        self.v[client] = self.M
        self.synced_at[client] = version
        return {"params": self.params}

    def difference(self, client: int) -> dict[str, torch.Tensor]:
        """G = M − v_k (Eq. 3), top-R₂ of it with secondary compression (Eq. 6a); v_k ← v_k + G (Eq. 6b)."""
        v, (idx, _), behind = self.v[client], self._payload, self._behind
        if self.whole and idx is not None:  # G's coordinates: D's nonzeros and the update's, once each, in order
            where = nonzero_coordinates(behind.index_fill_(0, idx, 1.0))
            values = self.M.index_select(0, where) - v.index_select(0, where)
            keep = values != 0
            if not bool(keep.all()):  # an entry the update left as it was
                where, values = where[keep], values[keep]
            self.v[client] = self.M  # v_k + G = M, exactly
            return pack_entries("G", where, values, self.M.numel(), self.value_dtype)
        g = self.M - v
        r2 = self.config.secondary_rate
        if r2 is not None and r2 < 1:
            idx = select(g, r2, self.config.topk, sizes=self.sizes)
            idx = idx[g[idx] != 0]
        else:
            idx = nonzero_coordinates(g)
        tensors = pack("G", g, idx, self.value_dtype)
        if self.value_dtype == torch.float32:  # lossless: v_k + G = M on the coordinates sent
            new_v = v.clone()
            new_v[idx] = self.M[idx]
        else:  # what the client actually adds
            new_v = add_into(v.clone(), tensors, "G")
        self.v[client] = new_v
        return tensors

    # -- AsyncServer hooks -------------------------------------------------------------------------
    def on_update(self, client: int, update: Update) -> list:
        if client not in self.clients or not has_payload(update.tensors, "delta"):
            return []  # a dropped client's late update, or one without a payload: not applied
        numel = self.M.numel()
        idx, values = entries(update.tensors, "delta", numel)  # ValueError on a malformed payload: refused
        self._payload = (idx, values.to(torch.float32))  # in parameter units: η was applied by the client
        self._up = {"density_up": density(update.tensors, "delta", numel),
                    "bytes_up": payload_bytes(update.tensors, "delta")}
        rest = {k: t for k, t in update.tensors.items() if k not in ("delta", "delta.idx", "delta.val")}
        try:
            return super().on_update(client, Update(tensors={**rest, "delta": values}, meta=update.meta))
        finally:
            self._payload = self._behind = None

    def gap_before(self, client: int) -> float:
        """‖θ₀ + M − (θ₀ + v_k)‖/√k, summed as model_passes sums every gap; D = M − v_k is kept for the reply."""
        v = self.v.get(client, self.M)
        self._behind = self.M - v
        return gap_of_sq_dist(model_passes.sq_dist(self.M, v), self.M.numel())

    def gap_and_apply(self, client: int, update: Update, lr: float) -> tuple[float, dict[str, Any]]:
        """Alg. 2's step in one pass where the reply is all of G in float32 (model_passes.sparse_difference): M and
        v_k read once for the gap, M's new copy and G's entries; the hooks in turn where a subclass overrides one,
        the update is dense, or the client is due a resync."""
        idx, values = self._payload
        v = self.v.get(client)
        if (not self.whole or idx is None or v is None or self.resyncs(client)
                or not self.hooks_are(DGSServer, "gap_before", "apply", "difference")):
            return super().gap_and_apply(client, update, lr)
        self.M, sq, where, g = model_passes.sparse_difference(self.M, v, idx, values)
        self.params = None  # θ₀ + M when next read
        self.v[client] = self.M  # v_k + G = M, exactly
        reply = pack_entries("G", where, g, self.M.numel(), self.value_dtype)
        return gap_of_sq_dist(sq, self.M.numel()), self.replied(client, reply, False)

    def apply(self, client: int, update: Update, lr: float):
        idx, values = self._payload
        self.M = self.M - values if idx is None else self.M.index_add(0, idx, values, alpha=-1)
        self.params = None  # θ₀ + M when next read
        resync = self.resyncs(client)
        return self.replied(client, self.dense(client, self.updates + 1) if resync else self.difference(client), resync)

    def resyncs(self, client: int) -> bool:
        """Whether the update being applied is answered with the dense model (`resync_every` versions since k's last)."""
        every = self.config.resync_every
        return bool(every) and self.updates + 1 - self.synced_at.get(client, 0) >= every

    def replied(self, client: int, reply: dict[str, torch.Tensor], resync: bool) -> dict[str, Any]:
        """Keep the reply for the next instruction; the update's log fields."""
        self.pending[client] = reply
        name = "params" if resync else "G"
        return {**self._up, "density_down": density(reply, name, self.M.numel()),
                "bytes_down": payload_bytes(reply, name), "resync": resync, "v_bytes": self.v_bytes()}

    def outgoing(self, client: int) -> torch.Tensor:
        return self.theta0  # unused (instruction() sends the pending reply); a constant costs no memory

    def computed_on(self, client: int) -> torch.Tensor:
        v = self.v.get(client)
        return self.params if v is None else self.theta0 + v  # the client's model, θ₀ + v_k

    def instruction(self, client: int, theta: torch.Tensor) -> Instruction:
        tensors = self.pending.pop(client, None)
        if tensors is None:  # the first instruction
            tensors = self.dense(client, self.updates)
        tensors = dict(tensors)
        if self.buffers.numel():
            tensors["buffers"] = self.buffers
        meta = {"version": self.updates, "lr": self.lr, "epochs": self.warmup.epochs_done()}
        return Instruction(tensors=tensors, meta=meta)

    def on_client_lost(self, client: int):
        for table in (self.v, self.synced_at, self.pending):
            table.pop(client, None)
        return super().on_client_lost(client)


class DGSClient(ClientAlgorithm):
    """Alg. 3: keeps θ_k and its compression memory (SAMomentum's u); `sparsify` is the hook."""

    config: SparseAsyncConfig

    def __init__(self, config, trainer):
        super().__init__(config, trainer)
        self.theta: torch.Tensor | None = None
        self.buffers: torch.Tensor | None = None
        self.memory: dict[str, Any] = {}  # u (DGS), r (GD-async), u and v (DGC-async); the η of u
        self.value_dtype = DTYPES[config.value_dtype]
        self._sizes: tuple[int, ...] | None = None

    def layer_sizes(self) -> tuple[int, ...]:
        """The layers top-R is taken in: the trainer's parameter tensors, in the flat vectors' order
        (`params.get_params`: model.parameters()) under `topk_scope: layer`; () (one layer) under `global`."""
        if self._sizes is None:
            self._sizes = (tuple(p.numel() for p in self.trainer.model.parameters())
                           if self.config.topk_scope == "layer" else ())
        return self._sizes

    def sparsify(self, g: torch.Tensor, lr: float, meta: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(x, indices): send x at indices (None = all of x); updates `self.memory`. Here: SAMomentum."""
        m = self.config.momentum
        u = self.memory.get("u")
        if u is not None and m > 0:
            u = correct_momentum(u, self.memory["lr"], lr)
        x, idx, self.memory["u"] = samomentum_step(u, lr * g, m, self.config.rate, self.config.topk,
                                                   self.layer_sizes())
        self.memory["lr"] = lr
        return x, idx

    def receive(self, instruction: Instruction) -> None:
        """θ_k ← the dense model, or θ_k ← θ_k + G (Alg. 3 line 15); the master's BatchNorm statistics."""
        tensors = instruction.tensors
        if "params" in tensors:
            self.theta = tensors["params"].clone()
        elif has_payload(tensors, "G"):
            if self.theta is None:
                raise ValueError("a model difference arrived before the client was sent a model")
            self.theta = add_into(self.theta.clone(), tensors, "G")
        elif self.theta is None:
            raise ValueError("the first instruction must carry the dense model ('params')")
        if "buffers" in tensors:
            self.buffers = tensors["buffers"]

    def on_instruction(self, instruction: Instruction) -> Update:
        self.receive(instruction)
        t = self.trainer
        t.set_params(self.theta)  # trainers may be shared between clients: always load
        if self.buffers is not None and self.buffers.numel():
            t.set_buffers(self.buffers)
        g, loss = t.gradient(self.config.weight_decay)
        lr = instruction_lr(instruction.meta)
        x, idx = self.sparsify(g, lr, instruction.meta)
        tensors = pack("delta", x, idx, self.value_dtype)
        buffers = t.get_buffers()
        if buffers.numel():
            self.buffers = tensors["buffers"] = buffers
        meta = {"loss": loss, "steps": 1, "samples": t.batch_samples, "data_size": t.num_samples,
                "version": instruction.meta.get("version", 0),
                GRAD_RMS: rms(g)}  # the gap's normaliser is the raw g, not the sparse update (staleness)
        return Update(tensors=tensors, meta=meta)

    def state_dict(self) -> dict[str, Any]:
        return {"theta": self.theta, "buffers": self.buffers, **self.memory}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.theta, self.buffers = state.pop("theta", None), state.pop("buffers", None)
        self.memory = state


SPEC = AlgorithmSpec(
    name="dgs", config=DGSConfig, server=DGSServer, client=DGSClient, family="asynchronous",
    paper="DGS (Yan), dual-way sparsification with SAMomentum, dgs.txt Alg. 2–3",
)
