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
`--write-docs` puts the table into docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- reproduce_parallel:begin -->", "<!-- reproduce_parallel:end -->"
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from edgesync.reproduce import evaluate

    with tempfile.TemporaryDirectory() as tmp:
        walls, results = {}, {}
        for name, flags in RUNS.items():
            out = Path(tmp) / name.replace(" ", "").replace("-", "")
            walls[name] = run(args.seeds, flags, out)
            results[name] = evaluate(out)
    parallel, serial = results["--parallel 2"], results["--parallel 1 --jobs 1"]
    lines = ["| claim | verdict, one at a time | verdict, --parallel 2 | per-seed figures equal |", "|---|---|---|---|"]
    same_verdicts = True
    for a, b in zip(serial, parallel):
        same_verdicts &= a["verdict"] == b["verdict"]
        lines.append(f"| {a['claim'].text} | {a['verdict']} | {b['verdict']} | "
                     f"{'yes' if a['per_seed'] == b['per_seed'] else 'NO'} |")
    w1, w2 = walls["--parallel 1 --jobs 1"], walls["--parallel 2"]
    text = "\n".join([
        f"`--parallel 1 --jobs 1`: {w1 / 60:.1f} min; `--parallel 2`: {w2 / 60:.1f} min; **{w1 / w2:.2f}× faster** "
        f"(one pair of runs, seeds {args.seeds}); verdicts {'the same for every claim' if same_verdicts else 'DIFFER'} "
        f"({len(serial)} claims).", "", *lines])
    print(text)
    if args.write_docs:
        from edgesync.docs_block import replace_block
        note = f"{platform.node()}, {os.cpu_count()} cores, `--seeds {args.seeds}`"
        replace_block(ROOT / "docs" / "benchmarks.md", BEGIN, END,
                      f"_Written by `benchmarks/reproduce_parallel.py --write-docs` ({note})._\n\n{text}")


if __name__ == "__main__":
    main()
