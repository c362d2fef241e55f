"""ESync (Li, Zhou, Yu): synchronous rounds in which fast clients keep training while they wait.

Each round every client starts from θ_t and trains its replica, asking the State Server before
every local iteration whether to stop (esync.txt Alg. 1); then θ_{t+1} = θ_t + ε·mean_i(Δ_i)
(Eq. 7–8, the aggregation local SGD uses: `local_sgd.DeltaServer`).

The State Server (Alg. 2) lives in the server half. Per client it keeps (k local iterations this
round, c capability = wall time of its last iteration, t_e when that iteration finished, ready,
round). QUERY-STATE answers NOT READY if k = 0 (everyone does ≥ 1 step) or the slowest client (the
largest c) has not pulled this round's model yet; otherwise rest = c_slowest − (now − t_e,slowest)
and the caller is READY if it is the slowest, the slowest is ready, or c_caller + ε > rest: its next
iteration would not end before the slowest is ready.

Choices fixed here (docs/algorithms.md, ESync): t_e is the State Server's own receive time of the query that
follows an iteration (clients' clocks are not synchronized across lab machines); ε (`slack_s`) is
in seconds, default 0 (the authors' code uses 0.5 s); each client's first instruction runs one
step before its first query, Alg. 1's RUN-BATCH-DATA-TEST, and nobody is ready while any client's
capability is unknown. Non-blocking mode (§4.2, `mode: nonblocking`): the client sends its query and
keeps training; only READY is answered; c includes the query's round-trip time (measured on the READY
that ended its last round). A READY that arrives during an iteration aborts it at once, as §4.2
says: the step's emulated part (the throttle's sleep live, the virtual step in the simulator) is
cut short and its gradient dropped; computation already done live cannot be preempted, so an
undisturbed client finishes the step it is computing, and that step counts. Per round each
client's n_i, aborted steps and blocking time (from its update's arrival to the round's close) are
logged to updates.jsonl.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from edgesync.algorithms.machinery.base import AlgorithmSpec, ClientAlgorithm, Instruction, Update
from edgesync.algorithms.local_sgd import DeltaConfig, DeltaServer, LocalRound
from edgesync.trainer import StepAborted


class ESyncKeys(DeltaConfig):
    """The keys of ESync and of its per-round stand-in (`esync_budget`)."""

    slack_s: float = Field(0.0, ge=0, description="ε in QUERY-STATE, seconds (authors' code: 0.5)")
    max_local_steps: int = Field(10_000, ge=1, description="safety cap on n_i in one round")

    @model_validator(mode="after")
    def _balances_itself(self) -> "ESyncKeys":
        if self.mitigates:
            raise ValueError("ESync balances its rounds itself (the State Server tells each client when to "
                             "stop): backup_workers, close_at, over_select and deadlines are for ssgd, local_sgd "
                             "and its family, and fednova")
        return self


class ESyncConfig(ESyncKeys):
    name: Literal["esync"] = "esync"
    mode: Literal["blocking", "nonblocking"] = Field("blocking", description="State Server queries: "
                                                     "blocking round trips, or §4.2 delayed ACK")


@dataclass
class Record:
    """The State Server's record of one client (Alg. 2, line 2)."""

    k: int = 0
    c: float | None = None  # unknown until the client's first iteration
    t_e: float = 0.0
    ready: bool = False
    round: int = -1


def query_state(records: dict[int, Record], caller: int, current_round: int, now: float, slack_s: float) -> bool:
    """Alg. 2's decision for `caller`, whose record is already updated. Marks it ready if so.

    A client whose capability is still unknown might be the slowest, so nobody is ready before every
    capability is known (Alg. 1 measures them all before training starts).
    """
    me = records[caller]
    if me.k == 0 or any(r.c is None for r in records.values()):
        return False
    slowest = max(records, key=lambda r: (records[r].c, -r))  # ties: the lowest rank
    slow = records[slowest]
    if slow.round < current_round:
        return False
    rest = slow.c - (now - slow.t_e)
    if caller == slowest or slow.ready or me.c + slack_s > rest:
        me.ready = True
    return me.ready


class ESyncServer(DeltaServer):
    config: ESyncConfig

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.records = {c: Record() for c in clients}
        self.arrived: dict[int, float] = {}
        self.steps_this_round: dict[int, int] = {}

    def on_query(self, client: int, meta: dict) -> dict | None:
        if client not in self.records or int(meta.get("round", -1)) != self.round:
            return {"ready": True, "round": meta.get("round"), "stale": True}  # finish that round now
        rec = self.records[client]
        if rec.round != self.round:  # its first query this round: it has pulled the model
            rec.round, rec.ready = self.round, False
        rec.k = int(meta["k"])
        if meta.get("c") is not None:
            rec.c = float(meta["c"])
        rec.t_e = self.now()
        ready = query_state({c: self.records[c] for c in self.clients}, client, self.round, rec.t_e,
                            self.config.slack_s)
        if ready or self.config.mode == "blocking":
            return {"ready": ready, "round": self.round, "k": rec.k}
        return None  # non-blocking: NOT READY is implicit

    def on_update(self, client: int, update: Update):
        if update.meta.get("version") == self.round and client in self.clients:
            self.arrived[client] = self.now()
            self.steps_this_round[client] = (int(update.meta.get("steps", 0)), update.meta.get("aborted_steps"))
        round_before, closed_at = self.round, self.now()
        sends = super().on_update(client, update)
        if self.round != round_before:  # the round closed: how long each client waited for it
            for c, t in sorted(self.arrived.items()):
                n_i, aborted = self.steps_this_round.get(c, (None, None))
                extra = {} if aborted is None else {"aborted": aborted}
                self.log_update(c, round=round_before, n_i=n_i, blocking_s=round(closed_at - t, 6), **extra)
            self.arrived, self.steps_this_round = {}, {}
        return sends

    def on_client_lost(self, client: int):
        self.records.pop(client, None)  # the State Server no longer waits for it, slowest or not
        return super().on_client_lost(client)

    def include(self, client: int) -> None:
        self.records.setdefault(client, Record())  # a participant again keeps its record; a returning one starts afresh
        super().include(client)


class ESyncClient(ClientAlgorithm):
    config: ESyncConfig
    uses_queries = True

    def __init__(self, config, trainer):
        super().__init__(config, trainer)
        self.capability: float | None = None  # c: the last iteration's time (+ query RTT, non-blocking)
        self.rtt = 0.0

    def state_dict(self) -> dict:
        return {"capability": self.capability, "rtt": self.rtt}

    def load_state_dict(self, state: dict) -> None:
        self.capability, self.rtt = state.get("capability"), state.get("rtt", 0.0)

    def on_instruction(self, instruction: Instruction) -> Update:
        ctx, cfg = self.ctx, self.config
        round_ = instruction.meta.get("version", 0)
        session = LocalRound(self, instruction)
        if self.capability is None:  # RUN-BATCH-DATA-TEST: the first step tells the capability
            self._step(session)
        if cfg.mode == "blocking":
            while session.steps < cfg.max_local_steps:
                if ctx.query({"round": round_, "k": session.steps, "c": self.capability})["ready"]:
                    break
                self._step(session)
            return session.finish()
        self._sent_at: dict[int, float] = {}
        self._round = round_
        aborted = 0
        while session.steps < cfg.max_local_steps:
            self._sent_at[session.steps] = ctx.now()
            ctx.send_query({"round": round_, "k": session.steps, "c": self.capability})
            if self._ready(ctx.replies(), ctx.now()):
                break
            try:
                self._step(session, interrupt=self._interrupt)
            except StepAborted:
                aborted += 1
                break
        update = session.finish()
        update.meta["aborted_steps"] = aborted
        return update

    def _ready(self, replies: list[dict], now: float) -> bool:
        """Whether a READY for this round, received at `now`, is among `replies` (it tells the RTT)."""
        ready = [r for r in replies if r.get("ready") and r.get("round") == self._round]
        if ready:
            self.rtt = now - self._sent_at.get(ready[0].get("k", -1), now)
        return bool(ready)

    def _interrupt(self, seconds: float) -> float | None:
        """The step's emulated wait, cut short by a READY (§4.2's delayed ACK aborts the iteration)."""
        start, waited = self.ctx.now(), 0.0
        while waited < seconds:
            replies, took = self.ctx.wait_replies(seconds - waited)
            waited += took
            if self._ready(replies, start + waited):
                return waited
        return None

    def _step(self, session: LocalRound, interrupt=None) -> None:
        t_s = self.ctx.now()
        session.step(interrupt)
        self.capability = self.ctx.now() - t_s + (self.rtt if self.config.mode == "nonblocking" else 0.0)


SPEC = AlgorithmSpec(
    name="esync", config=ESyncConfig, server=ESyncServer, client=ESyncClient,
    family="synchronous", paper="ESync (Li, Zhou, Yu): esync.txt Alg. 1–2, §4.2", without_queries="esync_budget",
)
