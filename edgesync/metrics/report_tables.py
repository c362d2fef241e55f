"""report.md's tables: the entries compared, their seeds' means and intervals, the clients, each client's
achieved slowdown (fidelity), and staleness."""
from __future__ import annotations

from edgesync.metrics.formatting import NONE, RunData, code, md_table, num, pct, secs, sort_key, whole
from edgesync.metrics.report_values import (
    BYTES_PER_MB, cell_text, device_text, fixed_text, mb_text, rate_text, sig3, signed_pct, times_text,
)
from edgesync.metrics.seeds import INTERVAL_METHOD
from edgesync.metrics.summary import GAP_FIRST_N, compute_ratio, speedup, staleness_means


def comparison_table(run: RunData) -> list[str]:
    if not run.summary:
        return ["No evaluations recorded (metrics.jsonl is missing or empty)."]
    first = run.labels[0] if run.labels else None
    base = run.summary[first].get("time_to_target_s") if first else None
    target = f"Time to {pct(run.target_acc)} (s)" if run.target_acc is not None else "Time to target (s)"
    paired = bool(run.aggregates)  # seeds: each run's speedup against the first entry's run of its seed
    header = ["Entry", "Final acc.", "Best acc.", target,
              f"Speedup vs {run.labels[0].partition('@')[0]} (same seed)" if paired else f"Speedup vs {first or NONE}",
              "Updates",
              "Samples/s", "MB up", "MB down", "Compute ratio"]
    rows = []
    for label in run.labels:
        e = run.summary[label]
        ttt = num(e.get("time_to_target_s"))
        evaluated = e.get("evals", 1) != 0 and e.get("final_acc") is not None
        rows.append([
            code(label) + ("" if evaluated else " (no evaluations)"),
            pct(e.get("final_acc")), pct(e.get("best_acc")),
            secs(ttt) if ttt is not None else ("not reached" if run.target_acc is not None and evaluated
                                                 else NONE),
            times_text(num(e.get("speedup_vs")) if paired else speedup(num(base), ttt)),
            whole(e.get("updates")), rate_text(e.get("samples_per_s")),
            mb_text(e.get("bytes_up")), mb_text(e.get("bytes_down")), fixed_text(e.get("compute_ratio_mean"), 2),
        ])
    return md_table(header, rows, align="l" + "r" * (len(header) - 1))


SEEDS_NOTE = (f"Each figure is the mean over the entry's seeds ± the half-width of its 95% confidence interval "
              f"({INTERVAL_METHOD}; summary.json keeps every seed's value under `stats`). Speedups are paired: "
              f"each seed's time against the first entry's run of the same seed. A time to target some seeds "
              f"never reached has no mean; the column says how many reached it.")


def seeds_table(run: RunData) -> list[str]:
    first = next(iter(run.aggregates))
    target = f"Time to {pct(run.target_acc)} (s)" if run.target_acc is not None else "Time to target (s)"
    header = ["Entry", "Seeds", "Final acc. (%)", "Best acc. (%)", target, f"Speedup vs {first}", "MB/s",
              "Mean lag", "Mean gap"]
    rows = []
    for label, e in run.aggregates.items():
        stats = e.get("stats", {})
        ttt = stats.get("time_to_target_s", {})
        reached = ttt.get("reached", "")
        time_cell = (_mean_ci(ttt, 1) if e.get("time_to_target_s") is not None
                     else (f"{reached} reached" if reached else NONE))
        rows.append([code(label), str(len(e["seeds"])), _mean_ci(stats.get("final_acc"), 2, 100),
                     _mean_ci(stats.get("best_acc"), 2, 100), time_cell,
                     _mean_ci(stats.get("speedup_vs"), 2, suffix="×"),
                     _mean_ci(stats.get("bytes_per_s"), 3, 1 / BYTES_PER_MB),
                     _mean_ci(stats.get("mean_lag"), 2), _mean_ci(stats.get("mean_gap"), 3, sig=True)])
    return md_table(header, rows, align="lr" + "r" * (len(header) - 2))


def _mean_ci(stat: dict | None, digits: int, scale: float = 1.0, suffix: str = "", sig: bool = False) -> str:
    """'83.10 ± 0.42' (mean ± half-width of the 95% interval); the mean alone for one seed."""
    if not stat or num(stat.get("mean")) is None:
        return NONE
    fmt = (lambda v: f"{v:.{digits}g}") if sig else (lambda v: f"{v:,.{digits}f}")
    mean = stat["mean"] * scale
    ci = stat.get("ci95")
    if not ci:
        return f"{fmt(mean)}{suffix}"
    return f"{fmt(mean)}{suffix} ± {fmt((ci[1] - stat['mean']) * scale)}"


def clients_table(run: RunData) -> list[str]:
    if not run.clients:
        return ["No client records (clients.jsonl is missing or empty)."]
    order = {label: i for i, label in enumerate(run.labels)}
    rows = sorted(run.clients, key=lambda r: (order.get(str(r.get("algorithm")), len(order)),
                                               str(r.get("algorithm")), sort_key(r.get("client"))))
    header = ["Entry", "Client", "Profile", "Host", "Device", "Compute (s)", "Wait (s)", "Ratio", "Steps",
              "Samples"]
    body = [[code(r.get("algorithm")), cell_text(r.get("client")), cell_text(r.get("profile")), cell_text(r.get("host")),
             cell_text(device_text(r)), secs(num(r.get("compute_s"))), secs(num(r.get("wait_s"))),
             fixed_text(compute_ratio(r), 2), whole(r.get("steps")), whole(r.get("samples"))] for r in rows]
    return md_table(header, body, align="lrlllrrrrr")


FIDELITY_NOTE = ("Each client's slowdown relative to the fastest profile's clients in the same entry: achieved "
                 "= its median step time over theirs, target = its profile's median factor over theirs. End to "
                 "end: their steps per second of wall time over its own, as the algorithm felt it, and what the "
                 "emulation predicts once the time between steps is counted (asynchronous: the fastest clients' "
                 "time outside their steps paid by every client, so a ×k client is less than ×k slower; "
                 "synchronous: ×1, the barrier). Base step: the ×1 device's step time the run paced at; "
                 "isolation: how the client's process was pinned or capped.")


def fidelity_table(run: RunData) -> list[str]:
    order = {label: i for i, label in enumerate(run.labels)}
    rows = sorted((r for r in run.clients if r.get("achieved_factor") is not None),
                  key=lambda r: (order.get(str(r.get("algorithm")), len(order)), sort_key(r.get("client"))))
    header = ["Entry", "Client", "Profile", "Host", "Base step (ms)", "Median step (ms)", "Target ×", "Achieved ×",
              "Error", "End to end ×", "Predicted ×", "Isolation"]
    ms = lambda v: fixed_text(None if num(v) is None else num(v) * 1e3, 2)
    body = [[code(r.get("algorithm")), cell_text(r.get("client")), cell_text(r.get("profile")), cell_text(r.get("host")),
             ms(r.get("base_step_s")), ms(r.get("median_step_s")), fixed_text(r.get("target_factor"), 2),
             fixed_text(r.get("achieved_factor"), 2), signed_pct(r.get("fidelity_error")),
             fixed_text(r.get("e2e_factor"), 2), fixed_text(r.get("e2e_predicted"), 2), cell_text(r.get("isolation"))]
            for r in rows]
    return md_table(header, body, align="lrllrrrrrrrl")


STALENESS_NOTE = (f"Per applied update (updates.jsonl): the lag τ, DANA's gap G = ‖θ_apply − θ_computed‖₂/√k and "
                  f"G / RMS(g), the gap normalised by the RMS of the client's raw gradient (the same normaliser "
                  f"for every algorithm). Means over the whole run, and over each entry's first N applied "
                  f"updates (N = {GAP_FIRST_N}, or fewer if it applied fewer): the same early stretch for all.")


def staleness_table(run: RunData) -> list[str]:
    """One row per entry that logged gaps (as the staleness plot): the summary's staleness means, computed
    from updates.jsonl, so that a folder whose summary.json predates a field still shows it."""
    labels = [label for label in run.labels if any(r.get("algorithm") == label and "gap" in r for r in run.updates)]
    header = ["Entry", "Updates", "Mean lag", "Mean gap G", "Mean G / RMS(g)", "First N", "Mean G, first N",
              "Mean G / RMS(g), first N"]
    body = []
    for label in labels:
        rows = [r for r in run.updates if r.get("algorithm") == label]
        m = staleness_means(rows)
        body.append([code(label), whole(sum("gap" in r for r in rows)), fixed_text(m["mean_lag"], 2),
                     sig3(m["mean_gap"]), sig3(m["mean_gap_normalized"]), whole(m["gap_first_n"]),
                     sig3(m["mean_gap_first_n"]), sig3(m["mean_gap_normalized_first_n"])])
    return md_table(header, body, align="lrrrrrrr")
