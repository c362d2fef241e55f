"""`edgesync reproduce --quick` with its seeds as Ray tasks (`--parallel 2`) against one at a time.

    .venv/bin/python benchmarks/reproduce_parallel.py [--seeds 0-4] [--write-docs]

Method (fixed before the first result was seen): the same command twice on this machine, one after the
other, each in a fresh process with its own output folder: `--parallel 2` (one experiment at a time, two
of its seeds or variants at once on a local Ray instance the run starts) and `--parallel 1 --jobs 1` (one
seed of one experiment at a time: what --parallel 1 means on its own; the default `--jobs 2` runs two
experiments side by side as processes instead, a different kind of parallelism). The step times and
coordinator costs are measured (or read from this machine's cache) before either runs, so both use the
same. Printed: each wall time, their ratio, and claim by claim both verdicts and whether the per-seed
figures are equal. One pair of runs (about an hour on 2 cores): the ratio is a single measurement.
`--write-docs` puts the table into docs/benchmarks.md and the runs' figures (wall times, each claim's verdict and
per-seed figures) into docs/data/reproduce_parallel.json.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, ran_on, write_block  # noqa: E402

BLOCK = "reproduce_parallel"
RUNS = {"--parallel 2": ["--parallel", "2"], "--parallel 1 --jobs 1": ["--parallel", "1", "--jobs", "1"]}


def run(seeds: str, flags: list[str], out: Path) -> float:
    cmd = [sys.executable, "-m", "edgesync.cli", "reproduce", "--quick", "--seeds", seeds, "--out", str(out), "-q", *flags]
    print(f"  {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(flags)} failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
    print(f"    {wall / 60:.1f} min", file=sys.stderr, flush=True)
    return wall


def claims(out: Path) -> list[dict]:
    """Each claim's verdict and per-seed figures in one run's folder (seeds as strings: JSON's keys)."""
    from edgesync.reproduce import evaluate

    return [{"claim": r["claim"].text, "verdict": r["verdict"], "magnitude": r["magnitude"],
             "by_construction": bool(r["claim"].by_construction),
             "per_seed": {str(seed): value for seed, value in r["per_seed"].items()}} for r in evaluate(out)]


def reading(claim: dict) -> str:
    """A claim's verdicts as the table shows them: direction / magnitude (a record from before magnitudes were
    kept: direction alone), or that the configuration fixes the figure (no verdict: reproduce never counts it)."""
    if claim.get("by_construction"):
        return "by construction"
    return claim["verdict"] + (f" / {claim['magnitude']}" if "magnitude" in claim else "")


def render(data: dict) -> str:
    """The table from both runs' wall times and claims (as docs/data/reproduce_parallel.json keeps them)."""
    serial, parallel = data["runs"]["--parallel 1 --jobs 1"], data["runs"]["--parallel 2"]
    kept = all("magnitude" in c for c in serial["claims"] + parallel["claims"])
    head = "verdict (direction / magnitude)" if kept else "verdict (direction)"
    lines = [f"| claim | {head}, one at a time | {head}, --parallel 2 | per-seed figures equal |", "|---|---|---|---|"]
    same_verdicts = True
    for a, b in zip(serial["claims"], parallel["claims"]):
        same_verdicts &= reading(a) == reading(b)
        lines.append(f"| {a['claim']} | {reading(a)} | {reading(b)} | "
                     f"{'yes' if a['per_seed'] == b['per_seed'] else 'NO'} |")
    fixed = sum(bool(c.get("by_construction")) for c in serial["claims"])
    counted = (f"{len(serial['claims']) - fixed} measured claims, and {fixed} figures the configuration fixes"
               if fixed else f"{len(serial['claims'])} claims")
    w1, w2 = serial["wall_s"], parallel["wall_s"]
    return "\n".join([
        f"`--parallel 1 --jobs 1`: {w1 / 60:.1f} min; `--parallel 2`: {w2 / 60:.1f} min; **{w1 / w2:.2f}× faster** "
        f"(one pair of runs, seeds {data['seeds']}); verdicts {'the same for every claim' if same_verdicts else 'DIFFER'} "
        f"({counted}).", "", *lines])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in RUNS.items():
            out = Path(tmp) / name.replace(" ", "").replace("-", "")
            runs[name] = {"wall_s": run(args.seeds, flags, out), "claims": claims(out)}
    data = {"seeds": args.seeds, "runs": runs}
    print(render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/reproduce_parallel.py --write-docs` ({ran_on()}, `--seeds {args.seeds}`); "
                f"{data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
