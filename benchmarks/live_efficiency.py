"""Live runtime efficiency: four ×1 clients under the coordinator vs four bare training processes.

    .venv/bin/python benchmarks/live_efficiency.py [--seconds 20] [--clients 4] [--repeats 1] [--write-docs]

Both sides train the small CNN on real Fashion-MNIST batches of 32 with one torch thread per
process, on the same machine, one after the other in this run. Bare: each process loops
forward/backward/SGD step on its own model. EdgeSync: an ASGD run (every step is a round trip of
the whole model through the coordinator) with the same number of clients, in `emulation.mode: undisturbed`
(a ×1 client is paced against its own undisturbed step, so it is not slowed: the default shared base step
would make every ×1 device slower than the hardware on purpose, emulation/device_model.py); its total
samples/s comes from the run's summary. Prints both and the ratio; with `--repeats N`, N such pairs in a row, each ratio
taken within its pair. `--write-docs` puts the table in docs/benchmarks.md's `live_efficiency` block and
every pair's figures in docs/data/live_efficiency.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edgesync.constants import CLIENT_THREAD_ENV, MALLOC_ENV
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario
from edgesync.docs_data import data_note, ran_on, write_block

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "live_efficiency"

BARE = """
import sys, time, numpy as np, torch
torch.set_num_threads(1)
from edgesync.runtime.bookkeeping.workload import dataset, make_trainer
from edgesync.trainer import NoHook
data = dataset("fashion_mnist", None, 15000)
tr = make_trainer(data, "cnn", np.arange(15000), 32, seed=int(sys.argv[2]), device=torch.device("cpu"), hook=NoHook())
theta = tr.get_params()
for _ in range(3):
    tr.gradient()
sys.stdout.write("go\\n"); sys.stdout.flush()
sys.stdin.readline()
end = time.perf_counter() + float(sys.argv[1]); n = 0
while time.perf_counter() < end:
    g, _ = tr.gradient(); theta -= 0.05 * g; tr.set_params(theta); n += 32
print(n / float(sys.argv[1]))
"""


def bare(clients: int, seconds: float) -> float:
    env = {**os.environ, **CLIENT_THREAD_ENV, **MALLOC_ENV}  # as the runtime starts its client processes
    procs = [subprocess.Popen([sys.executable, "-c", BARE, str(seconds), str(i)], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for i in range(clients)]
    for p in procs:  # start the clock together, after every process has loaded torch and the data
        assert p.stdout.readline().strip() == "go"
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
    return sum(float(p.communicate()[0].strip().splitlines()[-1]) for p in procs)


def edgesync(clients: int, seconds: float) -> float:
    scenario = load_scenario({
        "name": "live-efficiency", "clients": clients,
        "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 32}],
        "stop": {"time_budget_s": seconds, "target_acc": None},
        "eval": {"every_s": seconds, "test_size": 500},
        "emulation": {"mode": "undisturbed"},  # ×1 clients unpaced: the shared base step would slow them by design
    }, source="benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_scenario(scenario, Path(tmp) / "run", progress=False)
    return summary["asgd"]["samples_per_s"]


def render(data: dict) -> str:
    """The block's table from each repeat's pair of figures (as docs/data/live_efficiency.json keeps them)."""
    pairs, n = data["repeats"], data["clients"]

    def show(xs: list[float], fmt: str) -> str:
        mean = f"{statistics.mean(xs):{fmt}}"
        return mean if len(xs) == 1 else f"{mean} ± {statistics.stdev(xs):{fmt}}"

    bare_rates, ours = [p["bare"] for p in pairs], [p["edgesync"] for p in pairs]
    head = "samples/s" if len(pairs) == 1 else f"samples/s, mean ± sd over {len(pairs)} repeats"
    table = [f"| | {head} |", "|---|---:|",
             f"| {n} bare training processes (forward, backward, SGD step) | {show(bare_rates, ',.0f')} |",
             f"| EdgeSync ASGD, {n} ×1 clients (every step a round trip of the whole model) | {show(ours, ',.0f')} |",
             f"| ratio, EdgeSync ÷ bare | {show([o / b for o, b in zip(ours, bare_rates)], '.2f')} |"]
    return "\n".join(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1, help="pairs of runs (bare, then EdgeSync), one after another")
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = ap.parse_args()
    started, pairs = time.perf_counter(), []
    for _ in range(args.repeats):
        pairs.append({"bare": bare(args.clients, args.seconds), "edgesync": edgesync(args.clients, args.seconds)})
        print(f"bare {pairs[-1]['bare']:.0f} samples/s, EdgeSync {pairs[-1]['edgesync']:.0f} samples/s", flush=True)
    took = time.perf_counter() - started
    data = {"clients": args.clients, "seconds": args.seconds, "repeats": pairs}
    print(render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/live_efficiency.py --repeats {args.repeats} --write-docs` on "
                f"{ran_on()}, {took / 60:.1f} min; {args.clients} clients, {args.seconds:g} s each "
                f"side; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
