"""The same FedAvg scenario under our ZeroMQ coordinator and under a real Flower SuperLink, side by side.

    .venv/bin/python benchmarks/flower_overhead.py [--rounds 20] [--out runs/flower-overhead]

Runs scenarios/flower_fedavg.yaml (2 clients, i.i.d. Fashion-MNIST, 20 local steps per round) twice
in this run: with `edgesync run` (live, ZeroMQ) and with `flwr run` on a local SuperLink and two
SuperNodes (edgesync.flower.lab, what `edgesync flower-up --run` does). Both apply the same
rounds from the same θ₀ with the same per-client mini-batch sequences, so their final models
should agree up to floating point. Prints, for each: final accuracy, wall time per round, the
clients' compute per round, and the overhead per round (wall − compute: messaging, process
start-up, polling), then the ratio of the overheads.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from edgesync.flower.lab import FlowerLab
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/flower_fedavg.yaml"


def figures(run_dir: Path) -> dict:
    s = next(iter(json.loads((run_dir / "summary.json").read_text()).values()))
    clients = read_jsonl(run_dir / "clients.jsonl")
    rounds = max(1, s["updates"])
    compute = max(c["compute_s"] for c in clients) / rounds  # a round waits for its slowest client
    per_round = s["duration_s"] / rounds
    return {"final_acc": s["final_acc"], "rounds": s["updates"], "round_s": per_round, "compute_s": compute,
            "overhead_s": per_round - compute, "bytes_per_round": (s["bytes_up"] + s["bytes_down"]) / rounds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("runs/flower-overhead"))
    args = ap.parse_args()
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    out = args.out.resolve()
    overrides = [f"stop.max_updates={args.rounds}"]

    t0 = time.perf_counter()
    run_scenario(load_scenario(ROOT / SCENARIO, overrides + ["runtime=live"]), out / "zeromq", progress=False)
    print(f"ZeroMQ run done in {time.perf_counter() - t0:.0f} s", flush=True)

    t0 = time.perf_counter()
    with FlowerLab(out / "flwr-home", [{"partition-id": 0}, {"partition-id": 1}]) as lab:
        lab.wait_for_nodes()
        result = lab.run_app(ROOT, {"scenario": SCENARIO, "set": "; ".join(overrides), "out": str(out / "flower")})
    if result.returncode != 0 or not (out / "flower" / "summary.json").exists():
        raise SystemExit(f"flwr run failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    print(f"Flower run done in {time.perf_counter() - t0:.0f} s", flush=True)

    z, f = figures(out / "zeromq"), figures(out / "flower")
    print(f"\nFedAvg, 2 clients, {args.rounds} rounds of 20 local steps (scenarios/flower_fedavg.yaml)\n")
    print("| runtime | final acc | rounds | wall s / round | compute s / round | overhead s / round | MB / round |")
    print("|---|---|---|---|---|---|---|")
    for name, r in (("EdgeSync coordinator (ZeroMQ)", z), ("Flower SuperLink + SuperNodes", f)):
        print(f"| {name} | {r['final_acc']:.4f} | {r['rounds']} | {r['round_s']:.3f} | {r['compute_s']:.3f} | "
              f"{r['overhead_s']:.3f} | {r['bytes_per_round'] / 1e6:.2f} |")
    print(f"\nfinal accuracy difference (Flower − ZeroMQ): {100 * (f['final_acc'] - z['final_acc']):+.2f} pt")
    print(f"overhead per round, Flower ÷ ZeroMQ: {f['overhead_s'] / max(z['overhead_s'], 1e-9):.1f}x")
    print(f"run folders: {out / 'zeromq'}  {out / 'flower'}")


if __name__ == "__main__":
    main()
