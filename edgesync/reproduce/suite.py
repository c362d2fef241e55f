"""Running the experiments: each over its seeds into its own folder (one after another, side by side in
worker processes with `--jobs`, or its seeds as Ray tasks with `--parallel`), and the output folder's
reproduce.json recording how and where each ran."""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path

import yaml

from edgesync.reproduce.claims import CLAIMS
from edgesync.reproduce.experiments import EXPERIMENTS, SEEDS, Experiment
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario, variants
from edgesync.docs_data import cpu_model

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = "reproduce.json"
PROGRESS_EVERY_S = 300  # how often a suite of experiments side by side says how far the running ones are


def read_manifest(out: Path) -> dict:
    """What `run_suite` recorded in `out`: experiment → {mode, runtime, overrides, seeds, wall_s, machine}."""
    path = out / MANIFEST
    return json.loads(path.read_text()) if path.exists() else {}


def folder_key(out: Path) -> str | None:
    """"MODE-RUNTIME" ("quick-sim", "full-live", …) if every experiment recorded in `out` ran so, else None."""
    keys = {f"{e['mode']}-{e['runtime']}" for e in read_manifest(out).values()}
    return keys.pop() if len(keys) == 1 else None


def machine() -> str:
    """This machine in a few words: CPU model, cores this process may use, OS."""
    cpu = cpu_model()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores, {platform.system()} {platform.release()}"


def run_suite(out: Path, quick: bool, runtime: str = "sim", only: list[str] | None = None,
              progress: bool = True, seeds: list[int] | None = None, jobs: int = 1, parallel: int = 1,
              fresh: bool = False) -> None:
    """Run the experiments into `out/KEY`, each over `seeds` (default SEEDS of the mode); `jobs` > 1 runs
    that many simulator experiments at once in worker processes (live runs always one at a time: their
    client processes need the cores); `parallel` > 1 instead runs one experiment at a time, that many of
    its seeds and variants at once as Ray tasks (runtime/sim/parallel_variants.py). Run again into `out`, the suite
    goes on: an experiment that finished there with the same settings is kept (reproduce.json), one cut short goes
    on from its finished entries (`_run_one`); `fresh` runs every one again, moving earlier runs aside."""
    out.mkdir(parents=True, exist_ok=True)
    mode = "quick" if quick else "full"
    seeds = list(seeds or SEEDS[mode])
    if only:  # an experiment's claims may also read runs kept in experiments of their own (claims.py `also`)
        only = [*only, *(extra for claim in CLAIMS if claim.experiment in only for extra in claim.also)]
    todo = [exp for exp in EXPERIMENTS if ((exp.key in only) if only else (exp.in_quick or not quick))]
    plans = {exp.key: [*(exp.quick if quick else exp.full), f"runtime={runtime}", f"seeds={seeds}"] for exp in todo}
    # every scenario checked (loaded) before anything runs
    loaded = {exp.key: load_scenario(ROOT / exp.scenario, plans[exp.key]) for exp in todo}
    manifest = read_manifest(out)
    where, commit = machine(), git_commit()
    if not fresh:
        kept = [exp.key for exp in todo if finished_before(manifest.get(exp.key), mode, runtime, plans[exp.key],
                                                           out / exp.key)]
        if kept:
            _say(f"reproduce: {', '.join(kept)} finished in {out} before with these settings (reproduce.json): "
                 "kept (--fresh runs them again)")
            todo = [exp for exp in todo if exp.key not in kept]

    def record(exp: Experiment, ran: tuple[float, bool]) -> None:
        wall_s, resumed = ran
        now = time.time()
        manifest[exp.key] = {"mode": mode, "runtime": runtime, "scenario": exp.scenario, "overrides": plans[exp.key],
                             "seeds": seeds, "wall_s": round(wall_s, 1), "machine": where, "jobs": workers,
                             "started_at": round(now - wall_s, 1), "finished_at": round(now, 1),
                             "commit": commit, **({"resumed": True} if resumed else {})}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")  # after each: a stopped suite keeps it

    workers = 1 if runtime == "live" or len(todo) <= 1 or parallel > 1 else max(1, jobs)
    if workers == 1:
        for exp in todo:
            record(exp, _run_one(exp.scenario, plans[exp.key], out / exp.key, progress, parallel, fresh))
        return
    if runtime == "sim":
        _measure_step_times([loaded[e.key] for e in todo])
    started = time.perf_counter()
    _say(f"reproduce: {len(todo)} experiments × {len(seeds)} seeds, {workers} at a time")
    # the longest first, by what each took when last run into this folder (same mode): fewer minutes at the end
    # with one experiment left on one core
    last = {k: e["wall_s"] for k, e in manifest.items() if e.get("mode") == mode and e.get("runtime") == runtime}
    order = sorted(todo, key=lambda exp: -last.get(exp.key, 0.0))
    finals = {exp.key: sum(len(v.scenario.algorithms) for v in variants(loaded[exp.key])) for exp in todo}
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_run_one, exp.scenario, plans[exp.key], out / exp.key, False, 1, fresh): exp
                   for exp in order}
        pending, done = set(futures), 0
        while pending:
            finished, pending = wait(pending, timeout=PROGRESS_EVERY_S, return_when=FIRST_COMPLETED)
            for future in finished:
                exp, done = futures[future], done + 1
                ran = future.result()  # a failed experiment stops the suite with its error
                record(exp, ran)
                _say(f"reproduce: [{done}/{len(todo)}] {exp.key} finished in {ran[0] / 60:.1f} min "
                     f"{'(resumed) ' if ran[1] else ''}"
                     f"({(time.perf_counter() - started) / 60:.1f} min so far)")
            if not finished:  # an experiment can take hours: what the running ones have finished so far
                _say(f"reproduce: {(time.perf_counter() - started) / 60:.0f} min so far; " + "; ".join(
                    progress_of(out / futures[f].key, finals[futures[f].key]) for f in pending
                    if (out / futures[f].key).exists()))


def _run_one(scenario: str, overrides: list[str], folder: Path, progress: bool, parallel: int = 1,
             fresh: bool = False) -> tuple[float, bool]:
    """Run one experiment into `folder`; (seconds it took, whether it went on from a stopped run: never `fresh`)."""
    t0 = time.perf_counter()
    sc = load_scenario(ROOT / scenario, overrides)
    # A simulated experiment that a stopped suite left unfinished goes on: its finished entries (and tuning runs)
    # are kept (runtime/bookkeeping/finished_entries.py). Any other earlier run of it is moved aside.
    resume = not fresh and stopped_here(folder, sc)
    if resume:
        _say(f"reproduce: {folder} holds this experiment's stopped run: going on with it")
    run_scenario(sc, folder, progress=progress, overwrite=not resume, resume=resume, parallel=parallel)
    return time.perf_counter() - t0, resume


def finished_before(entry: dict | None, mode: str, runtime: str, plan: list[str], folder: Path) -> bool:
    """Whether reproduce.json's `entry` records this experiment as finished in `folder` in this mode and runtime
    with the same overrides (seeds included), and its summary is there."""
    return (entry is not None and entry.get("mode") == mode and entry.get("runtime") == runtime
            and entry.get("overrides") == plan and (folder / "summary.json").exists())


def progress_of(folder: Path, finals: int) -> str:
    """"KEY: N tuning runs, M/finals final runs finished" from the clients' rows the folder holds."""
    from edgesync.runtime.bookkeeping.finished_entries import entries_with_clients

    tuning = sum(len(entries_with_clients(d)) for d in folder.glob("tuning*") if d.is_dir())
    final = len(entries_with_clients(folder))
    return f"{folder.name}: " + (f"{tuning} tuning runs, " if tuning else "") + f"{final}/{finals} runs finished"


def stopped_here(folder: Path, sc) -> bool:
    """Whether `folder` holds an unfinished simulated run of `sc`: its scenario (or, once tuned, its tuning runs)
    is `sc`'s and there is no summary.json yet."""
    from edgesync.runtime.bookkeeping.checkpoint import scenario_digest
    from edgesync.runtime.bookkeeping.finished_entries import sim_digest
    from edgesync.metrics.recorder import TUNING_FILE
    from edgesync.runtime.tuning import tuning_scenario

    if sc.runtime != "sim" or not (folder / "scenario.yaml").exists() or (folder / "summary.json").exists():
        return False
    if sc.tune and (folder / TUNING_FILE).exists():  # tuned: the final runs' scenario holds the chosen values
        record = json.loads((folder / TUNING_FILE).read_text())
        return record.get("scenario_digest") == scenario_digest(tuning_scenario(sc).resolved())
    written = yaml.safe_load((folder / "scenario.yaml").read_text()) or {}
    return sim_digest(written) == sim_digest(sc.resolved())


def git_commit() -> str | None:
    """The commit the suite runs (a dirty tree marked), for reproduce.json: experiments of one folder may have run
    on different days."""
    import subprocess
    try:
        head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+changes" if dirty else "")) or None


def _measure_step_times(scenarios: list) -> None:
    """Fill the simulator's per-machine caches — step times, and the coordinator's costs of each entry
    (runtime/sim/server_cost.py) — before experiments run side by side, so no experiment measures them while
    another one loads the cores (runtime/bookkeeping/step_time.py)."""
    from edgesync.runtime.sim.simulator import Simulator
    from edgesync.runtime.tuning import tuning_scenario
    seen = set()
    # a tuned experiment's grid points (momentum 0.5, 0.9, …) are entries of their own to calibrate
    for sc in [s for sc in scenarios for s in ([sc, tuning_scenario(sc)] if sc.tune else [sc])]:
        key = (sc.model.id, sc.dataset.model_dump_json(), tuple(sorted({a.batch_size for a in sc.algorithms})),
               sc.sim.server_time == "model" and tuple(a.model_dump_json(exclude={"label"}) for a in sc.algorithms))
        if key not in seen:
            seen.add(key)
            Simulator(sc, None, None).prepare()


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
