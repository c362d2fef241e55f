"""Simulator overhead: its wall time for a run vs the same training steps in a bare PyTorch loop.

    .venv/bin/python benchmarks/sim_overhead.py [--clients 16] [--asgd-updates 3000] [--ssgd-rounds 200]
                                                [--train-size 60000] [--algorithms asgd ssgd] [--profile]
                                                [--write-docs]

The simulator computes every client's gradients for real, serially, in this process; only time is
virtual. Its floor is therefore the bare loop below: forward, backward and an SGD step on the small
CNN, batch 32, one torch thread, on the same normalized Fashion-MNIST tensors, in the channels-last layout
the trainer gives a convolutional model on CPU (without it the bare loop is the slower one). Both run here, one after
the other, after a warm-up. For each algorithm (16 ×1 clients by default) the simulator's wall time
is split into evaluation (the global model tested every `--eval-every` virtual seconds on
`--test-size` images) and the rest, and compared with the bare loop running exactly as many steps
as the simulator's clients ran (`steps` summed over clients.jsonl). Data loading, the step-time
measurement and the report are not counted: `base_step_s` is fixed and `Simulator.prepare()` runs
before the clock starts.

`--profile` runs cProfile over the simulator (evaluation included) and prints the functions with
the most own time, to show where time beyond the bare loop goes; its times are cProfile's, slower than the
run's own, so a profiled run's timing table is not written. `--write-docs` puts the timing table into
docs/simulator.md (`sim_overhead:table`, "Overhead against a bare PyTorch loop") and the runs' figures into
docs/data/sim_overhead-table.json; with `--profile`, the profile's breakdown instead
(`sim_overhead:profile`, docs/data/sim_overhead-profile.json).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from edgesync.docs_data import data_note, write_block
from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.models import build_model
from edgesync.runtime.sim.simulator import Simulator
from edgesync.trainer import use_channels_last
from edgesync.config import load_scenario

ROOT = Path(__file__).resolve().parents[1]
TABLE_BLOCK, PROFILE_BLOCK = "sim_overhead:table", "sim_overhead:profile"
# What the profile block breaks out, in its order: (label, file under edgesync/ it is in, function; None: any of the
# file's). A row's time is the cumulative time of its outermost matching calls (a matching call inside another
# one is not counted twice); an indented row is part of the row above it.
PARTS = (
    ("the clients' instructions (`on_instruction`)", "algorithms/", "on_instruction"),
    ("  training steps (`Trainer.gradient`: batch, forward, backward, flattening)", "trainer.py", "gradient"),
    ("    flattening the gradient (`get_grads`)", "params.py", "get_grads"),
    ("  loading θ into the shared model (`Trainer.set_params`)", "trainer.py", "set_params"),
    ("evaluations (`Simulator._evaluate`)", "runtime/sim/simulator.py", "_evaluate"),
    ("the coordinator's updates (`VirtualCoordinator._update`)", "runtime/sim/coordinator.py", "_update"),
    ("  the server half (`on_update`)", "algorithms/", "on_update"),
    ("    staleness statistics (`staleness.py`)", "algorithms/machinery/staleness.py", None),
    ("message sizes (`Message.wire_size`)", "transport/protocol.py", "wire_size"),
)

def scenario(args, algorithm: dict, max_updates: int):
    return load_scenario({
        "name": "sim-overhead", "seed": 0, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": args.train_size},
        "clients": args.clients,
        "algorithms": [algorithm],
        "stop": {"time_budget_s": 1e6, "max_updates": max_updates, "target_acc": None},
        "eval": {"every_s": args.eval_every, "test_size": args.test_size},
        "sim": {"base_step_s": 0.01},
    })


def bare_loop(x: torch.Tensor, y: torch.Tensor, steps: int, batch_size: int = 32, lr: float = 0.05,
              seed: int = 0) -> tuple[float, float]:
    """(wall, CPU) seconds of `steps` plain SGD steps on the CNN (sampling without replacement, as the trainer)."""
    torch.manual_seed(seed)
    model = build_model("cnn", num_classes=10, in_channels=int(x.shape[1]))
    model.train()
    # the layout the trainer gives the same model (trainer.py): the bare loop is the fastest plain step, not a slower one
    fast = use_channels_last(model, x)
    params = list(model.parameters())
    rng = np.random.default_rng(seed)
    n = len(y)
    order, cursor = rng.permutation(n), 0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        if cursor + batch_size > n:
            order, cursor = rng.permutation(n), 0
        idx = torch.from_numpy(order[cursor:cursor + batch_size])
        cursor += batch_size
        model.zero_grad(set_to_none=False)
        xb = x[idx]
        loss = F.cross_entropy(model(xb.contiguous(memory_format=torch.channels_last) if fast else xb), y[idx])
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-lr)
        loss.item()
    return time.perf_counter() - t0, time.process_time() - c0


class TimedEval:
    """Wraps Simulator._evaluate to add up the wall time spent evaluating."""

    def __init__(self, sim: Simulator):
        self.seconds, self.cpu, self.count, self._inner = 0.0, 0.0, 0, sim._evaluate
        sim._evaluate = self

    def __call__(self, t: float, **kwargs) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        self._inner(t, **kwargs)
        self.seconds += time.perf_counter() - t0
        self.cpu += time.process_time() - c0
        self.count += 1


def run_sim(args, algorithm: dict, max_updates: int, profile: bool) -> dict:
    sc = scenario(args, algorithm, max_updates)
    with tempfile.TemporaryDirectory() as tmp:
        recorder = RunRecorder(Path(tmp))
        sim = Simulator(sc, recorder)
        sim.prepare()
        timed = TimedEval(sim)
        prof = cProfile.Profile() if profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        sim.run()
        if prof:
            prof.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        recorder.close()
        rows = read_jsonl(Path(tmp) / "clients.jsonl")
        last = read_jsonl(Path(tmp) / "metrics.jsonl")[-1]
    out = {"wall": wall, "cpu": cpu, "eval": timed.seconds, "eval_cpu": timed.cpu, "evals": timed.count, "steps": sum(r["steps"] for r in rows),
           "updates": last["updates"], "virtual_s": last["time_s"], "x": sim.x, "y": sim.y}
    if prof:
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("tottime").print_stats(args.top)
        out["profile"] = text.getvalue()
        out["profile_figures"] = profile_figures(stats, args.top)
    return out


def _where(key: tuple) -> str:
    """A pstats key as 'edgesync/FILE.py:function' (or the built-in's name)."""
    file, _, name = key
    if file == "~":
        return name
    file = file.replace("\\", "/")
    return f"{file.split('/edgesync/', 1)[1] if '/edgesync/' in file else file.rsplit('/', 1)[-1]}:{name}"


def profile_figures(stats: pstats.Stats, top: int) -> dict:
    """What the profile block shows of one profiled run: its total, each of PARTS, and the `top` functions by
    own time."""
    table = stats.stats  # (file, line, function) → (primitive calls, calls, own s, cumulative s, callers)

    def ours(key: tuple, file: str, name: str | None) -> bool:
        return f"/edgesync/{file}" in key[0].replace("\\", "/") and (name is None or key[2] == name)

    parts = []
    for label, file, name in PARTS:
        matched = {key for key in table if ours(key, file, name)}
        outer = [key for key in matched if not matched & set(table[key][4])]  # not called by another match
        parts.append({"part": label, "calls": sum(table[k][1] for k in outer),
                      "cum_s": sum(table[k][3] for k in outer)})
    ranked = sorted(table.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return {"total_s": stats.total_tt, "parts": parts,
            "top": [{"function": _where(key), "calls": v[1], "own_s": v[2], "cum_s": v[3]} for key, v in ranked]}


def render(data: dict) -> str:
    """The timing block's table from the runs' figures (as docs/data/sim_overhead-table.json keeps them): both
    clocks, the simulator's time split into evaluation and the rest, and the ratios to the bare loop."""
    lines = ["| algorithm | clock | updates | steps | virtual s | simulator (s) | evaluation (s, n) "
             "| simulator − evaluation (s) | bare loop (s) | ratio | ratio incl. evaluation |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data["cases"]:
        for clock, name in (("wall", "wall"), ("cpu", "CPU")):
            sim_s, eval_s, bare = r[f"sim_{clock}"], r[f"eval_{clock}"], r[f"bare_{clock}"]
            lines.append(f"| {r['algorithm']} | {name} | {r['updates']:,} | {r['steps']:,} | {r['virtual_s']:.2f} "
                         f"| {sim_s:.2f} | {eval_s:.2f} ({r['evals']}) | {sim_s - eval_s:.2f} | {bare:.2f} "
                         f"| {(sim_s - eval_s) / bare:.3f} | {sim_s / bare:.3f} |")
    met = [f"{r['algorithm']} {'meets' if (r['sim_cpu'] - r['eval_cpu']) / r['bare_cpu'] <= 1.2 else 'misses'} it"
           for r in data["cases"]]
    lines += ["", f"Ratio: the simulator's time without evaluation over the bare loop's, for the same steps; target "
                  f"≤ 1.2 (on the CPU clock, the steadier under other load: {', '.join(met)}). {data['clients']} ×1 "
                  f"clients, train_size {data['train_size']:,}, evaluation every {data['eval_every']:g} virtual s on "
                  f"{data['test_size']:,} test images; one run each."]
    return "\n".join(lines)


def render_profile(data: dict) -> str:
    """The profile block from each profiled run's figures (as docs/data/sim_overhead-profile.json keeps them):
    the parts' times, their share and their cost per step, what the simulator adds to the bare loop's work,
    and the functions with the most own time."""
    def cum(parts: list[dict], label_start: str) -> float:
        return next(p["cum_s"] for p in parts if p["part"].strip().startswith(label_start))

    out = []
    for r in data["cases"]:
        prof, steps = r["profile"], r["steps"]
        total, parts = prof["total_s"], prof["parts"]
        out += [f"**{r['algorithm']}**, {r['updates']:,} updates, {steps:,} steps, {r['evals']} evaluations: "
                f"{total:.1f} s under cProfile.", "",
                "| part (↳: part of the row above) | calls | cumulative (s) | share | ms per step |",
                "|---|---:|---:|---:|---:|"]
        for p in prof["parts"]:
            indent = "↳ " * ((len(p["part"]) - len(p["part"].lstrip())) // 2)
            out.append(f"| {indent}{p['part'].strip()} | {p['calls']:,} | {p['cum_s']:.2f} "
                       f"| {100 * p['cum_s'] / total:.1f} % | {1e3 * p['cum_s'] / steps:.2f} |")
        instructions, evaluations = cum(parts, "the clients' instructions"), cum(parts, "evaluations")
        engine = total - instructions - evaluations
        added = engine + cum(parts, "flattening the gradient") + cum(parts, "loading θ")
        step = cum(parts, "training steps")
        out += ["", f"Outside the clients' instructions and the evaluations (the engine, the coordinator, message "
                    f"sizes, bookkeeping): {engine:.2f} s, {1e3 * engine / steps:.2f} ms per step. With loading θ and "
                    f"flattening the gradient, the work the bare loop does not do comes to {1e3 * added / steps:.2f} ms "
                    f"per step, {100 * added / step:.1f} % of a training step's {1e3 * step / steps:.2f} ms (cProfile's "
                    f"times, slower than unprofiled).", "",
                "| the most own time | calls | own (s) | cumulative (s) |", "|---|---:|---:|---:|"]
        out += [f"| `{f['function']}` | {f['calls']:,} | {f['own_s']:.2f} | {f['cum_s']:.2f} |"
                for f in prof["top"][:data.get("shown", 8)]]
        out.append("")
    return "\n".join(out).rstrip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--asgd-updates", type=int, default=3000)
    ap.add_argument("--ssgd-rounds", type=int, default=200)
    ap.add_argument("--train-size", type=int, default=60000)
    ap.add_argument("--eval-every", type=float, default=0.5, help="virtual seconds between evaluations")
    ap.add_argument("--test-size", type=int, default=2000)
    ap.add_argument("--algorithms", nargs="+", choices=("asgd", "ssgd"), default=["asgd", "ssgd"])
    ap.add_argument("--profile", action="store_true", help="cProfile the simulator runs")
    ap.add_argument("--top", type=int, default=25, help="functions shown per profile")
    ap.add_argument("--write-docs", action="store_true", help="write the timing table (with --profile: the "
                    "profile's breakdown) into docs/simulator.md")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from edgesync.reproduce import machine

    print(f"{args.clients} x1 clients, small CNN, batch 32, 1 torch thread, Fashion-MNIST "
          f"train_size {args.train_size}; step time fixed at 0.01 virtual s; evaluation every "
          f"{args.eval_every:g} virtual s on {args.test_size} test images; torch {torch.__version__}")
    cases = [("asgd", {"name": "asgd", "lr": 0.01}, args.asgd_updates),  # 0.05 diverges with 16 clients
             ("ssgd", {"name": "ssgd", "lr": 0.1}, args.ssgd_rounds)]
    cases = [case for case in cases if case[0] in args.algorithms]
    started = time.perf_counter()
    # Warm-up: a few simulated steps and bare steps, so neither side pays first-call costs.
    warm = run_sim(argparse.Namespace(**{**vars(args), "test_size": 100}), cases[0][1], 20, False)
    bare_loop(warm["x"], warm["y"], 20)

    header = (f"{'algorithm':9} {'updates':>7} {'steps':>6} {'virtual s':>9} {'sim s':>7} {'eval s (n)':>11} "
              f"{'sim-eval s':>10} {'bare s':>7} {'ratio':>6} {'ratio incl. eval':>16}")
    tables: dict[str, list[str]] = {"wall": [], "cpu": []}
    profiles, figures = [], []
    for label, algorithm, limit in cases:
        r = run_sim(args, algorithm, limit, args.profile)
        bare_wall, bare_cpu = bare_loop(r["x"], r["y"], r["steps"])
        figures.append({"algorithm": label, "updates": r["updates"], "steps": r["steps"], "virtual_s": r["virtual_s"],
                        "evals": r["evals"], "sim_wall": r["wall"], "sim_cpu": r["cpu"], "eval_wall": r["eval"],
                        "eval_cpu": r["eval_cpu"], "bare_wall": bare_wall, "bare_cpu": bare_cpu,
                        **({"profile": r["profile_figures"]} if args.profile else {})})
        for clock, sim_s, eval_s, bare in (("wall", r["wall"], r["eval"], bare_wall),
                                           ("cpu", r["cpu"], r["eval_cpu"], bare_cpu)):
            rest = sim_s - eval_s
            tables[clock].append(f"{label:9} {r['updates']:>7} {r['steps']:>6} {r['virtual_s']:>9.2f} {sim_s:>7.2f} "
                                 f"{eval_s:>6.2f} ({r['evals']:>2}) {rest:>10.2f} {bare:>7.2f} {rest / bare:>6.3f} "
                                 f"{sim_s / bare:>16.3f}")
        if "profile" in r:
            profiles.append((label, r["profile"]))
        print(f"  {label}: simulator {r['wall']:.2f} s wall ({r['eval']:.2f} s of it in {r['evals']} evaluations), "
              f"bare loop {bare_wall:.2f} s for the same {r['steps']} steps", flush=True)
    took = time.perf_counter() - started
    for clock, title in (("wall", "wall-clock seconds"), ("cpu", "CPU seconds of this process (robust to other load)")):
        print(f"\n{title}:\n{header}")
        for line in tables[clock]:
            print(line)
    print("\nratio = (simulator time without evaluation) / (bare loop time); target <= 1.2")
    for label, text in profiles:
        print(f"\n--- cProfile, {label} (own time, top {args.top}) ---\n{text}")
    data = {"clients": args.clients, "train_size": args.train_size, "eval_every": args.eval_every,
            "test_size": args.test_size, "cases": figures}
    block = PROFILE_BLOCK if args.profile else TABLE_BLOCK
    print("\n" + (render_profile(data) if args.profile else render(data)))
    if args.write_docs:
        flags = " ".join([f"--clients {args.clients}", *([f"--asgd-updates {args.asgd_updates}"] if "asgd" in
                          args.algorithms else []), *([f"--ssgd-rounds {args.ssgd_rounds}"] if "ssgd" in
                          args.algorithms else []), f"--train-size {args.train_size}", f"--test-size {args.test_size}",
                          f"--algorithms {' '.join(args.algorithms)}", *(["--profile"] if args.profile else [])])
        note = (f"_Written by `benchmarks/sim_overhead.py {flags} --write-docs` on {time.strftime('%Y-%m-%d')} "
                f"({machine()}; torch {torch.__version__}, one thread; {took / 60:.1f} min); {data_note(block)}._")
        write_block(ROOT / "docs" / "simulator.md", block, note, data)


if __name__ == "__main__":
    main()
