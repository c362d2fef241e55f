"""Run accounting, written once for every runtime: stop rules, evaluation rows, update-log rows, client rows
and clocks.

The live coordinator, the simulator and the Flower ServerApp differ in how time passes and how bytes
move; what they record does not. Each keeps an `AlgorithmAccount` per algorithm and writes every
metrics.jsonl, updates.jsonl and clients.jsonl row through it, so the three runtimes' run folders
have the same keys, rounding and rules (a test runs one scenario live and in the simulator and
compares them). Each client keeps a `ClientClock` (its wait and wall time) and reports
`client_totals(...)` (what STATS carries).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from edgesync import algorithms
from edgesync.algorithms.machinery.base import AlgorithmConfig
from edgesync.metrics import fidelity
from edgesync.metrics.recorder import RunRecorder
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.config.stop_eval import StopSpec
from edgesync.trainer import StepSample, StepTimeline, TrainerStats

TIME_DIGITS = 6  # time stamps in every row: µs, finer than any runtime's clock is meaningful
# stop.collapse_evals: a model has learned once its best accuracy reaches LEARNED × chance, and is back at
# chance at AT_CHANCE × chance or below (a collapsed model predicts one class: chance on a balanced test set,
# a little more on a sampled one).
LEARNED, AT_CHANCE = 2.0, 1.2

log = logging.getLogger(__name__)


@dataclass
class AlgorithmAccount:
    """One algorithm's counters in a run, and the rows it writes."""

    config: AlgorithmConfig
    stop: StopSpec
    recorder: RunRecorder
    progress: Progress = field(default_factory=lambda: Progress(enabled=False))
    samples: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    reached_target: bool = False
    diverged: bool = False
    best_acc: float = 0.0
    chance_acc: float | None = None  # 1 / classes: the accuracy of a model that learned nothing, or forgot it
    evals_at_chance: int = 0  # evaluations in a row back at chance after the model had learned
    last_row: dict[str, Any] | None = None
    final_row: dict[str, Any] | None = None  # the entry's final evaluation, once written: the entry is over
    # each client's accuracy under the final model (client_eval.py: `client_acc`, `client_eval`), for clients.jsonl
    client_acc: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return self.config.key

    # -- stop rules --------------------------------------------------------------------------------
    def should_stop(self, now: float, updates: int) -> bool:
        """The time budget, max_updates, divergence, the target when stop_at_target is set; and an entry whose
        final row is written is over."""
        stop = self.stop
        if self.final_row is not None:  # resumed after its final row was written: nothing is left to train
            return True
        if now >= stop.time_budget_s:
            return True
        if stop.max_updates is not None and updates >= stop.max_updates:
            return True
        return self.diverged or bool(stop.stop_at_target and self.reached_target)

    # -- metrics.jsonl -----------------------------------------------------------------------------
    def counters(self, time_s: float, updates: int) -> dict[str, Any]:
        """What an evaluation row holds besides the accuracy: the counters when the model existed."""
        return {"algorithm": self.key, "time_s": round(time_s, TIME_DIGITS), "updates": updates,
                "samples": self.samples, "bytes_up": self.bytes_up, "bytes_down": self.bytes_down,
                "wall_clock": time.time()}

    def log_eval(self, counters: dict[str, Any], acc: float, loss: float, diverged: bool = False) -> dict[str, Any]:
        """Write one evaluation row; it marks the target reached, and a non-finite loss (or `diverged`:
        the runtime saw the training diverge otherwise) as divergence. None comes after the final row."""
        if self.final_row is not None:
            raise RuntimeError(f"{self.key}: an evaluation at {counters['time_s']} s after the final one "
                               f"(at {self.final_row['time_s']} s): a runtime evaluates one model twice")
        row = {**counters, "test_acc": round(acc, 6), "test_loss": round(loss, 6)}
        self.best_acc = max(self.best_acc, row["test_acc"])
        if self.stop.target_acc is not None and row["test_acc"] >= self.stop.target_acc:
            self.reached_target = True
        if self._collapsed(row["test_acc"]):
            diverged = True
            row["collapsed"] = True
            log.warning("%s: back at chance (accuracy %.3f, best %.3f) for %d evaluations in a row: diverged",
                        self.key, row["test_acc"], self.best_acc, self.evals_at_chance)
        if diverged or not math.isfinite(row["test_loss"]):  # nothing more to learn from this model
            self.diverged = row["diverged"] = True
        self.last_row = row
        self.recorder.log_eval(row)
        self.progress.update(row)
        return row

    def _collapsed(self, acc: float) -> bool:
        """Whether this evaluation makes `stop.collapse_evals` in a row at chance, after the model had learned:
        a model that forgot everything with a finite loss would otherwise train on to the budget."""
        if self.chance_acc is None or self.stop.collapse_evals is None:
            return False
        learned = self.best_acc >= LEARNED * self.chance_acc
        self.evals_at_chance = self.evals_at_chance + 1 if learned and acc <= AT_CHANCE * self.chance_acc else 0
        return self.evals_at_chance >= self.stop.collapse_evals

    def log_evals(self, results: list[tuple[dict[str, Any], float, float]]) -> None:
        """Rows of evaluations made off the runtime's loop (counters, accuracy, loss), in the order made."""
        for counters, acc, loss in results:
            self.log_eval(counters, acc, loss)

    def final_evaluated(self, time_s: float, updates: int) -> bool:
        """Whether the final model (`updates` at `time_s`, the end) has its row: the final row is written, or
        the last row evaluated this very model at this very time (the simulator's evaluation on its grid at
        the end), which is then the final row. One model state at one instant is one row."""
        last = self.last_row
        if (self.final_row is None and last is not None and last["updates"] == updates
                and last["time_s"] == round(time_s, TIME_DIGITS)):
            self.final_row = last
        return self.final_row is not None

    def log_final(self, counters: dict[str, Any], acc: float, loss: float, diverged: bool = False) -> dict[str, Any]:
        """The entry's final evaluation: its last row, written once (a second is a runtime's bug: it raises).
        Per-client accuracies among the counters (the live evaluator's) go to clients.jsonl, not to the row."""
        if "client_acc" in counters:
            counters = dict(counters)
            self.client_acc = {"client_acc": counters.pop("client_acc"), "client_eval": counters.pop("client_eval")}
        row = self.log_eval(counters, acc, loss, diverged)
        self.final_row = row
        return row

    # -- updates.jsonl -----------------------------------------------------------------------------
    def log_updates(self, rows: list[dict[str, Any]], time_s: float) -> None:
        """The server half's update log (`drain_update_log()`), stamped with this algorithm and the time."""
        if rows:
            stamp = round(time_s, TIME_DIGITS)
            self.recorder.log_updates([{"algorithm": self.key, "time_s": stamp, **r} for r in rows])

    def log_presence(self, rank: int, online: bool, time_s: float) -> None:
        """A device went offline or came back (its availability): a row of updates.jsonl, for the report's
        availability plot and for checking that nobody trained while offline."""
        self.log_updates([{"client": rank, "presence": "online" if online else "offline"}], time_s)

    # -- clients.jsonl -----------------------------------------------------------------------------
    def client_row(self, rank: int, profile: str, totals: dict[str, Any], bytes_up: int, bytes_down: int,
                   host: str | None = None, device: str | None = None, gpu: str | None = None, refused: int = 0,
                   lost: int = 0, rejoined: int = 0, error: str | None = None,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """One client's row: its totals (`client_totals`, as STATS carries them) and what the runtime counted."""
        row = {
            "algorithm": self.key, "client": rank, "profile": profile, "host": host,
            "device": totals.get("device", device), "compute_s": totals.get("compute_s"),
            "wait_s": totals.get("wait_s"), "wall_s": totals.get("wall_s"), "steps": totals.get("steps"),
            "samples": totals.get("samples"), "bytes_up": bytes_up, "bytes_down": bytes_down,
            "reference_step_s": totals.get("reference_s"), "base_step_s": totals.get("base_s"),
            "median_step_s": totals.get("median_step_s"), "median_factor": totals.get("median_factor"),
            "target_factor": None, "achieved_factor": None, "fidelity_error": None,
            "isolation": totals.get("isolation"), "refused": refused, "lost": lost, "rejoined": rejoined,
            # a traced device's (algorithm time, step seconds), sampled: how its steps followed the trace
            **({"step_timeline": totals["step_timeline"]} if totals.get("step_timeline") else {}),
            # STATS name the device the client trained on (the scenario's unless its --device overrode it)
            # and its GPU; HELLO, sent before SETUP, knows only the override
            "gpu": totals.get("gpu") if "device" in totals else gpu,
        }
        if extra:  # what only some runs have: time offline (availability), rounds taken part in
            row.update({k: v for k, v in extra.items() if v is not None})
        if error is not None:
            row["error"] = error
        return row

    def write_clients(self, rows: list[dict[str, Any]], tolerance: float = 0.05) -> None:
        """Every client's row for this algorithm, with its factors relative to the fastest clients
        (metrics/fidelity.py; a warning for each one off by more than `tolerance`)."""
        fidelity.annotate(rows, synchronous=algorithms.get(self.config.name).family == "synchronous")
        fidelity.warn_if_off(self.key, rows, tolerance)
        accs = (self.client_acc or {}).get("client_acc") or []
        for row in rows:
            if isinstance(row.get("client"), int) and 0 <= row["client"] < len(accs):  # its accuracy at the end
                row["final_acc"], row["final_acc_on"] = accs[row["client"]], self.client_acc["client_eval"]
            self.recorder.log_client(row)


@dataclass
class ClientClock:
    """A client's time outside its steps: `wait_s` runs from sending an update to the next instruction's
    start; wall time from the first instruction to the end. Compute time is the trainer's (TrainerStats)."""

    first_train: float | None = None
    last_sent: float | None = None  # None while an instruction runs: the time since is compute, not wait
    wait_s: float = 0.0

    def instruction_started(self, now: float) -> None:
        if self.first_train is None:
            self.first_train = now
        elif self.last_sent is not None:
            self.wait_s += now - self.last_sent
        self.last_sent = None

    def update_sent(self, now: float) -> None:
        self.last_sent = now

    def wait_until(self, end: float) -> float:
        """Wait time at `end`, counting a wait for an answer that never came (the algorithm ended)."""
        return self.wait_s + (end - self.last_sent if self.last_sent is not None and self.last_sent < end else 0.0)

    def wall_until(self, end: float) -> float:
        return end - self.first_train if self.first_train is not None else 0.0

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)


def client_totals(stats: TrainerStats, clock: ClientClock, end: float, device: str, reference_s: float | None,
                  factors: StepSample | None = None, wall_end: float | None = None, gpu: str | None = None,
                  base_s: float | None = None, isolation: str | None = None,
                  timeline: StepTimeline | None = None) -> dict[str, Any]:
    """What a client reports for an algorithm (STATS): steps, samples, compute, wait and wall seconds; its
    undisturbed step `reference_s`, the ×1 step `base_s` its throttle used, the median of its steps' times
    and of the factors its profile drew (`factors`, None: no throttle, ×1) for the coordinator's fidelity
    figures, and how its process was isolated. `wall_end` is when its last step ended if after `end` (a
    step running at the end is finished); `gpu` names the GPU it trained on, if any."""
    median_step = stats.step_times.median()
    median_factor = factors.median() if factors is not None else None
    return {"steps": stats.steps, "samples": stats.samples, "compute_s": round(stats.compute_s, 6),
            "wait_s": round(clock.wait_until(end), 6),
            # never below the compute it holds: the steps' own readings of the clock can add up to a few µs
            # past the span they lie in
            "wall_s": round(max(clock.wall_until(max(end, wall_end or end)), stats.compute_s), 6), "device": device,
            "gpu": gpu, "reference_s": reference_s, "base_s": base_s,
            "median_step_s": None if median_step is None else round(median_step, 6),
            "median_factor": 1.0 if median_factor is None else round(median_factor, 6), "isolation": isolation,
            **({"step_timeline": timeline.points} if timeline is not None else {})}
