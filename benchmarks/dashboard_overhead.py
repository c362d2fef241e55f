"""Does an open dashboard slow the coordinator? 100 slot clients, live, with and without it, side by side.

    PYTHONPATH=. .venv/bin/python benchmarks/dashboard_overhead.py [--repeats 3] [--seconds 30] [--write-docs]

The method, fixed before any figure was seen:
- the workload: scenarios/live_100_clients.yaml's ASGD entry (100 clients: 60 ×1, 30 ×2, 10 ×10, as slots of
  one client process per core), for `--seconds` of training, at a fixed base step (`--base-ms`, default 1,200 ms:
  what 2 cores sustain for this fleet, so that the run measures the coordinator, not a calibration that moves
  from run to run);
- two arms per repeat, in alternating order (A B, then B A, …) so that a drift of the machine falls on both:
  without the dashboard, and with it (`--dashboard 127.0.0.1:0`, its own process, as `edgesync run` starts it)
  and a viewer reading its event stream the whole run, as an open page does (a thread of this process: the
  browser of a lab's user runs on their own machine, not on the coordinator's). fleet.json and events.jsonl are
  written in both arms: they are part of every live run;
- the figures, per run: the updates the coordinator served per second (coordinator.jsonl), its utilisation
  and mean queueing delay; per repeat the ratio with / without of the first;
- the verdict (metrics/verdict.py, the one rule): the ratio's mean and 95% t-interval over the repeats, "no
  difference" only if the whole interval lies within ±5 % of 1.

`--write-docs` puts the table in docs/dashboard.md's `dashboard_overhead` block, the per-run figures in
docs/data/dashboard_overhead.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

from edgesync.config import load_scenario
from edgesync.docs_data import data_note, ran_on, write_block
from edgesync.metrics.verdict import compare, shown

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "dashboard_overhead"
MARGIN = 0.05
FIGURES = ("updates_served_per_s", "coordinator_utilisation", "queue_delay_mean_s")


def scenario(seconds: float, base_ms: float):
    data = yaml.safe_load((ROOT / "scenarios/live_100_clients.yaml").read_text())
    data["algorithms"] = [a for a in data["algorithms"] if a["name"] == "asgd"]
    data["stop"] = {"time_budget_s": seconds, "target_acc": None}
    data["emulation"] = {"mode": "fixed", "base_step_ms": base_ms}
    return load_scenario(data, source="scenarios/live_100_clients.yaml (asgd, fixed base step)")


class Viewer(threading.Thread):
    """An open page: reads the dashboard's event stream until told to stop, counting what it was sent."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.bytes, self.deltas, self.done = url + "api/stream", 0, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=30) as stream:
                    for line in stream:
                        self.bytes += len(line)
                        self.deltas += line.startswith(b"event: delta")
                        if self.done.is_set():
                            return
            except OSError:
                time.sleep(0.2)  # not up yet, or stopped


def one_run(sc, dashboard: bool) -> dict:
    from edgesync.dashboard.serve import DashboardProcess
    from edgesync.runtime.runs import log_to, run_scenario
    with tempfile.TemporaryDirectory(prefix="dashboard-overhead-") as tmp:
        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        log_to(run_dir, verbose=False)  # coordinator.log and events.jsonl, as `edgesync run` writes them
        process = viewer = None
        if dashboard:
            process = DashboardProcess(run_dir, "127.0.0.1:0")
            viewer = Viewer(process.url)
            viewer.start()
        began = time.perf_counter()
        try:
            summary = run_scenario(sc, run_dir, progress=False, claimed=True)
        finally:
            if process is not None:
                viewer.done.set()
                process.stop(linger_s=0)
        entry = summary["asgd"]
        row = {"dashboard": dashboard, "took_s": round(time.perf_counter() - began, 1),
               "updates": entry["updates"], **{k: entry.get(k) for k in FIGURES}}
        if viewer is not None:
            row.update(viewer_deltas=viewer.deltas, viewer_bytes=viewer.bytes)
        return row


def render(data: dict) -> str:
    runs = data["runs"]
    pairs = [(a, b) for a, b in zip([r for r in runs if not r["dashboard"]], [r for r in runs if r["dashboard"]])]
    out = ["| repeat | updates/s without | with | ratio | coordinator busy without | with | queueing delay without (ms) "
           "| with (ms) | the viewer was sent |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, (a, b) in enumerate(pairs, 1):
        out.append(f"| {i} | {a['updates_served_per_s']:.1f} | {b['updates_served_per_s']:.1f} | "
                   f"{b['updates_served_per_s'] / a['updates_served_per_s']:.3f} | "
                   f"{100 * a['coordinator_utilisation']:.0f} % | {100 * b['coordinator_utilisation']:.0f} % | "
                   f"{1e3 * a['queue_delay_mean_s']:.1f} | {1e3 * b['queue_delay_mean_s']:.1f} | "
                   f"{b['viewer_deltas']} updates, {b['viewer_bytes'] / 1e3:,.0f} kB |")
    ratios = [b["updates_served_per_s"] / a["updates_served_per_s"] for a, b in pairs]
    busy = [b["coordinator_utilisation"] / a["coordinator_utilisation"] for a, b in pairs]
    served = compare(ratios, 1.0, MARGIN, "slower with the dashboard", "faster with the dashboard")
    out += ["", f"Updates served per second, with ÷ without: **{shown(served, 3)}** (95% t-interval over "
                f"{len(ratios)} repeats; \"no difference\" only within ±{MARGIN:g}). The coordinator's utilisation, "
                f"with ÷ without: {statistics.mean(busy):.3f} (per repeat: "
                f"{', '.join(f'{x:.3f}' for x in busy)})."]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--base-ms", type=float, default=1200.0)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    sc = scenario(args.seconds, args.base_ms)
    runs, began = [], time.perf_counter()
    for i in range(args.repeats):
        for dashboard in ((False, True) if i % 2 == 0 else (True, False)):
            print(f"repeat {i + 1}/{args.repeats}, {'with' if dashboard else 'without'} the dashboard …",
                  file=sys.stderr, flush=True)
            runs.append(one_run(sc, dashboard))
            print(f"  {runs[-1]}", file=sys.stderr, flush=True)
    data = {"repeats": args.repeats, "seconds": args.seconds, "base_ms": args.base_ms, "runs": runs}
    print(render(data))
    if args.write_docs:
        took = (time.perf_counter() - began) / 60
        note = (f"_Written by `benchmarks/dashboard_overhead.py --repeats {args.repeats} --seconds {args.seconds:g} "
                f"--write-docs` on {ran_on()}, {took:.0f} min; 100 slot clients (scenarios/live_100_clients.yaml's "
                f"ASGD entry) at a fixed {args.base_ms:g} ms base step; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/dashboard.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
