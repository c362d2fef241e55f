"""Many logical clients in a few processes, live: 100 clients as slots of 4 client processes, bounded in time.

    PYTHONPATH=. .venv/bin/python benchmarks/slots_live.py [--clients 100] [--processes 4] [--seconds 30] \
        [--write-docs]

`edgesync run`'s launcher (runtime/live/launcher.py) with `live.processes` starts the processes (`edgesync
client --rank R --slots K`), and the coordinator serves an ASGD run of the small CNN on Fashion-MNIST for
`--seconds` (lr 0.005: updates are about as stale as there are clients); every fourth client is a ×4 device, the others ×1. Every client process's resident set
(psutil) is sampled every 200 ms. Prints the run's time, base step and throughput, per process its
ranks and RSS (when training starts, and its peak), and per profile the updates each client sent and
its achieved factor (relative to the ×1 clients, metrics/fidelity.py). `--write-docs` puts the figures
in docs/benchmarks.md's `slots_live` block and the run's per-process and per-client figures in
docs/data/slots_live.json.
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
from edgesync.docs_data import data_note, ran_on, write_block

MB = 2 ** 20
ROOT = Path(__file__).resolve().parents[1]
BLOCK = "slots_live"


def sample_children(stop: threading.Event, metrics: Path, seen: dict[int, dict]) -> None:
    """Each client process's command, RSS when metrics.jsonl first has a line (training started) and peak. The
    clients are forked from the warm process (runtime/live/warm_start.py: grandchildren, whose process title is
    their `edgesync client --rank R --slots K` command), or children of this one (`EDGESYNC_WARM_START=0`)."""
    me = psutil.Process()
    while not stop.is_set():
        started = metrics.exists() and metrics.stat().st_size > 0
        for child in me.children(recursive=True):
            try:
                cmd, rss = " ".join(child.cmdline()).split(), child.memory_info().rss
            except psutil.Error:
                continue
            if "client" not in cmd or "--rank" not in cmd:
                continue
            entry = seen.setdefault(child.pid, {"cmd": cmd, "start": None, "peak": 0})
            entry["peak"] = max(entry["peak"], rss)
            if started and entry["start"] is None:
                entry["start"] = rss
        time.sleep(0.2)


def render(data: dict) -> str:
    """The block's figures from the run's (as docs/data/slots_live.json keeps them; RSS in bytes)."""
    rows, entry = data["clients_rows"], data["summary"]
    base = data["base_step_s"]
    undisturbed = statistics.median(r["reference_step_s"] for r in rows if r["reference_step_s"])
    out = [f"{len(rows)} clients in {len(data['processes'])} processes, ASGD for {data['seconds']:g} s: the whole run "
           f"(process start, set-up, calibration, training, end) took {data['took_s']:.0f} s; base step "
           f"{base * 1e3:.0f} ms, {base / undisturbed:.0f} × the undisturbed step ({undisturbed * 1e3:.1f} ms, median "
           f"over the clients); {entry['updates']:,} updates, {entry['samples_per_s']:,.0f} samples/s, final "
           f"accuracy {entry['final_acc']:.3f}", "",
           "| process | ranks | RSS when training starts (MB) | peak RSS (MB) |", "|---|---|---:|---:|"]
    for i, proc in enumerate(data["processes"]):
        first, count = proc["first"], proc["count"]
        start = f"{proc['start'] / MB:,.0f}" if proc["start"] else "–"
        out.append(f"| {i} (`--rank {first} --slots {count}`) | {first}–{first + count - 1} | {start} "
                   f"| {proc['peak'] / MB:,.0f} |")
    total = sum(proc["peak"] for proc in data["processes"])
    out += [f"| all | | | {total / MB:,.0f} ({total / MB / len(rows):.1f} per client) |", "",
            "| profile | clients | updates per client: min / median / max | achieved factor: median (min–max) |",
            "|---|---:|---|---|"]
    for profile in dict.fromkeys(r["profile"] for r in rows):  # in rank order: x1 first here
        mine = [r for r in rows if r["profile"] == profile]
        steps = sorted(r["steps"] for r in mine)
        factors = sorted(r["achieved_factor"] for r in mine if r["achieved_factor"] is not None)
        errors = [r for r in mine if r.get("error")]
        out.append(f"| {profile} | {len(mine)} | {steps[0]} / {statistics.median(steps):.0f} / {steps[-1]} | "
                   f"{statistics.median(factors):.2f} ({factors[0]:.2f}–{factors[-1]:.2f}) |"
                   + (f" {len(errors)} with errors" if errors else ""))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--keep", type=Path, help="keep the run folder here (default: a temporary one)")
    parser.add_argument("--write-docs", action="store_true", help="write the figures into docs/benchmarks.md")
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
    processes = []
    for info in sorted(seen.values(), key=lambda info: int(info["cmd"][info["cmd"].index("--rank") + 1])):
        cmd = info["cmd"]
        processes.append({"first": int(cmd[cmd.index("--rank") + 1]), "start": info["start"], "peak": info["peak"],
                          "count": int(cmd[cmd.index("--slots") + 1]) if "--slots" in cmd else 1})
    keep = ("client", "profile", "steps", "achieved_factor", "reference_step_s", "error")
    base = next(r["base_step_s"] for r in rows if r["base_step_s"])
    data = {"seconds": args.seconds, "took_s": took, "base_step_s": base,
            "summary": {k: summary["asgd"][k] for k in ("updates", "samples_per_s", "final_acc")},
            "processes": processes, "clients_rows": [{k: r.get(k) for k in keep} for r in rows]}
    print(render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/slots_live.py --write-docs` on {ran_on()}, {took / 60:.1f} min; "
                f"`--clients {args.clients} --processes {args.processes} --seconds {args.seconds:g}`, every fourth "
                f"client ×4, ASGD lr 0.005; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
