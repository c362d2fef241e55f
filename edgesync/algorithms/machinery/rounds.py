"""The barrier round shared by the synchronous family (SSGD, local SGD / FedAvg, ESync).

Each round the server broadcasts θ with the round number as `version`, collects one update per live
client into running sums (float64, so the mean is the same in any arrival order; memory does not grow with
the number of clients), and when every live
client has reported calls `apply(mean)` and broadcasts again. `round_lr` is η for the round: the
configured one, or the warm-up schedule's at the round's start (`warmup_epochs`). Updates from an earlier round or from
a client not in the round are ignored. A client lost after it reported still counts: its update was
computed on this round's θ. Subclasses say which tensor they average (`update_key`) and how to
weight it (`weight`).

Partial participation (participation.py): `online` is every client able to take part, `clients` the
round's participants, drawn among the online ones when the round starts (all of them unless the config
samples). A client lost mid-round leaves both; one that comes back joins `online` and can be drawn from
the next round on (or at once, when no round is under way). A round whose every participant is lost
before anyone reported is drawn again among those still online. Each round's draw is logged (a row with
`participants` and `online` in updates.jsonl) and its close (`contributors` and the time each reported,
`reported_s`) when the config samples clients or some client is offline;
`participation` counts the rounds each client reported in.

All-reduce (`aggregation: allreduce`, esync.txt §3's MPI Allreduce form of GLOBAL-SUM-UPDATES): the
round's participants sum their weighted updates among themselves over torch.distributed
(runtime/allreduce/client.py) and each applies the round's `apply(mean)` to its own replica of this half.
What reaches the server is a report from each (`meta["ring"]`), then, from the round's lead (its
lowest-ranked participant), the round's mean (`ring.mean_of`), which the server applies exactly as
the replicas did: it keeps the model (evaluation, checkpoints, resume) and its θ equals every replica's
bit for bit. The round closes on the reports: the next one starts at once when every participant's
replica holds θ (`ring.current`: the live transport leaves the tensors out, allreduce/host.py), so the
mean's upload overlaps the next round's compute; a round with a client that needs θ waits for the mean.
`updates` counts the means applied. A participant lost before it reported leaves the ring unable to
finish, and a lead lost before its mean arrived leaves the server behind its replicas: either way the
round starts again, with θ sent to everyone. A full update (no `ring` in its meta: the simulator's,
which models the ring's time instead, sim/ring.py) is summed as in the parameter-server form.

Slow clients (stragglers.py): a round may close before every participant has reported (`backup_workers`,
`close_at`, `over_select`) or at a deadline (`deadline_s`, `deadline_median`, asked of the runtime through
`due()`/`on_due()`); what arrives after its round closed is discarded and counted per client (`discarded`).
A participant whose report is still due is busy and not drawn again until it arrives; with `partial_work`
each participant is told the time left to the deadline (`time_budget_s`) and the round waits for all.
"""
from __future__ import annotations

import math
from abc import abstractmethod
from typing import Literal

import torch
from pydantic import Field, model_validator

from edgesync import model_passes
from edgesync.algorithms.machinery.base import Send, ServerAlgorithm, Update
from edgesync.algorithms.machinery.gradient_client import model_instruction
from edgesync.algorithms.machinery.participation import ParticipationConfig, choose, round_size
from edgesync.algorithms.machinery.stragglers import (StragglerConfig, draw_size, in_round_deadline,
                                                       reports_needed, round_deadline)
from edgesync.algorithms.machinery.warmup import Warmup


class RoundConfig(StragglerConfig):
    """Keys of every barrier-round algorithm (SSGD, local SGD, ESync)."""

    aggregation: Literal["ps", "allreduce"] = Field(
        "ps", description="ps: the coordinator sums the updates; allreduce: the clients do, over "
                          "torch.distributed (gloo on CPU, NCCL on GPUs)")
    allreduce_backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="allreduce: the ring's backend; auto = NCCL when every client has a GPU of its "
                            "own in the scenario (distinct cuda devices), else gloo")

    @model_validator(mode="after")
    def _mitigations_are_the_servers(self) -> "RoundConfig":
        if self.aggregation == "allreduce" and self.mitigates:
            raise ValueError("backup_workers, close_at, over_select and deadlines need aggregation: ps (the "
                             "coordinator decides which reports a round takes; an all-reduce ring takes all)")
        return self


class RoundServer(ServerAlgorithm):
    update_key = "grad"

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.online = sorted(self.clients)  # able to take part; `clients` are the round's participants
        self.round = 0
        self.attempt = 0  # draws of this round's participants (a round whose participants all left is redrawn)
        self.participation: dict[int, int] = {}  # rounds each client reported in
        self.warmup = Warmup(config.lr, config.warmup_epochs, self.clients)
        self.round_lr = self.warmup.lr()
        self.ring_group = 0  # all-reduce: the process group of the round's participants (a new one per draw)
        self.ring_members: list[int] = []
        self.current: set[int] = set()  # all-reduce: clients whose replica holds this round's θ
        self.awaiting: dict | None = None  # all-reduce: the closed round whose mean is on its way (round, lead, lr)
        self.held: bool = False  # all-reduce: this round's instructions wait for that mean (θ to send)
        # slow clients (stragglers.py): who still owes a report and since when, each one's last round time,
        # the round's close rule and deadline, and what arrived too late
        self.busy: dict[int, float] = {}  # client → when its instruction was sent
        self.last_round_s: dict[int, float] = {}
        self.need: int | None = None  # reports that close the round early (None: every participant's)
        self.deadline_at = math.inf  # on the runtime's clock
        self.round_started = 0.0
        self.budget_told = False  # partial work: the participants were told the deadline (it was known at the start)
        self.past_deadline = False  # the deadline passed with nothing reported: the first report closes the round
        self.discarded: dict[int, dict[str, int]] = {}  # client → late updates and the local steps they held
        self._reset()

    @property
    def sampled(self) -> bool:
        """Whether a round draws a sample of the online clients (participation.py), not all of them."""
        return isinstance(self.config, ParticipationConfig) and self.config.samples_clients

    @property
    def all_reduce(self) -> bool:
        return getattr(self.config, "aggregation", "ps") == "allreduce"

    def load_state_dict(self, state: dict) -> None:
        defaults = {"ring_group": 0, "ring_members": [], "awaiting": None, "held": False, "busy": {},
                    "last_round_s": {}, "need": None, "deadline_at": math.inf,
                    "round_started": 0.0, "budget_told": False, "past_deadline": False, "discarded": {}}
        super().load_state_dict({**defaults, **state, "current": set()})  # resumed clients hold no replica
        if self.awaiting is not None:  # saved before the mean came: that round again
            self.round, self.awaiting, self.held = self.awaiting["round"], None, False
            self._reset()

    def _reset(self) -> None:
        self.reported: set[int] = set()
        self.reported_at: dict[int, float] = {}  # when each report arrived (the round's log row)
        self.weight_sum = 0.0
        self.update_sum: torch.Tensor | None = None
        self.buffer_sum: torch.Tensor | None = None
        self.early_mean: dict[str, torch.Tensor] | None = None  # all-reduce: the lead's mean, before the others' reports

    # -- hooks -----------------------------------------------------------------------------------
    @abstractmethod
    def apply(self, mean: torch.Tensor) -> None:
        """Change the global model with this round's (weighted) mean of `update_key`."""

    def weight(self, update: Update) -> float:
        """This update's weight in the round's mean; 1 = unweighted."""
        return 1.0

    def sum_weight(self, update: Update, w: float) -> float:
        """What the update's main tensor is multiplied by as it joins the round's sum (its weight w; FedNova's
        normalised rounds fold 1/τ_i in here, so the tensor is read once)."""
        return w

    def instruction_meta(self, client: int) -> dict:
        """Extra metadata for `client`'s instruction this round (step budgets, …)."""
        return {}

    def replica_state(self) -> dict[str, torch.Tensor]:
        """Besides θ and the buffers, what `apply` keeps between rounds (SSGD's velocity): sent to an
        all-reduce client whose replica is not current."""
        return {}

    def load_replica_state(self, tensors: dict[str, torch.Tensor]) -> None:
        """A replica takes `replica_state()` from an instruction."""

    # -- the round -------------------------------------------------------------------------------
    def start(self) -> list[Send]:
        self.busy = {}  # every client is ready and owes nothing (after a resume too: its clients start afresh)
        return self.broadcast()

    def on_update(self, client: int, update: Update) -> list[Send]:
        ring = update.meta.get("ring") if self.all_reduce else None
        if isinstance(ring, dict) and "mean_of" in ring:
            return self._take_mean(client, ring["mean_of"], update.tensors)
        sends = self._returned(client, update)
        if update.meta.get("version") != self.round or client not in self.clients or client in self.reported:
            return sends  # a late update from an earlier round or a dropped client: not part of this round
        self.warmup.observe(client, update.meta)
        self.reported.add(client)
        self.reported_at[client] = round(self.now(), 6)
        self.participation[client] = self.participation.get(client, 0) + 1
        if ring is not None:  # all-reduce: the clients summed; the lead's mean follows its report
            return self._close_round_if_complete()
        if self.deadline_at == math.inf:  # deadline_median in a round that started without one
            self.deadline_at = self.round_started + in_round_deadline(
                self.config, len(self.clients), len(self.reported), self.now() - self.round_started)
        w = self.weight(update)
        self.weight_sum += w
        # float64 sums (x widened as it is read): the mean, rounded to float32 once, does not depend on the order the
        # updates arrived in (live, that order varies from run to run, and a float32 sum moved the model by a last
        # bit that a ReLU network can amplify over rounds)
        self.update_sum = model_passes.accumulate(self.update_sum, update.tensors[self.update_key],
                                                  self.sum_weight(update, w))
        if "buffers" in update.tensors:
            self.buffer_sum = model_passes.accumulate(self.buffer_sum, update.tensors["buffers"], w)
        return self._close_round_if_complete()

    def _returned(self, client: int, update: Update) -> list[Send]:
        """`client`'s report is in: it is free again (its round time noted). One that comes after its round
        closed is discarded and counted; the client then joins a round under way that takes every online
        client (an unsampled one), else it waits for the next draw."""
        sent = self.busy.pop(client, None)
        if sent is not None:
            self.last_round_s[client] = self.now() - sent
        version = update.meta.get("version")
        if version is None or version >= self.round or self.all_reduce:
            return []
        lost = self.discarded.setdefault(client, {"updates": 0, "steps": 0})
        lost["updates"] += 1
        lost["steps"] += int(update.meta.get("steps", 0))
        self.log_update(-1, round=version, late=client, steps=int(update.meta.get("steps", 0)))
        if sent is None or client not in self.online or client in self.clients:
            return []
        if not self.clients:  # every other online client owes a report too: a round starts with this one
            self.attempt += 1
            return self.broadcast()
        if self.sampled:
            return []  # a sampled round keeps its draw
        self.include(client)
        return [self._instruction(client)]

    def due(self) -> float:
        """The round's deadline, while it is one the runtime must wake the server half for (the round is
        open and closes there, not at its clients' partial reports)."""
        if self.past_deadline or self.budget_told or self.awaiting:
            return math.inf
        return self.deadline_at if self.clients else math.inf

    def on_due(self) -> list[Send]:
        """The deadline: the round closes with what has arrived (with nothing yet, at its first report)."""
        if self.now() < self.deadline_at or not self.clients:
            return []
        self.past_deadline = True
        return self._close_round_if_complete()

    def on_client_lost(self, client: int) -> list[Send]:
        self.current.discard(client)
        self.busy.pop(client, None)
        if self.awaiting is not None and client == self.awaiting["lead"]:  # its replicas are ahead of the server
            self.round, self.awaiting, self.held = self.awaiting["round"], None, False
            return self._restart_ring(client)
        if self.all_reduce and client in self.clients and client not in self.reported:
            return self._restart_ring(client)
        if client in self.online:
            self.online.remove(client)
        if client in self.clients:
            self.clients.remove(client)
        return self._close_round_if_complete()

    def on_client_joined(self, client: int) -> list[Send]:
        """A returning client can be drawn from the next round on (this one's mean is already under
        way); if no round is under way (every participant was lost), a round starts at once."""
        if client in self.online:
            return []
        self.online = sorted({*self.online, client})
        if self.clients:
            return []
        self.attempt += 1
        return self.broadcast()

    def _restart_ring(self, lost: int) -> list[Send]:
        """All-reduce: `lost` left before it reported, so the others' collective cannot finish (or finished
        and was applied to replicas the server has not heard from): the round starts again, θ to all."""
        self.online = [c for c in self.online if c != lost]
        self.log_update(-1, round=self.round, ring_restarted=True, lost=lost)
        self.current = set()
        self.busy = {}  # θ goes to everyone again
        self.attempt += 1
        self._reset()
        if self.online:
            return self.broadcast()
        self.clients = []
        return []

    def _take_mean(self, client: int, of: int, tensors: dict[str, torch.Tensor]) -> list[Send]:
        """All-reduce: the lead's mean of round `of`, applied as its replicas applied it (that round's η).
        One that comes before the round has closed (the lead is quicker than another's report) waits."""
        if of == self.round and self.ring_members[:1] == [client]:
            self.early_mean = tensors
            return []
        if self.awaiting is None or of != self.awaiting["round"] or client != self.awaiting["lead"]:
            return []  # a mean of a round started again
        now_lr, self.round_lr = self.round_lr, self.awaiting["lr"]
        self.apply(tensors["mean"])
        self.round_lr = now_lr
        if "buffers" in tensors:
            self.buffers = tensors["buffers"]
        self.updates += 1
        self.awaiting = None
        sends = [self._instruction(c) for c in self.clients] if self.held else []
        self.held = False
        return sends + self._close_round_if_complete()  # this round's reports may all be in already

    def include(self, client: int) -> None:
        """Make `client` one of the round's clients (ESync adds its State Server record)."""
        self.clients = sorted({*self.clients, client})

    def _close_round_if_complete(self) -> list[Send]:
        if not self.reported:
            if self.clients or not self.online:
                return []
            self.attempt += 1  # every participant left before reporting: draw again among the online
            return self.broadcast()
        if not self._complete() or self.awaiting is not None:
            return []  # (all-reduce: the previous round's mean first)
        if self._logs_rounds():
            dropped = sorted(set(self.clients) - self.reported)
            self.log_update(-1, round=self.round, contributors=sorted(self.reported),
                            reported_s=[self.reported_at[c] for c in sorted(self.reported)],
                            **({"dropped": dropped} if dropped else {}))
        early = self.early_mean
        if self.update_sum is None:  # all-reduce reports: the replicas hold θ_{t+1}; the lead's mean follows
            self.awaiting = {"round": self.round, "lead": self.ring_members[0], "lr": self.round_lr}
        else:
            self.apply_round()
            if self.buffer_sum is not None:
                self.buffers = (self.buffer_sum / self.weight_sum).float()  # BatchNorm statistics: averaged
            self.updates += 1
        self.current = set(self.reported) if self.all_reduce else set()
        self.round += 1
        self.attempt = 0
        self._reset()
        sends = self.broadcast()
        if self.awaiting is not None and early is not None:
            sends += self._take_mean(self.awaiting["lead"], self.awaiting["round"], early)
        return sends

    def _complete(self) -> bool:
        """Every participant has reported; or the round's `need` of them (backup workers, close_at,
        over-selection), or some after its deadline."""
        if self.past_deadline:
            return True
        if self.need is None:
            return self.reported.issuperset(self.clients)
        return len(self.reported) >= min(self.need, len(self.clients))

    def round_mean(self) -> torch.Tensor:
        """The mean `apply` takes: the round's weighted mean of its updates, rounded to float32 once."""
        return model_passes.mean(self.update_sum, *self.mean_scale())

    def mean_scale(self) -> tuple[float, float]:
        """(divisor, multiplier): the round's mean is its float64 sum ÷ divisor × multiplier."""
        return self.weight_sum, 1.0

    def apply_round(self) -> None:
        """The round's close: `apply` its mean (local_sgd.DeltaServer applies it in the same pass)."""
        self.apply(self.round_mean())

    def broadcast(self) -> list[Send]:
        """Start the round: draw its participants among the online clients that owe no report and send them θ."""
        self.round_lr = self.warmup.lr()
        self.clients = []
        config, sampled = self.config, self.sampled
        free = [c for c in self.online if c not in self.busy]
        target = round_size(config, len(free)) if sampled else len(free)
        drawn = draw_size(config, target, len(free))
        chosen = choose(config, self.population, free, self.round, self.attempt, drawn) if sampled else free
        for client in chosen:
            self.include(client)
        self.need = reports_needed(config, len(self.clients), len(self.online), target)
        self.round_started = self.now()
        self.deadline_at = self.round_started + round_deadline(config, self.clients, self.last_round_s)
        self.budget_told = getattr(config, "partial_work", "drop") != "drop" and self.deadline_at < math.inf
        self.past_deadline = False
        if self.all_reduce and (self.clients != self.ring_members or self.attempt):
            self.ring_group += 1  # gloo groups are fixed: new members, or a failed try, need a new one
            self.ring_members = list(self.clients)
        if self._logs_rounds():
            self.log_update(-1, round=self.round, participants=list(self.clients), online=len(self.online))
        if self.awaiting is not None and not self.current.issuperset(self.clients):
            self.held = True  # a participant needs θ, which the lead's mean brings
            return []
        return [self._instruction(c) for c in self.clients]

    def _logs_rounds(self) -> bool:
        """Rounds are logged (who was drawn, who contributed) when they sample clients, some are offline or a
        mitigation may close them early."""
        mitigates = isinstance(self.config, StragglerConfig) and self.config.mitigates
        return self.sampled or mitigates or len(self.online) < len(self.population.data_sizes)

    def _instruction(self, client: int) -> Send:
        meta = self.instruction_meta(client)
        self.busy[client] = self.now()
        if self.budget_told:
            meta["time_budget_s"] = round(max(0.0, self.deadline_at - self.now()), 6)  # stop by the deadline
        if not self.all_reduce:
            return Send(client, model_instruction(self.params, self.buffers, self.round, **meta))
        current = client in self.current
        meta["ring"] = {"group": self.ring_group, "members": list(self.clients), "current": current,
                        "lr": self.round_lr}
        instruction = model_instruction(self.params, self.buffers, self.round, **meta)
        if not current:
            instruction.tensors.update(self.replica_state())
        return Send(client, instruction)

