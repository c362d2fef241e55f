"""One experiment's run folder, start to finish, for every command that runs one: `edgesync run` (live or
simulator), `edgesync coordinator` (clients elsewhere) and the Flower ServerApp (`flower-up`, `flwr run`).

`run_experiment` is the one life cycle they share: the folder (named from the scenario unless given,
never one that already holds a run unless it resumes it or was told to `overwrite` it: see
`claim_run_folder`), the coordinator's log in `logs/`, the resolved scenario, the checkpoint (a fresh one, or the one a
killed run left with `resume=True`), each sweep variant in turn (skipping those finished before a
resume), then summary.json and report.md made from the folder alone. A command only says how one
variant runs (`RunVariant`).
"""
from __future__ import annotations

import gc
import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Callable

from edgesync.metrics.event_log import EventLog
from edgesync.metrics.recorder import COORDINATOR_FILE, RunRecorder, read_jsonl
from edgesync.runtime.bookkeeping.partition_record import write_partitions
from edgesync.metrics.seeds import with_seed_aggregates
from edgesync.metrics.summary import summarize
from edgesync.runtime.bookkeeping.checkpoint import CheckpointError, Checkpointer
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.config import Scenario
from edgesync.config import Variant, variants
from edgesync.config.outside_code import outside_code
from edgesync.transport.allocator import release_free_memory

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# How one variant runs: (variant, recorder, checkpoints or None, progress, resolved scenario dict to update).
RunVariant = Callable[[Variant, RunRecorder, "Checkpointer | None", Progress, dict], None]


log = logging.getLogger("edgesync.runs")

class RunFolderExists(RuntimeError):
    """A run folder that holds a run, without `resume` or `overwrite`: nothing was changed in it."""


def render_report(run_dir: Path) -> None:
    """The run folder's report.md and plots (metrics/report.py), imported when needed: matplotlib is ~0.4 s
    of every coordinator's start."""
    from edgesync.metrics.report import render_report as render
    render(run_dir)


def run_folder(scenario: Scenario, out: str | Path | None = None) -> Path:
    """`out`, else `output.dir/output.name`, else `output.dir/NAME-TIME`. A default name is made unique
    (`NAME-TIME-2`, …) and its folder created, empty, at once: two runs started in the same second get two
    folders."""
    if out is not None:
        return Path(out)
    if scenario.output.name:
        return Path(scenario.output.dir) / scenario.output.name
    parent = Path(scenario.output.dir)
    parent.mkdir(parents=True, exist_ok=True)
    stem = f"{scenario.name}-{datetime.now():%Y%m%d-%H%M%S}"
    for n in range(1, 10_000):
        path = parent / (stem if n == 1 else f"{stem}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RunFolderExists(f"{parent / stem}: no free run folder name")


def holds_run(path: Path) -> bool:
    """Whether `path` is anything but a missing or empty folder (scenario.yaml, metrics.jsonl, logs/, …)."""
    path = Path(path)
    if not path.exists():
        return False
    return not path.is_dir() or any(path.iterdir())


def claim_run_folder(run_dir: Path, resume: bool = False, overwrite: bool = False,
                     options: tuple[str, str] = ("--resume", "--overwrite")) -> Path | None:
    """Make `run_dir` this run's: a folder that holds a run is used only to `resume` it, or (`overwrite`)
    moved aside first to `NAME.old-YYYYmmdd-HHMMSS`, never deleted; returns where it went (None: nowhere).
    Without either, RunFolderExists names the folder and `options` (the caller's names of the two) and
    nothing in it has changed."""
    run_dir = Path(run_dir)
    if resume:
        return None
    moved = None
    if holds_run(run_dir):
        if not overwrite:
            raise RunFolderExists(f"{run_dir} already holds a run: continue it with {options[0]} or start a new "
                                  f"run there with {options[1]} (the old folder is moved aside, not deleted)")
        moved = _aside(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if holds_run(run_dir):  # another run took it meanwhile
        raise RunFolderExists(f"{run_dir} was just taken by another run: give another --out")
    return moved


def _aside(run_dir: Path) -> Path:
    """Rename `run_dir` to a free sibling `NAME.old-TIME[-N]` (a rename: nothing is copied or deleted)."""
    stem = f"{run_dir.name}.old-{datetime.now():%Y%m%d-%H%M%S}"
    for n in range(1, 10_000):
        target = run_dir.with_name(stem if n == 1 else f"{stem}-{n}")
        if target.exists():
            continue
        try:
            os.rename(run_dir, target)  # same parent folder: atomic; an existing empty target would be replaced
        except OSError:
            if target.exists():
                continue
            raise
        return target
    raise RunFolderExists(f"{run_dir}: no free name to move it aside to")


def log_to(run_dir: Path | None, verbose: bool = True) -> None:
    """Coordinator events into RUN_DIR/logs/coordinator.log and, as JSON lines, RUN_DIR/events.jsonl (the
    dashboard's event log), and to stderr (warnings only unless `verbose`)."""
    handlers: list[logging.Handler] = []
    if run_dir is not None:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(run_dir / "logs" / "coordinator.log"))
        handlers.append(EventLog(run_dir))
    stream = logging.StreamHandler(sys.stderr)
    stream.setLevel(logging.INFO if verbose else logging.WARNING)
    handlers.append(stream)
    logging.basicConfig(level=logging.INFO, handlers=handlers, format=LOG_FORMAT, force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a ServerApp's every pull from the SuperLink (20 a second)


def run_experiment(scenario: Scenario, run_dir: Path, run_variant: RunVariant, progress: bool = True,
                   resume: bool = False, checkpointed: bool = True, overwrite: bool = False,
                   claimed: bool = False, parallel: int = 1) -> dict:
    """Run every sweep variant of `scenario` into `run_dir` with `run_variant`; returns the summary.

    `resume=True` goes on from the folder's checkpoint (runtime/bookkeeping/checkpoint.py): finished algorithms and
    variants are skipped and the one in progress restarts from its last checkpoint. Otherwise a folder
    that already holds a run raises RunFolderExists, untouched, unless `overwrite=True` moves it aside
    (`claim_run_folder`); `claimed=True`: the caller claimed it already (to log into it before the run).
    `checkpointed=False` (the simulator) keeps no checkpoint: `resume` keeps the entries that finished and runs
    the others again from their start (finished_entries.py: the simulator is deterministic).
    `parallel` > 1 (the simulator): that many variants at a time as Ray tasks (parallel_variants.py)."""
    if resume and overwrite:
        raise RunFolderExists("resume or overwrite, not both")
    if not claimed and (moved := claim_run_folder(run_dir, resume, overwrite)):
        log.warning("%s held an earlier run: moved to %s", run_dir, moved)
    display = Progress(enabled=progress)
    finished = None
    if resume and not checkpointed:
        scenario, finished = _finished_entries(scenario, Path(run_dir))
    runs = variants(scenario)
    resolved = scenario.resolved()
    with RunRecorder(run_dir, tensorboard=scenario.output.tensorboard) as recorder:
        if recorder.tensorboard_dir is not None:
            log.info("TensorBoard event files in %s: view them with `tensorboard --logdir %s`",
                     recorder.tensorboard_dir, recorder.tensorboard_dir)
        checkpoints = (Checkpointer.open(run_dir, resolved, scenario.checkpoint.every_updates, resume,
                                         every_s=scenario.checkpoint.every_s) if checkpointed else finished)
        recorder.write_scenario(resolved)
        write_partitions(run_dir, runs)  # what each client trains on, for the report, before any client trains
        if used := outside_code(scenario):
            recorder.write_extensions(used)
        try:
            in_parallel = parallel > 1 and len(runs) > 1 and scenario.runtime == "sim"
            if in_parallel:
                from edgesync.runtime.sim.parallel_variants import run_parallel
                run_parallel(runs, recorder, display, resolved, parallel)
            for variant in [] if in_parallel else runs:
                if checkpoints is not None and all(checkpoints.is_done(a.key) for a in variant.scenario.algorithms):
                    display.status(f"{variant.tag or scenario.name}: finished before the resume, skipped")
                    continue
                if variant.tag:
                    display.status(f"sweep: {variant.tag}")
                run_variant(variant, recorder, checkpoints, display, resolved)
        finally:
            display.close()
        recorder.write_scenario(resolved)  # now with what the run measured, for an exact replay
    names = {a.key: a.name for v in runs for a in v.scenario.algorithms}
    return finish_run(run_dir, scenario, names)


def _finished_entries(scenario: Scenario, run_dir: Path):
    """A simulated run's resume: the entries of `run_dir` that finished (finished_entries.py), and the scenario
    with the stopped run's measured step times and costs, so that the entries still to run keep its clock."""
    from edgesync.config import load_scenario
    from edgesync.runtime.bookkeeping.finished_entries import FinishedEntries, ResumeError

    if scenario.output.tensorboard:  # its event files cannot drop what a cut-short entry wrote
        raise CheckpointError("a simulated run with output.tensorboard cannot be resumed: run it again")
    clients = {a.key: len(v.scenario.clients) for v in variants(scenario) for a in v.scenario.algorithms}
    try:
        finished = FinishedEntries.open(run_dir, scenario.resolved(), clients)
    except ResumeError as exc:
        raise CheckpointError(str(exc)) from None
    if finished.measured:
        data = scenario.resolved()
        for key, values in finished.measured.items():
            data["sim"][key] = {**values, **(data["sim"].get(key) or {})}  # what the scenario gives wins
        scenario = load_scenario(data, source=f"{run_dir / 'scenario.yaml'} (resumed)")
    log.info("%s: %d entries finished before the resume, kept; the others run from their start",
             run_dir, len(finished.done))
    return scenario, finished


def run_scenario(scenario: Scenario, run_dir: Path, progress: bool = True, resume: bool = False,
                 curve: bool = False, overwrite: bool = False, claimed: bool = False, parallel: int = 1) -> dict:
    """`edgesync run`: every variant and algorithm of `scenario` in its runtime; returns the summary.
    `curve=True` CURVE-encrypts a live run's links, with throw-away keys (the simulator has no links);
    `resume`, `overwrite`, `claimed` and `parallel` as in `run_experiment`."""

    def run_variant(variant: Variant, recorder: RunRecorder, checkpoints, display: Progress, resolved: dict) -> None:
        if scenario.runtime == "sim":
            from edgesync.runtime.sim.simulator import run_sim
            for key, measured in run_sim(variant.scenario, recorder, display, skip=checkpoints).items():
                resolved["sim"][key].update(measured)  # measured_step_s, measured_server_s: for a replay
            # the variant's simulator is gone only now: give its heap back before the next variant, or a sweep
            # of large models grows by its fragments, variant after variant (a ResNet-18 EQ3 sweep reached 24 GB)
            gc.collect()
            release_free_memory()
        else:
            from edgesync.runtime.live.launcher import run_live
            run_live(variant.scenario, recorder, display, logs=f"logs/{variant.tag}" if variant.tag else "logs",
                     checkpoints=checkpoints, curve=curve)

    checkpointed = scenario.runtime == "live"
    from edgesync.runtime.tuning import tune_entries, tunes
    if tunes(scenario):  # the tuning runs first, into RUN_DIR/tuning/
        if resume and overwrite:
            raise RunFolderExists("resume or overwrite, not both")
        if not claimed and (moved := claim_run_folder(run_dir, resume, overwrite)):
            log.warning("%s held an earlier run: moved to %s", run_dir, moved)
        scenario, resume = tune_entries(scenario, Path(run_dir), lambda tuning, folder, again: run_experiment(
            tuning, folder, run_variant, progress, again, checkpointed=checkpointed), progress, resume)
        claimed = True
    return run_experiment(scenario, run_dir, run_variant, progress, resume, checkpointed=checkpointed,
                          overwrite=overwrite, claimed=claimed, parallel=parallel)


def finish_run(run_dir: Path, scenario: Scenario, names: dict[str, str] | None = None) -> dict:
    """summary.json and report.md from what the run folder holds (with the seeds' aggregates, if any)."""
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    clients = read_jsonl(run_dir / "clients.jsonl")
    updates = read_jsonl(run_dir / "updates.jsonl")
    coordinator = read_jsonl(run_dir / COORDINATOR_FILE)
    names = names or {a.key: a.name for v in variants(scenario) for a in v.scenario.algorithms}
    baseline = next(iter(names))
    summary = summarize(metrics, clients, scenario.stop.target_acc, names, baseline=baseline, updates=updates,
                        coordinator=coordinator)
    summary = with_seed_aggregates(summary, baseline)  # seeds: speedups paired by seed, mean ± interval
    recorder = RunRecorder(run_dir)
    recorder.write_summary(summary)
    recorder.close()
    render_report(run_dir)
    return summary
