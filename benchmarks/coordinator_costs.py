"""The simulator's coordinator cost model (runtime/sim/server_cost.py): the costs a calibration measures, and
what charging them changes in a run.

    .venv/bin/python benchmarks/coordinator_costs.py [--clients 4,16] [--repeats 3] [--write-docs]

The costs: the calibration every simulated run with `server_time: model` runs once per machine and entry
(server_calibration.py), here run `--repeats` times for SSGD, ASGD and ESync on the small CNN (Fashion-MNIST,
batch 32, one torch thread), with each calibration client count of `--clients` (4 is what runs use; with more,
a round's `apply` builds more instructions, which the model does not scale with the clients). Repeats, counts
and entries interleave; the cache is neither read nor written. Per entry and count: each cost, mean ± sd over
the repeats, and the calibration's own time. Beside them, the two parts of `decode_update` timed alone
(median of `--samples` each): decoding an UPDATE's frames and checking its tensors (shapes, dtypes, every value
finite). `--write-docs` puts the table into docs/simulator.md (`coordinator_costs:table`) and every
calibration's figures into docs/data/coordinator_costs-table.json.

    .venv/bin/python benchmarks/coordinator_costs.py --effect [--base-step-ms 22.1] [--seed 0] [--write-docs]

What the cost model changes, in the simulator alone: scenarios/cross_check.yaml with ESync added (SSGD lr 0.1,
ASGD and ESync lr 0.05) at a fixed base step (results.md's live run measured 22.1 ms), once with
`server_time: zero` and once with `model`, the costs calibrated afresh for the run (a temporary
EDGESYNC_CACHE, so no cached figure from another load is charged). Per entry: the time to the target, the
updates by then, the fast (×1) clients' compute ratio; the costs charged; how much longer the ×10 client's step
to step time gets (SSGD's round), ASGD's updates per virtual second, ESync's fast clients' local steps and time
blocked per round. `--write-docs` puts it into docs/simulator.md (`coordinator_costs:effect`) and the runs'
figures into docs/data/coordinator_costs-effect.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402

TABLE_BLOCK, EFFECT_BLOCK = "coordinator_costs:table", "coordinator_costs:effect"
ENTRIES = [{"name": "ssgd", "lr": 0.1, "batch_size": 32}, {"name": "asgd", "lr": 0.05, "batch_size": 32},
           {"name": "esync", "lr": 0.05, "batch_size": 32}]
COSTS = ("decode_update", "collect", "apply", "encode_send", "query")


# -- the costs ----------------------------------------------------------------------------------------------
def prepared(base_step_s: float):
    """A prepared simulator of the entries (nothing calibrated: `server_time: zero`), to calibrate beside."""
    from edgesync.config import load_scenario
    from edgesync.metrics.recorder import RunRecorder
    from edgesync.runtime.sim.simulator import Simulator

    sc = load_scenario({"name": "coordinator-costs", "seed": 0, "runtime": "sim", "dataset": {"name": "fashion_mnist"},
                        "clients": ["x1"] * 4, "algorithms": ENTRIES,
                        "stop": {"time_budget_s": 1e6, "target_acc": None}, "eval": {"every_s": 1e5, "test_size": 100},
                        "sim": {"base_step_s": base_step_s, "server_time": "zero"}})
    folder = tempfile.mkdtemp(prefix="coordinator-costs-")
    sim = Simulator(sc, RunRecorder(Path(folder)))
    sim.prepare()
    return sim


def calibrate(sim, config, clients: int) -> dict:
    """One calibration of `config` with `clients` calibration clients, as a run's first one does it: the costs
    in seconds, how many samples of each class it timed, and the calibration's own wall time."""
    from edgesync.runtime.sim.server_calibration import timed_events

    t0 = time.perf_counter()
    samples = timed_events(sim, config, clients)
    took = time.perf_counter() - t0
    return {**samples.costs().model_dump(), "calibration_s": took, "samples": {c: samples.count(c) for c in COSTS}}


def decode_and_check(sim, samples: int) -> dict:
    """Median seconds to decode an ASGD UPDATE's frames, and to check its tensors, each timed alone."""
    import torch

    from edgesync import algorithms
    from edgesync.runtime.bookkeeping.update_check import UpdateCheck
    from edgesync.transport import protocol
    from edgesync.transport.protocol import Message

    config = next(c for c in sim.scenario.algorithms if c.name == "asgd")
    server = algorithms.get("asgd").server(config, sim.initial, [0])
    check = UpdateCheck.for_server(server, sim.initial)
    grad = torch.randn(sim.initial.params.numel())
    tensors = {"grad": grad, **({"buffers": sim.initial.buffers.clone()} if sim.initial.buffers.numel() else {})}
    frames = protocol.update({}, tensors).to_frames()
    decode, checking = [], []
    for _ in range(samples):
        t0 = time.perf_counter()
        msg = Message.from_frames(frames, protocol.CLIENT_TYPES)
        t1 = time.perf_counter()
        check.check(msg.tensors)
        t2 = time.perf_counter()
        decode.append(t1 - t0)
        checking.append(t2 - t1)
    return {"params": sim.initial.params.numel(), "samples": samples, "decode_s": statistics.median(decode),
            "check_s": statistics.median(checking)}


def _ms(values: list[float]) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{1e3 * mean:.3f} ± {1e3 * sd:.3f}"


def render(data: dict) -> str:
    """The costs table from every calibration's figures (as docs/data/coordinator_costs-table.json keeps them):
    per entry and calibration client count, each cost's mean ± sd over the repeats, in ms; what a class the
    calibration never met was charged is marked; then the decode/check split and what a round's `apply` adds
    per calibration client."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in data["calibrations"]:
        groups.setdefault((r["entry"], r["clients"]), []).append(r)
    lines = ["| entry | calibration clients | decode_update | collect | apply | encode_send | query | calibration (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (entry, clients), runs in groups.items():
        cells = []
        for cost in COSTS:
            unseen = any(r["samples"][cost] == 0 for r in runs)
            cells.append("—" if unseen else _ms([r[cost] for r in runs]))
        took = statistics.fmean(r["calibration_s"] for r in runs)
        lines.append(f"| {entry} | {clients} | {' | '.join(cells)} | {took:.1f} |")
    split = data["decode_check"]
    lines += ["", f"Costs in ms, mean ± sd over {len(next(iter(groups.values())))} calibrations each; —: a class the "
                  f"calibration never met (charged the median of the server-half calls it did meet). Within "
                  f"`decode_update`, timed alone (median of {split['samples']:,}, {split['params']:,} parameters): "
                  f"decoding the frames {1e3 * split['decode_s']:.3f} ms, checking the tensors (shapes, dtypes, every "
                  f"value finite) {1e3 * split['check_s']:.3f} ms."]
    counts = sorted({clients for _, clients in groups})
    if len(counts) > 1:
        few, many = counts[0], counts[-1]
        per_client = []
        for entry in dict.fromkeys(e for e, _ in groups):  # a barrier's entries: a round's apply instructs them all
            barrier = all(r["samples"]["collect"] for n in (few, many) for r in groups.get((entry, n), []))
            if (entry, few) in groups and (entry, many) in groups and barrier:
                a = [statistics.fmean(r["apply"] for r in groups[(entry, n)]) for n in (few, many)]
                extra = (a[1] - a[0]) / (many - few)
                decode = statistics.fmean(r["decode_update"] for r in groups[(entry, few)])
                per_client.append(f"{entry} {1e6 * extra:.1f} µs a client (at 1,000 clients {1e3 * 1000 * extra:.1f} "
                                  f"ms a round, against {1e3 * 1000 * decode:,.0f} ms of decoding its 1,000 updates)")
        if per_client:
            lines += ["", f"A round's `apply` with {many} calibration clients against {few}, per extra client: "
                          f"{'; '.join(per_client)}."]
    return "\n".join(lines)


def measure_costs(args) -> dict:
    sim = prepared(args.base_step_ms / 1e3)
    counts = [int(c) for c in args.clients.split(",")]
    calibrations = []
    for repeat in range(args.repeats):
        for clients in counts:
            for config in sim.scenario.algorithms:
                got = calibrate(sim, config, clients)
                calibrations.append({"entry": config.key, "clients": clients, "repeat": repeat, **got})
                print(f"repeat {repeat + 1}/{args.repeats}, {clients} clients, {config.key}: " +
                      ", ".join(f"{c} {1e3 * got[c]:.3f} ms" for c in COSTS) + f" ({got['calibration_s']:.1f} s)",
                      flush=True)
    return {"base_step_ms": args.base_step_ms, "calibrations": calibrations,
            "decode_check": decode_and_check(sim, args.samples)}


# -- what charging them changes -----------------------------------------------------------------------------
def read_run(folder: Path) -> dict:
    """What the effect block reads of one run folder, per entry."""
    import yaml

    summary = json.loads((folder / "summary.json").read_text())
    clients = [json.loads(line) for line in (folder / "clients.jsonl").read_text().splitlines() if line.strip()]
    updates = [json.loads(line) for line in (folder / "updates.jsonl").read_text().splitlines() if line.strip()]
    scenario = yaml.safe_load((folder / "scenario.yaml").read_text())
    fast = {label: {c["client"] for c in clients if c["algorithm"] == label and c["profile"] == "x1"} for label in summary}
    entries = {}
    for label, s in summary.items():
        mine = [c for c in clients if c["algorithm"] == label]
        slow = [c for c in mine if c["profile"] == "x10"]
        rows = [u for u in updates if u["algorithm"] == label and "presence" not in u]
        per_update = [u["time_s"] for u in rows if "n_i" not in u]
        rounds = [u for u in rows if "n_i" in u and u["client"] in fast[label]]
        entries[label] = {
            "time_to_target_s": s["time_to_target_s"], "target_acc": s["target_acc"], "updates": s["updates"],
            "fast_compute_ratio": statistics.median(c["compute_s"] / c["wall_s"] for c in mine
                                                    if c["profile"] == "x1" and c["wall_s"]),
            "slow_step_s": slow[0]["wall_s"] / slow[0]["steps"] if slow and slow[0]["steps"] else None,
            "updates_per_s": ((len(per_update) - 1) / (per_update[-1] - per_update[0])
                              if len(per_update) > 1 and per_update[-1] > per_update[0] else None),
            "local_steps": statistics.fmean(u["n_i"] for u in rounds) if rounds else None,
            "blocked_s": statistics.fmean(u.get("blocking_s", 0.0) for u in rounds) if rounds else None,
        }
    return {"entries": entries, "costs": scenario["sim"].get("measured_server_s") or {}}


def pct(new: float | None, old: float | None) -> str:
    return "n/a" if not new or not old else f"{100 * (new / old - 1):+.1f} %"


def render_effect(data: dict) -> str:
    """The effect block from both runs' figures (as docs/data/coordinator_costs-effect.json keeps them)."""
    zero, model = data["runs"]["zero"], data["runs"]["model"]
    target = next(iter(zero["entries"].values()))["target_acc"]

    def sec(v: float | None) -> str:
        return "not reached" if v is None else f"{v:.1f}"

    lines = [f"| entry | time to {target:g}, zero (s) | time to {target:g}, model (s) | updates by the target, zero / "
             "model | fast clients' compute ratio, zero / model |", "| --- | ---: | ---: | ---: | ---: |"]
    for label, z in zero["entries"].items():
        m = model["entries"][label]
        lines.append(f"| `{label}` | {sec(z['time_to_target_s'])} | {sec(m['time_to_target_s'])} "
                     f"| {z['updates']} / {m['updates']} | {z['fast_compute_ratio']:.2f} / {m['fast_compute_ratio']:.2f} |")
    charged = []
    for label, c in model["costs"].items():
        collected = (f"{1e3 * (c['decode_update'] + c['collect']):.2f} collected / "
                     if label in data.get("collecting", []) else "")
        text = (f"{label}: an update {collected}{1e3 * (c['decode_update'] + c['apply']):.2f} applied, a message sent "
                f"{1e3 * c['encode_send']:.3f}")
        charged.append(text + (f", a query {1e3 * c['query']:.3f}" if label.startswith("esync") else ""))
    lines += ["", f"Charged with `model` (ms, calibrated for this run): {'; '.join(charged)}."]
    effects = []
    for label, z in zero["entries"].items():
        m = model["entries"][label]
        if label.startswith("ssgd") and z["slow_step_s"]:
            effects.append(f"SSGD's round (the ×10 client's step to step) {1e3 * z['slow_step_s']:.2f} / "
                           f"{1e3 * m['slow_step_s']:.2f} ms ({pct(m['slow_step_s'], z['slow_step_s'])})")
        if label.startswith("asgd") and z["updates_per_s"]:
            c = model["costs"].get(label)
            work = f", coordinator work per update {1e3 * (c['decode_update'] + c['apply'] + c['encode_send']):.2f} ms" \
                if c else ""
            effects.append(f"ASGD's updates per virtual second {z['updates_per_s']:.1f} / {m['updates_per_s']:.1f} "
                           f"({pct(m['updates_per_s'], z['updates_per_s'])}{work})")
        if label.startswith("esync") and z["local_steps"] is not None:
            effects.append(f"ESync's fast clients, a round: {z['local_steps']:.1f} / {m['local_steps']:.1f} local steps, "
                           f"blocked {1e3 * z['blocked_s']:.1f} / {1e3 * m['blocked_s']:.1f} ms")
    if effects:
        lines += ["", f"Zero / model: {'; '.join(effects)}. Base step {data['base_step_ms']:g} ms, seed {data['seed']}."]
    return "\n".join(lines)


def measure_effect(args) -> dict:
    from edgesync import algorithms
    from edgesync.config import load_scenario
    from edgesync.runtime.runs import run_scenario

    entries = "[" + ", ".join(f"{{name: {e['name']}, lr: {e['lr']}}}" for e in ENTRIES) + "]"
    sets = [f"seed={args.seed}", "runtime=sim", f"emulation.base_step_ms={args.base_step_ms}", "sim.base_step_s=null",
            f"algorithms={entries}", *args.set]
    runs = {}
    with tempfile.TemporaryDirectory(prefix="coordinator-effect-") as tmp:
        os.environ["EDGESYNC_CACHE"] = str(Path(tmp) / "cache")  # the costs calibrated now, not read from a cache
        for mode in ("zero", "model"):
            out = Path(tmp) / mode
            t0 = time.perf_counter()
            run_scenario(load_scenario(args.scenario, [*sets, f"sim.server_time={mode}"]), out, progress=False)
            print(f"{mode}: {time.perf_counter() - t0:.0f} s", flush=True)
            runs[mode] = read_run(out)
    collecting = [c.key for c in load_scenario(args.scenario, sets).algorithms  # a barrier's updates but a round's last
                  if algorithms.get(c.name).family == "synchronous"]
    return {"scenario": args.scenario, "base_step_ms": args.base_step_ms, "seed": args.seed, "set": args.set,
            "collecting": collecting, "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="4,16", help="calibration client counts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=200, help="decode and check timed alone: samples of each")
    ap.add_argument("--base-step-ms", type=float, default=22.1)
    ap.add_argument("--effect", action="store_true", help="what charging the costs changes (see above)")
    ap.add_argument("--scenario", default="scenarios/cross_check.yaml", help="--effect: the scenario")
    ap.add_argument("--seed", type=int, default=0, help="--effect: its seed")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="--effect: an override")
    ap.add_argument("--write-docs", action="store_true", help="write the block into docs/simulator.md")
    args = ap.parse_args()
    import torch

    from edgesync.reproduce import machine

    torch.set_num_threads(1)
    started = time.perf_counter()
    data = measure_effect(args) if args.effect else measure_costs(args)
    took = time.perf_counter() - started
    text = render_effect(data) if args.effect else render(data)
    print("\n" + text)
    if args.write_docs:
        block = EFFECT_BLOCK if args.effect else TABLE_BLOCK
        flags = (f"--effect --base-step-ms {args.base_step_ms:g} --seed {args.seed}"
                 + "".join(f" --set {s}" for s in args.set) if args.effect
                 else f"--clients {args.clients} --repeats {args.repeats}")
        note = (f"_Written by `benchmarks/coordinator_costs.py {flags} --write-docs` on {time.strftime('%Y-%m-%d')} "
                f"({machine()}; torch {torch.__version__}, one thread; {took / 60:.1f} min); {data_note(block)}._")
        write_block(ROOT / "docs" / "simulator.md", block, note, data)


if __name__ == "__main__":
    main()
