"""The run report's plots: accuracy vs time or updates, cumulative traffic, staleness, compute-time ratio per
client (those of federated realism: churn_plots.py; what every plot shares: plot_canvas.py).

Each `plot_*` function draws one PNG from a `RunData` (see `edgesync.metrics.report.load_run`) on a
matplotlib `Figure` (the Agg canvas), never through pyplot, so drawing touches no global backend state.
`render_report` draws them all under `matplotlib.rc_context(PLOT_STYLE)`.

With seeds (metrics/seeds.py) the accuracy and traffic plots draw one line per entry, the mean over its
seeds, and the accuracy plot shades the band from the lowest to the highest seed.

Numbers are formatted by `edgesync.metrics.formatting`, as in report.md, so a plot's labels read exactly
like the tables."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.cm
import matplotlib.colors
import matplotlib.patches
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from edgesync.metrics.formatting import RunData, num, pct, secs, sort_key
from edgesync.metrics.plot_canvas import legend, line_style, new_plot, no_data, save_figure, time_label
from edgesync.metrics.summary import compute_ratio


MAX_LABELLED_BARS = 24             # above this many bars, the compute-ratio plot drops the value labels
MAX_ANNOTATED_HITS = 4             # above this many entries reaching the target, the stars lose their times
MAX_MARKED_POINTS = 40             # a curve with more evaluations is drawn without point markers
MAX_LEGEND_CLIENTS = 24            # above this many clients, the compute-ratio plot has a colour scale, no legend
MAX_HISTOGRAM_BINS = 40


def plot_accuracy(run: RunData, x_key: str, path: Path) -> Path:
    """Test accuracy (%) against `x_key` ("time_s" or "updates"): one line per entry, the target dashed,
    a star where each entry first reaches it."""
    by_time = x_key == "time_s"
    fig, ax = new_plot(
        "Test accuracy vs time" if by_time else "Test accuracy vs global model updates",
        time_label(run) if by_time else "Global model updates", "Test accuracy (%)")
    acc = lambda r: num(r.get("test_acc"))
    bands = {label: _seed_band(run, label, x_key, acc) for label in run.aggregates}  # seeds: mean and band
    series = ({label: list(zip(b[0], b[1])) for label, b in bands.items()} if bands
              else {label: _series(run.metrics, label, x_key, acc) for label in run.labels})
    hits = {label: _first_reaching(points, run.target_acc) for label, points in series.items()}
    annotate = by_time and sum(hit is not None for hit in hits.values()) <= MAX_ANNOTATED_HITS
    any_data = False
    for i, (label, points) in enumerate(series.items()):
        style = line_style(i)
        if not points:
            ax.plot([], [], **style, label=f"{label} (no evaluations)")
            continue
        any_data = True
        xs, ys = zip(*points)
        ax.plot(xs, [100 * y for y in ys], **style, **_point_markers(points),
                label=f"{label} (mean of {len(run.aggregates[label]['seeds'])} seeds)" if bands else label)
        if label in bands:
            band_x, _, low, high = bands[label]
            ax.fill_between(band_x, [100 * y for y in low], [100 * y for y in high], color=style["color"],
                            alpha=0.18, linewidth=0)
        hit = hits[label]
        if hit is not None:
            ax.plot(hit[0], 100 * hit[1], marker="*", markersize=14, color=style["color"],
                    markeredgecolor="black", markeredgewidth=0.6, linestyle="none", zorder=5)
            if annotate:
                ax.annotate(f"{secs(hit[0])} s", (hit[0], 100 * hit[1]), xytext=(5, -13),
                            textcoords="offset points", fontsize=8, color=style["color"])
    handles, labels = ax.get_legend_handles_labels()
    if bands:
        handles.append(matplotlib.patches.Patch(color="0.6", alpha=0.35))
        labels.append("band: lowest to highest seed")
    if run.target_acc is not None:
        ax.axhline(100 * run.target_acc, color="0.35", linestyle="--", linewidth=1.0, zorder=1)
        handles.append(Line2D([], [], color="0.35", linestyle="--", linewidth=1.0))
        labels.append(f"target {pct(run.target_acc)}")
        if any_data:
            handles.append(Line2D([], [], marker="*", markersize=11, color="0.6", markeredgecolor="black",
                                  markeredgewidth=0.6, linestyle="none"))
            labels.append("first reaches target")
    if not any_data:
        no_data(ax, "no evaluations recorded")
        ax.set_ylim(0, 100)
    ax.set_xlim(left=0)
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    legend(ax, handles, labels, loc="lower right")
    return save_figure(fig, path)


def plot_bytes(run: RunData, path: Path) -> Path:
    """Cumulative bytes on the wire (up + down) against time, one line per entry (with seeds: the mean)."""
    if run.aggregates:
        series = {label: list(zip(*_seed_band(run, label, "time_s", _total_bytes)[:2])) for label in run.aggregates}
    else:
        series = {label: _series(run.metrics, label, "time_s", _total_bytes) for label in run.labels}
    peak = max((b for pts in series.values() for _, b in pts), default=0)
    scale, unit = _byte_unit(peak)
    fig, ax = new_plot("Cumulative traffic on the wire (up + down)", time_label(run), f"Traffic ({unit})")
    for i, (label, points) in enumerate(series.items()):
        style = line_style(i)
        if not points:
            ax.plot([], [], **style, label=f"{label} (no evaluations)")
            continue
        xs, ys = zip(*points)
        ax.plot(xs, [y / scale for y in ys], **style, **_point_markers(points), label=label)
    if not any(series.values()):
        no_data(ax, "no traffic recorded")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    legend(ax, handles, labels, loc="upper left")
    return save_figure(fig, path)


def plot_staleness(run: RunData, path: Path, bins: int = 40) -> Path:
    """Mean lag τ and mean gap G of applied updates over time (binned), one line per entry that logs them."""
    fig = Figure(figsize=(7, 5.6))
    top, bottom = fig.subplots(2, 1, sharex=True)
    labels = [label for label in run.labels if any(r.get("algorithm") == label and "gap" in r for r in run.updates)]
    end = max((r["time_s"] for r in run.updates if "time_s" in r), default=0.0) or 1.0
    width = end / bins
    for i, label in enumerate(labels):
        sums: dict[int, list[float]] = {}
        for r in run.updates:
            if r.get("algorithm") == label and isinstance(r.get("gap"), (int, float)):
                acc = sums.setdefault(min(bins - 1, int(r["time_s"] / width)), [0.0, 0.0, 0])
                acc[0] += r.get("lag", 0)
                acc[1] += r["gap"]
                acc[2] += 1
        xs = [(b + 0.5) * width for b in sorted(sums)]
        style = line_style(i)
        top.plot(xs, [sums[b][0] / sums[b][2] for b in sorted(sums)], **style, label=label)
        bottom.plot(xs, [sums[b][1] / sums[b][2] for b in sorted(sums)], **style, label=label)
    top.set_title("Staleness of applied updates")
    top.set_ylabel("mean lag τ (updates)")
    bottom.set_ylabel("mean gap G = ‖Δθ‖₂/√k")
    bottom.set_xlabel(time_label(run))
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    top.legend(loc="upper right", fontsize="small")
    return save_figure(fig, path)


def plot_compute_ratio(run: RunData, path: Path) -> Path:
    """Grouped bars: for each entry (group) one bar per client, its compute time / wall time."""
    fig, ax = new_plot("Compute-time ratio per client", "Entry", "Compute time / wall time")
    labels = [label for label in run.labels if any(str(r.get("algorithm")) == label for r in run.clients)]
    labels += sorted({str(r.get("algorithm")) for r in run.clients} - set(labels))
    ranks = sorted({r.get("client") for r in run.clients}, key=sort_key)
    profile = {}
    for r in run.clients:
        profile.setdefault(r.get("client"), r.get("profile"))
    if not labels or not ranks:
        no_data(ax, "no client records")
        ax.set_xticks([])
        return save_figure(fig, path)

    width = 0.8 / len(ranks)
    colors = _client_colors(len(ranks))
    peak = 0.0
    for j, rank in enumerate(ranks):
        xs, heights = [], []
        for g, label in enumerate(labels):
            row = next((r for r in run.clients if str(r.get("algorithm")) == label and r.get("client") == rank),
                       None)
            ratio = compute_ratio(row) if row is not None else None
            if ratio is not None:
                xs.append(g + (j - (len(ranks) - 1) / 2) * width)
                heights.append(ratio)
        peak = max([peak, *heights])
        name = f"{rank} ({profile[rank]})" if profile.get(rank) else str(rank)
        bars = ax.bar(xs, heights, width=width * 0.92, color=colors[j], label=name, edgecolor="white",
                      linewidth=0.4)
        if len(ranks) * len(labels) <= MAX_LABELLED_BARS:
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1.5)
    ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 4 else 0)
    ax.set_ylim(0, max(1.0, peak) * 1.1)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.grid(False, axis="x")
    if len(ranks) > MAX_LEGEND_CLIENTS:  # a legend this long would squeeze the axes to nothing: a colour scale
        scale = matplotlib.cm.ScalarMappable(matplotlib.colors.Normalize(0, len(ranks) - 1), "viridis")
        fig.colorbar(scale, ax=ax, label=f"Client (by rank: {ranks[0]} … {ranks[-1]})", ticks=[])
        return save_figure(fig, path)
    handles, names = ax.get_legend_handles_labels()
    ax.legend(handles, names, title="Client (profile)", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, ncols=1 if len(ranks) <= 12 else 2)
    return save_figure(fig, path)


def _point_markers(points: list) -> dict:
    """Small dots on each evaluation, unless there are so many that they would blur the line."""
    return {"marker": "o", "markersize": 3} if len(points) <= MAX_MARKED_POINTS else {}


def _client_colors(n: int) -> list:
    """Client colours, a palette apart from the entries' tab10 so a client is not read as an entry."""
    if n <= 8:
        return [matplotlib.colormaps["Set2"](i) for i in range(n)]
    return [matplotlib.colormaps["viridis"](i / (n - 1)) for i in range(n)]


def _series(metrics: list[dict], label: str, x_key: str, y_of) -> list[tuple[float, float]]:
    """(x, y) of one entry's evaluations that have both, sorted by x (stable)."""
    points = [(num(r.get(x_key)), y_of(r)) for r in metrics if str(r.get("algorithm")) == label]
    return sorted(((x, y) for x, y in points if x is not None and y is not None), key=lambda p: p[0])


def _seed_band(run: RunData, label: str, x_key: str, y_of) -> tuple[list, list, list, list]:
    """(xs, mean, lowest, highest) of an aggregate's seeds at the union of their x values: each seed's curve
    interpolated linearly, and counted only up to its own last point (a run that stopped at its target
    leaves the band there, nothing is extrapolated)."""
    curves = [c for c in (_series(run.metrics, r, x_key, y_of) for r in run.seed_runs(label)) if c]
    xs = sorted({x for c in curves for x, _ in c})
    columns = [[float(np.interp(x, [p[0] for p in c], [p[1] for p in c])) for c in curves if x <= c[-1][0]]
               for x in xs]
    return (xs, [sum(v) / len(v) for v in columns], [min(v) for v in columns], [max(v) for v in columns])


def _first_reaching(points: list[tuple[float, float]], target: float | None) -> tuple[float, float] | None:
    if target is None:
        return None
    return next(((x, y) for x, y in points if y >= target), None)


def _total_bytes(row: dict) -> float | None:
    up, down = num(row.get("bytes_up")), num(row.get("bytes_down"))
    return None if up is None or down is None else up + down


def _byte_unit(peak: float) -> tuple[float, str]:
    for scale, unit in [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")]:
        if peak >= scale:
            return scale, unit
    return 1.0, "bytes"
