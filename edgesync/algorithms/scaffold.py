"""SCAFFOLD: stochastic controlled averaging for federated learning (Karimireddy et al. 2020, "SCAFFOLD:
Stochastic Controlled Averaging for Federated Learning", Alg. 1; docs/algorithms.md, `scaffold`).

The server keeps a control variate c, each client i its own c_i (both start at 0). Every round the server
sends x and c to the round's clients S; client i starts from y = x and runs K local steps

    y ← y − η_l·(g_i(y) − c_i + c),

then refreshes its control variate, by option I (`control_option: 1`) c_i⁺ = ∇f_i(x), the gradient of its
whole shard at x, or by option II (`control_option: 2`, the default, what the paper's experiments use)
c_i⁺ = c_i − c + (x − y)/(K·η_l). It sends Δy = y − x and Δc = c_i⁺ − c_i and keeps c_i ← c_i⁺. With all
reports in,

    x ← x + (η_g/|S|)·ΣΔy,    c ← c + (1/N)·ΣΔc,    N = every client of the run, not only S.

Choices fixed here:
- **The bytes are the paper's, twice FedAvg's each way.** The instruction carries `params` and `control`
  (c). The update carries Δy and Δc in its one model-sized tensor `delta`: the contract lets an update hold
  a single main tensor (runtime/bookkeeping/update_check.py) and the wire knows no float64 or complex
  dtype, so the pair (Δy_k, Δc_k) of every parameter k is packed as one int64 (two float32, bit for bit;
  `pack` / `unpack`). The server half declares int64 as its update's dtype and checks the unpacked floats
  for NaN and Inf itself (the client also says `nonfinite` in the metadata, which every shard of a sharded
  server reads alike); a sharded coordinator slices the vector per parameter as it slices any.
- **Option I's full pass** runs the client's whole shard through the model at x in mini-batches of
  `batch_size` (the last one smaller), each batch a gradient step of the trainer's, so the pass costs
  ⌈n_i/B⌉ steps of compute and time per round (throttled live, on the virtual clock in the simulator)
  besides the K training steps; the update's `samples` counts them, `steps` the K, `full_pass_steps` the
  pass. The training steps see the mini-batches they would have seen without the pass.
- **c_i lives in the client half** (`state_dict`) and survives between instructions. It does not survive
  the half being set up afresh: a client back from offline in the simulator, a live client that is set up
  again (a new process, one that reconnected, or every client after the coordinator resumes from its
  checkpoint). A client with no c_i starts from 0, the paper's initialisation; a live client presumed lost
  that speaks again on its old connection keeps its half. c is the server half's state and is checkpointed.
- **c = (1/N)·Σ c_i is kept exact.** Each update says which round its c_i came from (`control_round`,
  None for a c_i of 0); the server remembers the round whose Δc it last applied for each client. When the
  two disagree — a c_i lost with a fresh half, or moved by an update the server never applied (a late or
  refused one), or a non-finite update — c no longer equals the mean of the c_i, and the corrections
  c − c_i would no longer cancel across clients: a drift that would last for the rest of the run. So that
  round's Δc are dropped, c restarts from 0 and the instructions carry a new `control_epoch`, on which
  every client restarts its c_i from 0: the paper's start again, logged as a `control_reset` row in
  updates.jsonl. Δy is applied as usual; a non-finite update's Δy is left out of the mean.
- Plain local SGD (no momentum), the round's η_l from the instruction (warm-up), unweighted as in Alg. 1;
  BatchNorm statistics are averaged over the round as in FedAvg; no all-reduce form.

With c and every c_i held at 0 a client's steps are local SGD's, operation for operation, and the server's
x is FedAvg's with global learning rate η_g, bit for bit.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.local_sgd import DeltaServer, LocalRound, local_epochs_field, round_steps
from edgesync.algorithms.machinery.base import (AlgorithmSpec, ClientAlgorithm, Instruction, Send, Update,
                                                UpdateFormat)
from edgesync.algorithms.machinery.participation import ParticipationConfig
from edgesync.buffer_checks import all_finite


class ScaffoldConfig(ParticipationConfig):
    name: Literal["scaffold"] = "scaffold"
    local_steps: int = Field(10, ge=1, description="K, local SGD steps per round")
    local_epochs: float | None = local_epochs_field()
    global_lr: float = Field(1.0, gt=0, description="η_g, the server learning rate: x ← x + (η_g/|S|)·ΣΔy")
    control_option: Literal[1, 2] = Field(
        2, description="how a client refreshes c_i: 1 = the gradient of its whole shard at x (a full pass, "
                       "⌈n_i/batch_size⌉ extra steps a round), 2 = c_i − c + (x − y)/(K·η) (no extra compute)")

    @property
    def momentum(self) -> float:
        """LocalRound's local momentum: none, SCAFFOLD's local steps are plain SGD."""
        return 0.0


# -- the update's two vectors in one tensor ------------------------------------------------------------

def pack(delta_y: torch.Tensor, delta_c: torch.Tensor) -> torch.Tensor:
    """(Δy_k, Δc_k) as one int64 per parameter: two float32, bit for bit (native byte order)."""
    return torch.stack((delta_y.float(), delta_c.float()), dim=1).view(torch.int64).reshape(-1)


def unpack(packed: torch.Tensor, numel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`pack`'s inverse: (Δy, Δc), new float32 tensors (`packed` may be a read-only view)."""
    if packed.dtype != torch.int64 or packed.dim() != 1 or packed.numel() != numel:
        raise ValueError(f"a scaffold update's 'delta' is {numel} int64 (Δy and Δc as float32 pairs); got "
                         f"{packed.dtype} of shape {list(packed.shape)}")
    return model_passes.split_pairs(packed.contiguous().view(torch.float32).view(-1, 2))


# -- option I's full pass --------------------------------------------------------------------------------

def full_gradient(trainer, params: torch.Tensor, buffers: torch.Tensor | None,
                  weight_decay: float) -> tuple[torch.Tensor, int]:
    """∇f_i(x): the mean-loss gradient over the trainer's whole shard at `params`, and the batches it took.

    The shard goes through in order, in mini-batches of the trainer's batch size (the last one smaller),
    each a `Trainer.gradient` call — so each is timed, throttled and counted like a training step — weighted
    by its size. The trainer's mini-batch sampling is put back as it was: the training steps that follow
    see the batches they would have seen without the pass.
    """
    trainer.set_params(params)
    if buffers is not None:
        trainer.set_buffers(buffers)
    subset = getattr(trainer, "subset", None)
    rows = np.asarray(subset if subset is not None else np.arange(trainer.num_samples), dtype=np.int64)
    batch = trainer.batch_samples
    sampling, batch_size = trainer.sampler_state(), trainer.batch_size
    total: torch.Tensor | None = None
    batches = 0
    try:
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            trainer.batch_size = len(chunk)  # exactly these rows: the cursor ends the order without a reshuffle
            trainer.load_sampler_state({"rng": sampling["rng"], "order": chunk, "cursor": 0})
            g, _ = trainer.gradient(weight_decay)
            total = g.double() * len(chunk) if total is None else total.add_(g.double(), alpha=len(chunk))
            batches += 1
    finally:
        trainer.batch_size = batch_size
        trainer.load_sampler_state(sampling)
    return (total / len(rows)).float(), batches


# -- the halves ------------------------------------------------------------------------------------------

class ScaffoldClient(ClientAlgorithm):
    config: ScaffoldConfig

    def __init__(self, config: ScaffoldConfig, trainer):
        super().__init__(config, trainer)
        self.control: torch.Tensor | None = None  # c_i; None is 0 (the paper's start, or a half set up afresh)
        self.control_epoch: int | None = None  # the server's control epoch c_i belongs to
        self.control_round: int | None = None  # the round whose instruction produced c_i

    def on_instruction(self, instruction: Instruction) -> Update:
        cfg = self.config
        x = instruction.tensors["params"]
        c = instruction.tensors.get("control")
        c = torch.zeros_like(x) if c is None else c
        epoch = int(instruction.meta.get("control_epoch", 0))
        if self.control_epoch != epoch:  # the server restarted its control variates: so does this client
            self.control, self.control_round = None, None
        c_i = torch.zeros_like(x) if self.control is None else self.control
        full, full_steps = None, 0
        if cfg.control_option == 1:  # ∇f_i(x), before the local steps move the trainer's model away from x
            full, full_steps = full_gradient(self.trainer, x, instruction.tensors.get("buffers"), cfg.weight_decay)

        session = LocalRound(self, instruction)
        correction = c - c_i
        for _ in range(round_steps(cfg, instruction, self.trainer)):
            session.step()  # y ← y − η_l·g_i(y)
            session.theta.sub_(correction, alpha=session.lr)  # … − η_l·(c − c_i): Alg. 1's corrected step
        update = session.finish()
        delta_y = update.tensors["delta"]
        if full is not None:
            new = full  # option I
        elif session.steps:
            new = (c_i - c) - delta_y / (session.steps * session.lr)  # option II: c_i − c + (x − y)/(K·η_l)
        else:
            new = c_i  # no step, nothing learnt
        delta_c = new - c_i
        update.tensors["delta"] = pack(delta_y, delta_c)
        update.meta["control_round"] = self.control_round
        if not (all_finite(delta_y) and all_finite(delta_c)):
            update.meta["nonfinite"] = True  # said in the metadata, so every shard of a sharded server hears it
        if full_steps:
            update.meta["full_pass_steps"] = full_steps
            update.meta["samples"] += self.trainer.num_samples
        self.control, self.control_epoch = new, epoch
        self.control_round = int(instruction.meta.get("version", 0))
        return update

    def state_dict(self) -> dict:
        if self.control is None:
            return {}
        return {"control": self.control, "control_epoch": self.control_epoch, "control_round": self.control_round}

    def load_state_dict(self, state: dict) -> None:
        self.control = state.get("control")
        self.control_epoch = state.get("control_epoch")
        self.control_round = state.get("control_round")


class ScaffoldServer(DeltaServer):
    """x ← x + (η_g/|S|)·ΣΔy and c ← c + (1/N)·ΣΔc at each round's close (DeltaServer's barrier round)."""

    config: ScaffoldConfig

    def __init__(self, config: ScaffoldConfig, initial, clients: list[int]):
        super().__init__(config, initial, clients)
        self.control = torch.zeros_like(self.params)  # c
        self.control_epoch = 0  # goes up each time c restarts from 0 (clients restart their c_i with it)
        self.control_rounds: dict[int, int] = {}  # client → the round whose Δc was last applied, this epoch
        self.n_clients = len(self.clients)  # N where the runtime gives no population (unit tests)

    def _reset(self) -> None:
        super()._reset()
        self.control_sum: torch.Tensor | None = None  # ΣΔc of this round, float64
        self.out_of_step: dict[int, str] = {}  # clients of this round whose c_i is not the one c holds

    def update_format(self) -> UpdateFormat:
        return UpdateFormat("delta", False, frozenset({torch.int64}))

    def instruction_meta(self, client: int) -> dict:
        return {**super().instruction_meta(client), "control_epoch": self.control_epoch}

    def broadcast(self) -> list[Send]:
        sends = super().broadcast()
        for send in sends:  # c beside x; never changed in place (c is replaced at each round's close)
            send.instruction.tensors["control"] = self.control
        return sends

    def on_update(self, client: int, update: Update) -> list[Send]:
        delta_y, delta_c = unpack(update.tensors["delta"], self.params.numel())
        finite = not update.meta.get("nonfinite") and all_finite(delta_y) and all_finite(delta_c)
        tensors = {"delta": delta_y if finite else torch.zeros_like(delta_y), "control": delta_c}
        if finite and "buffers" in update.tensors:
            tensors["buffers"] = update.tensors["buffers"]
        meta = {**update.meta, "scaffold": {"client": client, "finite": finite}}
        return super().on_update(client, Update(tensors=tensors, meta=meta))

    def weight(self, update: Update) -> float:
        """Called once for each update the round takes in, before its close: Δc joins the round's sum here.
        Every update counts 1 (Alg. 1 is unweighted); a non-finite one 0, its Δy left out of the mean."""
        arrived = update.meta["scaffold"]
        client = arrived["client"]
        if not arrived["finite"]:
            self.out_of_step[client] = "non-finite update"
            return 0.0
        if update.meta.get("control_round") != self.control_rounds.get(client):
            self.out_of_step[client] = ("its c_i started afresh" if update.meta.get("control_round") is None
                                        else "its c_i moved by an update that was not applied")
        delta_c = update.tensors["control"]  # widened to float64 as the sum reads it
        self.control_sum = model_passes.accumulate(self.control_sum, delta_c, 1.0)
        self.control_rounds[client] = self.round
        return 1.0

    def apply(self, mean: torch.Tensor) -> None:
        if self.weight_sum > 0:  # (every update of the round non-finite: x stays)
            super().apply(mean)
        if self.out_of_step:  # c is not the mean of the c_i any more: both restart from 0
            self.log_update(-1, round=self.round, control_reset=sorted(self.out_of_step),
                            reason=sorted(set(self.out_of_step.values())))
            self.control = torch.zeros_like(self.params)
            self.control_epoch += 1
            self.control_rounds = {}
        elif self.control_sum is not None:
            n = len(self.population.data_sizes) or self.n_clients
            self.control = model_passes.mean(self.control_sum, n, theta=self.control)  # c + ΣΔc/N, one pass


SPEC = AlgorithmSpec(
    name="scaffold", config=ScaffoldConfig, server=ScaffoldServer, client=ScaffoldClient,
    family="synchronous", paper="SCAFFOLD (Karimireddy et al. 2020, SCAFFOLD: Stochastic Controlled Averaging "
                                "for Federated Learning, Alg. 1)",
)
