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
- The floor of each part is a memory copy (`torch.Tensor.copy_` between two preallocated byte buffers) of the
  bytes that part must move at the least, measured two ways: *in cache* (the same copy repeated, median of
  200: the bytes stay in the CPU's caches) and *from memory* (each of 50 copies after 64 MB were written
  elsewhere, which pushes the bytes out of the caches: median). The coordinator meets its bytes from memory:
  a client's training step or the socket's receive has displaced them since they were last touched. The bytes:
    decode: the UPDATE's bytes (it must read them once: the check that every value is finite);
    encode: the message's bytes;
    apply:  the model-sized vectors the algorithm's rule must read or write, once each (`VECTORS`, from
            ../shared/ALGORITHMS.md; the update's own tensor counted by its bytes), as bytes ÷ 2, since a copy
            reads and writes each byte it moves. A synchronous algorithm's (and FedBuff's) `apply` is the update
            that closes the round (flushes the buffer): it joins the round's sum as a `collect` does, then the
            round closes, so its floor counts the collect's vectors too. (Until 2026-12-02 it counted the close
            alone: a floor below the work of the event timed.)
- The floors are measured afresh in every repeat, each the first time that repeat needs it, beside its
  calibrations, and each repeat's costs are divided by its own floors. (Until 2026-12-02 every floor was measured
  once per run: the same copy's floor from memory then measured 140 µs in one run and 221 µs in another minutes
  later on the same shared VM, and a floor taken once put that drift into every ratio of a run and none of it into
  the interval.)
- The target: each part within 3× of its floor from memory; the ratio to the floor in cache is shown beside it.
  "× floor" is the median cost ÷ the floor, its interval over the repeats.
(The first version of this benchmark, whose table docs/benchmarks.md keeps under the new one, had only the floor
in cache.)
- Clients served before the coordinator saturates, at a base step of BASE_STEP_S (a stated figure, not this
  machine's): an asynchronous algorithm answers every update, so with N clients each sending one per step it is
  busy N·(decode + apply + encode) per step, and saturates at N = step ÷ that; a synchronous one handles, per
  round of one step, N decodes, collects and encodes and one apply: N = (step − apply) ÷ (decode + collect +
  encode). The same from the costs of the table this run replaces ("before"), where the page has one.
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
# every asynchronous member). Synchronous members keep the round's sum in float64 (rounds.py: a mean that does
# not depend on the updates' order), twice a float32 vector's bytes: `collect` adds one update to it (the sum
# read and written: 4), `apply` is the round's aggregation (the sum read: 2, the mean written: 1, θ read and
# written: 2).
VECTORS = {
    "asgd": 3, "ssp": 3, "dana_slim": 3,
    # SHAT's θ_computed is the master's mirror of the client's θ_i, which no reply holds: it is read for the gap
    # and written with the client's step and mixing every update (+1 beside ASGD's 3; it was counted 3 before
    # 2026-12-02, which left that write out)
    "shat": 4, "shat_root": 4, "ensemble": 4,
    "nag_asgd": 5,      # + v read and written
    "multi_asgd": 5,    # + v_i read and written
    "dc_asgd": 5,       # + v_i; θ_i^sent is θ_computed
    "dana_zero": 8,     # + v_i, Σv read and written, θ̂ written
    "dana_dc": 8,       # as DANA-Zero; θ̂_i is θ_computed
    # θ̃ read and written, δ (the reply, model-sized) written, θ_computed read for the gap (it was counted 2 before
    # 2026-12-02: θ̃ ← θ̃ + δ alone, which left out the reply it must write and the gap every member logs)
    "easgd": 4,
    "fedasync": 3,      # θ ← (1−α)θ + αθ_client, + θ_computed
    "fedbuff": 3,       # θ and the buffer read, θ written (the buffer's reset is free)
    # the DGS family's master (dgs.DGSServer, Alg. 2): M and v_k read and written, θ = θ₀ + M written, θ₀ read,
    # and a top-k selection of M − v_k for the reply, which no copy floors
    "dgs": 6, "dgc_async": 6, "gd_async": 6,
    "ssgd": 5, "local_sgd": 5, "esync": 5, "esync_budget": 5, "fedprox": 5, "fednova": 5,
    "fedavgm": 7,       # + the server momentum read and written
    "fedadam": 9, "fedyogi": 9, "fedadagrad": 9,  # + m and v read and written
    "scaffold": 9,      # + c read and written, the float64 ΣΔc read
}
COLLECT_VECTORS = 4
# SCAFFOLD's rounds keep two float64 sums, Δy's and Δc's, each read and written by every update (it was counted 4
# before 2026-12-02, the Δy sum alone)
COLLECT_VECTORS_OF = {"scaffold": 8}
BASE_STEP_S = 0.02  # the ×1 device's step the saturation figures assume


EVICT_BYTES = 64 << 20  # written between cold copies: more than any last-level cache of a lab machine


def memcpy_s(nbytes: int, cold: bool) -> float:
    """Median seconds to copy `nbytes` between two preallocated buffers: repeated (in cache), or each copy after
    EVICT_BYTES were written elsewhere (from memory)."""
    import torch

    src, dst = torch.ones(max(nbytes, 1), dtype=torch.uint8), torch.empty(max(nbytes, 1), dtype=torch.uint8)
    evict = torch.empty(EVICT_BYTES, dtype=torch.uint8) if cold else None
    for _ in range(20):
        dst.copy_(src)
    times = []
    for i in range(50 if cold else 200):
        if evict is not None:
            evict.fill_(i & 0xFF)
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cache_size(level: int) -> str:
    """This machine's cache of that level per core as the kernel lists it ('2048K'), else '?'."""
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "level").read_text().strip() == str(level) and \
                    (index / "type").read_text().strip() in ("Unified", "Data"):
                return (index / "size").read_text().strip()
        except OSError:
            continue
    return "?"


def passes_s(numel: int) -> dict[str, float]:
    """Median seconds of two passes over model-sized float32 vectors, warm: one that reads two vectors and
    writes one of them in place (`a.add_(b)`), and one that reads two and writes a third (`torch.add(a, b,
    out=c)`). On a machine whose per-core cache holds two such vectors but not three, the second runs from the
    next level down: why an apply's ratio to its floor differs between machines of the same size."""
    import torch

    a, b, c = torch.randn(numel), torch.randn(numel), torch.empty(numel)
    out = {}
    for name, op in (("in_place", lambda: a.add_(b, alpha=1e-9)), ("three_vectors", lambda: torch.add(a, b, out=c))):
        for _ in range(30):
            op()
        times = []
        for _ in range(300):
            t0 = time.perf_counter()
            op()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    return out


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
    from edgesync.runtime.sim.server_calibration import timed_events

    s = timed_events(sim, config)
    return {part: {"s": statistics.median(s.times[part]), "bytes": int(statistics.median(s.sizes[part])),
                   "n": len(s.times[part])} for part in PARTS if s.times[part]}


def floor_bytes(name: str, part: str, message_bytes: int, vector_bytes: int, collects: bool = False) -> int:
    """The bytes a part's floor copies. `collects`: the algorithm's `apply` is the update that closes a round (or
    flushes a buffer), which joins the round's sum as a `collect` does before the close: both its parts counted."""
    if part in ("decode_update", "encode_send"):
        return message_bytes
    collect = COLLECT_VECTORS_OF.get(name, COLLECT_VECTORS)
    vectors = (VECTORS.get(name, 3) + (collect if collects else 0)) if part == "apply" else collect
    return (message_bytes + vectors * vector_bytes) // 2


def floors(name: str, parts: dict, vector_bytes: int, copy) -> dict:
    """Each part's floors in seconds: {part: {"cache": s, "memory": s}}."""
    collects = "collect" in parts
    return {part: {where: copy(floor_bytes(name, part, m["bytes"], vector_bytes, collects), where == "memory")
                   for where in ("cache", "memory")} for part, m in parts.items()}


def render(data: dict) -> str:
    return render_parts(data) + "\n\n" + render_machine(data) + "\n\n" + render_served(data)


def render_machine(data: dict) -> str:
    """One line on this machine's caches: what makes the same code's ratios differ between machines."""
    m = data.get("machine")
    if not m:
        return "_This machine's caches: not measured by this version of the benchmark._"
    p = m["passes"]
    return (f"_This machine: {m['cpu']}, L2 {m['l2']} per core; a vector of the model's size is "
            f"{m['vector_bytes'] / 2**20:.2f} MB. A pass that reads two such vectors and writes a third "
            f"(`torch.add(a, b, out=c)`) takes {1e6 * p['three_vectors']:.0f} µs, "
            f"{p['three_vectors'] / p['in_place']:.1f}× one that reads two and writes one of them in place "
            f"(`a.add_(b)`, {1e6 * p['in_place']:.0f} µs)._")


def render_parts(data: dict) -> str:
    from edgesync.metrics.seeds import interval

    lines = ["| algorithm | part | bytes | cost, µs | floor from memory, µs | × floor | within 3× | floor in cache, µs "
             "| × floor in cache |", "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for name, runs in data["algorithms"].items():
        for part in PARTS:
            rs = [r for r in runs if part in r["parts"]]
            if not rs:
                continue
            iv = interval([r["parts"][part]["s"] / r["floors"][part]["memory"] for r in rs])
            hot = interval([r["parts"][part]["s"] / r["floors"][part]["cache"] for r in rs])
            cost = statistics.fmean(r["parts"][part]["s"] for r in rs)
            floor = {w: statistics.fmean(r["floors"][part][w] for r in rs) for w in ("memory", "cache")}
            verdict = "yes" if iv.high is not None and iv.high <= TARGET else \
                "no" if iv.low is not None and iv.low > TARGET else "undecided"
            lines.append(f"| {name} | {part} | {rs[0]['parts'][part]['bytes']:,} | {1e6 * cost:,.0f} | "
                         f"{1e6 * floor['memory']:,.0f} | {_ratio(iv)} | {verdict} | {1e6 * floor['cache']:,.0f} "
                         f"| {_ratio(hot)} |")
    return "\n".join(lines)


def served(costs: dict[str, float]) -> int | None:
    """Clients one coordinator serves before it saturates at BASE_STEP_S, from one algorithm's costs (seconds
    per part; `collect` present for a synchronous algorithm)."""
    if "collect" in costs:
        per_client = costs.get("decode_update", 0) + costs["collect"] + costs.get("encode_send", 0)
        return int((BASE_STEP_S - costs.get("apply", 0)) / per_client) if per_client else None
    per_update = costs.get("decode_update", 0) + costs.get("apply", 0) + costs.get("encode_send", 0)
    return int(BASE_STEP_S / per_update) if per_update else None


def earlier_costs(doc: Path) -> dict[str, dict[str, float]]:
    """Each algorithm's mean cost per part (seconds) in the table `doc`'s block holds now (before a re-run)."""
    from edgesync.docs_data import current_block

    current = current_block(doc, BLOCK)  # the block's note and table, without the earlier run it keeps
    out: dict[str, dict[str, float]] = {}
    for line in (current or {"table": ""})["table"].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 4 and cells[1] in PARTS:
            out.setdefault(cells[0], {})[cells[1]] = float(cells[3].replace(",", "")) * 1e-6
    return out


def render_served(data: dict) -> str:
    """Clients served before saturation per algorithm, now and before."""
    lines = [f"| algorithm | clients served at a {1e3 * BASE_STEP_S:g} ms step, before | now |", "|---|---:|---:|"]
    for name, runs in data["algorithms"].items():
        now = {p: statistics.fmean(r["parts"][p]["s"] for r in runs if p in r["parts"])
               for p in PARTS if any(p in r["parts"] for r in runs)}
        before = data.get("before", {}).get(name)
        cell = lambda costs: "–" if not costs or served(costs) is None else f"{served(costs):,}"  # noqa: E731
        lines.append(f"| {name} | {cell(before)} | {cell(now)} |")
    return "\n".join(lines)


def _ratio(iv) -> str:
    return f"{iv.mean:.1f}" + (f" [{iv.low:.1f}, {iv.high:.1f}]" if iv.low is not None else "")


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
    cache: dict[tuple[int, bool], float] = {}

    def copy(nbytes: int, cold: bool) -> float:
        if (nbytes, cold) not in cache:
            cache[nbytes, cold] = memcpy_s(nbytes, cold)
        return cache[nbytes, cold]

    results: dict[str, list[dict]] = {n: [] for n in names}
    t0 = time.time()
    for rep in range(args.repeats):
        cache.clear()  # each repeat's floors measured beside its own calibrations (see the method)
        for config in sim.scenario.algorithms:
            parts = calibrate(sim, config)
            results[config.name].append({"parts": parts, "floors": floors(config.name, parts, vector_bytes, copy)})
            print(f"[{rep + 1}/{args.repeats} {time.time() - t0:.0f} s] {config.name}: " + ", ".join(
                f"{p} {1e6 * m['s']:.0f} µs" for p, m in parts.items()), file=sys.stderr, flush=True)
    from edgesync.docs_data import cpu_model

    machine = {"cpu": cpu_model(), "l2": cache_size(2), "vector_bytes": vector_bytes,
               "passes": passes_s(sim.initial.params.numel())}
    data = {"params": sim.initial.params.numel(), "repeats": args.repeats, "algorithms": results, "machine": machine,
            "before": earlier_costs(ROOT / "docs" / "benchmarks.md")}
    print(render(data))
    if args.write_docs:
        from edgesync.docs_data import data_note, ran_on, write_block

        note = (f"_Written by `benchmarks/coordinator_floor.py --repeats {args.repeats} --write-docs` on "
                f"{ran_on(with_torch=True)}, {(time.time() - t0) / 60:.1f} min; the small CNN "
                f"({data['params']:,} parameters); {data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
