"""SHAT's parameter-sharding experiment (shat.txt §4.4, EQ3, Fig. 6) in the simulator: throughput with one
parameter server, layer-wise sharding (LPS) and memory-wise sharding (MPS) over 4 shards.

    .venv/bin/python benchmarks/eq3_sharding.py [--seeds 0-2] [--models vgg_small,resnet18] [--write-docs]
    .venv/bin/python benchmarks/eq3_sharding.py --runtime live [--seeds 0-2] [--write-docs]

Method (fixed before the first result was seen): scenarios/shat_sharding.yaml as it is — SHAT, 4, 8 and
16 workers with gamma-distributed step times (DANA's homogeneous cluster, mean 50 ms: `gamma-homo` over a
fixed `sim.base_step_s`, so the figures do not depend on this machine's speed), every server on its own
1 Gbit/s link, the coordinator's work charged from its cost model — once per model: the VGG-like model
(96% of the parameters in one layer, VGG-16's shape) and ResNet-18, each until 300 updates (ResNet-18:
150 at batch 8, as its steps cost real CPU time here; the virtual step is fixed, so neither changes what
is timed), over seeds 0–2. Throughput is the run's updates per virtual
second (summary.json's updates_per_s); a speedup is taken within one seed and worker count against the
unsharded run, then averaged with a 95% Student-t interval.

Live (`--runtime live`, fixed with the simulated method, before its first result): the VGG-like model
only, the same sweep with real processes on this machine — each worker a client process (its gamma
step times paced by the throttle around the shared base step), each follower shard a process, the
server links paced by the transport at 100 Mbit/s (so that the links, not this machine's two cores,
bound the throughput: one server carries ≈ 1.9 updates/s) — each run 40 s of wall clock, throughput
its updates over that time. ResNet-18 is left to the simulator: 16 ResNet-18 workers on two cores
would measure the CPU, not the servers. The paper's ordering is decided per model
and worker count by the project's one verdict rule (edgesync/metrics/verdict.py, ≥ 3 seeds): MPS ≥ LPS holds
when MPS ÷ LPS's interval lies at or above 1, does not hold when it lies below, else is inconclusive (likewise
LPS ≥ none), and "no difference" between LPS and none only when LPS ÷ none's interval lies within 1 ± 0.1.
`--write-docs` puts the tables into
docs/results.md (block eq3:shat_sharding, live eq3:shat_sharding_live) and each seed's throughputs into
docs/data/eq3-shat_sharding[_live].json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/shat_sharding.yaml"
LIVE = ["--set", "runtime=live", "--set", "coordinator_link.rate_mbps=100", "--set", "stop.time_budget_s=40",
        "--set", "stop.max_updates=100000", "--set", "eval.every_s=10"]
PANELS = {"vgg_small": ["--set", "model.name=vgg_small"],
          # ResNet-18 at batch 8: the virtual step is fixed, so the batch sets only the CPU time spent here
          "resnet18": ["--set", "model.name=resnet18", "--set", "stop.max_updates=150",
                       "--set", "algorithms.0.batch_size=8"]}
WORKERS = (4, 8, 16)
SHARDINGS = ("none", "layer", "memory")
NEAR = 0.1  # "LPS ≈ no sharding": LPS ÷ none within 1 ± 0.1


def run(model: str, seeds: str, out: Path, live: bool) -> float:
    from timed_run import timed_run  # not at the top: docs_data imports this file without benchmarks/ on sys.path
    return timed_run(model, [SCENARIO, "--seeds", seeds, *PANELS[model], *(LIVE if live else []), "--out", str(out),
                             "--overwrite", "-q"])


def tag_of(label: str) -> tuple[int, str]:
    """'shat@clients=8×gamma-homo,sharding=layer' → (8, 'layer')."""
    parts = dict(p.split("=", 1) for p in label.split("@", 1)[1].split(","))
    return int(parts["clients"].split("×")[0]), parts["sharding"]


def throughputs(out: Path) -> dict[str, dict[str, dict[str, float]]]:
    """One model's run folder as docs/data keeps it: seed → workers → sharding → updates per second."""
    from edgesync.metrics.seeds import by_seed

    found: dict[str, dict[str, dict[str, float]]] = {}
    for seed, rows in sorted(by_seed(json.loads((out / "summary.json").read_text())).items()):
        for label, row in rows.items():
            workers, sharding = tag_of(label)
            found.setdefault(str(seed), {}).setdefault(str(workers), {})[sharding] = row["updates_per_s"]
    return found


def render(data: dict) -> str:
    """The block's tables from its record: {"runtime", "panels": {model: {"layer_shares", "updates_per_s":
    seed → workers → sharding → updates per second}}}."""
    body = []
    for model, figures in data["panels"].items():
        rows, verdicts = panel(figures["updates_per_s"])
        body += [f"**{model}** (layer-wise shards hold {figures['layer_shares']} of the parameters; "
                 "memory-wise 25% each)", "",
                 "| workers | sharding | updates/s | speedup vs none (paired) |", "|---:|---|---:|---:|", *rows, "",
                 "| workers | MPS ÷ LPS [95% CI]: MPS ≥ LPS | LPS ÷ none [95% CI]: LPS ≥ none | LPS vs none (no "
                 f"difference within ±{NEAR:g}) |", "|---:|---|---|---|", *verdicts, ""]
    return "\n".join(body).rstrip()


def panel(per_seed: dict[str, dict[str, dict[str, float]]]) -> tuple[list[str], list[str]]:
    """The table rows and the verdict lines of one model's throughputs (seed → workers → sharding)."""
    from edgesync.metrics.seeds import interval
    from edgesync.metrics.verdict import against, compare, shown

    seeds = sorted(per_seed, key=int)

    def iv(values: list[float]) -> str:
        i = interval(values)
        return f"{i.mean:.2f} ± {i.half_width:.2f}" if i.half_width is not None else f"{i.mean:.2f}"

    rows, verdicts = [], []
    for n in map(str, WORKERS):
        at_n = [per_seed[seed][n] for seed in seeds]
        ratio = {s: [run[s] / run["none"] for run in at_n] for s in SHARDINGS}
        for s in SHARDINGS:
            rows.append(f"| {n} | {s} | {iv([run[s] for run in at_n])} | {iv(ratio[s])} |")
        mps_lps = [run["memory"] / run["layer"] for run in at_n]
        mps_ge, lps_ge = against(mps_lps, "≥", 1), against(ratio["layer"], "≥", 1)
        near = compare(ratio["layer"], 1.0, NEAR, lower="LPS slower", higher="LPS faster")
        verdicts.append(f"| {n} | {shown(mps_ge)} | {shown(lps_ge)} | {near} |")
    return rows, verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--models", default=None, help="default: both in the simulator, vgg_small live")
    ap.add_argument("--runtime", choices=("sim", "live"), default="sim")
    ap.add_argument("--runs", default=None, help="parent of the run folders (one per model; default runs/eq3[-live])")
    ap.add_argument("--from-runs", action="store_true", help="re-read finished run folders")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from edgesync.models import build_model
    from edgesync.models.shard_plan import model_plan

    from edgesync.docs_data import data_note, write_block
    from edgesync.reproduce import machine

    live = args.runtime == "live"
    args.models = args.models or ("vgg_small" if live else ",".join(PANELS))
    args.runs = args.runs or ("runs/eq3-live" if live else "runs/eq3")
    models = args.models.split(",")
    record = ROOT / args.runs / "walls.json"  # each model's wall time, for a later --from-runs
    walls = json.loads(record.read_text()) if record.exists() else {}
    panels = {}
    for model in models:
        out = ROOT / args.runs / model
        if not args.from_runs:
            walls[model] = run(model, args.seeds, out, live)
            record.write_text(json.dumps(walls))
        panels[model] = {"layer_shares": model_plan(build_model(model), 4, "layer").describe(),
                         "updates_per_s": throughputs(out)}
    data = {"runtime": args.runtime, "panels": panels}
    block = "eq3:shat_sharding_live" if live else "eq3:shat_sharding"
    minutes = sum(walls.get(m, 0.0) for m in models) / 60
    unit = "updates per second of wall clock" if live else "updates per virtual second"
    head = (f"_Written by `benchmarks/eq3_sharding.py --runtime {args.runtime} --seeds {args.seeds} --models "
            f"{args.models} --write-docs`, {minutes:.0f} min of runs, machine: {machine()}; "
            f"throughput in {unit}, mean ± half-width of the 95% t-interval over the seeds; {data_note(block)}._")
    print(head + "\n\n" + render(data))
    if args.write_docs:
        write_block(ROOT / "docs/results.md", block, head, data)


if __name__ == "__main__":
    main()
