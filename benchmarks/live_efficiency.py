"""Live runtime efficiency: four ×1 clients under the coordinator vs four bare training processes.

    .venv/bin/python benchmarks/live_efficiency.py [--seconds 20] [--clients 4]

Both sides train the small CNN on real Fashion-MNIST batches of 32 with one torch thread per
process, on the same machine, one after the other in this run. Bare: each process loops
forward/backward/SGD step on its own model. EdgeSync: an ASGD run (every step is a round trip of
the whole model through the coordinator) with the same number of clients; its total samples/s comes
from the run's summary. Prints both and the ratio.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from edgesync.constants import CLIENT_THREAD_ENV
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

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
    env = {**os.environ, **CLIENT_THREAD_ENV}
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
    }, "benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_scenario(scenario, Path(tmp) / "run", progress=False)
    return summary["asgd"]["samples_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    b = bare(args.clients, args.seconds)
    e = edgesync(args.clients, args.seconds)
    print(f"{args.clients} bare training processes: {b:8.0f} samples/s")
    print(f"EdgeSync ASGD, {args.clients} x1 clients: {e:8.0f} samples/s")
    print(f"ratio (EdgeSync / bare):    {e / b:8.2f}")


if __name__ == "__main__":
    main()
