"""Cross-check: one scenario in the live runtime and in the simulator, time-to-accuracy side by side.

    .venv/bin/python benchmarks/cross_check.py [--scenario scenarios/cross_check.yaml] [--seeds 0]

For each seed: run the scenario live (4 client processes on this machine), then simulate it twice:
1. "as a cluster": the simulator's default, each client on its own undisturbed machine (the base
   step time measured alone);
2. "replaying this machine": with the step times the live clients actually had — on a 2-core machine
   four clients and the coordinator share the cores, so a ×1 step is several times slower than
   undisturbed. base_step_s = the ×1 clients' median live step, and each other client's profile is
   its live step time over that base.
Prints time to target per algorithm for each, the sim/live ratio, and whether the ordering agrees.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from edgesync.scenario import load_scenario, scenario_from_dict
from edgesync.runtime.runs import run_scenario


def read(run_dir: Path) -> tuple[dict, list[dict]]:
    summary = json.loads((run_dir / "summary.json").read_text())
    clients = [json.loads(line) for line in (run_dir / "clients.jsonl").read_text().splitlines()]
    return summary, clients


def replay_settings(base: dict, clients: list[dict], label: str) -> dict:
    """The scenario with the live run's measured step times, for one algorithm."""
    rows = {c["client"]: c for c in clients if c["algorithm"] == label and c["steps"]}
    step = {rank: c["compute_s"] / c["steps"] for rank, c in rows.items()}
    fast = statistics.median(s for rank, s in step.items() if rows[rank]["profile"] == "x1")
    data = json.loads(json.dumps(base))
    data["runtime"] = "sim"
    data["sim"] = {"base_step_s": round(fast, 6), "server_time": "zero"}
    data["clients"] = [{"profile": f"x{max(1.0, step[i] / fast):.3f}"} for i in sorted(step)]
    data["algorithms"] = [a for a in data["algorithms"] if (a.get("label") or a["name"]) == label]
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="scenarios/cross_check.yaml")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="cross-check-"))
    for seed in [int(s) for s in args.seeds.split(",")]:
        live_sc = load_scenario(args.scenario, [f"seed={seed}", "runtime=live"])
        live_dir = root / f"live-seed{seed}"
        run_scenario(live_sc, live_dir, progress=False)
        live, live_clients = read(live_dir)
        cluster_dir = root / f"sim-cluster-seed{seed}"
        run_scenario(load_scenario(args.scenario, [f"seed={seed}", "runtime=sim"]), cluster_dir, progress=False)
        cluster, _ = read(cluster_dir)
        replay = {}
        base = live_sc.resolved()
        for label in live:
            d = root / f"sim-replay-{label}-seed{seed}"
            run_scenario(scenario_from_dict(replay_settings(base, live_clients, label), "replay"), d, progress=False)
            replay[label] = read(d)[0][label]
        print(f"\nseed {seed}: time to {live_sc.stop.target_acc:.2f} test accuracy (s)")
        print(f"{'algorithm':>10} {'live':>8} {'sim (cluster)':>14} {'sim (replay)':>13} {'replay/live':>12}")
        order = {}
        for label, s in live.items():
            lt, ct, rt = s["time_to_target_s"], cluster[label]["time_to_target_s"], replay[label]["time_to_target_s"]
            ratio = rt / lt if lt and rt else None
            order[label] = (lt, ct, rt)
            fmt = lambda v: f"{v:8.1f}" if v is not None else "     n/a"
            print(f"{label:>10} {fmt(lt)} {fmt(ct):>14} {fmt(rt):>13} {ratio if ratio is None else round(ratio, 2)!s:>12}")
        for i, name in enumerate(("live", "sim (cluster)", "sim (replay)")):
            ranked = sorted((v[i] if v[i] is not None else float("inf"), k) for k, v in order.items())
            print(f"  ordering, {name}: {' < '.join(k for _, k in ranked)}")
    print(f"\nrun folders: {root}")


if __name__ == "__main__":
    main()
