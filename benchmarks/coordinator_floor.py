"""The coordinator against its floor (issue 38): every algorithm's decode, apply and encode beside the time of
copying the same bytes on this machine.

    .venv/bin/python benchmarks/coordinator_floor.py [--algorithms asgd,dana_dc] [--repeats 3] [--write-docs]

Method (fixed before the first result was seen):
- The costs are the simulator's calibration of the coordinator (runtime/sim/server_calibration.py): the real
  server half, fed by real client halves (4 ×1 clients, the small CNN on Fashion-MNIST, batch 32, one torch
  thread), every UPDATE decoded from real frames and checked, applied, its replies encoded, each part timed;
  the median of each class per calibration; `--repeats` calibrations per algorithm, interleaved. Each
  algorithm at its defaults (lr 0.05). A round's aggregation (`apply` of a synchronous algorithm) is timed
  with the 4 calibration clients.
- The floor of each part is a memory copy (`torch.Tensor.copy_` between two preallocated byte buffers, median
  of 200) of the bytes that part must move at the least:
    decode: the UPDATE's bytes (it must read them once: the check that every value is finite);
    encode: the message's bytes;
    apply:  the model-sized vectors the algorithm's rule must read or write, once each (`VECTORS`, from
            ../shared/ALGORITHMS.md; the update's own tensor counted by its bytes), as bytes ÷ 2, since a copy
            reads and writes each byte it moves.
- The target: each part within 3× of its floor. "×floor" is the median cost ÷ the floor, its interval over
  the repeats.
`--write-docs` writes the table into docs/benchmarks.md (`coordinator_floor`) and every calibration's figures
into docs/data/coordinator_floor.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BLOCK = "coordinator_floor"
PARTS = ("decode_update", "apply", "collect", "encode_send")
TARGET = 3.0
# Model-sized vectors each algorithm's apply must read or write besides the update it is given (θ read and
# written counts 2); ../shared/ALGORITHMS.md. The staleness log reads θ_computed where it differs from θ (+1,
# every asynchronous member). Synchronous members: `apply` is a round's aggregation (θ, the round's sum: 3),
# `collect` one update added to the sum (the sum read and written: 2).
VECTORS = {
    "asgd": 3, "ssp": 3, "dana_slim": 3, "shat": 3, "shat_root": 3, "ensemble": 3, "gd_async": 3,
    "nag_asgd": 5,      # + v read and written
    "multi_asgd": 5,    # + v_i read and written
    "dc_asgd": 5,       # + v_i; θ_i^sent is θ_computed
    "dana_zero": 8,     # + v_i, Σv read and written, θ̂ written
    "dana_dc": 8,       # as DANA-Zero; θ̂_i is θ_computed
    "easgd": 2,         # θ̃ ← θ̃ + δ
    "fedasync": 3,      # θ ← (1−α)θ + αθ_client, + θ_computed
    "fedbuff": 3,       # θ and the buffer read, θ written (the buffer's reset is free)
    "dgs": 2, "dgc_async": 2,  # θ read and written where the sparse update touches it: a dense bound
    "ssgd": 3, "local_sgd": 3, "esync": 3, "esync_budget": 3, "fedprox": 3, "fednova": 3,
    "fedavgm": 5,       # + the server momentum
    "fedadam": 7, "fedyogi": 7, "fedadagrad": 7,  # + m and v read and written, Δ
    "scaffold": 6,      # + c read and written, Σ Δc
}
COLLECT_VECTORS = 2


def memcpy_s(nbytes: int, samples: int = 200) -> float:
    """Median seconds to copy `nbytes` between two preallocated buffers."""
    import torch

    src, dst = torch.ones(max(nbytes, 1), dtype=torch.uint8), torch.empty(max(nbytes, 1), dtype=torch.uint8)
    for _ in range(20):
        dst.copy_(src)
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def prepared(names: list[str]):
    from edgesync.config import load_scenario
    from edgesync.metrics.recorder import RunRecorder
    from edgesync.runtime.sim.simulator import Simulator

    sc = load_scenario({"name": "coordinator-floor", "seed": 0, "runtime": "sim", "dataset": {"name": "fashion_mnist"},
                        "clients": ["x1"] * 4, "algorithms": [{"name": n, "lr": 0.05, "batch_size": 32} for n in names],
                        "stop": {"time_budget_s": 1e6, "target_acc": None}, "eval": {"every_s": 1e5, "test_size": 100},
                        "sim": {"base_step_s": 0.02, "server_time": "zero"}})
    sim = Simulator(sc, RunRecorder(Path(tempfile.mkdtemp(prefix="coordinator-floor-"))))
    sim.prepare()
    return sim


def calibrate(sim, config) -> dict:
    """One calibration: each part's median seconds and median bytes."""
    from edgesync.runtime.sim import server_calibration
    from edgesync.runtime.sim.server_cost import CostSamples

    seen: list[CostSamples] = []

    class Kept(CostSamples):
        def __init__(self) -> None:
            super().__init__()
            seen.append(self)

    before = server_calibration.CostSamples
    server_calibration.CostSamples = Kept  # read by calibrate() when it runs
    try:
        server_calibration.calibrate(sim, config)
    finally:
        server_calibration.CostSamples = before
    s = seen[0]
    return {part: {"s": statistics.median(s.times[part]), "bytes": int(statistics.median(s.sizes[part])),
                   "n": len(s.times[part])} for part in PARTS if s.times[part]}


def floors(name: str, parts: dict, vector_bytes: int, copy) -> dict:
    """Each part's floor in seconds."""
    out = {}
    for part, m in parts.items():
        if part in ("decode_update", "encode_send"):
            out[part] = copy(m["bytes"])
        else:
            vectors = VECTORS.get(name, 3) if part == "apply" else COLLECT_VECTORS
            out[part] = copy((m["bytes"] + vectors * vector_bytes) // 2)
    return out


def render(data: dict) -> str:
    from edgesync.metrics.seeds import interval

    lines = ["| algorithm | part | bytes | cost, µs | floor, µs | × floor | within 3× |", "|---|---|---:|---:|---:|---:|---|"]
    for name, runs in data["algorithms"].items():
        for part in PARTS:
            rs = [r for r in runs if part in r["parts"]]
            if not rs:
                continue
            ratios = [r["parts"][part]["s"] / r["floors"][part] for r in rs]
            iv = interval(ratios)
            cost = statistics.fmean(r["parts"][part]["s"] for r in rs)
            floor = statistics.fmean(r["floors"][part] for r in rs)
            spread = f" [{iv.low:.1f}, {iv.high:.1f}]" if iv.low is not None else ""
            verdict = "yes" if iv.high is not None and iv.high <= TARGET else \
                "no" if iv.low is not None and iv.low > TARGET else "undecided"
            lines.append(f"| {name} | {part} | {rs[0]['parts'][part]['bytes']:,} | {1e6 * cost:,.0f} | "
                         f"{1e6 * floor:,.0f} | {iv.mean:.1f}{spread} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algorithms", default=",".join(VECTORS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    names = args.algorithms.split(",")
    sim = prepared(names)
    vector_bytes = sim.initial.params.numel() * 4
    cache: dict[int, float] = {}

    def copy(nbytes: int) -> float:
        if nbytes not in cache:
            cache[nbytes] = memcpy_s(nbytes)
        return cache[nbytes]

    results: dict[str, list[dict]] = {n: [] for n in names}
    t0 = time.time()
    for rep in range(args.repeats):
        for config in sim.scenario.algorithms:
            parts = calibrate(sim, config)
            results[config.name].append({"parts": parts, "floors": floors(config.name, parts, vector_bytes, copy)})
            print(f"[{rep + 1}/{args.repeats} {time.time() - t0:.0f} s] {config.name}: " + ", ".join(
                f"{p} {1e6 * m['s']:.0f} µs" for p, m in parts.items()), file=sys.stderr, flush=True)
    data = {"params": sim.initial.params.numel(), "repeats": args.repeats, "algorithms": results}
    print(render(data))
    if args.write_docs:
        from edgesync.docs_data import data_note, ran_on, write_block

        note = (f"_Written by `benchmarks/coordinator_floor.py --repeats {args.repeats} --write-docs` on "
                f"{ran_on(with_torch=True)}, {(time.time() - t0) / 60:.1f} min; the small CNN "
                f"({data['params']:,} parameters); {data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
