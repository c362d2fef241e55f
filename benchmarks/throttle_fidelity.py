"""Emulation fidelity: does a ×k profile make a real training step take k times its undisturbed time?

    .venv/bin/python benchmarks/throttle_fidelity.py [--steps 20]

One process, one torch thread, the small CNN on real Fashion-MNIST batches: calibrate the
undisturbed step time as a client does, then run steps under each profile and print the median
achieved factor (step time / reference) against the target. Target: within ±5%.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from edgesync.constants import CALIBRATION_STEPS, CALIBRATION_WARMUP_STEPS
from edgesync.emulation.profiles import FactorSampler, parse_profile
from edgesync.emulation.throttle import Throttle
from edgesync.runtime.workload import dataset, make_trainer
from edgesync.trainer import NoHook


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="throttled steps per profile (x100: a fifth)")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = dataset("fashion_mnist", None, 8000)
    trainer = make_trainer(data, "cnn", np.arange(8000), args.batch_size, seed=0,
                           device=torch.device("cpu"), hook=NoHook())
    times = []
    for i in range(CALIBRATION_WARMUP_STEPS + CALIBRATION_STEPS):
        t0 = time.perf_counter()
        trainer.gradient()
        if i >= CALIBRATION_WARMUP_STEPS:
            times.append(time.perf_counter() - t0)
    reference = statistics.median(times)
    print(f"reference (undisturbed) step: {reference * 1000:.2f} ms, batch {args.batch_size}")
    print(f"{'profile':>8} {'target':>7} {'median':>8} {'mean':>7} {'error':>7}  steps")
    worst = 0.0
    for name in ("x2", "x10", "x100"):
        throttle = Throttle(FactorSampler(parse_profile(name), seed=0, rank=0), reference)
        trainer.hook = throttle
        n = max(5, args.steps // 5) if name == "x100" else args.steps
        durations = []
        for _ in range(n):
            t0 = time.perf_counter()
            trainer.gradient()
            durations.append((time.perf_counter() - t0) / reference)
        target = throttle.sampler.mean_factor
        med = statistics.median(durations)
        err = med / target - 1
        worst = max(worst, abs(err))
        print(f"{name:>8} {target:>7.1f} {med:>8.3f} {statistics.mean(durations):>7.3f} {err:>+7.2%}  {n}")
    print(f"worst median error: {worst:.2%} ({'within' if worst <= 0.05 else 'OUTSIDE'} ±5%)")


if __name__ == "__main__":
    main()
