"""The ServerApp: the live coordinator on a `GridSocket`, writing the run folder `edgesync run` writes.

`serve(grid, context, app_dir)` is the whole ServerApp (server/flower_server.py only calls it). It
reads the run config ([tool.flwr.app.config] in pyproject.toml, overridden by `flwr run -c`):

    scenario        scenario YAML; a relative path is inside the app (the FAB), e.g. scenarios/…
    set             `--set` overrides, separated by ";": "stop.max_updates=2; algorithms.0.lr=0.1"
    out             the run folder; "" = the scenario's output.dir/NAME-TIME, relative to the
                    directory flower-superlink was started in
    esync-budget    "steps" or "time": how ESync's per-node budget is sent (`esync_budget`'s `budget`)
    resume          true: go on with the run folder `out` from its checkpoint (a killed ServerApp)
    overwrite       true: `out` holds an earlier run: move it aside (to NAME.old-TIME, nothing
                    deleted) and start afresh; without it (or `resume`) such a folder is refused
    federated-eval  true: after each algorithm every node evaluates the final model on its own
                    training split (ClientApp `@app.evaluate()`); rows go to flower_eval.jsonl

and runs every sweep variant and algorithm of the scenario with `FlowerCoordinator` — the live
`Coordinator` (join, setup, calibration one node at a time, the algorithm's server half, evaluation
thread, stop rules, per-client rows) on Flower's Grid, through its public hooks only — into a run
folder set up as every command sets one up (`runtime/runs.py`). An algorithm whose client half asks
the server mid-instruction runs as the stand-in its spec names (ESync → `esync_budget`, with
`esync-budget` as its `budget`). The scenario's `runtime` and `links` do not apply; availability and device
traces do (the nodes read the algorithm's clock from its wall-clock start, grid_socket.py).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid

from edgesync import algorithms
from edgesync.algorithms.machinery.base import AlgorithmConfig
from edgesync.constants import STATS_TIMEOUT_S
from edgesync.flower.grid_socket import GridSocket
from edgesync.flower.stock_node import ModelLayout
from edgesync.metrics.recorder import RunRecorder, dumps_line
from edgesync.models import build_model
from edgesync.runtime.live.coordinator import Coordinator
from edgesync.runtime.bookkeeping.evaluator import Snapshot
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.runtime.runs import claim_run_folder, log_to, run_experiment, run_folder
from edgesync.config import Scenario, load_scenario
from edgesync.transport import protocol
from edgesync.transport.protocol import MessageType as T

log = logging.getLogger("edgesync.flower.server")

FEDERATED_EVAL_FILE = "flower_eval.jsonl"
ERROR_FILE = "error.txt"  # why a run failed (the ServerApp raised: `flwr ls` shows the run failed)
DEFAULT_RUN_CONFIG: dict[str, Any] = {"scenario": "scenarios/flower_fedavg.yaml", "set": "", "out": "",
                                      "esync-budget": "steps", "federated-eval": False, "resume": False,
                                      "overwrite": False}


class FlowerCoordinator(Coordinator):
    heartbeats = False  # SuperNodes' liveness is Flower's business; a ClientApp cannot send heartbeats

    def __init__(self, scenario: Scenario, recorder: RunRecorder, grid: Grid, esync_budget: str = "steps",
                 federated_eval: bool = False, progress: Progress | None = None):
        """`esync_budget`: the `budget` of the stand-in for ESync (`flower_scenario`)."""
        scenario = flower_scenario(scenario, esync_budget)
        sock = GridSocket(grid, [a.name for a in scenario.algorithms])
        super().__init__(scenario, recorder, progress=progress, sock=sock)
        self.federated_eval = federated_eval
        self.returned: set[tuple[str, int, float]] = set()  # (algorithm, rank, offline since): handed back already
        sock.returning = self._returning

    def _returning(self) -> list[bytes]:
        """The nodes offline by their availability whose online time has come (a SuperNode cannot ask to come
        back, as an offline `edgesync client` does): the Grid socket says their HELLO again, which readmits
        them as a returning client (set up afresh, then back)."""
        if self.server is None or not self.availability.active:
            return []
        now, back = self._now(), []
        for rank, since in self.availability.offline.items():
            if (self.account.key, rank, since) not in self.returned and self.availability.schedules[rank].online(now):
                self.returned.add((self.account.key, rank, since))
                back.append(self.peers[rank].identity)
        return back

    def prepare(self) -> None:
        """As the live coordinator's, and the global model's layout for stock Flower ClientApps (stock_node.py)."""
        super().prepare()
        data = self.workload.data
        self.sock.layout = ModelLayout(build_model(self.scenario.model.id, data.num_classes, data.input_shape[0]))

    def after_algorithm(self, config: AlgorithmConfig, end_s: float, final: Snapshot) -> None:
        """With `federated-eval`, every node evaluates the final model on its own training split."""
        if not self.federated_eval:
            return
        for rank in self.members.alive():
            self.members.send(rank, protocol.evaluate(config.key, final.params, final.buffers))
        got = self.phases.collect(T.EVALUATED, STATS_TIMEOUT_S, strict=False)
        with open(self.recorder.run_dir / FEDERATED_EVAL_FILE, "a", encoding="utf-8") as f:
            for rank, meta in sorted(got.items()):
                f.write(dumps_line({"algorithm": config.key, "time_s": round(end_s, 4), "client": rank,
                                    "local_acc": meta.get("local_acc"), "local_loss": meta.get("local_loss"),
                                    "examples": meta.get("examples")}))


def flower_scenario(scenario: Scenario, esync_budget: str = "steps") -> Scenario:
    """`scenario` as Flower can run it: each algorithm whose client would query mid-instruction replaced
    by its declared stand-in (`AlgorithmSpec.without_queries`); ValueError names one that has none."""
    entries = [algorithms.without_queries(a, budget=esync_budget) for a in scenario.algorithms]
    return scenario.model_copy(update={"algorithms": entries})


def run_config(context: Context) -> dict[str, Any]:
    """The run config with every key this app reads, defaults filled in."""
    return {**DEFAULT_RUN_CONFIG, **dict(context.run_config)}


def load_run_scenario(cfg: dict[str, Any], app_dir: Path) -> Scenario:
    path = Path(str(cfg["scenario"]))
    if not path.is_absolute():
        path = app_dir / path
    overrides = [s.strip() for s in str(cfg["set"]).split(";") if s.strip()]
    return load_scenario(path, overrides)


def serve(grid: Grid, context: Context, app_dir: Path) -> Path:
    """Run the scenario the run config names over `grid`; returns the run folder."""
    cfg = run_config(context)
    scenario = flower_scenario(load_run_scenario(cfg, app_dir), str(cfg["esync-budget"]))
    from edgesync.runtime.tuning import tunes
    if tunes(scenario):
        raise ValueError(f"{cfg['scenario']}: tune: runs with `edgesync run`, not on Flower; put the values a "
                         "tuning.json chose into `algorithms`")
    if scenario.shard_count > 1:
        raise ValueError(f"{cfg['scenario']}: sharding {scenario.sharding}: the follower shards talk to EdgeSync's own "
                         "clients (`edgesync run`, `edgesync coordinator --shard`); over Flower leave sharding out")
    if any(getattr(a, "aggregation", "ps") == "allreduce" for a in scenario.algorithms):
        raise ValueError(f"{cfg['scenario']}: aggregation: allreduce sums on EdgeSync's own clients (`edgesync run`); "
                         "over Flower the ServerApp aggregates: use aggregation: ps")
    run_dir = run_folder(scenario, cfg["out"] or None).resolve()
    resume, overwrite = bool(cfg["resume"]), bool(cfg["overwrite"])
    moved = claim_run_folder(run_dir, resume, overwrite, options=("resume=true", "overwrite=true"))
    log_to(run_dir)
    if moved:
        log.warning("overwrite=true: the earlier run in %s was moved to %s", run_dir, moved)
    if scenario.runtime != "live":
        log.warning("runtime: %s does not apply: this is the Flower runtime (wall-clock time)", scenario.runtime)
    log.info("%s on Flower run %s: %d clients, algorithms %s → %s", scenario.name, context.run_id,
             len(scenario.clients), ", ".join(a.key for a in scenario.algorithms), run_dir)
    started = time.perf_counter()

    def run_variant(variant, recorder, checkpoints, display, resolved) -> None:
        coordinator = FlowerCoordinator(variant.scenario, recorder, grid, federated_eval=bool(cfg["federated-eval"]))
        coordinator.checkpoints = checkpoints
        try:
            coordinator.run()
        finally:
            coordinator.close()

    try:
        summary = run_experiment(scenario, run_dir, run_variant, progress=False, resume=resume, claimed=True)
    except Exception as exc:  # failures are failures: recorded in the run folder, and the ServerApp fails
        reason = f"{type(exc).__name__}: {exc}"
        log.error("run failed after %.1f s: %s", time.perf_counter() - started, reason)
        (run_dir / ERROR_FILE).write_text(reason + "\n", encoding="utf-8")
        raise
    for label, s in summary.items():
        log.info("%s: final accuracy %s, %s updates, %.0f samples/s", label, s.get("final_acc"), s.get("updates"),
                 s.get("samples_per_s") or 0)
    log.info("run folder %s written in %.1f s", run_dir, time.perf_counter() - started)
    return run_dir
