"""Simulator scale: peak memory and wall time for 10, 100 and 1,000 clients.

    .venv/bin/python benchmarks/sim_scale.py [--sizes 10 100 1000] [--steps 2000]

Each (clients, algorithm) pair runs in a fresh subprocess, so its peak RSS (getrusage's ru_maxrss)
is its own. Every run trains the small CNN on Fashion-MNIST (all 60,000 training images, split
i.i.d.), ×1 clients, batch 32, one torch thread, with a fixed step time (0.01 virtual s), about
`--steps` gradient steps whatever the number of clients (ASGD: max_updates = steps, lr
min(0.05, 0.5 / clients); SSGD: max_updates = steps / clients rounds, at least 2, lr 0.1), and two
evaluations (t = 0 and the end) on 500
test images. Printed per run: updates, steps the clients ran, wall time of the simulation (data
loading excluded, client set-up included), milliseconds per step, RSS after loading the data, peak
RSS, and the growth between the two (in all and per client).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(clients: int, algorithm: str, steps: int) -> None:
    import psutil
    import torch

    from edgesync.metrics.recorder import RunRecorder, read_jsonl
    from edgesync.runtime.simulator import Simulator
    from edgesync.scenario import scenario_from_dict

    torch.set_num_threads(1)
    max_updates = steps if algorithm == "asgd" else max(2, steps // clients)
    sc = scenario_from_dict({
        "name": "sim-scale", "seed": 0, "runtime": "sim",
        "dataset": {"name": "fashion_mnist"},
        "clients": clients,
        # ASGD's lr shrinks with the number of clients (its staleness grows with it; 0.05 diverges at 100).
        "algorithms": [{"name": algorithm, "lr": 0.1 if algorithm == "ssgd" else min(0.05, 0.5 / clients)}],
        "stop": {"time_budget_s": 1e6, "max_updates": max_updates, "target_acc": None},
        "eval": {"every_s": 1e5, "test_size": 500},
        "sim": {"base_step_s": 0.01},
    })
    with tempfile.TemporaryDirectory() as tmp:
        recorder = RunRecorder(Path(tmp))
        sim = Simulator(sc, recorder)
        sim.prepare()
        base_rss = psutil.Process().memory_info().rss
        t0 = time.perf_counter()
        sim.run()
        wall = time.perf_counter() - t0
        recorder.close()
        rows = read_jsonl(Path(tmp) / "clients.jsonl")
        last = read_jsonl(Path(tmp) / "metrics.jsonl")[-1]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"clients": clients, "algorithm": algorithm, "updates": last["updates"],
                      "steps": sum(r["steps"] for r in rows), "wall_s": wall, "base_rss": base_rss,
                      "peak_rss": peak, "virtual_s": last["time_s"]}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--algorithms", nargs="+", default=["asgd", "ssgd"])
    ap.add_argument("--steps", type=int, default=2000, help="about this many gradient steps per run")
    ap.add_argument("--child", nargs=3, metavar=("CLIENTS", "ALGORITHM", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], int(args.child[2]))
        return

    mb = 1 / 2 ** 20
    print(f"small CNN (184,586 parameters: 0.74 MB a model), Fashion-MNIST 60,000 images, x1 clients, "
          f"~{args.steps} steps per run, one fresh process per run")
    print(f"{'clients':>7} {'algorithm':9} {'updates':>7} {'steps':>6} {'wall s':>7} {'ms/step':>8} "
          f"{'RSS after data MiB':>18} {'peak RSS MiB':>12} {'growth MiB':>10} {'MiB/client':>10}", flush=True)
    for n in args.sizes:
        for algorithm in args.algorithms:
            proc = subprocess.run([sys.executable, __file__, "--child", str(n), algorithm, str(args.steps)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{n:>7} {algorithm:9} FAILED (status {proc.returncode}):\n{proc.stderr[-2000:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            growth = (r["peak_rss"] - r["base_rss"]) * mb
            print(f"{n:>7} {algorithm:9} {r['updates']:>7} {r['steps']:>6} {r['wall_s']:>7.1f} "
                  f"{1000 * r['wall_s'] / r['steps']:>8.2f} {r['base_rss'] * mb:>18.0f} {r['peak_rss'] * mb:>12.0f} "
                  f"{growth:>10.0f} {growth / n:>10.3f}", flush=True)


if __name__ == "__main__":
    main()
