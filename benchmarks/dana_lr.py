"""DANA's learning rate, chosen for one worker on validation data (the paper's practice, dana.txt App. B.4).

    .venv/bin/python benchmarks/dana_lr.py [--write-docs]      # about ten minutes on 2 cores
    .venv/bin/python benchmarks/dana_lr.py --from-runs [--write-docs]

The DANA paper runs every algorithm at every worker count with "the original hyperparameters of the respective
neural network architecture, which are tuned for a single worker" (App. B.4): one learning rate and momentum,
chosen for sequential Nesterov SGD, then used unchanged by NAG-ASGD, DANA-DC and the rest at N workers (with
the warm-up from η/N). `edgesync reproduce` does the same: its three DANA experiments and
scenarios/dana_scale.yaml share one learning rate. This benchmark is where that rate comes from.

Method (fixed before its first result): scenarios/dana_scale.yaml at one `x1` worker, NAG-ASGD (momentum 0.9
with Nesterov, the paper's γ; warm-up 0.5 epoch; 2,500 updates; the scenario's model and data), tuned by the
scenario's `tune` block as every other `reproduce` experiment is: learning rates 0.005, 0.01, 0.02, chosen by
final accuracy on 2,000 validation images carved from the training data, on seed 100 (never an evaluation
seed), the grid followed past a chosen edge one geometric step at a time up to twice (`tune.extend`). The test
set chooses nothing. Printed and written: each learning rate's validation accuracy, the one chosen, whether
it lies on the grid's edge, and the rate `reproduce` runs (reproduce/experiments.py, DANA_LR);
tests/test_dana_lr.py fails when the two differ. `--write-docs` puts the table into docs/results.md
(block dana_lr) and every tuning run's figures into docs/data/dana_lr.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/dana_scale.yaml"
ENTRY = "algorithms=[{name: nag_asgd, lr: 0.01, momentum: 0.9, warmup_epochs: 0.5}]"
TUNE = ("tune={grid: {lr: [0.005, 0.01, 0.02]}, metric: final_acc, validation_size: 2000, seed: 100, "
        "extend: 2}")
RUNS = "runs/dana-lr"


def run(out: Path) -> float:
    from timed_run import timed_run  # not at the top: docs_data imports this file without benchmarks/ on sys.path
    return timed_run("one worker, tuned", [SCENARIO, "--set", "sweep={}", "--set", "clients={count: 1, profile: x1}",
                                           "--set", ENTRY, "--set", TUNE, "--out", str(out), "--overwrite", "-q"])


def record(out: Path, pinned: float) -> dict:
    """The block's record from the run folder's tuning.json: every point's validation figures, the choice and the
    rate reproduce runs."""
    tuning = json.loads((out / "tuning.json").read_text())
    entry = tuning["entries"]["nag_asgd"]
    points = sorted(({"lr": p["values"]["lr"], "final_acc": p["final_acc"], "best_acc": p["best_acc"],
                      "diverged": p["diverged"]} for p in entry["points"]), key=lambda p: p["lr"])
    return {"seed": tuning["seed"], "validation": tuning["validation"], "metric": tuning["metric"],
            "points": points, "chosen_lr": entry["chosen"]["lr"], "at_edge": entry["at_edge"], "pinned_lr": pinned}


def chosen(points: list[dict]) -> float:
    """The rate the recorded points choose by runtime/tuning.py's own rule (the test recomputes the record's
    choice with it)."""
    from edgesync.runtime.tuning import choose

    return points[choose(points, "final_acc")]["lr"]


def render(data: dict) -> str:
    """The block's table from its record: {"seed", "validation": {"size", ...}, "metric", "points": [{"lr",
    "final_acc", "best_acc", "diverged"}], "chosen_lr", "at_edge", "pinned_lr"}."""
    lines = ["| learning rate | validation acc, final | validation acc, best | |", "|---:|---:|---:|---|"]
    for p in data["points"]:
        mark = "chosen" if p["lr"] == data["chosen_lr"] else ("diverged" if p["diverged"] else "")
        final = "—" if p["final_acc"] is None else f"{p['final_acc']:.4f}"
        best = "—" if p["best_acc"] is None else f"{p['best_acc']:.4f}"
        lines.append(f"| {p['lr']:g} | {final} | {best} | {mark} |")
    edge = ("on the grid's edge after the extensions: " + ", ".join(f"{k} ({v})" for k, v in data["at_edge"].items())
            if data["at_edge"] else "inside the grid")
    same = "the rate it runs" if data["pinned_lr"] == data["chosen_lr"] else "**not** the rate chosen here"
    won = next(p for p in data["points"] if p["lr"] == data["chosen_lr"])
    rest = [p for p in data["points"] if p is not won and p["final_acc"] is not None and not p["diverged"]]
    runner = max(rest, key=lambda p: p["final_acc"], default=None)
    gap = 100 * (won["final_acc"] - runner["final_acc"]) if runner else None
    margin = "" if gap is None else (f"; the next best, lr {runner['lr']:g}, ends {gap:.2f} pt below it on one tuning "
                                     "run each" + (": less than a point, not a sharp choice" if gap < 1 else ""))
    lines += ["", f"Chosen: lr {data['chosen_lr']:g} ({edge}), on {data['validation']['size']:,} validation images, "
              f"seed {data['seed']}{margin}. `reproduce` runs lr {data['pinned_lr']:g}: {same}."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=RUNS, help="the run folder")
    ap.add_argument("--from-runs", action="store_true", help="re-read the finished run folder")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from edgesync.docs_data import data_note, write_block
    from edgesync.reproduce import machine
    from edgesync.reproduce.experiments import DANA_LR

    out = ROOT / args.out
    wall = None if args.from_runs else run(out)
    data, block = record(out, DANA_LR), "dana_lr"
    took = f"{wall / 60:.0f} min, " if wall is not None else ""
    head = (f"_Written by `benchmarks/dana_lr.py --write-docs`, {took}machine: {machine()}; NAG-ASGD at one worker, "
            f"momentum 0.9, 2,500 updates, one tuning run per rate; {data_note(block)}._")
    print(head + "\n\n" + render(data))
    if args.write_docs:
        write_block(ROOT / "docs/results.md", block, head, data)


if __name__ == "__main__":
    main()
