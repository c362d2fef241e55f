"""`edgesync calibrate`: this machine's cached step times (the simulator's clock), how each was measured, and
measuring them again."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from edgesync.cli.shared import load_scenario_or_exit, out

# What `--redo` measures without a scenario: the default model at the default batch size, the figure every
# simulated run of the shipped scenarios uses unless it fixes its own base step.
DEFAULT = {"name": "calibrate", "clients": 1, "runtime": "sim", "algorithms": [{"name": "ssgd"}]}


def calibrate(scenario: Optional[Path] = typer.Argument(None, help="measure what this scenario's simulated run "
                                                         "uses (default: the default model and batch size)"),
              redo: bool = typer.Option(False, "--redo", help="forget the cached figures of this machine first and "
                                        "measure them now"),
              set_: Optional[List[str]] = typer.Option(None, "--set", help="KEY.PATH=VALUE override, as `run`")):
    """Show this machine's calibration (the simulator's step times, with the load they were measured under),
    or measure it again with --redo."""
    import torch

    from edgesync.runtime.bookkeeping import calibration
    from edgesync.runtime.bookkeeping.step_time import STEP_CACHE, cache_file, this_machine
    torch.set_num_threads(1)  # as the simulator measures and runs: its cache keys name one thread, not the cores
    path = cache_file(STEP_CACHE)
    machine = this_machine()
    if redo:
        _forget(path, machine)
    if redo or scenario is not None:
        _measure(scenario, set_ or [])
    load, cores = calibration.load_1min(), calibration.usable_cores()
    out.print(f"cache: {path}  (EDGESYNC_CACHE moves it)\nthis machine: {machine}\nload now: "
              f"{'unknown' if load is None else load} on {cores} cores"
              f"{' — busy: a figure measured now would be marked busy' if calibration.is_busy(load, cores) else ''}",
              highlight=False)
    entries = _entries(path, machine)
    if not entries:
        out.print("no step time cached for this machine yet: the first simulated run measures it "
                  "(or `edgesync calibrate --redo`)")
        return
    t = Table(title="step times (the simulator's ×1 device)")
    t.add_column("model | batch | device")
    t.add_column("step time and how it was measured")
    for key, entry in entries.items():
        what = key.replace(f"|{machine}", "")
        t.add_row(what, calibration.describe(entry) if isinstance(entry, dict) and "step_s" in entry
                  else f"{1e3 * float(entry):.2f} ms (cached before conditions were recorded: measured again "
                       "by the next run that needs it)")
    out.print(t)


def _entries(path: Path, machine: str) -> dict:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in sorted(cache.items()) if k.endswith(machine) or f"|{machine}|" in k}


def _forget(path: Path, machine: str) -> None:
    from edgesync.runtime.bookkeeping.step_time import STEP_CACHE, forget
    gone = forget(STEP_CACHE, list(_entries(path, machine)))
    out.print(f"forgot {gone} cached step time(s) of this machine", highlight=False)


def _measure(scenario: Path | None, sets: list[str]) -> None:
    from edgesync.config import load_scenario
    from edgesync.runtime.sim.simulator import Simulator
    sc = load_scenario_or_exit(scenario, [*sets, "runtime=sim"]) if scenario else load_scenario(DEFAULT, sets)
    sim = Simulator(sc, None, None)
    sim.prepare()
    for batch, step in sorted(sim.step_s.items()):
        out.print(f"{sc.model.name}, batch {batch}: {1e3 * step:.2f} ms", highlight=False)
