"""The ServerApp: the live coordinator on a `GridSocket`, writing the run folder `edgesync run` writes.

`serve(grid, context, app_dir)` is the whole ServerApp (server/flower_server.py only calls it). It
reads the run config ([tool.flwr.app.config] in pyproject.toml, overridden by `flwr run -c`):

    scenario        scenario YAML; a relative path is inside the app (the FAB), e.g. scenarios/…
    set             `--set` overrides, separated by ";": "stop.max_updates=2; algorithms.0.lr=0.1"
    out             the run folder; "" = the scenario's output.dir/NAME-TIME, relative to the
                    directory flower-superlink was started in
    esync-budget    "steps" or "time": how ESync's per-node budget is sent (budgets.py)
    federated-eval  true: after each algorithm every node evaluates the final model on its own
                    training split (ClientApp `@app.evaluate()`); rows go to flower_eval.jsonl

and runs every sweep variant and algorithm of the scenario with `FlowerCoordinator`, which is
`edgesync.runtime.coordinator.Coordinator` (join, setup, calibration one node at a time, the
algorithm's server half, evaluation thread, stop rules, per-client rows) with two differences: its
socket is Flower's Grid, and ESync's server half is the budgeted one. Then summary.json and
report.md, as `edgesync coordinator` does. The scenario's `runtime` and `links` do not apply.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid

from edgesync.algorithms.base import AlgorithmConfig, ServerAlgorithm
from edgesync.constants import STATS_TIMEOUT_S
from edgesync.flower import budgets
from edgesync.flower.grid_socket import GridSocket
from edgesync.metrics.recorder import RunRecorder, dumps_line
from edgesync.runtime.coordinator import Coordinator
from edgesync.runtime.evaluator import Snapshot
from edgesync.runtime.progress import Progress
from edgesync.runtime.runs import finish_run, run_folder
from edgesync.scenario import Scenario, load_scenario
from edgesync.sweep import variants
from edgesync.transport.protocol import Message

log = logging.getLogger("edgesync.flower.server")

FEDERATED_EVAL_FILE = "flower_eval.jsonl"
DEFAULT_RUN_CONFIG: dict[str, Any] = {"scenario": "scenarios/flower_fedavg.yaml", "set": "", "out": "",
                                      "esync-budget": "steps", "federated-eval": False}


class FlowerCoordinator(Coordinator):
    heartbeats = False  # SuperNodes' liveness is Flower's business; a ClientApp cannot send heartbeats
    def __init__(self, scenario: Scenario, recorder: RunRecorder, grid: Grid, esync_budget: budgets.Budget = "steps",
                 federated_eval: bool = False, progress: Progress | None = None):
        super().__init__(scenario, recorder, progress=progress, sock=GridSocket(grid))
        self.esync_budget = esync_budget
        self.federated_eval = federated_eval
        self._last: Snapshot | None = None

    def server_half(self, config: AlgorithmConfig, clients: list[int]) -> ServerAlgorithm:
        return budgets.server_half(config, self.initial, clients, self.esync_budget)

    def _snapshot(self, server, now: float) -> Snapshot:
        self._last = super()._snapshot(server, now)  # the last one taken is the final model
        return self._last

    def _finish_clients(self, config: AlgorithmConfig, end: float) -> None:
        if self.federated_eval and self._last is not None:
            self._evaluate_on_nodes(config, end)
        super()._finish_clients(config, end)

    def _evaluate_on_nodes(self, config: AlgorithmConfig, end: float) -> None:
        tensors = {"params": self._last.params}
        if self._last.buffers.numel():
            tensors["buffers"] = self._last.buffers
        for peer in self.peers.values():
            self.sock.send(peer.identity, Message("EVALUATE", {"label": config.key}, tensors))
        got = self._await_all("EVALUATED", STATS_TIMEOUT_S, strict=False)
        with open(self.recorder.run_dir / FEDERATED_EVAL_FILE, "a", encoding="utf-8") as f:
            for rank, meta in sorted(got.items()):
                f.write(dumps_line({"algorithm": config.key, "time_s": round(end, 4), "client": rank,
                                    "local_acc": meta.get("local_acc"), "local_loss": meta.get("local_loss"),
                                    "examples": meta.get("examples")}))


def run_config(context: Context) -> dict[str, Any]:
    """The run config with every key this app reads, defaults filled in."""
    return {**DEFAULT_RUN_CONFIG, **dict(context.run_config)}


def load_run_scenario(cfg: dict[str, Any], app_dir: Path) -> Scenario:
    path = Path(str(cfg["scenario"]))
    if not path.is_absolute():
        path = app_dir / path
    overrides = [s.strip() for s in str(cfg["set"]).split(";") if s.strip()]
    return load_scenario(path, overrides)


def _log_to(run_dir: Path) -> None:
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    root = logging.getLogger("edgesync")
    root.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in (logging.FileHandler(run_dir / "logs" / "coordinator.log"), logging.StreamHandler()):
        handler.setFormatter(fmt)
        root.addHandler(handler)


def serve(grid: Grid, context: Context, app_dir: Path) -> Path:
    """Run the scenario the run config names over `grid`; returns the run folder."""
    cfg = run_config(context)
    scenario = load_run_scenario(cfg, app_dir)
    run_dir = run_folder(scenario, cfg["out"] or None).resolve()
    _log_to(run_dir)
    if scenario.runtime != "live":
        log.warning("runtime: %s does not apply: this is the Flower runtime (wall-clock time)", scenario.runtime)
    log.info("%s on Flower run %s: %d clients, algorithms %s → %s", scenario.name, context.run_id,
             len(scenario.clients), ", ".join(a.key for a in scenario.algorithms), run_dir)
    started = time.perf_counter()
    with RunRecorder(run_dir) as recorder:
        recorder.write_scenario(scenario.resolved())
        for variant in variants(scenario):
            coordinator = FlowerCoordinator(variant.scenario, recorder, grid, cfg["esync-budget"],
                                            bool(cfg["federated-eval"]))
            try:
                coordinator.run()
            finally:
                coordinator.close()
    summary = finish_run(run_dir, scenario)
    for label, s in summary.items():
        log.info("%s: final accuracy %s, %s updates, %.0f samples/s", label, s.get("final_acc"), s.get("updates"),
                 s.get("samples_per_s") or 0)
    log.info("run folder %s written in %.1f s", run_dir, time.perf_counter() - started)
    return run_dir
