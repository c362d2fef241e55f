"""One experiment, start to finish: a run folder, each sweep variant in the chosen runtime, the report.

Both runtimes write through the same RunRecorder, so the folder's format is the same; the summary
and report are made from the folder alone at the end.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.metrics.report import render_report
from edgesync.metrics.summary import summarize
from edgesync.runtime.checkpoint import CheckpointError, Checkpointer
from edgesync.runtime.progress import Progress
from edgesync.scenario import Scenario
from edgesync.sweep import variants


def run_folder(scenario: Scenario, out: str | Path | None = None) -> Path:
    if out is not None:
        return Path(out)
    name = scenario.output.name or f"{scenario.name}-{datetime.now():%Y%m%d-%H%M%S}"
    return Path(scenario.output.dir) / name


def run_scenario(scenario: Scenario, run_dir: Path, progress: bool = True, resume: bool = False,
                 curve: bool = False) -> dict:
    """Run every variant and algorithm of `scenario` in its runtime; returns the summary.

    `resume=True` goes on from the run folder's checkpoint (live runs): finished algorithms are
    skipped and the one in progress restarts from its last checkpoint (runtime/checkpoint.py).
    `curve=True` CURVE-encrypts a live run's links, with throw-away keys (the simulator has no links)."""
    display = Progress(enabled=progress)
    runs = variants(scenario)
    resolved = scenario.resolved()
    if resume and scenario.runtime != "live":
        raise CheckpointError("--resume is for live runs: a simulator run is deterministic, run it again")
    with RunRecorder(run_dir) as recorder:
        checkpoints = (Checkpointer.open(run_dir, resolved, scenario.checkpoint.every_updates, resume)
                       if scenario.runtime == "live" else None)
        recorder.write_scenario(resolved)
        try:
            for variant in runs:
                if checkpoints is not None and all(checkpoints.is_done(a.key) for a in variant.scenario.algorithms):
                    display.status(f"{variant.tag or scenario.name}: finished before the resume, skipped")
                    continue
                if variant.tag:
                    display.status(f"sweep: {variant.tag}")
                if scenario.runtime == "sim":
                    from edgesync.runtime.simulator import run_sim
                    steps = run_sim(variant.scenario, recorder, display)
                    resolved["sim"]["measured_step_s"].update(steps)
                else:
                    from edgesync.runtime.launcher import run_live
                    run_live(variant.scenario, recorder, display,
                             logs=f"logs/{variant.tag}" if variant.tag else "logs", checkpoints=checkpoints,
                             curve=curve)
        finally:
            display.close()
        recorder.write_scenario(resolved)  # now with what the run measured, for an exact replay
    names = {a.key: a.name for v in runs for a in v.scenario.algorithms}
    return finish_run(run_dir, scenario, names)


def finish_run(run_dir: Path, scenario: Scenario, names: dict[str, str] | None = None) -> dict:
    """summary.json and report.md from what the run folder holds."""
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    clients = read_jsonl(run_dir / "clients.jsonl")
    updates = read_jsonl(run_dir / "updates.jsonl")
    names = names or {a.key: a.name for v in variants(scenario) for a in v.scenario.algorithms}
    summary = summarize(metrics, clients, scenario.stop.target_acc, names, baseline=next(iter(names)),
                        updates=updates)
    recorder = RunRecorder(run_dir)
    recorder.write_summary(summary)
    recorder.close()
    render_report(run_dir)
    return summary
