"""Seeds as an axis: the runs of one entry under several seeds, summarised as mean, spread and interval.

A scenario's `seeds: [0, 1, 2]` runs every entry once per seed, labelled `LABEL@seed=N` (or
`LABEL@clients=8,seed=N` inside a sweep). summary.json keeps each seed's entry and adds one entry per
label without the seed (`LABEL`, `LABEL@clients=8`) holding, for each figure of FIGURES, the mean over
the seeds at the top level (so `summary["esync"]["final_acc"]` reads the same with or without seeds)
and under `stats` the per-seed values, the mean, the sample standard deviation and a 95% confidence
interval for the mean.

The interval is Student's t: mean ± t(0.975, n − 1) · sd / √n over the n seeds that have the figure,
two-sided. It assumes the seeds' figures are independent draws of a roughly normal quantity; with 3–5
seeds a bootstrap interval would be too narrow (it cannot be wider than the range of the values), t is
the honest choice. One seed gives no interval. A time to target that some seeds never reached has no
mean (a mean over the seeds that reached it would flatter the entry); its stats say how many reached it.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

INTERVAL_METHOD = "Student t, 95%, two-sided, over seeds"

# The figures of a summary entry that get a mean, spread and interval over seeds.
FIGURES = ("final_acc", "best_acc", "time_to_target_s", "speedup_vs", "updates", "samples_per_s", "duration_s",
           "bytes_up", "bytes_down", "bytes_per_s", "compute_ratio_mean", "fidelity_max_error", "mean_lag",
           "mean_gap", "mean_gap_normalized", "mean_gap_first_n", "mean_gap_normalized_first_n",
           "coordinator_utilisation", "queue_delay_mean_s", "queue_delay_p95_s", "updates_served_per_s",
           "coordinator_saturated_share", "client_acc_mean", "client_acc_p10", "client_acc_worst")


def t_975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` ≥ 1 degrees of freedom (scipy.special's inverse of the t
    distribution, imported here: every run folder's summary passes through this module, and most need no
    interval; scipy.stats would cost a process 1.3 CPU-s to import, scipy.special 0.4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be ≥ 1 (got {df})")
    from scipy.special import stdtrit
    return float(stdtrit(df, 0.975))


@dataclass(frozen=True)
class Interval:
    """Mean, sample sd and 95% t-interval of n values; sd, low and high are None for n < 2."""

    n: int
    mean: float | None
    sd: float | None
    low: float | None
    high: float | None

    @property
    def half_width(self) -> float | None:
        return None if self.high is None or self.mean is None else self.high - self.mean


def interval(values: list[float]) -> Interval:
    """The t-interval of the mean of `values` (finite numbers)."""
    n = len(values)
    if n == 0:
        return Interval(0, None, None, None, None)
    mean = statistics.fmean(values)
    if n == 1:
        return Interval(1, mean, None, None, None)
    sd = statistics.stdev(values)
    half = t_975(n - 1) * sd / math.sqrt(n)
    return Interval(n, mean, sd, mean - half, mean + half)


def split_seed(label: str) -> tuple[str, int | None]:
    """'esync@clients=8,seed=2' → ('esync@clients=8', 2); 'esync@seed=0' → ('esync', 0); no seed → (label, None)."""
    name, at, tag = label.partition("@")
    if not at:
        return label, None
    parts = tag.split(",")
    seeds = [p for p in parts if p.startswith("seed=") and p[5:].isdigit()]
    if len(seeds) != 1:
        return label, None
    rest = [p for p in parts if p != seeds[0]]
    return (f"{name}@{','.join(rest)}" if rest else name), int(seeds[0][5:])


def by_seed(summary: dict[str, dict]) -> dict[int | None, dict[str, dict]]:
    """The per-run entries of a summary grouped by seed, each keyed by its label without the seed; a
    summary without seeds is one group, key None. Aggregate entries (with `seeds`) are left out."""
    groups: dict[int | None, dict[str, dict]] = {}
    for label, entry in summary.items():
        if not isinstance(entry, dict) or "seeds" in entry:
            continue
        base, seed = split_seed(label)
        groups.setdefault(seed, {})[base] = entry
    return groups


def with_seed_aggregates(summary: dict[str, dict], baseline: str | None = None) -> dict[str, dict]:
    """`summary` with its per-seed speedups paired by seed (`per_seed_speedups`, when there is a
    baseline) and, after the per-seed entries, one aggregate entry per label run under seeds."""
    if baseline is not None:
        per_seed_speedups(summary, baseline)
    return {**summary, **aggregate(summary)}


def aggregate(summary: dict[str, dict]) -> dict[str, dict]:
    """One aggregate entry per label without its seed, for every label that carries a seed tag (so a
    scenario's `seeds: [3]` still reads `summary["LABEL"]`, with n = 1 and no interval)."""
    groups: dict[str, dict[int, dict]] = {}
    for label, entry in summary.items():
        base, seed = split_seed(label)
        if seed is not None and isinstance(entry, dict):
            groups.setdefault(base, {})[seed] = entry
    return {base: aggregate_entry(runs) for base, runs in groups.items()}


def aggregate_entry(runs: dict[int, dict]) -> dict[str, Any]:
    """The aggregate of one label's per-seed entries (seed → entry)."""
    seeds = sorted(runs)
    first = runs[seeds[0]]
    entry: dict[str, Any] = {"algorithm": first.get("algorithm"), "seeds": seeds,
                             "target_acc": first.get("target_acc"), "interval": INTERVAL_METHOD}
    stats: dict[str, dict] = {}
    for key in FIGURES:
        if not any(key in runs[s] for s in seeds):
            continue
        per_seed = {str(s): _finite(runs[s].get(key)) for s in seeds}
        values = [v for v in per_seed.values() if v is not None]
        iv = interval(values)
        stat = {"n": iv.n, "mean": iv.mean, "sd": iv.sd,
                "ci95": None if iv.low is None else [iv.low, iv.high], "per_seed": per_seed}
        if key == "time_to_target_s":
            stat["reached"] = f"{iv.n}/{len(seeds)}"
            entry[key] = iv.mean if iv.n == len(seeds) else None  # never a mean over the lucky seeds only
        else:
            entry[key] = iv.mean
        stats[key] = stat
    entry["diverged"] = any(bool(runs[s].get("diverged")) for s in seeds)
    entry["diverged_seeds"] = [s for s in seeds if runs[s].get("diverged")]
    entry["coordinator_bottleneck_seeds"] = [s for s in seeds if runs[s].get("coordinator_bottleneck")]
    entry["evals"] = sum(int(runs[s].get("evals") or 0) for s in seeds)
    entry["stats"] = stats
    return entry


def per_seed_speedups(summary: dict[str, dict], baseline: str) -> None:
    """Set each per-seed entry's `speedup_vs` against the baseline's run of the same seed (and sweep
    tag, when the baseline label has it): speedups are paired by seed, never across seeds."""
    base_label, _ = split_seed(baseline)
    base_name = base_label.partition("@")[0]
    for label, entry in summary.items():
        stem, seed = split_seed(label)
        if seed is None:
            continue
        tag = stem.partition("@")[2]
        partner = f"{base_name}@{','.join(p for p in (tag, f'seed={seed}') if p)}"
        ref = summary.get(partner) or summary.get(f"{base_name}@seed={seed}")
        this, base = entry.get("time_to_target_s"), (ref or {}).get("time_to_target_s")
        entry["speedup_vs"] = base / this if base and this and this > 0 else None


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
