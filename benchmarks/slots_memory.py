"""Live memory per logical client: the RSS of one `edgesync client --slots K` process.

    PYTHONPATH=. .venv/bin/python benchmarks/slots_memory.py [--slots 1,10,50] [--repeats 3] [--seconds 3] \
        [--write-docs]

For each K, a coordinator in this process serves a scenario of K clients — the small CNN on
Fashion-MNIST, 600 training samples per client (a 100-client split of the 60,000), ASGD for
`--seconds` — and one client process hosts all of them (`edgesync client --rank 0 --slots K`; K = 1 is
a plain client process, what `edgesync run` starts per client). The process's resident set (psutil)
is sampled every 50 ms: "set up" is its RSS when training starts (every slot set up and calibrated),
"peak" the most over the run. Prints, per K, the mean ± sample standard deviation over the repeats of
both, the RSS per logical client, and what each slot beyond the first adds; and, once per repeat, the RSS
of a process (the clients' environment) that only imports torch: what every client process holds before
anything of its own. `--write-docs` puts the table in docs/benchmarks.md's `slots_memory` block and every
repeat's figures in docs/data/slots_memory.json.
"""
from __future__ import annotations

import argparse
import os
import platform
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
from edgesync.docs_data import data_note, write_block
from edgesync.runtime.live.slots import SLOT_MALLOC_ARENAS

MB = 2 ** 20
SAMPLES_PER_CLIENT = 600
ROOT = Path(__file__).resolve().parents[1]
BLOCK = "slots_memory"
TORCH_ONLY = "import psutil, torch; print(psutil.Process().memory_info().rss)"


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


def torch_only_rss() -> float:
    """The RSS, in bytes, of a process in the clients' environment that has only imported torch."""
    out = subprocess.run([sys.executable, "-c", TORCH_ONLY], env=client_env(), check=True, capture_output=True,
                         text=True).stdout
    return float(out.strip().splitlines()[-1])


def render(data: dict) -> str:
    """The block's table from each repeat's RSS figures (as docs/data/slots_memory.json keeps them, in bytes)."""
    runs = data["repeats"]

    def mean_sd(values: list[float]) -> str:
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.mean(values) / MB:,.0f} ± {sd / MB:,.0f}"

    set_up = {k: [run[str(k)]["set_up"] for run in runs] for k in data["slots"]}
    one = statistics.mean(set_up[1]) if 1 in set_up else None
    out = ["| slots K | RSS set up (MB) | peak RSS (MB) | set up per client (MB) | each slot beyond the first (MB) |",
           "|---:|---:|---:|---:|---:|"]
    for k in data["slots"]:
        peak = [run[str(k)]["peak"] for run in runs]
        beyond = f"{(statistics.mean(set_up[k]) - one) / (k - 1) / MB:.1f}" if one is not None and k > 1 else "–"
        out.append(f"| {k} | {mean_sd(set_up[k])} | {mean_sd(peak)} | {statistics.mean(set_up[k]) / k / MB:,.1f} "
                   f"| {beyond} |")
    torch_only = [run["torch_only"] for run in runs]
    out += ["", f"(mean ± sd over {len(runs)} repeats; MB = 2^20 bytes.) A process that only imports torch, in the "
            f"clients' environment: {mean_sd(torch_only)} MB."]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", default="1,10,50", help="comma-separated K (each ≤ 100)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="ASGD training time per measurement")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()
    counts = [int(k) for k in args.slots.split(",")]
    started, repeats = time.perf_counter(), []
    with tempfile.TemporaryDirectory(prefix="slots-memory-") as tmp:
        for repeat in range(args.repeats):  # interleaved: a drift in the machine's load hits every K alike
            run: dict = {"torch_only": torch_only_rss()}
            for k in counts:
                set_up, peak = measure(k, args.seconds, Path(tmp) / f"k{k}-{repeat}")
                run[str(k)] = {"set_up": set_up, "peak": peak}
                print(f"K={k} repeat {repeat}: set up {set_up / MB:.0f} MB, peak {peak / MB:.0f} MB", file=sys.stderr)
            repeats.append(run)
    took = time.perf_counter() - started
    data = {"slots": counts, "seconds": args.seconds, "samples_per_client": SAMPLES_PER_CLIENT, "repeats": repeats}
    print(render(data))
    print(f"\n({SAMPLES_PER_CLIENT} Fashion-MNIST samples per client, small CNN, ASGD, {args.seconds:g} s of training)")
    if args.write_docs:
        note = (f"_Written by `benchmarks/slots_memory.py --write-docs` on {platform.node()} ({platform.machine()}, "
                f"{len(os.sched_getaffinity(0))} cores), {time.strftime('%Y-%m-%d')}, {took / 60:.1f} min; "
                f"`--slots {args.slots} --repeats {args.repeats} --seconds {args.seconds:g}`, the small CNN, "
                f"{SAMPLES_PER_CLIENT} Fashion-MNIST samples per client, a slot process capped at "
                f"{SLOT_MALLOC_ARENAS} malloc arenas; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
