"""A tuned comparison: every entry of a scenario tuned on the same grid (validation data), then run over seeds.

    .venv/bin/python benchmarks/tuned_comparison.py [--scenario scenarios/dgs_tuned.yaml] [--seeds 0-2]
                                                     [--out runs/dgs-tuned] [--from RUN_DIR] [--write-docs]

Runs the scenario (its `tune:` block: each entry at every grid point it has, on one seed, chosen on the
validation split; then the final runs with the chosen values on every seed, measured on the test set)
and prints, per entry: the grid it got, the chosen values with their validation figure, then over the
seeds the test figures as mean ± 95% half-width (Student t), and the speedup to the target against the
first entry paired by seed. `--from` re-reads a finished run folder. `--write-docs` puts the tables into
docs/results.md between `<!-- tuned:STEM:begin -->` and `<!-- tuned:STEM:end -->` (STEM: the scenario
file's stem), with the machine, seeds, base step and wall time, and tuning.json with each seed's figures into
docs/data/tuned-STEM.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402
from edgesync.metrics.seeds import aggregate_entry, interval  # noqa: E402
from edgesync.reproduce import machine  # noqa: E402
from edgesync.runtime.runs import run_scenario  # noqa: E402
from edgesync.config import load_scenario  # noqa: E402

KEPT = ("final_acc", "best_acc", "time_to_target_s", "speedup_vs", "bytes_up", "updates")  # of each seed's run


def mean_ci(stat: dict | None, fmt: str, scale: float = 1.0) -> str:
    if not stat or stat.get("mean") is None:
        return "n/a"
    text = format(stat["mean"] * scale, fmt)
    return f"{text} ± {format((stat['ci95'][1] - stat['mean']) * scale, fmt)}" if stat.get("ci95") else text


def record(run_dir: Path) -> dict:
    """What docs/data keeps of a finished run folder: tuning.json, the target, and each entry's runs, seed by
    seed (their KEPT figures; speedup_vs is already paired by seed against the first entry)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    aggregates = {label: e for label, e in summary.items() if "seeds" in e}
    runs = {label: {str(s): {k: v for k, v in summary[f"{label}@seed={s}"].items() if k in KEPT} for s in e["seeds"]}
            for label, e in aggregates.items()}
    return {"tuning": json.loads((run_dir / "tuning.json").read_text()),
            "target_acc": next(iter(aggregates.values())).get("target_acc"), "runs": runs}


def render(data: dict) -> str:
    """The block's tables from its record (`record`): each entry's mean ± interval over its seeds, recomputed
    as summary.json's aggregates are (metrics/seeds.py's aggregate_entry)."""
    tuning = data["tuning"]
    runs = {label: {int(s): row for s, row in seeds.items()} for label, seeds in data["runs"].items()}
    aggregates = {label: aggregate_entry(seeds) for label, seeds in runs.items()}
    first = next(iter(aggregates))
    metric = tuning["metric"]
    lines = [f"Tuning: {tuning['runs']} runs on seed {tuning['seed']}, chosen by {metric.replace('_', ' ')} on "
             f"{tuning['validation']['size']:,} validation images (training on the other "
             f"{tuning['validation']['trained_on']:,}).", "",
             f"| entry | grid | chosen | validation {metric.replace('_', ' ')} |", "|---|---|---|---:|"]
    for label, e in tuning["entries"].items():
        grid = ", ".join(f"{k} {v}" for k, v in e["grid"].items())
        if e["not_applicable"]:
            grid += f" ({', '.join(e['not_applicable'])}: not applicable)"
        chosen = ", ".join(f"{k} {v}" for k, v in e["chosen"].items()) or "n/a"
        for key, side in tuning.get("edges_left", {}).get(label, {}).items():  # extended, and still chosen there
            chosen += (f" ({key}: the {side} tried, after {len(tuning.get('extended', []))} extension(s): the "
                       "optimum may lie beyond)")
        figure = e["figure"]
        shown = "n/a" if figure is None else (f"{figure:.4f}" if metric != "time_to_target" else f"{figure:.1f} s")
        lines.append(f"| {label} | {grid} | {chosen} | {shown} |")
    lines += ["", f"| entry | seeds | final acc. (%) | best acc. (%) | final acc. − {first} (pt, paired) | "
              f"time to {data['target_acc']} (s) | speedup vs {first} (paired) | KB up per update |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, e in aggregates.items():
        stats, entry_runs = e["stats"], runs[label]
        reached = stats.get("time_to_target_s", {}).get("reached", "")
        ttt = mean_ci(stats.get("time_to_target_s"), ".1f") if e.get("time_to_target_s") is not None \
            else f"{reached} reached"
        per_update = [entry_runs[s]["bytes_up"] / entry_runs[s]["updates"] for s in e["seeds"]
                      if entry_runs[s].get("updates")]
        kb = f"{sum(per_update) / len(per_update) / 1e3:.1f}" if per_update else "n/a"
        diffs = [100 * (entry_runs[s]["final_acc"] - runs[first][s]["final_acc"]) for s in e["seeds"]
                 if s in runs[first]]
        iv = interval(diffs)
        diff = "n/a" if iv.mean is None else (f"{iv.mean:+.2f}" + (f" ± {iv.half_width:.2f}" if iv.high else ""))
        lines.append(f"| {label} | {len(e['seeds'])} | {mean_ci(stats.get('final_acc'), '.2f', 100)} | "
                     f"{mean_ci(stats.get('best_acc'), '.2f', 100)} | {diff} | {ttt} | "
                     f"{mean_ci(stats.get('speedup_vs'), '.2f')} | {kb} |")
    lines += ["", "Mean ± half-width of the 95% Student-t interval over the seeds; differences and speedups are "
              f"taken within each seed against {first}'s run of that seed."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="scenarios/dgs_tuned.yaml")
    ap.add_argument("--seeds", default="0-2", help="LOW-HIGH or comma-separated")
    ap.add_argument("--out", type=Path, default=Path("runs/dgs-tuned"))
    ap.add_argument("--from", dest="reuse", type=Path, default=None, help="re-read this finished run folder")
    ap.add_argument("--write-docs", action="store_true", help="put the tables into docs/results.md")
    args = ap.parse_args()
    low, _, high = args.seeds.partition("-")
    seeds = list(range(int(low), int(high) + 1)) if high else [int(s) for s in args.seeds.split(",")]
    run_dir, started = args.reuse or args.out, time.time()
    if args.reuse is None:
        sc = load_scenario(ROOT / args.scenario, [f"seeds={seeds}"])
        run_scenario(sc, run_dir, overwrite=True)
        (run_dir / "wall_s.txt").write_text(f"{time.time() - started:.0f}\n")
    data = record(run_dir)
    text = render(data)
    print(text)
    if args.write_docs:
        stem = Path(args.scenario).stem
        wall = (run_dir / "wall_s.txt").read_text().strip() if (run_dir / "wall_s.txt").exists() else None
        used = yaml.safe_load((run_dir / "scenario.yaml").read_text()).get("seeds") or seeds
        steps = _base_step(run_dir)
        note = (f"`benchmarks/tuned_comparison.py --scenario {args.scenario} --seeds {args.seeds} --write-docs`, "
                f"runs in `{run_dir}`" + (f", {int(wall) / 60:.1f} min" if wall else "") +
                f", seeds {', '.join(map(str, used))}, machine: {machine()}, base step {steps}")
        block = f"tuned:{stem}"
        write_block(ROOT / "docs" / "results.md", block, f"_Written by {note}; {data_note(block)}._", data)
        print(f"tables written to docs/results.md (tuned:{stem})")


def _base_step(run_dir: Path) -> str:
    sim = (yaml.safe_load((run_dir / "scenario.yaml").read_text()) or {}).get("sim") or {}
    steps = sorted({round(1e3 * float(v), 2) for v in (sim.get("measured_step_s") or {}).values()})
    if sim.get("base_step_s"):
        steps = [round(1e3 * float(sim["base_step_s"]), 2)]
    return ", ".join(f"{ms:.2f} ms" for ms in steps) or "n/a"


if __name__ == "__main__":
    main()
