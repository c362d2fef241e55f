"""EdgeSync's simulator on a peer workload (issue 38), driven as a user drives it: the workload written as a
scenario YAML, run by `edgesync run`, its curve read back from the run folder's metrics.jsonl.

    .venv/bin/python benchmarks/peers/run_edgesync.py --spec SPEC.json --out RESULT.json [--backend serial|ray]

W1/W2: FedAvg is `local_sgd` weighted by the clients' samples with `clients_per_round` and `local_steps`, ended
after `rounds` global updates (`stop.max_updates`). The virtual clock runs at a fixed base step a hair under
20 ms (19.9 ms), with the coordinator's time counted as zero, so that a round of five steps ends just before
each test at every 0.5 virtual seconds: each test sees exactly five more rounds, as the other systems' tests do.
The partition is EdgeSync's own Dirichlet(0.5) with the spec's seed: the very lists in the spec's partition file
(the harness checks the run folder's partition.json against them).
W3/W4: FedBuff (`fedbuff`) with `concurrency` clients training at once and a buffer of `buffer` updates, the
last device of every `slow_every` (ids 9, 19, …) at ×`slow_factor`, at the spec's base step; ended after
`rounds` flushes, tested every 0.5 virtual s. W4 adds each client's availability as a trace: client c is online
while (t + c·P/N) mod P < online_s, P = online_s + offline_s, N clients (the phases staggered by client).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spec_io as common  # noqa: E402  (torch-free: this process only starts `edgesync run`)

TEST_STEP_S = 0.02  # the tests' period is counted in steps of this length (every 5 rounds of 5 steps: 0.5 s)
BASE_STEP_S = 0.0199  # a hair shorter: a round of 5 steps ends at 0.0995 s · r, just before each test at 0.5 s · k


def scenario(spec: dict, backend: str) -> dict:
    """The workload as an EdgeSync scenario."""
    round_s = spec["local_steps"] * BASE_STEP_S
    sc = {"name": f"peers-{spec['workload']}", "seed": spec["seed"], "runtime": "sim",
          "dataset": {"name": "fashion_mnist"}, "model": {"name": spec["model"]},
          "partition": {"kind": "dirichlet", "alpha": spec["alpha"]},
          "eval": {"every_s": round(spec["eval_every"] * spec["local_steps"] * TEST_STEP_S, 6), "test_size": spec["test_size"]},
          "sim": {"base_step_s": BASE_STEP_S, "server_time": "zero", "backend": backend}}
    common_entry = {"lr": spec["lr"], "batch_size": spec["batch_size"], "momentum": spec["momentum"]}
    if spec["mode"] == "sync":
        sc["clients"] = {"count": spec["clients"], "profile": "x1"}
        sc["algorithms"] = [{"name": "local_sgd", "label": "fedavg", **common_entry, "local_steps": spec["local_steps"],
                             "weighted": spec["weighting"] == "samples", "clients_per_round": spec["per_round"]}]
        sc["stop"] = {"time_budget_s": round(round_s * spec["rounds"] * 10, 3), "target_acc": spec["target_acc"],
                      "max_updates": spec["rounds"]}
    else:
        slow = [c % spec["slow_every"] == spec["slow_every"] - 1 for c in range(spec["clients"])]
        sc["clients"] = [{"profile": f"x{spec['slow_factor']}" if s else "x1"} for s in slow]
        if spec.get("churn"):
            for c, client in enumerate(sc["clients"]):
                client["availability"] = {"kind": "trace", "online": online_intervals(spec, c, HORIZON_S)}
        sc["algorithms"] = [{"name": "fedbuff", **common_entry, "local_steps": spec["local_steps"],
                             "buffer_size": spec["buffer"], "concurrency": spec["concurrency"]}]
        sc["sim"]["base_step_s"] = spec["base_step_s"]
        sc["eval"]["every_s"] = 0.5
        sc["stop"] = {"time_budget_s": HORIZON_S, "target_acc": spec["target_acc"], "max_updates": spec["rounds"]}
    return sc


HORIZON_S = 120.0  # virtual seconds: far past any W3/W4 run's end (its `rounds` flushes)


def online_intervals(spec: dict, client: int, horizon: float) -> list[list[float]]:
    """W4's staggered phases as a trace: [start, end] intervals within [0, horizon]."""
    on, period = spec["churn"]["online_s"], spec["churn"]["online_s"] + spec["churn"]["offline_s"]
    offset = client * period / spec["clients"]
    out, k = [], 0
    while k * period - offset < horizon:
        start, end = max(0.0, k * period - offset), min(horizon, k * period - offset + on)
        if end > start:
            out.append([round(start, 6), round(end, 6)])
        k += 1
    return out


def curve(run: Path, spec: dict) -> list[dict]:
    """One point per eval round: the metrics.jsonl record whose update count is that round (asynchronous
    workloads: every test, its `round` the flushes by then)."""
    if spec["mode"] != "sync":
        return [{"round": rec["updates"], "acc": rec["test_acc"], "loss": rec["test_loss"], "sim_time_s": rec["time_s"]}
                for rec in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "test_acc" in rec]
    wanted = common.eval_rounds(spec)
    points = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "test_acc" in rec and rec["updates"] in wanted:
            points[rec["updates"]] = {"round": rec["updates"], "acc": rec["test_acc"], "loss": rec["test_loss"],
                                      "sim_time_s": rec["time_s"]}
    missing = sorted(wanted - set(points))
    if missing:
        raise SystemExit(f"{run}/metrics.jsonl: no test after rounds {missing}")
    return [points[r] for r in sorted(points)]


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", choices=["serial", "ray"], default="serial")
    a = ap.parse_args()
    spec = json.loads(Path(a.spec).read_text())
    timer = common.Timer()
    out = Path(a.out)
    folder = out.with_suffix("")
    folder.mkdir(parents=True, exist_ok=True)
    import yaml

    (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario(spec, a.backend), sort_keys=False))
    run = folder / "run"
    cmd = [sys.executable, "-m", "edgesync.cli", "run", str(folder / "scenario.yaml"), "--out", str(run), "-q"]
    subprocess.run(cmd, check=True, cwd=common.ROOT)
    from importlib.metadata import version

    common.write(out, common.result(f"edgesync-{a.backend}", version("edgesync"), curve(run, spec), spec,
                                    work_s=timer.seconds(), run=str(run)))


if __name__ == "__main__":
    main()
