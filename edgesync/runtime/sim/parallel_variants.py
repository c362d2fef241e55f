"""A simulated sweep's variants (and seeds) as independent Ray tasks: `edgesync run --parallel N`.

Each variant runs serially in a Ray task of its own, into its own labelled part of the run folder
(`RUN_DIR/parts/TAG/`); when all have finished, their rows are appended to the run's files in the
variants' order, so the folder reads as a serial run's (wall-clock stamps apart). What a variant measures
on the machine it runs on would differ between machines and between runs made side by side, so this
process measures it first, once (the step time per batch size and the coordinator's costs, cached per
machine as serially), and every task is given the figures: a part computes the same thing wherever it
runs.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from edgesync.metrics.recorder import (CLIENTS_FILE, COORDINATOR_FILE, METRICS_FILE, UPDATES_FILE, RunRecorder,
                                       read_jsonl)
from edgesync.runtime.bookkeeping.membership import RunAborted
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.config import Scenario
from edgesync.config.sim import ServerCostSpec
from edgesync.config import Variant

PARTS_DIR = "parts"


def measured_for(scenario: Scenario) -> dict[str, dict]:
    """What a simulation of `scenario` measures on this machine (step times, coordinator costs), measured
    or read from the cache here, as the `sim` keys a replay reads."""
    from edgesync.runtime.sim.simulator import Simulator
    with tempfile.TemporaryDirectory() as tmp:
        recorder = RunRecorder(Path(tmp))
        sim = Simulator(scenario, recorder)
        sim.prepare()
        recorder.close()
    return sim.measured()


def _pinned(scenario: Scenario, measured: dict[str, dict]) -> Scenario:
    """`scenario` with this machine's figures given, to run serially in a task."""
    sim = scenario.sim.model_copy(update={
        "measured_step_s": {**scenario.sim.measured_step_s, **measured["measured_step_s"]},
        "calibration": {**scenario.sim.calibration, **measured["calibration"]},
        "measured_server_s": {**scenario.sim.measured_server_s,
                              **{k: ServerCostSpec(**v) for k, v in measured["measured_server_s"].items()}},
        "backend": "serial"})
    return scenario.model_copy(update={"sim": sim})


def _run_part(scenario: Scenario, folder: str) -> None:
    """One variant, serially, into `folder` (a Ray task)."""
    from edgesync.runtime.sim.simulator import run_sim
    recorder = RunRecorder(Path(folder))
    try:
        run_sim(scenario, recorder, Progress(enabled=False))
    finally:
        recorder.close()


def run_parallel(runs: list[Variant], recorder: RunRecorder, display: Progress, resolved: dict, parallel: int) -> None:
    """Run `runs` as up to `parallel` Ray tasks at a time; their rows end up in `recorder`'s files in order."""
    try:
        import ray
    except ImportError:
        raise RunAborted("--parallel runs variants as Ray tasks: pip install 'ray==2.60.0'") from None
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)  # RAY_ADDRESS, a local cluster, or a new one
    parts = recorder.run_dir / PARTS_DIR
    task = ray.remote(num_cpus=1)(_run_part)
    pending, waiting, folders = {}, [], []
    for i, variant in enumerate(runs):
        display.status(f"sweep: measuring for {variant.tag} ({i + 1}/{len(runs)})")
        measured = measured_for(variant.scenario)
        for key, value in measured.items():
            resolved["sim"][key].update(value)
        folder = parts / f"{i:03d}-{variant.tag or 'run'}"
        folders.append(folder)
        waiting.append((variant, _pinned(variant.scenario, measured), folder))
    done = 0
    while waiting or pending:
        while waiting and len(pending) < parallel:
            variant, scenario, folder = waiting.pop(0)
            pending[task.remote(scenario, str(folder))] = variant
        finished, _ = ray.wait(list(pending), num_returns=1)
        variant = pending.pop(finished[0])
        ray.get(finished[0])  # a failed part raises here, naming its task
        done += 1
        display.status(f"sweep: {variant.tag} finished ({done}/{len(runs)}, {parallel} at a time)")
    for folder in folders:
        _append(recorder, folder)
    shutil.rmtree(parts, ignore_errors=True)


def _append(recorder: RunRecorder, folder: Path) -> None:
    """A part's rows into the run's files (TensorBoard too, when it is on), as if written there."""
    recorder.log_updates(read_jsonl(folder / UPDATES_FILE) if (folder / UPDATES_FILE).exists() else [])
    for row in read_jsonl(folder / METRICS_FILE):
        recorder.log_eval(row)
    for row in read_jsonl(folder / CLIENTS_FILE):
        recorder.log_client(row)
    for row in read_jsonl(folder / COORDINATOR_FILE):
        recorder.log_coordinator(row)
