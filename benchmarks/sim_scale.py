"""Simulator scale: peak memory and wall time for 10, 100 and 1,000 clients.

    .venv/bin/python benchmarks/sim_scale.py [--sizes 10 100 1000] [--steps 2000] [--repeats 1] [--write-docs]

Each (clients, algorithm) pair runs in a fresh subprocess, so its peak RSS (getrusage's ru_maxrss)
is its own. Every run trains the small CNN on Fashion-MNIST (all 60,000 training images, split
i.i.d.), ×1 clients, batch 32, one torch thread, with a fixed step time (0.01 virtual s), about
`--steps` gradient steps whatever the number of clients (ASGD: max_updates = steps, lr
min(0.05, 0.5 / clients); SSGD: max_updates = steps / clients rounds, at least 2, lr 0.1), and two
evaluations (t = 0 and the end) on 500
test images. Printed per run: updates, steps the clients ran, wall time of the simulation (data
loading excluded, client set-up included), milliseconds per step, RSS after loading the data, peak
RSS, and the growth between the two (in all and per client). With `--repeats R` the sizes run R times,
interleaved (every size once per repeat: the machine's speed drifts), and each figure is the mean (± sd
for the time per step). `--write-docs` puts the table into docs/simulator.md ("Clients vs memory and
time", `sim_clients:table`) and every run's figures into docs/data/sim_clients-table.json.

    .venv/bin/python benchmarks/sim_scale.py --backends [--repeats 3] [--budget 10] [--write-docs]

Serial vs Ray backend (issue 22). Method (fixed before the first result was seen): a compute-bound
scenario, 16 ×1 clients on the full Fashion-MNIST training set split i.i.d., SSGD (lr 0.1) and ASGD
(lr 0.05) entries, batch 128 (a step is ≈ 30–40 ms of torch against ≈ 1–2 ms of engine work per update),
a fixed base step of 0.1 virtual s, `server_time: zero`, `--budget` virtual seconds per entry, evaluations
every 2 virtual s on 500 test images. Each repeat runs the serial backend, then the Ray backend with a
local Ray instance started by the run (`ray.init()`: as many workers as this machine has cores), each in a
fresh process; the time is the whole `run_sim` call as a user waits for it (Ray's and its workers'
start-up included, data loading excluded). Per repeat: both wall times, their ratio, and whether the two
metrics.jsonl are identical (apart from wall_clock). The speed-up is the mean ratio with its 95%
t-interval over the repeats; the ≥ 1.5× target holds only if the whole interval is above it.
`--write-docs` puts the table into docs/benchmarks.md and the repeats' figures into docs/data/sim_backends.json.

    .venv/bin/python benchmarks/sim_scale.py --scenario scenarios/sim_10k_clients.yaml [--set KEY=VALUE] [--write-docs]

A scenario at scale (issue 22): each of its algorithm entries in a fresh process, as `edgesync run` runs it
(its backend, its spill limit). Printed per entry: the clients, RSS once the data are loaded and the
simulator prepared, peak RSS (getrusage, this process: a Ray backend's workers are not in it), the growth
per client, the wall time of the run, the updates the clients sent (FedAvg: each sampled client's upload;
asynchronous: each gradient) and wall seconds per 1,000 of them, the virtual time reached. `--write-docs`
puts the table into docs/simulator.md ("10,000 clients") and the entries' figures into docs/data/sim_at_scale.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402
from edgesync.metrics.seeds import interval  # noqa: E402
from edgesync.metrics.verdict import against  # noqa: E402

BACKENDS_BLOCK, SCALE_BLOCK, CLIENTS_BLOCK = "sim_backends", "sim_at_scale", "sim_clients:table"
MIB = 2 ** 20


def child(clients: int, algorithm: str, steps: int) -> None:
    import psutil
    import torch

    from edgesync.metrics.recorder import RunRecorder, read_jsonl
    from edgesync.runtime.sim.simulator import Simulator
    from edgesync.config import load_scenario

    torch.set_num_threads(1)
    max_updates = steps if algorithm == "asgd" else max(2, steps // clients)
    sc = load_scenario({
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


def backend_child(backend: str, budget: float, out: str) -> None:
    """One run of the backends comparison in this fresh process; prints its wall time."""
    import torch

    from edgesync.metrics.recorder import RunRecorder
    from edgesync.runtime.sim.simulator import Simulator
    from edgesync.config import load_scenario

    torch.set_num_threads(1)
    sc = load_scenario({
        "name": "sim-backends", "seed": 0, "runtime": "sim", "dataset": {"name": "fashion_mnist"},
        "clients": ["x1"] * 16,
        "algorithms": [{"name": "ssgd", "lr": 0.1, "batch_size": 128}, {"name": "asgd", "lr": 0.05, "batch_size": 128}],
        "stop": {"time_budget_s": budget, "target_acc": None}, "eval": {"every_s": 2.0, "test_size": 500},
        "sim": {"base_step_s": 0.1, "server_time": "zero", "backend": backend},
    })
    recorder = RunRecorder(Path(out))
    sim = Simulator(sc, recorder)
    sim.prepare()
    t0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - t0
    recorder.close()
    print(json.dumps({"backend": backend, "wall_s": wall}))


def scenario_child(path: str, label: str, overrides: list[str]) -> None:
    """One entry of a scenario in this fresh process; prints its figures as JSON."""
    from edgesync.metrics.recorder import RunRecorder, read_jsonl
    from edgesync.runtime.sim.simulator import Simulator
    from edgesync.config import load_scenario

    sc = load_scenario(path, overrides)
    sc = sc.model_copy(update={"algorithms": [a for a in sc.algorithms if a.key == label]})
    with tempfile.TemporaryDirectory() as tmp:
        recorder = RunRecorder(Path(tmp))
        sim = Simulator(sc, recorder)
        sim.prepare()
        base_rss = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        t0 = time.perf_counter()
        sim.run()
        wall = time.perf_counter() - t0
        recorder.close()
        clients = read_jsonl(Path(tmp) / "clients.jsonl")
        last = read_jsonl(Path(tmp) / "metrics.jsonl")[-1]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    rounds = [r["rounds"] for r in clients if r.get("rounds") is not None]
    sent = sum(rounds) if rounds else last["updates"]  # FedAvg: uploads of sampled clients; async: gradients
    print(json.dumps({"label": label, "clients": len(sc.clients), "backend": sc.sim.backend, "base_rss": base_rss,
                      "peak_rss": peak, "wall_s": wall, "updates": last["updates"], "sent": sent,
                      "virtual_s": last["time_s"], "acc": last.get("test_acc")}))


def at_scale(path: str, overrides: list[str]) -> list[dict]:
    """Each entry's figures, as its fresh process printed them (scenario_child)."""
    from edgesync.config import load_scenario

    entries = []
    for entry in load_scenario(path, overrides).algorithms:
        args = [sys.executable, __file__, "--scenario-child", path, entry.key] + [f"--set={o}" for o in overrides]
        print(f"  {entry.key}: running…", file=sys.stderr, flush=True)
        proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
        if proc.returncode != 0:
            sys.exit(f"{entry.key} failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
        entries.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(scale_row(entries[-1]), file=sys.stderr, flush=True)
    return entries


def scale_row(r: dict) -> str:
    """One entry's row: its RSS in MB, growth per client and seconds per 1,000 updates from its figures."""
    mb = 2 ** 20
    return (f"| {r['label']} | {r['clients']:,} | {r['backend']} | {r['base_rss'] / mb:,.0f} | {r['peak_rss'] / mb:,.0f} "
            f"| {(r['peak_rss'] - r['base_rss']) / mb / r['clients']:.3f} | {r['wall_s']:.1f} | {r['sent']:,} "
            f"| {1000 * r['wall_s'] / max(r['sent'], 1):.1f} | {r['virtual_s']:g} | {r['acc']:.3f} |")


def render_at_scale(data: dict) -> str:
    """The sim_at_scale table from the entries' figures (as docs/data/sim_at_scale.json keeps them)."""
    return "\n".join(["| entry | clients | backend | RSS prepared (MB) | peak RSS (MB) | growth per client (MB) "
                      "| wall (s) | client updates | s per 1,000 | virtual s | final acc |",
                      "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|", *map(scale_row, data["entries"])])


def metrics_rows(folder: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "wall_clock"}
            for line in (folder / "metrics.jsonl").read_text().splitlines()]


def compare_backends(repeats: int, budget: float) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            row = {}
            for backend in ("serial", "ray"):
                out = Path(tmp) / f"{backend}-{i}"
                proc = subprocess.run([sys.executable, __file__, "--backend-child", backend, str(budget), str(out)],
                                      capture_output=True, text=True, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
                if proc.returncode != 0:
                    sys.exit(f"{backend} run {i + 1} failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
                row[backend] = json.loads(proc.stdout.strip().splitlines()[-1])["wall_s"]
            row["identical"] = metrics_rows(Path(tmp) / f"serial-{i}") == metrics_rows(Path(tmp) / f"ray-{i}")
            rows.append(row)
            print(f"  repeat {i + 1}/{repeats}: serial {row['serial']:.1f} s, ray {row['ray']:.1f} s, "
                  f"{row['serial'] / row['ray']:.2f}×, metrics identical: {row['identical']}", file=sys.stderr, flush=True)
    return rows


def render_backends(data: dict) -> str:
    """The sim_backends table from the repeats' wall times (as docs/data/sim_backends.json keeps them): the
    speed-ups, their interval and the verdict are computed here."""
    rows = data["repeats"]
    ratios = [r["serial"] / r["ray"] for r in rows]
    ratio = interval(ratios)
    lines = [f"| repeat | serial (s) | Ray, {data['workers']} workers (s) | speed-up | metrics identical |",
             "|---:|---:|---:|---:|---|"]
    for i, (r, speedup) in enumerate(zip(rows, ratios)):
        lines.append(f"| {i + 1} | {r['serial']:.1f} | {r['ray']:.1f} | {speedup:.2f}× | {'yes' if r['identical'] else 'NO'} |")
    verdict = against(ratios, "≥", 1.5)  # the project's one verdict rule
    interval_text = f" [{ratio.low:.2f}, {ratio.high:.2f}]" if ratio.low is not None else ""
    lines.append("")
    lines.append(f"Speed-up {ratio.mean:.2f}×{interval_text} (mean and 95% t-interval over {len(rows)} repeats); "
                 f"target ≥ 1.5×: **{verdict}**. 16 ×1 clients, SSGD + ASGD, batch 128, {data['budget']:g} virtual s per "
                 f"entry, `server_time: zero`.")
    return "\n".join(lines)


def render_clients(data: dict) -> str:
    """The sim_clients table from every run's figures (as docs/data/sim_clients-table.json keeps them): per
    (clients, algorithm), the mean over its repeats, and the time per step at the most clients over the fewest."""
    import statistics

    groups: dict[tuple[int, str], list[dict]] = {}
    for r in data["runs"]:
        groups.setdefault((r["clients"], r["algorithm"]), []).append(r)

    def mean(runs: list[dict], figure) -> float:
        return statistics.fmean(figure(r) for r in runs)

    def ms_per_step(r: dict) -> float:
        return 1000 * r["wall_s"] / r["steps"]

    lines = ["| clients | algorithm | runs | updates | steps | wall (s) | ms per step | RSS after data (MiB) "
             "| peak RSS (MiB) | growth (MiB) | growth per client (MiB) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (n, algorithm), runs in sorted(groups.items()):
        step = [ms_per_step(r) for r in runs]
        spread = f" ± {statistics.stdev(step):.2f}" if len(step) > 1 else ""
        growth = mean(runs, lambda r: (r["peak_rss"] - r["base_rss"]) / MIB)
        lines.append(f"| {n:,} | {algorithm} | {len(runs)} | {mean(runs, lambda r: r['updates']):,.0f} "
                     f"| {mean(runs, lambda r: r['steps']):,.0f} | {mean(runs, lambda r: r['wall_s']):.1f} "
                     f"| {statistics.fmean(step):.2f}{spread} | {mean(runs, lambda r: r['base_rss'] / MIB):,.0f} "
                     f"| {mean(runs, lambda r: r['peak_rss'] / MIB):,.0f} | {growth:,.0f} | {growth / n:.3f} |")
    notes = []
    for algorithm in dict.fromkeys(a for _, a in sorted(groups)):
        sizes = sorted(n for n, a in groups if a == algorithm)
        if len(sizes) > 1:
            few, many = (statistics.fmean(ms_per_step(r) for r in groups[(n, algorithm)]) for n in (sizes[0], sizes[-1]))
            notes.append(f"{algorithm} {many / few:.2f}×")
    if notes:
        lines += ["", f"Time per step with the most clients over the fewest: {', '.join(notes)}. About "
                      f"{data['steps']:,} steps per run, each in a fresh process; means over the runs (± sd)."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--algorithms", nargs="+", default=["asgd", "ssgd"])
    ap.add_argument("--steps", type=int, default=2000, help="about this many gradient steps per run")
    ap.add_argument("--backends", action="store_true", help="serial vs Ray backend instead (see above)")
    ap.add_argument("--repeats", type=int, default=None, help="--backends: pairs of runs (3); else: runs of every "
                    "size (1)")
    ap.add_argument("--budget", type=float, default=10.0, help="--backends: virtual seconds per entry")
    ap.add_argument("--write-docs", action="store_true", help="put the table into the docs (--backends: "
                    "docs/benchmarks.md; else docs/simulator.md)")
    ap.add_argument("--scenario", help="a scenario at scale instead (see above)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="--scenario: an override")
    ap.add_argument("--scenario-child", nargs=2, metavar=("PATH", "LABEL"), help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=3, metavar=("CLIENTS", "ALGORITHM", "STEPS"), help=argparse.SUPPRESS)
    ap.add_argument("--backend-child", nargs=3, metavar=("BACKEND", "BUDGET", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], int(args.child[2]))
        return
    if args.backend_child:
        backend_child(args.backend_child[0], float(args.backend_child[1]), args.backend_child[2])
        return
    if args.scenario_child:
        scenario_child(args.scenario_child[0], args.scenario_child[1], args.set)
        return
    if args.scenario:
        data = {"scenario": args.scenario, "set": args.set, "entries": at_scale(args.scenario, args.set)}
        print(render_at_scale(data))
        if args.write_docs:
            sets = "".join(f" --set {o}" for o in args.set)
            note = (f"_Written by `benchmarks/sim_scale.py --scenario … --write-docs` ({platform.node()}, {os.cpu_count()} "
                    f"cores, `--scenario {args.scenario}{sets}`); {data_note(SCALE_BLOCK)}._")
            write_block(ROOT / "docs" / "simulator.md", SCALE_BLOCK, note, data)
        return
    if args.backends:
        repeats = args.repeats or 3
        data = {"budget": args.budget, "workers": os.cpu_count(), "repeats": compare_backends(repeats, args.budget)}
        print(render_backends(data))
        if args.write_docs:
            note = (f"_Written by `benchmarks/sim_scale.py --backends --write-docs` ({platform.node()}, {os.cpu_count()} "
                    f"cores, `--repeats {repeats} --budget {args.budget:g}`); {data_note(BACKENDS_BLOCK)}._")
            write_block(ROOT / "docs" / "benchmarks.md", BACKENDS_BLOCK, note, data)
        return

    import torch

    from edgesync.reproduce import machine

    mb = 1 / MIB
    repeats = args.repeats or 1
    print(f"small CNN (184,586 parameters: 0.74 MB a model), Fashion-MNIST 60,000 images, x1 clients, "
          f"~{args.steps} steps per run, one fresh process per run, {repeats} repeat(s)")
    print(f"{'clients':>7} {'algorithm':9} {'updates':>7} {'steps':>6} {'wall s':>7} {'ms/step':>8} "
          f"{'RSS after data MiB':>18} {'peak RSS MiB':>12} {'growth MiB':>10} {'MiB/client':>10}", flush=True)
    runs, failed, started = [], 0, time.perf_counter()
    for repeat in range(repeats):
        for n in args.sizes:
            for algorithm in args.algorithms:
                proc = subprocess.run([sys.executable, __file__, "--child", str(n), algorithm, str(args.steps)],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    print(f"{n:>7} {algorithm:9} FAILED (status {proc.returncode}):\n{proc.stderr[-2000:]}")
                    failed += 1
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                runs.append({**r, "repeat": repeat})
                growth = (r["peak_rss"] - r["base_rss"]) * mb
                print(f"{n:>7} {algorithm:9} {r['updates']:>7} {r['steps']:>6} {r['wall_s']:>7.1f} "
                      f"{1000 * r['wall_s'] / r['steps']:>8.2f} {r['base_rss'] * mb:>18.0f} {r['peak_rss'] * mb:>12.0f} "
                      f"{growth:>10.0f} {growth / n:>10.3f}", flush=True)
    took = time.perf_counter() - started
    data = {"steps": args.steps, "runs": runs}
    if runs:
        print("\n" + render_clients(data))
    if args.write_docs:
        if failed or not runs:
            sys.exit(f"{failed} run(s) failed: docs not written")
        flags = f"--sizes {' '.join(map(str, args.sizes))} --algorithms {' '.join(args.algorithms)} --steps {args.steps}"
        note = (f"_Written by `benchmarks/sim_scale.py {flags} --repeats {repeats} --write-docs` on "
                f"{time.strftime('%Y-%m-%d')} ({machine()}; torch {torch.__version__}, one thread; {took / 60:.1f} min); "
                f"{data_note(CLIENTS_BLOCK)}._")
        write_block(ROOT / "docs" / "simulator.md", CLIENTS_BLOCK, note, data)


if __name__ == "__main__":
    main()
