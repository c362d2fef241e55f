"""The peer harness (issue 38): every system on the same workloads, side by side on this machine, and
docs/peers.md written from what they measured.

    .venv/bin/python benchmarks/peers/harness.py [--workloads W1,W2,W3,W4] [--seeds 0,1,2] [--systems a,b] [--write-docs]

For each seed, each workload, each system (the systems' order rotates with the seed, so that a drift of the
machine's speed does not always fall on the same one): the runner (`run_NAME.py`, in the system's own
environment) trains the workload and writes its curve; the harness times the whole process from start to exit
(imports and set-up included: what a user waits for) and samples the resident memory of the process and all its
children (Ray's workers too) every 50 ms, keeping the peak. A seed is a repeat: each has its own Dirichlet
partition, the same for every system. Every run's result, log and measurements go to `--out` (runs/peers/);
`--write-docs` writes docs/peers.md's blocks (one for the synchronous workloads, one for the asynchronous) and
keeps their per-run figures in docs/data/peers-sync.json and peers-async.json.
A runner that fails is recorded with the end of its log, and its row says so.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import workloads  # noqa: E402
from systems import SYSTEMS  # noqa: E402

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "FLWR_TELEMETRY_ENABLED": "0", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of `proc` and all its descendants now (processes that end meanwhile count as 0)."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def measure(cmd: list[str], log: Path, timeout_s: float) -> dict:
    """Run `cmd` to its end: its wall time, the peak resident memory of its process tree, its exit status."""
    with open(log, "w") as out:
        t0 = time.perf_counter()
        popen = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **ONE_THREAD},
                                 start_new_session=True)
        proc, peak = psutil.Process(popen.pid), 0
        while popen.poll() is None:
            peak = max(peak, tree_rss(proc))
            if time.perf_counter() - t0 > timeout_s:
                os.killpg(popen.pid, 9)
                popen.wait()
                return {"wall_s": time.perf_counter() - t0, "peak_rss_mb": peak / 2**20, "rc": "timeout"}
            time.sleep(0.05)
        wall = time.perf_counter() - t0
    try:  # Ray and Flower leave daemons behind in the session: end them before the next run
        os.killpg(popen.pid, 9)
    except ProcessLookupError:
        pass
    return {"wall_s": wall, "peak_rss_mb": peak / 2**20, "rc": popen.returncode}


def run_one(system, workload: str, seed: int, out: Path, timeout_s: float) -> dict:
    """One system on one workload and seed: the record docs/data/peers.json keeps of it."""
    rec = {"system": system.name, "workload": workload, "seed": seed}
    why = system.unavailable(workload)
    if why:
        return {**rec, "unavailable": why}
    spec = workloads.prepare(workload, seed)
    folder = out / workload / system.name
    folder.mkdir(parents=True, exist_ok=True)
    result = folder / f"s{seed}.json"
    result.unlink(missing_ok=True)
    cmd = [str(system.python()), str(HERE / system.script), "--spec", str(spec), "--out", str(result), *system.args]
    m = measure(cmd, folder / f"s{seed}.log", timeout_s)
    rec.update(m)
    if m["rc"] != 0 or not result.exists():
        tail = (folder / f"s{seed}.log").read_text(errors="replace").strip().splitlines()[-6:]
        return {**rec, "error": f"exit {m['rc']}: " + " / ".join(line.strip() for line in tail)[-600:]}
    res = json.loads(result.read_text())
    return {**rec, "version": res["version"], "final_acc": res["final_acc"], "curve": res["curve"],
            "sim_time_to_target_s": res.get("sim_time_to_target_s"), "notes": res.get("notes", ""),
            "work_s": res.get("work_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="W1,W2,W3,W4")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "peers")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one run may take")
    ap.add_argument("--write-docs", action="store_true", help="write docs/peers.md and docs/data/peers.json")
    ap.add_argument("--from", dest="from_", type=Path, help="render from an earlier harness record instead of running")
    args = ap.parse_args()
    import report

    argv = " ".join(a for a in sys.argv[1:] if a != "--write-docs")
    if args.from_:
        data = json.loads(args.from_.read_text())
    else:
        wls, seeds = args.workloads.split(","), [int(s) for s in args.seeds.split(",")]
        names = args.systems.split(",")
        unknown = [n for n in names if n not in SYSTEMS]
        if unknown:
            sys.exit(f"--systems: unknown {', '.join(unknown)}; expected some of {', '.join(SYSTEMS)}")
        args.out.mkdir(parents=True, exist_ok=True)
        runs, t0 = [], time.time()
        total = len(wls) * len(seeds) * len(names)
        for i, seed in enumerate(seeds):
            order = names[i % len(names):] + names[:i % len(names)]
            for wl in wls:
                for name in order:
                    rec = run_one(SYSTEMS[name], wl, seed, args.out, args.timeout)
                    runs.append(rec)
                    state = rec.get("unavailable") or rec.get("error") or \
                        f"{rec['wall_s']:.1f} s, {rec['peak_rss_mb']:.0f} MB, acc {rec['final_acc']:.3f}"
                    print(f"[{len(runs)}/{total}, {(time.time() - t0) / 60:.1f} min] {wl} seed {seed} {name}: {state}",
                          flush=True)
                    (args.out / "harness.json").write_text(json.dumps(report.record(runs, wls, seeds, argv), indent=1))
        data = report.record(runs, wls, seeds, argv)
    print(report.render(data))
    if args.write_docs:
        report.write_docs(data, data.get("argv", argv) + " --write-docs")


if __name__ == "__main__":
    main()
