"""The summary of a run: one entry per algorithm label, computed from the recorded rows alone.

Definitions, for the rows of one label in recorded order (how time, bytes and compute are measured:
docs/architecture.md, "Time, bytes and evaluation"; the lag and the gap: docs/algorithms.md, "Staleness"):

    final_acc          test_acc of the last evaluation
    best_acc           the largest test_acc
    time_to_target_s   the first time_s with test_acc >= target_acc (None: no target, or never reached)
    updates, samples,
    bytes_up/down      the counters of the last evaluation (they are cumulative)
    duration_s         time_s of the last evaluation
    samples_per_s      samples / duration_s;   bytes_per_s = (bytes_up + bytes_down) / duration_s
    updates_per_s      updates / duration_s: the coordinator's throughput (shat.txt EQ3)
    compute_ratio_mean mean over the label's clients of compute_s / wall_s
    fidelity_max_error the largest |fidelity_error| of the label's clients: how far the slowdown a client
                       achieved relative to the fastest clients is from its target (metrics/fidelity.py)
    speedup_vs         (only with a baseline) baseline's time_to_target_s / this label's
    evals              how many evaluations were recorded
    client_acc_mean,
    client_acc_p10,
    client_acc_worst   over the clients, their accuracy under the final model (clients.jsonl's `final_acc`:
                       each client's own test split, or the test set weighted by its label shares, as
                       `final_acc_on` says, copied as `client_eval`; runtime/bookkeeping/client_eval.py):
                       mean, 10th percentile, worst

and, from the label's rows of updates.jsonl (asynchronous algorithms: one row per applied update),

    mean_lag, mean_gap,
    mean_gap_normalized          means of `lag`, `gap` and `gap_normalized` over every row
    gap_first_n                  N: how many rows the next two are over, the first GAP_FIRST_N rows that
                                 carry a gap, in recorded order (fewer if the run applied fewer)
    mean_gap_first_n,
    mean_gap_normalized_first_n  means of `gap` and `gap_normalized` over those N rows

and, from the label's row of coordinator.jsonl (the coordinator's load; metrics/coordinator_load.py; None
for a folder without one; with several, e.g. a resumed entry's, the one over the longest span),

    coordinator_utilisation      the coordinator's busy time / the entry's run
    queue_delay_mean_s,
    queue_delay_p95_s            mean and 95th percentile of its messages' waits for the coordinator
    updates_served_per_s         UPDATE messages it took up per second (applied or collected)
    coordinator_saturated_share  the share of the run in 1 s windows it was busy ≥ 90% of
    coordinator_bottleneck       that share above 25%: the coordinator set the pace, not the clients

The first-N means compare algorithms over the same early stretch of training, whatever their run
lengths: a whole-run mean mixes phases (a run that diverges, or one that trains longer at a lower gap).
`gap_normalized` divides the gap by the RMS of the raw gradient, the same normaliser for every algorithm
(algorithms/machinery/staleness.py). Means are over the finite values (a diverging run's last gaps are inf/nan);
None where there are none.

A value that cannot be computed (no evaluations, a zero duration, a missing key) is None, never an error.
`summarize` is a pure function of plain lists and dicts, so every number can be checked by hand.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

GAP_FIRST_N = 100  # applied updates: the early stretch over which mean_gap_first_n compares algorithms


def summarize(
    metrics: list[dict],
    clients: list[dict],
    target_acc: float | None,
    algorithms: dict[str, str] | None = None,
    baseline: str | None = None,
    updates: list[dict] | None = None,
    coordinator: list[dict] | None = None,
) -> dict[str, dict[str, Any]]:
    """The summary keyed by label, labels in the order first seen in `metrics`.

    metrics, clients: rows of metrics.jsonl and clients.jsonl (rows without `algorithm` are ignored).
    algorithms: label -> registered name; a label missing from it is its own name. Labels that appear only
      in `clients` or `algorithms` (an entry that never evaluated) follow, with None for what needs evals.
    baseline: a label; adds `speedup_vs` to every entry. Raises ValueError if no entry has that label.
    updates: rows of updates.jsonl; adds `staleness_means` (None for entries that logged none, e.g.
      synchronous algorithms; non-finite values are left out).
    coordinator: rows of coordinator.jsonl; adds the coordinator's load (`coordinator_load`).
    """
    algorithms = algorithms or {}
    labels = _labels_in_order(metrics, clients, algorithms)
    if baseline is not None and baseline not in labels:
        raise ValueError(f"baseline {baseline!r} is not one of the run's labels {labels}")

    summary: dict[str, dict[str, Any]] = {}
    for label in labels:
        evals = [r for r in metrics if r.get("algorithm") == label]
        entry = _summarize_evals(evals, target_acc)
        rows = [r for r in clients if r.get("algorithm") == label]
        entry["compute_ratio_mean"] = compute_ratio_mean(rows)
        entry.update(client_spread([r.get("final_acc") for r in rows]))
        entry["client_eval"] = next((r["final_acc_on"] for r in rows if r.get("final_acc_on")), None)
        errors = [abs(r["fidelity_error"]) for r in rows if isinstance(r.get("fidelity_error"), (int, float))]
        entry["fidelity_max_error"] = max(errors) if errors else None
        entry["diverged"] = any(r.get("diverged") for r in evals)
        entry.update(staleness_means([r for r in updates or () if r.get("algorithm") == label]))
        entry.update(coordinator_load([r for r in coordinator or () if r.get("algorithm") == label]))
        summary[label] = {"algorithm": algorithms.get(label, label), **entry}

    if baseline is not None:
        base = summary[baseline]["time_to_target_s"]
        for entry in summary.values():
            entry["speedup_vs"] = speedup(base, entry["time_to_target_s"])
    return summary


def staleness_means(rows: list[dict]) -> dict[str, Any]:
    """mean_lag, mean_gap, mean_gap_normalized over `rows` (one label's updates.jsonl rows, in order), and
    mean_gap_first_n, mean_gap_normalized_first_n over its first GAP_FIRST_N rows with a gap (gap_first_n:
    how many; None if none)."""
    first = [r for r in rows if "gap" in r][:GAP_FIRST_N]
    means = {f"mean_{key}": _finite_mean(rows, key) for key in ("lag", "gap", "gap_normalized")}
    return {**means, "gap_first_n": len(first) or None, "mean_gap_first_n": _finite_mean(first, "gap"),
            "mean_gap_normalized_first_n": _finite_mean(first, "gap_normalized")}


# summary field ← coordinator.jsonl field
COORDINATOR_FIELDS = {"coordinator_utilisation": "utilisation", "queue_delay_mean_s": "queue_delay_mean_s",
                      "queue_delay_p95_s": "queue_delay_p95_s", "updates_served_per_s": "updates_served_per_s",
                      "coordinator_saturated_share": "saturated_share"}


def coordinator_load(rows: list[dict]) -> dict[str, Any]:
    """The coordinator's load figures from one label's coordinator.jsonl rows: the row over the longest span
    (None for each without one), and `coordinator_bottleneck` as the row says."""
    row = max(rows, key=lambda r: _num(r.get("duration_s")) or 0.0, default={})
    figures: dict[str, Any] = {name: _num(row.get(key)) for name, key in COORDINATOR_FIELDS.items()}
    figures["coordinator_bottleneck"] = row.get("bottleneck") if isinstance(row.get("bottleneck"), bool) else None
    return figures


def _finite_mean(rows: list[dict], key: str) -> float | None:
    # a diverging run's last gaps are inf/nan: the mean is over the finite ones before it
    values = [r[key] for r in rows if _num(r.get(key)) is not None and math.isfinite(r[key])]
    return sum(values) / len(values) if values else None


def time_to_target(evals: list[dict], target_acc: float | None) -> float | None:
    """The first time_s at which test_acc >= target_acc; None without a target or if never reached."""
    if target_acc is None:
        return None
    reached = [r["time_s"] for r in evals
               if _num(r.get("test_acc")) is not None and r["test_acc"] >= target_acc
               and _num(r.get("time_s")) is not None]
    return min(reached) if reached else None


def speedup(baseline_s: float | None, this_s: float | None) -> float | None:
    """baseline_s / this_s: how many times faster this entry reached the target; None if either is None."""
    if baseline_s is None or this_s is None or this_s <= 0:
        return None
    return baseline_s / this_s


def compute_ratio(row: dict) -> float | None:
    """compute_s / wall_s of one client row; None when wall_s is missing or zero."""
    compute_s, wall_s = _num(row.get("compute_s")), _num(row.get("wall_s"))
    if compute_s is None or wall_s is None or wall_s <= 0:
        return None
    return compute_s / wall_s


def compute_ratio_mean(client_rows: list[dict]) -> float | None:
    """Mean compute-time ratio over the rows that have one; None if none has."""
    ratios = [r for r in (compute_ratio(row) for row in client_rows) if r is not None]
    return sum(ratios) / len(ratios) if ratios else None


def _summarize_evals(evals: list[dict], target_acc: float | None) -> dict[str, Any]:
    accs = [a for a in (_num(r.get("test_acc")) for r in evals) if a is not None]
    last = evals[-1] if evals else {}
    duration_s = _num(last.get("time_s"))
    samples, updates = _num(last.get("samples")), _num(last.get("updates"))
    bytes_up, bytes_down = _num(last.get("bytes_up")), _num(last.get("bytes_down"))
    has_duration = duration_s is not None and duration_s > 0
    return {
        "final_acc": _num(last.get("test_acc")),
        "best_acc": max(accs) if accs else None,
        "time_to_target_s": time_to_target(evals, target_acc),
        "target_acc": target_acc,
        "updates": updates,
        "samples": samples,
        "duration_s": duration_s,
        "samples_per_s": samples / duration_s if has_duration and samples is not None else None,
        "updates_per_s": updates / duration_s if has_duration and updates is not None else None,
        "bytes_up": bytes_up,
        "bytes_down": bytes_down,
        "bytes_per_s": ((bytes_up + bytes_down) / duration_s
                        if has_duration and bytes_up is not None and bytes_down is not None else None),
        "evals": len(evals),
    }


def client_spread(accs: list) -> dict[str, float | None]:
    """The mean, 10th percentile (numpy's linear interpolation) and worst of the clients' final accuracies that
    exist (runtime/bookkeeping/client_eval.py: a client without test samples has none); None without any."""
    values = [float(a) for a in accs if _num(a) is not None]
    if not values:
        return {"client_acc_mean": None, "client_acc_p10": None, "client_acc_worst": None}
    return {"client_acc_mean": sum(values) / len(values), "client_acc_p10": float(np.percentile(values, 10)),
            "client_acc_worst": min(values)}


def _labels_in_order(metrics: list[dict], clients: list[dict], algorithms: dict[str, str]) -> list[str]:
    labels: dict[str, None] = {}  # an ordered set
    for row in [*metrics, *clients]:
        if row.get("algorithm") is not None:
            labels.setdefault(str(row["algorithm"]), None)
    for label in algorithms:
        labels.setdefault(label, None)
    return list(labels)


def _num(value: Any) -> float | int | None:
    """`value` if it is a real number (not a bool, not NaN), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if value != value else value  # NaN != NaN
