"""`check_algorithm`: an algorithm on the tiny task (tiny_task.py), in the simulator and live on loopback,
against the promises its runtimes make about every algorithm:

- replay determinism: two simulator runs of one scenario write the same metrics.jsonl and clients.jsonl
  rows, the wall-clock field aside (docs/simulator.md, "Determinism");
- rows across runtimes: the simulator and the live runtime write rows of the same keys, and one stop rule
  ends both (runtime/bookkeeping/accounting.py: "the three runtimes' run folders have the same keys,
  rounding and rules"); their numbers differ (virtual against wall-clock time), so only this is compared;
- a lost client returns: a client that goes offline during its first step and comes back is taken back
  and trains again (docs/architecture.md, "Failures as data": `on_client_lost`, `on_client_joined`);
- resume from a checkpoint: the server half's state_dict(), loaded into a fresh one, is restored whole
  (docs/architecture.md: "tested to resume bit-identically"), and a live run stopped right after its first
  periodic checkpoint goes on from it, keeping the rows written before and writing none twice
  (runtime/bookkeeping/resume.py).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgesync.algorithms import registry
from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.config import Scenario, ScenarioError, load_scenario
from edgesync.metrics.recorder import METRICS_FILE
from edgesync.runtime.bookkeeping import checkpoint
from edgesync.runtime.bookkeeping.checkpoint import Checkpointer
from edgesync.runtime.bookkeeping.workload import initial_model, scenario_dataset
from edgesync.testing import tiny_task
from edgesync.testing.rules import (LOADS, LOST_CLIENT, REPLAY, RESUME, RUNS, RUNTIMES, ContractViolation,
                                    first_difference, first_difference_in)
from edgesync.testing.tiny_task import BASE_STEP_S, MAX_UPDATES, SEED, rows

RUNTIME_NAMES = ("sim", "live")
COMPARED_FILES = ("metrics.jsonl", "clients.jsonl")  # the files the simulator promises byte for byte
ROW_FILES = ("metrics.jsonl", "clients.jsonl", "updates.jsonl")
CHECKPOINT_EVERY = 2  # updates: the resumed run's first periodic checkpoint comes a third of the way in


def check_algorithm(name_or_spec: str | AlgorithmSpec, *, config: dict[str, Any] | None = None,
                    runtimes: tuple[str, ...] = RUNTIME_NAMES, workdir: str | Path | None = None) -> dict[str, Any]:
    """Check an algorithm against the contract on the tiny task; ContractViolation names the first rule it
    breaks. `name_or_spec`: what a scenario names it by (a `package.module:SPEC` reference, an entry point's or
    a built-in name), or its AlgorithmSpec if a module holds it under a name. `config`: the entry's other keys
    ({"lr": 0.1}). `runtimes`: the rules that need a runtime left out are skipped. `workdir`: where the run
    folders go (kept), else a temporary folder. Returns what was checked, skipped, and the seconds each took."""
    runtimes = (runtimes,) if isinstance(runtimes, str) else tuple(runtimes)
    unknown = sorted(set(runtimes) - set(RUNTIME_NAMES))
    if unknown or not runtimes:
        raise ValueError(f"runtimes {runtimes!r}: expected one or both of {RUNTIME_NAMES}")
    name = reference(name_or_spec)
    entry = {"name": name, **(config or {})}
    started = time.perf_counter()
    sim = _loaded(entry, "sim")
    key, family = sim.algorithms[0].key, registry.get(name).family
    report: dict[str, Any] = {"algorithm": name, "key": key, "family": family, "checked": [LOADS], "skipped": {},
                              "seconds": {}}
    with tiny_task.run_folders(workdir, key) as folder:
        runs = _Runs(entry, key, folder)
        for rule, needs, check in ((REPLAY, ("sim",), _replay), (RUNTIMES, ("sim", "live"), _across_runtimes),
                                   (LOST_CLIENT, ("sim",), _lost_client), (RESUME, ("live",), _resume)):
            if not set(needs) <= set(runtimes):
                report["skipped"][rule] = f"needs the runtimes {' and '.join(needs)}"
                continue
            t0 = time.perf_counter()
            check(runs)
            report["checked"].append(rule)
            report["seconds"][rule] = round(time.perf_counter() - t0, 2)
        if workdir is not None:
            report["workdir"] = str(folder)
    report["seconds"]["total"] = round(time.perf_counter() - started, 2)
    return report


def reference(name_or_spec: str | AlgorithmSpec) -> str:
    """The name a scenario gives the algorithm: a string as it is; a built-in spec's registered name; another
    spec's `module:ATTR`, found among its modules' names (every process resolves it the same way)."""
    if isinstance(name_or_spec, str):
        return name_or_spec
    if not isinstance(name_or_spec, AlgorithmSpec):
        raise TypeError(f"check_algorithm takes a name or an AlgorithmSpec, not a {type(name_or_spec).__name__}")
    spec = name_or_spec
    if spec.name in registry.names() and registry.get(spec.name) is spec:
        return spec.name
    for module_name in dict.fromkeys((spec.client.__module__, spec.server.__module__, spec.config.__module__)):
        for attr, value in vars(sys.modules.get(module_name, object())).items():
            if value is spec:
                return f"{module_name}:{attr}"
    raise ValueError(f"AlgorithmSpec {spec.name!r}: no module holds it under a name (define it at module level, "
                     "or pass its 'package.module:ATTR' reference): every process of a run must find it by name")


def _loaded(entry: dict[str, Any], runtime: str, **sections: Any) -> Scenario:
    try:
        return load_scenario(tiny_task.scenario(runtime, entry, **sections))
    except ScenarioError as exc:
        raise ContractViolation(LOADS, f"the tiny task's scenario refuses {entry}: {exc}") from None


@dataclass
class _Runs:
    """The check's runs of one entry, in their folders; the first simulator run serves every rule that needs
    one."""

    entry: dict[str, Any]
    key: str
    folder: Path
    _reference: Path | None = field(default=None, repr=False)

    def run(self, label: str, runtime: str, what: str, **sections: Any) -> Path:
        """Run the tiny task into folder/label; a failure is a ContractViolation of RUNS naming `what`."""
        sc = _loaded(self.entry, runtime, **sections)
        run_dir = self.folder / label
        try:
            if runtime == "sim":
                tiny_task.run_simulated(sc, run_dir)
            else:
                tiny_task.run_live(sc, run_dir)
        except Exception as exc:  # noqa: BLE001 - the algorithm's failure, whatever it is, is the finding
            raise ContractViolation(RUNS, f"{what} of {self.key!r} failed: {type(exc).__name__}: {exc}") from exc
        return run_dir

    @property
    def reference(self) -> Path:
        """The first simulator run, checked to end at its stop rule."""
        if self._reference is None:
            self._reference = self.run("sim-1", "sim", "the simulator run")
            _ended_by_max_updates(self._reference, self.key, "the simulator run", RUNS)
        return self._reference


def _final_row(run_dir: Path, key: str) -> dict[str, Any] | None:
    entry_rows = [r for r in rows(run_dir, METRICS_FILE) if r["algorithm"] == key]
    return entry_rows[-1] if entry_rows else None


def _ended_by_max_updates(run_dir: Path, key: str, what: str, rule: str) -> dict[str, Any]:
    final = _final_row(run_dir, key)
    if final is None:
        raise ContractViolation(rule, f"{what} of {key!r} wrote no metrics row")
    if final.get("diverged"):
        raise ContractViolation(rule, f"{what} of {key!r} diverged (a non-finite test loss) at {final['updates']} "
                                      "updates on the tiny task")
    if final["updates"] != MAX_UPDATES:
        raise ContractViolation(rule, f"{what} of {key!r} ended at {final['updates']} updates at {final['time_s']} s, "
                                      f"not by its stop rule stop.max_updates {MAX_UPDATES}: the time budget "
                                      f"({tiny_task.LIVE_BUDGET_S:g} s) ran out first")
    return final


def _replay(runs: _Runs) -> None:
    first, second = runs.reference, runs.run("sim-2", "sim", "the second simulator run")
    for file in COMPARED_FILES:
        found = first_difference(rows(first, file), rows(second, file))
        if found is not None:
            index, column, a, b = found
            raise ContractViolation(REPLAY, f"two simulator runs with seed {SEED} differ at {file} row {index}, "
                                            f"column {column!r}: {a!r} against {b!r} (a run's randomness must "
                                            "come from the scenario's seed: the trainer's sampler, torch's seeded "
                                            "generator, never an unseeded global RNG or the clock)")


def _row_keys(run_dir: Path, file: str, key: str) -> set[tuple[str, ...]]:
    return {tuple(row) for row in rows(run_dir, file) if row["algorithm"] == key}


def _across_runtimes(runs: _Runs) -> None:
    sim = runs.reference
    live = runs.run("live", "live", "the live run on loopback")
    _ended_by_max_updates(live, runs.key, "the live run on loopback", RUNTIMES)
    for file in ROW_FILES:
        in_sim, in_live = _row_keys(sim, file, runs.key), _row_keys(live, file, runs.key)
        if in_sim != in_live:
            raise ContractViolation(RUNTIMES, f"{file}: the simulator's rows and the live runtime's have other keys "
                                              "(the runtimes promise rows of the same keys, in the same order): "
                                              f"only in the simulator {sorted(in_sim - in_live)}, only live "
                                              f"{sorted(in_live - in_sim)}")
    sim_clients = [(r["algorithm"], r["client"]) for r in rows(sim, "clients.jsonl")]
    live_clients = [(r["algorithm"], r["client"]) for r in rows(live, "clients.jsonl")]
    if sim_clients != live_clients:
        raise ContractViolation(RUNTIMES, f"clients.jsonl: the simulator wrote rows for {sim_clients}, the live "
                                          f"runtime for {live_clients}")


def _lost_client(runs: _Runs) -> None:
    """Client 0 goes offline during its first step (nothing it computed reaches the server before it leaves)
    and comes back half-way through the reference run: every step it reports, it trained after its return."""
    end_s = _final_row(runs.reference, runs.key)["time_s"]
    leaves_s = BASE_STEP_S / 2
    back_s = round(max(end_s / 2, leaves_s + BASE_STEP_S), 6)
    away = {"availability": {"kind": "trace", "online": [[0, leaves_s], [back_s, 1e9]]}}
    what = f"the simulator run with client 0 offline from {leaves_s:g} s to {back_s:g} s"
    run_dir = runs.run("lost-client", "sim", what, clients=[away, "x1"])
    _ended_by_max_updates(run_dir, runs.key, what, LOST_CLIENT)
    client = next((r for r in rows(run_dir, "clients.jsonl") if r["algorithm"] == runs.key and r["client"] == 0), None)
    if client is None:
        raise ContractViolation(LOST_CLIENT, f"{what}: clients.jsonl has no row of client 0")
    if not (client["lost"] >= 1 and client["rejoined"] >= 1):
        raise ContractViolation(LOST_CLIENT, f"{what}: the run did not see it leave and return (clients.jsonl: lost "
                                             f"{client['lost']}, rejoined {client['rejoined']})")
    if not (client["steps"] > 0 and client["bytes_up"] > 0):
        raise ContractViolation(LOST_CLIENT, f"{what}: it trained no step after its return (clients.jsonl: steps "
                                             f"{client['steps']}, bytes up {client['bytes_up']}): the server half "
                                             "never took it back (on_client_joined) or closed nothing without it "
                                             "(on_client_lost)")


class _StoppedAfterCheckpoint(Exception):
    """Ends a live run right after its first periodic checkpoint, as a crash at that moment would."""


class _StopAfterFirstCheckpoint(Checkpointer):
    """The coordinator's checkpoints, and the server half's state as it was when the first was saved."""

    saved_state: dict[str, Any] | None = None

    def save_progress(self, key: str, server_state: dict, elapsed_s: float, updates: int, **counters: Any) -> None:
        super().save_progress(key, server_state, elapsed_s, updates, **counters)
        if updates > 0:  # not the checkpoint every algorithm gets at its start
            self.saved_state = server_state
            raise _StoppedAfterCheckpoint(updates)


def _resume(runs: _Runs) -> None:
    sc = _loaded(runs.entry, "live", checkpoint={"every_updates": CHECKPOINT_EVERY, "every_s": 0})
    run_dir, resolved = runs.folder / "resume", sc.resolved()
    stopper = _StopAfterFirstCheckpoint(run_dir, resolved, CHECKPOINT_EVERY, fresh=True)
    try:
        tiny_task.run_live(sc, run_dir, stopper)
    except _StoppedAfterCheckpoint:
        pass
    except Exception as exc:  # noqa: BLE001 - the checkpoint itself may be what fails (an unpicklable state)
        raise ContractViolation(RESUME, f"the live run of {runs.key!r} failed before or at its first checkpoint: "
                                        f"{type(exc).__name__}: {exc}") from exc
    else:
        raise ContractViolation(RESUME, f"the live run of {runs.key!r} finished without a checkpoint every "
                                        f"{CHECKPOINT_EVERY} updates before its end")
    saved = checkpoint.load(run_dir).current
    _check_restores(sc, stopper.saved_state, saved, runs.key)
    before = (run_dir / METRICS_FILE).read_text().splitlines()
    try:
        tiny_task.run_live(sc, run_dir, Checkpointer.open(run_dir, resolved, CHECKPOINT_EVERY, resume=True))
    except Exception as exc:  # noqa: BLE001
        raise ContractViolation(RESUME, f"the run of {runs.key!r} resumed from its checkpoint at {saved['updates']} "
                                        f"updates failed: {type(exc).__name__}: {exc}") from exc
    _continues(run_dir, runs.key, before, saved)


def _check_restores(sc: Scenario, state: dict[str, Any], saved: dict[str, Any], key: str) -> None:
    """A fresh server half given the checkpoint's state (read back from checkpoint.pt) holds the state the running
    one saved: its state_dict() is that state."""
    config = sc.algorithms[0]
    server = registry.get(config.name).server(config, initial_model(sc, scenario_dataset(sc.dataset)),
                                              list(range(len(sc.clients))))
    try:
        server.load_state_dict(saved["server"])
        where = first_difference_in(state, server.state_dict())
    except Exception as exc:  # noqa: BLE001
        raise ContractViolation(RESUME, f"the server half of {key!r} cannot load the state its state_dict() saved at "
                                        f"{saved['updates']} updates: {type(exc).__name__}: {exc}") from exc
    if where is not None:
        raise ContractViolation(RESUME, f"the server half of {key!r}, given the state it saved at {saved['updates']} "
                                        f"updates, holds another {where}: what its state_dict saves does not come "
                                        "back whole through checkpoint.pt and its load_state_dict")


def _continues(run_dir: Path, key: str, before: list[str], saved: dict[str, Any]) -> None:
    """The resumed rows go on from the stopped ones, as tests/runtime/test_resume.py checks a killed run's."""
    what = f"the run of {key!r} resumed from its checkpoint at {saved['updates']} updates"
    after = (run_dir / METRICS_FILE).read_text().splitlines()
    if after[:len(before)] != before:
        raise ContractViolation(RESUME, f"{what} changed the {len(before)} metrics rows written before the stop")
    if len(set(after)) != len(after):
        raise ContractViolation(RESUME, f"{what} wrote a metrics row twice")
    resumed = [r for r in rows(run_dir, METRICS_FILE)[len(before):] if r["algorithm"] == key]
    if not resumed:
        raise ContractViolation(RESUME, f"{what} wrote no metrics row")
    # the evaluation at time 0 may still have been under way at the stop: then no row came before
    last_before = max((r["time_s"] for r in rows(run_dir, METRICS_FILE)[:len(before)] if r["algorithm"] == key),
                      default=-1.0)
    times = [r["time_s"] for r in resumed]
    if times[0] <= last_before or times != sorted(set(times)):
        raise ContractViolation(RESUME, f"{what}: its clock does not go on from {last_before} s (resumed rows at "
                                        f"{times})")
    if resumed[0]["updates"] < saved["updates"]:
        raise ContractViolation(RESUME, f"{what} started again from {resumed[0]['updates']} updates, not from the "
                                        f"checkpoint's {saved['updates']}: the server half's load_state_dict does "
                                        "not restore what its state_dict saved")
    _ended_by_max_updates(run_dir, key, what, RESUME)
    if checkpoint.load(run_dir).done != [key]:
        raise ContractViolation(RESUME, f"{what} did not finish: the checkpoint does not list it done")
