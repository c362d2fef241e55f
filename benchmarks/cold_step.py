"""How much slower is a fresh process's first training step, and does one warm-up step take that away?

    .venv/bin/python benchmarks/cold_step.py [--processes 5] [--model cnn] [--batch 32] [--write-docs]

Why: under Flower every message runs in a new ClientApp process (docs/flower.md), so with one step per message
every step is a process's first. Method (fixed before the first result was seen): `--processes` pairs of
fresh Python processes, each with 1 torch thread (as a client) and a 1,000-sample Fashion-MNIST slice. In the
first of a pair, the trainer's first step is timed (cold); in the second, `step_time.warm_up(steps=1)` runs
first and then the first counted step is timed (what a ClientApp's paced step sees after its warm-up). Each
process then times 5 more steps, whose median is its warm step. The table gives cold ÷ warm and
after-warm-up ÷ warm, mean ± sd over the pairs.
`--write-docs` writes the table into docs/flower.md and the pairs' figures into docs/data/cold_step.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402

BLOCK = "cold_step"

ONE_PROCESS = """
import json, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from edgesync.runtime.bookkeeping.step_time import warm_up
from edgesync.runtime.bookkeeping.workload import dataset, make_trainer
from edgesync.trainer import NoHook
model, batch, warmed = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "warmed"
data = dataset("fashion_mnist", None, 1000)
trainer = make_trainer(data, model, np.arange(500), batch, seed=0, device=torch.device("cpu"), hook=NoHook())
def timed():
    t0 = time.perf_counter(); trainer.gradient(); return time.perf_counter() - t0
if warmed:
    warm_up(trainer, steps=1)
first = timed()
print(json.dumps({"first": first, "warm": sorted(timed() for _ in range(5))[2]}))
"""


def one_process(model: str, batch: int, warmed: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", ONE_PROCESS, model, str(batch), "warmed" if warmed else "cold"],
                         cwd=ROOT, check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(pairs: list[list[dict]]) -> str:
    """The block's table from the pairs' figures (as docs/data/cold_step.json keeps them: [cold, warmed] each)."""
    def cell(values: list[float], fmt: str) -> str:
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{format(statistics.mean(values), fmt)} ± {format(sd, fmt)}"
    lines = ["| step | ms, mean ± sd | ÷ that process's warm step, mean ± sd |", "|---|---:|---:|"]
    for name, i in (("a fresh process's first", 0), ("the first after one warm-up step", 1)):
        rows = [pair[i] for pair in pairs]
        lines.append(f"| {name} | {cell([r['first'] * 1e3 for r in rows], '.1f')} | "
                     f"{cell([r['first'] / r['warm'] for r in rows], '.2f')} |")
    warm = [r["warm"] * 1e3 for pair in pairs for r in pair]
    lines.append(f"| warm (median of 5) | {cell(warm, '.1f')} | 1 |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--processes", type=int, default=5)
    p.add_argument("--model", default="cnn")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--write-docs", action="store_true")
    a = p.parse_args()
    started, pairs = time.time(), []
    for i in range(a.processes):
        pairs.append((one_process(a.model, a.batch, warmed=False), one_process(a.model, a.batch, warmed=True)))
        cold, warmed = pairs[-1]
        print(f"pair {i + 1}/{a.processes}: first step {cold['first'] * 1e3:.1f} ms (warm {cold['warm'] * 1e3:.1f}); "
              f"after a warm-up {warmed['first'] * 1e3:.1f} ms (warm {warmed['warm'] * 1e3:.1f})", flush=True)
    text = table(pairs)
    print(text)
    if a.write_docs:
        note = (f"_Written by `benchmarks/cold_step.py --processes {a.processes} --model {a.model} --batch {a.batch} "
                f"--write-docs` on {platform.node()} ({platform.machine()}, {len(os.sched_getaffinity(0))} cores), "
                f"{time.strftime('%Y-%m-%d')}, {time.time() - started:.0f} s; {a.processes} pairs of fresh processes; "
                f"{data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "flower.md", BLOCK, note, [list(pair) for pair in pairs])


if __name__ == "__main__":
    main()
