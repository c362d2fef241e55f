"""Simulator overhead: its wall time for a run vs the same training steps in a bare PyTorch loop.

    .venv/bin/python benchmarks/sim_overhead.py [--clients 16] [--asgd-updates 3000] [--ssgd-rounds 200]
                                                [--train-size 60000] [--profile]

The simulator computes every client's gradients for real, serially, in this process; only time is
virtual. Its floor is therefore the bare loop below: forward, backward and an SGD step on the small
CNN, batch 32, one torch thread, on the same normalized Fashion-MNIST tensors. Both run here, one after
the other, after a warm-up. For each algorithm (16 ×1 clients by default) the simulator's wall time
is split into evaluation (the global model tested every `--eval-every` virtual seconds on
`--test-size` images) and the rest, and compared with the bare loop running exactly as many steps
as the simulator's clients ran (`steps` summed over clients.jsonl). Data loading, the step-time
measurement and the report are not counted: `base_step_s` is fixed and `Simulator.prepare()` runs
before the clock starts.

`--profile` runs cProfile over the simulator (evaluation included) and prints the functions with
the most own time, to show where time beyond the bare loop goes.
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

from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.models import build_model
from edgesync.runtime.sim.simulator import Simulator
from edgesync.config import load_scenario


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
        loss = F.cross_entropy(model(x[idx]), y[idx])
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

    def __call__(self, t: float) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        self._inner(t)
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
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
        out["profile"] = text.getvalue()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--asgd-updates", type=int, default=3000)
    ap.add_argument("--ssgd-rounds", type=int, default=200)
    ap.add_argument("--train-size", type=int, default=60000)
    ap.add_argument("--eval-every", type=float, default=0.5, help="virtual seconds between evaluations")
    ap.add_argument("--test-size", type=int, default=2000)
    ap.add_argument("--profile", action="store_true", help="cProfile the simulator runs")
    ap.add_argument("--top", type=int, default=25, help="functions shown per profile")
    args = ap.parse_args()
    torch.set_num_threads(1)

    print(f"{args.clients} x1 clients, small CNN, batch 32, 1 torch thread, Fashion-MNIST "
          f"train_size {args.train_size}; step time fixed at 0.01 virtual s; evaluation every "
          f"{args.eval_every:g} virtual s on {args.test_size} test images; torch {torch.__version__}")
    cases = [("asgd", {"name": "asgd", "lr": 0.01}, args.asgd_updates),  # 0.05 diverges with 16 clients
             ("ssgd", {"name": "ssgd", "lr": 0.1}, args.ssgd_rounds)]
    # Warm-up: a few simulated steps and bare steps, so neither side pays first-call costs.
    warm = run_sim(argparse.Namespace(**{**vars(args), "test_size": 100}), cases[0][1], 20, False)
    bare_loop(warm["x"], warm["y"], 20)

    header = (f"{'algorithm':9} {'updates':>7} {'steps':>6} {'virtual s':>9} {'sim s':>7} {'eval s (n)':>11} "
              f"{'sim-eval s':>10} {'bare s':>7} {'ratio':>6} {'ratio incl. eval':>16}")
    tables: dict[str, list[str]] = {"wall": [], "cpu": []}
    profiles = []
    for label, algorithm, limit in cases:
        r = run_sim(args, algorithm, limit, args.profile)
        bare_wall, bare_cpu = bare_loop(r["x"], r["y"], r["steps"])
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
    for clock, title in (("wall", "wall-clock seconds"), ("cpu", "CPU seconds of this process (robust to other load)")):
        print(f"\n{title}:\n{header}")
        for line in tables[clock]:
            print(line)
    print("\nratio = (simulator time without evaluation) / (bare loop time); target <= 1.2")
    for label, text in profiles:
        print(f"\n--- cProfile, {label} (own time, top {args.top}) ---\n{text}")


if __name__ == "__main__":
    main()
