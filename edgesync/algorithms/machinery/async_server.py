"""The asynchronous master shared by the ASGD family (NAG/Multi/DC-ASGD, DANA, SHAT, EASGD, SSP).

It is `asgd.ASGDServer` with its steps named as hooks and the learning-rate warm-up of `warmup` built
in. For every update from a live client it (1) takes η from the warm-up schedule, (2) measures the lag
τ = updates applied since the model the client computed on was sent, (3) calls `apply()`, which
changes the global model out of place, (4) logs τ, DANA's gap G = ‖θ_apply − θ_computed‖₂/√k and G
normalised by the RMS of the client's raw gradient, one normaliser for every algorithm
(`staleness`: the RMS the client reported in its meta, else that of the raw gradient it sent), plus
the algorithm's own fields, (5) keeps the latest BatchNorm statistics (unless the half declares
`latest_statistics = False` and handles them in `apply()`: FedAsync mixes them), and (6) returns
`after_update()`'s sends: by default the reply to the sender alone.

Hooks, each with the ASGD behaviour by default:
- `apply(client, update, lr)` changes `self.params`; returns extra fields for the update log.
  ASGD: θ ← θ − η·g.
- `outgoing(client)` the parameters the client will compute on (θ; DANA: its look-ahead θ̂); they
  are remembered in `self.sent[client]`.
- `computed_on(client)` the parameters the arriving update was computed on (default `sent`).
- `gap_before(client)` the gap G before the update is applied (default from `computed_on`; with `apply` and
  `computed_on` not overridden either, the two are one pass, `gap_and_apply`).
- `instruction(client, theta)` the instruction that carries them (θ, buffers, version).
- `after_update(client)` what to send once the update is applied (SSP holds replies here).

With warm-up off and no hook overridden it applies exactly ASGD's updates (`asgd` is this class). The
client half of the gradient-pushing members is `gradient_client.GradientClient`, whose updates carry
the client's data size, which the warm-up needs.
"""
from __future__ import annotations

from typing import Any, ClassVar

import torch

from edgesync.algorithms.machinery.base import Instruction, Send, ServerAlgorithm, Update
from edgesync.algorithms.machinery.gradient_client import model_instruction
from edgesync import model_passes
from edgesync.algorithms.machinery.staleness import gap, gap_fields, gap_of_sq_dist, raw_gradient_rms
from edgesync.algorithms.machinery.warmup import Warmup, WarmupConfig


class AsyncServer(ServerAlgorithm):
    config: WarmupConfig
    update_key = "grad"  # the tensor every update carries
    latest_statistics: ClassVar[bool] = True  # keep the latest update's BatchNorm statistics (docs/algorithms.md)

    def __init__(self, config: WarmupConfig, initial, clients):
        super().__init__(config, initial, clients)
        self.warmup = Warmup(config.lr, config.warmup_epochs, self.clients)
        self.lr = self.warmup.lr()  # η for the next update (and for client-side steps)
        self.lag_sum = 0
        self.sent: dict[int, torch.Tensor] = {}  # what each client computes on (references, never copies)

    # -- hooks -----------------------------------------------------------------------------------
    def apply(self, client: int, update: Update, lr: float) -> dict[str, Any]:
        self.params, _ = model_passes.step(self.params, update.tensors["grad"], -lr)  # one pass: θ − η·g
        return {}

    def outgoing(self, client: int) -> torch.Tensor:
        return self.params

    def computed_on(self, client: int) -> torch.Tensor:
        return self.sent.get(client, self.params)

    def instruction(self, client: int, theta: torch.Tensor) -> Instruction:
        return model_instruction(theta, self.buffers, self.updates)

    def gap_before(self, client: int) -> float:
        """The gap, before the update is applied: between the model it is applied to and the one it was
        computed on."""
        return gap(self.params, self.computed_on(client))

    def after_update(self, client: int) -> list[Send]:
        return [self.reply(client)]

    def gap_and_apply(self, client: int, update: Update, lr: float) -> tuple[float, dict[str, Any]]:
        """`gap_before`, then `apply`. ASGD's own pair (neither hook overridden) is one pass: θ, g and θ_computed
        read once, the gap summed as the step is written (model_passes.step)."""
        if not self.hooks_are(AsyncServer, "apply", "gap_before", "computed_on"):
            g = self.gap_before(client)
            return g, self.apply(client, update, lr)
        sent = self.computed_if_behind(client)
        gap_of = None if sent is None else (self.params, sent)
        self.params, sq = model_passes.step(self.params, update.tensors["grad"], -lr, gap_of)
        return self.gap_of(sq), {}

    def computed_if_behind(self, client: int) -> torch.Tensor | None:
        """For a fused pass: θ_computed of `client`'s update, or None when it is θ itself (nothing applied since it
        was sent: the gap is 0 and the pass need not read it)."""
        sent = self.computed_on(client)
        return None if sent is self.params else sent

    def gap_of(self, sq: float | None) -> float:
        """G from the Σ (θ − θ_computed)² a fused pass read (None: θ_computed was θ, G = 0)."""
        return 0.0 if sq is None else gap_of_sq_dist(sq, self.params.numel())

    def hooks_are(self, owner: type, *names: str) -> bool:
        """Whether these hooks are still `owner`'s, not a subclass's: only then may `owner` fuse them into one pass
        (a subclass that overrides one must see each called as the hooks promise)."""
        return all(getattr(type(self), name) is getattr(owner, name) for name in names)

    # -- the loop ----------------------------------------------------------------------------------
    def start(self) -> list[Send]:
        return [self.reply(c) for c in self.clients]

    def on_update(self, client: int, update: Update) -> list[Send]:
        if client not in self.clients or self.update_key not in update.tensors:
            return []  # a dropped client's late update, or a malformed one: not applied
        lr = self.warmup.observe(client, update.meta)
        lag = self.lag_of(update)
        self.lag_sum += lag
        grad_rms = raw_gradient_rms(update.meta, update.tensors)
        g, extra = self.gap_and_apply(client, update, lr)
        fields = gap_fields(lag, g, grad_rms)
        if self.config.warmup_epochs:
            fields["lr"] = lr
        self.log_update(client, **fields, **extra)
        if self.latest_statistics and "buffers" in update.tensors:
            self.buffers = update.tensors["buffers"].clone()  # BatchNorm statistics: the latest
        self.updates += 1
        self.lr = self.warmup.lr()
        return self.after_update(client)

    def lag_of(self, update: Update) -> int:
        """τ: global updates applied since the model this update was computed on was sent (its version)."""
        return self.updates - int(update.meta.get("version", self.updates))

    def on_client_lost(self, client: int) -> list[Send]:
        if client in self.clients:
            self.clients.remove(client)
        self.sent.pop(client, None)
        return []

    def on_client_joined(self, client: int) -> list[Send]:
        """Back in the pool: it gets the current model at once, as at the start (per-client state
        dropped when it was lost starts afresh; DGS sends it the dense model)."""
        self.take_back(client)
        return [self.reply(client)]

    def take_back(self, client: int) -> None:
        """`client` is in the pool again (the clients stay sorted)."""
        if client not in self.clients:
            self.clients.append(client)
            self.clients.sort()

    def reply(self, client: int) -> Send:
        theta = self.outgoing(client)
        self.sent[client] = theta
        return Send(client, self.instruction(client, theta))

