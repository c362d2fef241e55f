"""The same FedAvg scenario under our ZeroMQ coordinator and under a real Flower SuperLink, side by side.

    .venv/bin/python benchmarks/flower_overhead.py [--rounds 20] [--repeats 2] [--write-docs]

Runs scenarios/flower_fedavg.yaml (2 clients, i.i.d. Fashion-MNIST, 20 local steps per round) three
ways in this run, `--repeats` times interleaved: with `edgesync run` (live, ZeroMQ); with `flwr run` on a
local SuperLink and two SuperNodes (edgesync.flower.lab, what `edgesync flower-up --run` does), whose
ServerApp and ClientApp processes are forked from the lab's warm process (edgesync/flower/warm_apps.py);
and the same with `EDGESYNC_WARM_START=0`, every app process started by Flower afresh. All apply the same
rounds from the same θ₀ with the same per-client mini-batch sequences, so their final models should agree
up to floating point. Prints, for each: final accuracy, wall time per round, the clients' compute per
round, the overhead per round (wall − compute: messaging, process start-up, polling) and the machine's
busy CPU time per round (/proc/stat: every process, the lab's included), as mean ± sd over the repeats;
`--write-docs` writes the table into docs/flower.md and each repeat's figures into
docs/data/flower_overhead-table.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import time
from datetime import date
from pathlib import Path

from edgesync.config import load_scenario
from edgesync.docs_data import data_note, write_block
from edgesync.flower.lab import FlowerLab
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.live.warm_start import WARM_START_ENV
from edgesync.runtime.runs import run_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/flower_fedavg.yaml"
BLOCK = "flower_overhead:table"
WAYS = {"zeromq": "EdgeSync coordinator (ZeroMQ)", "flower": "Flower, apps forked from the lab's warm process",
        "flower-cold": "Flower, each app a fresh process (`EDGESYNC_WARM_START=0`)"}


def busy_cpu_s() -> float:
    """Seconds of CPU time the whole machine has spent busy (not idle or waiting for I/O) since boot."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def figures(run_dir: Path, busy_s: float) -> dict:
    s = next(iter(json.loads((run_dir / "summary.json").read_text()).values()))
    clients = read_jsonl(run_dir / "clients.jsonl")
    rounds = max(1, s["updates"])
    compute = max(c["compute_s"] for c in clients) / rounds  # a round waits for its slowest client
    per_round = s["duration_s"] / rounds
    return {"final_acc": s["final_acc"], "rounds": s["updates"], "round_s": per_round, "compute_s": compute,
            "overhead_s": per_round - compute, "busy_s": busy_s / rounds,
            "bytes_per_round": (s["bytes_up"] + s["bytes_down"]) / rounds}


def run_once(way: str, out: Path, overrides: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    t0, cpu0 = time.perf_counter(), busy_cpu_s()
    if way == "zeromq":
        run_scenario(load_scenario(ROOT / SCENARIO, overrides + ["runtime=live"]), out, progress=False)
    else:
        saved = os.environ.get(WARM_START_ENV)
        os.environ[WARM_START_ENV] = "0" if way == "flower-cold" else "1"
        try:
            with FlowerLab(out.parent / f"flwr-home-{way}", [{"partition-id": 0}, {"partition-id": 1}]) as lab:
                lab.wait_for_nodes()
                result = lab.run_app(ROOT, {"scenario": SCENARIO, "set": "; ".join(overrides), "out": str(out)})
        finally:
            if saved is None:
                os.environ.pop(WARM_START_ENV)
            else:
                os.environ[WARM_START_ENV] = saved
        if result.returncode != 0 or not (out / "summary.json").exists():
            raise SystemExit(f"flwr run failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    busy = busy_cpu_s() - cpu0  # the run's whole span, the lab's start and stop included
    print(f"{way}: {time.perf_counter() - t0:.0f} s", flush=True)
    return figures(out, busy)


def cell(values: list[float], digits: int) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {sd:.{digits}f}"


def _overhead_ratio(flower_s: float, zeromq_s: float) -> str:
    if zeromq_s < 0.01:  # wall − compute within what the two clocks can tell apart: no ratio to take
        return f"overhead per round: Flower {flower_s:.2f} s, ZeroMQ under 10 ms ({zeromq_s:+.3f} s)"
    return f"overhead per round, Flower ÷ ZeroMQ: {flower_s / zeromq_s:.0f}×"


def render(got: dict[str, list[dict]]) -> str:
    """The block's table and comparisons from each way's repeats (as docs/data/flower_overhead-table.json keeps
    them: way → one `figures` dict per repeat)."""
    table = ["| runtime | final acc | rounds | wall s / round | compute s / round | overhead s / round | "
             "busy CPU s / round | MB / round |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for way, name in WAYS.items():
        rs = got[way]
        table.append(f"| {name} | {cell([r['final_acc'] for r in rs], 3)} | {rs[0]['rounds']} | "
                     f"{cell([r['round_s'] for r in rs], 3)} | {cell([r['compute_s'] for r in rs], 3)} | "
                     f"{cell([r['overhead_s'] for r in rs], 3)} | {cell([r['busy_s'] for r in rs], 2)} | "
                     f"{rs[0]['bytes_per_round'] / 1e6:.2f} |")
    mean = {way: {k: statistics.mean(r[k] for r in got[way]) for k in ("final_acc", "overhead_s", "busy_s")}
            for way in WAYS}
    lines = [f"final accuracy difference (Flower − ZeroMQ): "
             f"{100 * (mean['flower']['final_acc'] - mean['zeromq']['final_acc']):+.2f} pt",
             _overhead_ratio(mean['flower']['overhead_s'], mean['zeromq']['overhead_s']) + "; "
             f"Flower's apps started afresh ÷ forked: "
             f"overhead {mean['flower-cold']['overhead_s'] / mean['flower']['overhead_s']:.2f}×, "
             f"busy CPU {mean['flower-cold']['busy_s'] / mean['flower']['busy_s']:.2f}×"]
    return "\n".join(table) + "\n\n" + "\n".join(f"- {line}" for line in lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("runs/flower-overhead"))
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/flower.md")
    args = ap.parse_args()
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    out = args.out.resolve()
    overrides = [f"stop.max_updates={args.rounds}"]
    t_start = time.perf_counter()
    got: dict[str, list[dict]] = {way: [] for way in WAYS}
    for repeat in range(args.repeats):
        for way in WAYS:
            got[way].append(run_once(way, out / f"{way}-{repeat}", overrides))

    head = (f"FedAvg, 2 clients, {args.rounds} rounds of 20 local steps (scenarios/flower_fedavg.yaml), "
            f"{args.repeats} repeats, mean ± sd")
    print(f"\n{head}\n\n{render(got)}")
    print(f"run folders under {out}")
    if args.write_docs:
        took = time.perf_counter() - t_start
        note = (f"_Written by `benchmarks/flower_overhead.py --rounds {args.rounds} --repeats {args.repeats} "
                f"--write-docs` on {platform.node()} ({platform.machine()}, {os.cpu_count()} cores), "
                f"{date.today()}, {took / 60:.0f} min. {head}; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/flower.md", BLOCK, note, got)


if __name__ == "__main__":
    main()
