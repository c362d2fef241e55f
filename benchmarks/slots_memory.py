"""Live memory per logical client: the RSS of one `edgesync client --slots K` process.

    PYTHONPATH=. .venv/bin/python benchmarks/slots_memory.py [--slots 1,10,50] [--repeats 3] [--seconds 3]

For each K, a coordinator in this process serves a scenario of K clients — the small CNN on
Fashion-MNIST, 600 training samples per client (a 100-client split of the 60,000), ASGD for
`--seconds` — and one client process hosts all of them (`edgesync client --rank 0 --slots K`; K = 1 is
a plain client process, what `edgesync run` starts per client). The process's resident set (psutil)
is sampled every 50 ms: "set up" is its RSS when training starts (every slot set up and calibrated),
"peak" the most over the run. Prints, per K, the mean ± sample standard deviation over the repeats of
both, the RSS per logical client, and what each slot beyond the first adds.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from edgesync.metrics.recorder import RunRecorder
from edgesync.runtime.live.coordinator import Coordinator
from edgesync.runtime.live.launcher import client_env
from edgesync.config import load_scenario

MB = 2 ** 20
SAMPLES_PER_CLIENT = 600


def measure(slots: int, seconds: float, folder: Path) -> tuple[float, float]:
    """(RSS when training starts, peak RSS) of one process hosting `slots` clients, in bytes."""
    scenario = load_scenario({
        "name": f"slots-memory-{slots}", "seed": 0, "clients": slots,
        "dataset": {"name": "fashion_mnist", "train_size": SAMPLES_PER_CLIENT * slots},
        "algorithms": [{"name": "asgd", "lr": 0.05}],
        "stop": {"time_budget_s": seconds, "target_acc": None},
        "eval": {"every_s": seconds, "test_size": 200},
    })
    recorder = RunRecorder(folder)
    coordinator = Coordinator(scenario, recorder, bind="tcp://127.0.0.1:*")
    coordinating = threading.Thread(target=coordinator.run, daemon=True)
    coordinating.start()
    cmd = [sys.executable, "-m", "edgesync.cli", "client", "--connect", coordinator.address, "--rank", "0"]
    if slots > 1:
        cmd += ["--slots", str(slots)]
    proc = subprocess.Popen(cmd, env=client_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watched, metrics = psutil.Process(proc.pid), folder / "metrics.jsonl"
    at_start = peak = 0
    try:
        while proc.poll() is None:
            try:
                rss = watched.memory_info().rss
            except psutil.NoSuchProcess:
                break
            peak = max(peak, rss)
            if not at_start and metrics.exists() and metrics.stat().st_size > 0:
                at_start = rss  # the coordinator's first evaluation: training has started
            time.sleep(0.05)
        coordinating.join(60)
        if proc.wait(60) != 0:
            raise RuntimeError(f"the client process exited with {proc.returncode} (K = {slots})")
    finally:
        if proc.poll() is None:
            proc.kill()
        recorder.close()
        coordinator.close()
    return float(at_start), float(peak)


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values) / MB:,.0f} ± {sd / MB:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", default="1,10,50", help="comma-separated K (each ≤ 100)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="ASGD training time per measurement")
    args = parser.parse_args()
    counts = [int(k) for k in args.slots.split(",")]
    results: dict[int, list[tuple[float, float]]] = {k: [] for k in counts}
    with tempfile.TemporaryDirectory(prefix="slots-memory-") as tmp:
        for repeat in range(args.repeats):  # interleaved: a drift in the machine's load hits every K alike
            for k in counts:
                results[k].append(measure(k, args.seconds, Path(tmp) / f"k{k}-{repeat}"))
                print(f"K={k} repeat {repeat}: set up {results[k][-1][0] / MB:.0f} MB, "
                      f"peak {results[k][-1][1] / MB:.0f} MB", file=sys.stderr)
    one = statistics.mean(r[0] for r in results[counts[0]]) if counts[0] == 1 else None
    print("| slots K | RSS set up (MB) | peak RSS (MB) | set up per client (MB) | each slot beyond the first (MB) |")
    print("|---:|---:|---:|---:|---:|")
    for k in counts:
        start, peak = [r[0] for r in results[k]], [r[1] for r in results[k]]
        beyond = f"{(statistics.mean(start) - one) / (k - 1) / MB:.1f}" if one is not None and k > 1 else "–"
        print(f"| {k} | {mean_sd(start)} | {mean_sd(peak)} | {statistics.mean(start) / k / MB:,.1f} | {beyond} |")
    print(f"\n(mean ± sd over {args.repeats} repeats; {SAMPLES_PER_CLIENT} Fashion-MNIST samples per client, "
          f"small CNN, ASGD, {args.seconds:g} s of training)")


if __name__ == "__main__":
    main()
