"""Many logical clients in a few processes, live: 100 clients as slots of 4 client processes, bounded in time.

    PYTHONPATH=. .venv/bin/python benchmarks/slots_live.py [--clients 100] [--processes 4] [--seconds 30]

`edgesync run`'s launcher (runtime/live/launcher.py) with `live.processes` starts the processes (`edgesync
client --rank R --slots K`), and the coordinator serves an ASGD run of the small CNN on Fashion-MNIST for
`--seconds` (lr 0.005: updates are about as stale as there are clients); every fourth client is a ×4 device, the others ×1. Every client process's resident set
(psutil) is sampled every 200 ms. Prints the run's time, base step and throughput, per process its
ranks and RSS (when training starts, and its peak), and per profile the updates each client sent and
its achieved factor (relative to the ×1 clients, metrics/fidelity.py).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

MB = 2 ** 20


def sample_children(stop: threading.Event, metrics: Path, seen: dict[int, dict]) -> None:
    """Each `--slots` child's cmdline, RSS when metrics.jsonl first has a line (training started) and peak."""
    me = psutil.Process()
    while not stop.is_set():
        started = metrics.exists() and metrics.stat().st_size > 0
        for child in me.children():
            try:
                cmd, rss = child.cmdline(), child.memory_info().rss
            except psutil.Error:
                continue
            if "client" not in cmd:
                continue
            entry = seen.setdefault(child.pid, {"cmd": cmd, "start": None, "peak": 0})
            entry["peak"] = max(entry["peak"], rss)
            if started and entry["start"] is None:
                entry["start"] = rss
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--keep", type=Path, help="keep the run folder here (default: a temporary one)")
    args = parser.parse_args()
    profiles = ["x4" if rank % 4 == 3 else "x1" for rank in range(args.clients)]
    scenario = load_scenario({
        "name": "slots-live", "seed": 0, "clients": profiles,
        # 100 asynchronous clients make updates ~100 steps stale: the quick start's lr 0.05 diverges here
        "algorithms": [{"name": "asgd", "lr": 0.005}],
        "stop": {"time_budget_s": args.seconds, "target_acc": None},
        "eval": {"every_s": 10.0, "test_size": 1000},
        "live": {"processes": args.processes},
    })
    with tempfile.TemporaryDirectory(prefix="slots-live-") as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        stop, seen = threading.Event(), {}
        sampler = threading.Thread(target=sample_children, args=(stop, run_dir / "metrics.jsonl", seen), daemon=True)
        sampler.start()
        began = time.perf_counter()
        summary = run_scenario(scenario, run_dir, progress=False)
        took = time.perf_counter() - began
        stop.set()
        sampler.join(5)
        rows = [json.loads(line) for line in (run_dir / "clients.jsonl").read_text().splitlines()]
    entry = summary["asgd"]
    base = rows[0]["base_step_s"]
    print(f"{args.clients} clients in {args.processes} processes, ASGD for {args.seconds:g} s: the whole run "
          f"(process start, set-up, calibration, training, end) took {took:.0f} s; base step "
          f"{base * 1e3:.0f} ms (undisturbed step {statistics.median(r['reference_step_s'] for r in rows) * 1e3:.1f} ms); "
          f"{entry['updates']:,} updates, {entry['samples_per_s']:,.0f} samples/s, final accuracy {entry['final_acc']:.3f}")
    print("\n| process | ranks | RSS when training starts (MB) | peak RSS (MB) |\n|---|---|---:|---:|")
    for i, (pid, info) in enumerate(sorted(seen.items(), key=lambda kv: int(kv[1]["cmd"][kv[1]["cmd"].index("--rank") + 1]))):
        cmd = info["cmd"]
        first = int(cmd[cmd.index("--rank") + 1])
        count = int(cmd[cmd.index("--slots") + 1]) if "--slots" in cmd else 1
        start = f"{info['start'] / MB:,.0f}" if info["start"] else "–"
        print(f"| {i} (`--rank {first} --slots {count}`) | {first}–{first + count - 1} | {start} | {info['peak'] / MB:,.0f} |")
    total = sum(info["peak"] for info in seen.values())
    print(f"| all | | | {total / MB:,.0f} ({total / MB / args.clients:.1f} per client) |")
    print("\n| profile | clients | updates per client: min / median / max | achieved factor: median (min–max) |"
          "\n|---|---:|---|---|")
    for profile in ("x1", "x4"):
        mine = [r for r in rows if r["profile"] == profile]
        steps = sorted(r["steps"] for r in mine)
        factors = sorted(r["achieved_factor"] for r in mine if r["achieved_factor"] is not None)
        errors = [r for r in mine if r.get("error")]
        print(f"| {profile} | {len(mine)} | {steps[0]} / {statistics.median(steps):.0f} / {steps[-1]} | "
              f"{statistics.median(factors):.2f} ({factors[0]:.2f}–{factors[-1]:.2f}) |"
              + (f" {len(errors)} with errors" if errors else ""))


if __name__ == "__main__":
    main()
