"""Does a live device follow its trace? A client steps from ×1 to ×10 at 30 s; its step times are compared
with factor × base step, before and after the change.

    .venv/bin/python benchmarks/trace_fidelity.py [--runs 3] [--budget 60] [--change 30] [--write-docs]

Method (fixed before the first result was seen): a real live run (`edgesync run`'s path: the coordinator
and one process per client on this machine), ASGD so that every client steps continuously, three clients:
the traced one `{kind: trace, steps: [[0, 1], [CHANGE, 10]]}` and two ×1. The traced client records each
step's start on the algorithm's clock and its length (clients.jsonl `step_timeline`, sampled); its target
is factor × the run's base step (`base_step_s`). Per window — [2 s, CHANGE) and [CHANGE + 2 s, BUDGET), the
2 s margins leave out the step that spans the change and the start — the error is the median step / the
target − 1. Each run gives one error per window; the table gives their mean and sd over `--runs` runs.
Target (issue 20): within ±10% in both windows. `--write-docs` puts the table into docs/benchmarks.md and
each run's errors, step counts and base step into docs/data/trace_fidelity.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402
from edgesync.runtime.runs import run_scenario  # noqa: E402
from edgesync.config import load_scenario  # noqa: E402

BLOCK = "trace_fidelity"
MARGIN_S = 2.0
TOLERANCE = 0.10


def one_run(budget: float, change: float, folder: Path) -> dict:
    scenario = load_scenario({
        "name": "trace-fidelity", "runtime": "live",
        "clients": [{"profile": {"kind": "trace", "steps": [[0, 1], [change, 10]]}}, "x1", "x1"],
        "algorithms": [{"name": "asgd", "lr": 0.02}],
        "dataset": {"train_size": 6000},
        "stop": {"time_budget_s": budget, "target_acc": None},
        "eval": {"every_s": 10, "test_size": 500},
    })
    run_scenario(scenario, folder, progress=False)
    row = next(json.loads(line) for line in (folder / "clients.jsonl").open() if json.loads(line)["client"] == 0)
    return window_errors(row["step_timeline"], row["base_step_s"], budget, change)


def window_errors(points: list[list[float]], base_s: float, budget: float, change: float) -> dict:
    """Median step / (factor × base) − 1 in the window before the change and the one after."""
    out = {}
    for name, lo, hi, factor in (("×1", MARGIN_S, change, 1.0), ("×10", change + MARGIN_S, budget, 10.0)):
        steps = [s for t, s in points if lo <= t < hi]
        out[name] = {"steps": len(steps), "error": statistics.median(steps) / (factor * base_s) - 1 if steps else None}
    out["base_step_s"] = base_s
    return out


def render(runs: list[dict]) -> str:
    """The block's table from the runs' window errors (as docs/data/trace_fidelity.json keeps them)."""
    lines = ["| window | target | steps sampled per run | median step vs target, mean ± sd over runs | verdict |",
             "|---|---|---|---|---|"]
    for name in ("×1", "×10"):
        errors = [r[name]["error"] for r in runs if r[name]["error"] is not None]
        mean = statistics.mean(errors)
        sd = statistics.stdev(errors) if len(errors) > 1 else 0.0
        ok = all(abs(e) <= TOLERANCE for e in errors)
        steps = [r[name]["steps"] for r in runs]
        counts = f"{min(steps)}–{max(steps)}" if min(steps) != max(steps) else str(steps[0])
        lines.append(f"| {name} | {name} × base step | {counts} | {mean:+.1%} ± {sd:.1%} ({len(errors)} runs) | "
                     f"{'within' if ok else 'outside'} ±{TOLERANCE:.0%} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--budget", type=float, default=60.0)
    p.add_argument("--change", type=float, default=30.0)
    p.add_argument("--write-docs", action="store_true")
    a = p.parse_args()
    started, runs = time.time(), []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            result = one_run(a.budget, a.change, Path(tmp) / f"run{i}")
            print(f"run {i + 1}/{a.runs}: base step {result['base_step_s'] * 1e3:.2f} ms, "
                  + ", ".join(f"{w}: {result[w]['error']:+.1%} ({result[w]['steps']} steps)" for w in ("×1", "×10")),
                  flush=True)
            runs.append(result)
    print(render(runs))
    if a.write_docs:
        note = (f"_Written by `benchmarks/trace_fidelity.py --runs {a.runs} --budget {a.budget:g} --change "
                f"{a.change:g} --write-docs` on {platform.node()} ({platform.machine()}, "
                f"{len(__import__('os').sched_getaffinity(0))} cores), {time.strftime('%Y-%m-%d')}, "
                f"{(time.time() - started) / 60:.1f} min; base steps "
                + ", ".join(f"{r['base_step_s'] * 1e3:.2f}" for r in runs) + f" ms; {data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "benchmarks.md", BLOCK, note, runs)


if __name__ == "__main__":
    main()
