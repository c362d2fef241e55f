"""The report's plots for runs with federated realism (metrics/churn.py): rounds per client, availability
and the device and link traces."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from edgesync.metrics.churn import ChurnRecords, device_traces, link_traces, ranks_text
from edgesync.metrics.formatting import RunData, sort_key
from edgesync.metrics.plot_canvas import (
    DPI, FIG_SIZE_IN, PLOT_STYLE, legend, line_style, new_plot, no_data, save_figure, time_label,
)
from edgesync.metrics.plots import MAX_HISTOGRAM_BINS


MAX_AVAILABILITY_CLIENTS = 50      # the availability plot draws the first this many clients (by rank)
MAX_AVAILABILITY_PANELS = 4        # … for this many distinct schedules (entries with other seeds)
MAX_TRACE_LINES = 8                # distinct traces drawn per panel of the traces plot


def plot_rounds_per_client(run: RunData, path: Path, churn: ChurnRecords | None = None) -> Path:
    """Histogram of the rounds each client reported in, one bar colour per synchronous entry (`churn`: the
    run's records, when the caller has them already)."""
    parts = (churn or ChurnRecords(run)).participation
    fig, ax = new_plot("Rounds each client took part in", "Rounds reported in", "Clients")
    counts = {label: list(p.per_client.values()) for label, p in parts.items() if p.per_client}
    if not counts:
        no_data(ax, "no rounds recorded")
        return save_figure(fig, path)
    top = max(max(c) for c in counts.values())
    width = max(1, -(-(top + 1) // MAX_HISTOGRAM_BINS))  # whole rounds per bin
    bins = np.arange(-0.5, top + width + 0.5, width)
    ax.hist(list(counts.values()), bins=bins, color=[line_style(i)["color"] for i in range(len(counts))],
            label=[f"{label} ({len(c)} clients)" for label, c in counts.items()], edgecolor="white", linewidth=0.6)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(False, axis="x")
    handles, labels = ax.get_legend_handles_labels()
    legend(ax, handles, labels, loc="upper right")
    return save_figure(fig, path)


def plot_availability(run: RunData, path: Path, churn: ChurnRecords | None = None) -> Path:
    """Each client's online stretches (bars) over time, from the presence rows: one panel per distinct
    schedule (every entry faces the same one unless seeds differ), the first MAX_AVAILABILITY_CLIENTS
    clients by rank."""
    schedules = (churn or ChurnRecords(run)).schedules[:MAX_AVAILABILITY_PANELS]
    drawn = [sorted(s.intervals, key=sort_key)[:MAX_AVAILABILITY_CLIENTS] for s in schedules]
    heights = [0.9 + 0.11 * max(1, len(d)) for d in drawn] or [2.0]
    fig = Figure(figsize=(FIG_SIZE_IN[0], min(16.0, max(3.0, 0.7 + sum(heights)))), dpi=DPI,
                 layout="constrained")
    axes = fig.subplots(max(1, len(schedules)), 1, squeeze=False, height_ratios=heights)[:, 0]
    fig.suptitle("Client availability: online stretches", fontsize=PLOT_STYLE["axes.titlesize"])
    if not schedules:
        no_data(axes[0], "no presence rows recorded")
    for ax, s, clients in zip(axes, schedules, drawn):
        total = len(s.intervals)
        for y, c in enumerate(clients):
            ax.broken_barh([(a, b - a) for a, b in s.intervals[c]], (y - 0.38, 0.76),
                           color=matplotlib.colormaps["tab10"](2), linewidth=0)
        every = max(1, -(-len(clients) // 25))  # at most 25 tick labels
        ax.set_yticks(range(0, len(clients), every), [str(c) for c in clients[::every]],
                      fontsize=7 if len(clients) > 12 else None)
        ax.set_ylim(len(clients) - 0.5, -0.5)  # rank 0 at the top
        ax.set_xlim(0, s.end)
        ax.set_ylabel("Client")
        ax.grid(True, axis="x")
        who = ("every entry (one schedule)" if len(schedules) == 1 and len(s.labels) > 1
               else ", ".join(s.labels))
        shown = f"; clients {ranks_text(clients)} of {total}" if len(clients) < total else ""
        ax.set_title(f"{who}{shown}", fontsize=PLOT_STYLE["font.size"])
    axes[-1].set_xlabel(time_label(run))
    return save_figure(fig, path)


def plot_traces(run: RunData, path: Path, churn: ChurnRecords | None = None) -> Path:
    """The scenario's traces over time, as step plots: each traced device's factor, each traced link's
    rate and latency (up and down drawn apart where they differ). Clients with the same trace share a line."""
    churn = churn or ChurnRecords(run)
    device, links = device_traces(run.scenario), link_traces(run.scenario)
    panels = (["factor"] if device else []) + (["rate", "latency"] if links else [])
    fig = Figure(figsize=(FIG_SIZE_IN[0], 1.0 + 1.8 * max(1, len(panels))), dpi=DPI, layout="constrained")
    axes = fig.subplots(max(1, len(panels)), 1, sharex=True, squeeze=False)[:, 0]
    axes[0].set_title("Device and link traces (as the scenario sets them)")
    rows = [r for t in device.values() for r in t] + [r for t in links.values() for d in t.values() for r in d]
    horizon = churn.horizon or (max((r[0] for r in rows), default=0.0) + 1.0)
    if not panels:
        no_data(axes[0], "no traces in the scenario")
    by_panel = dict(zip(panels, axes))
    if device:
        ax = by_panel["factor"]
        groups = _grouped({rank: tuple(t) for rank, t in device.items()})
        achieved = churn.achieved_factors
        for i, (trace, ranks) in enumerate(groups[:MAX_TRACE_LINES]):
            color = line_style(i)["color"]
            _step(ax, trace, 1, horizon, color=color, label=_clients_label(ranks))
            for rank in (r for r in ranks if r in achieved):  # what its steps took, over the base step
                label, points = achieved[rank]
                ax.plot(*zip(*points), linestyle="none", marker="o", markersize=2.5, alpha=0.7, zorder=3,
                        markerfacecolor="0.15", markeredgecolor=color, markeredgewidth=0.5,
                        label=f"client {rank}: step / base step ({label})")
        ax.set_ylabel("Device factor (×)")
        ax.set_ylim(bottom=0)
        _trace_legend(ax, len(groups))
    if links:
        groups = _grouped({rank: (tuple(t.get("up", ())), tuple(t.get("down", ())))
                           for rank, t in links.items()})
        for col, name in ((1, "rate"), (2, "latency")):
            ax = by_panel[name]
            for i, ((up, down), ranks) in enumerate(groups[:MAX_TRACE_LINES]):
                color = line_style(i)["color"]
                if up == down:
                    _step(ax, up, col, horizon, color=color, label=_clients_label(ranks))
                    continue
                for rows_, which, dash in ((up, "up", "-"), (down, "down", "--")):
                    if rows_:
                        _step(ax, rows_, col, horizon, color=color, linestyle=dash,
                              label=f"{_clients_label(ranks)} {which}")
            ax.set_ylabel("Link rate (Mbit/s)" if name == "rate" else "Link latency (ms)")
            values = [r[col] for (up, down), _ in groups for d in (up, down) if d for r in d]
            if name == "rate" and values and max(values) > 50 * min(values):
                ax.set_yscale("log")
            else:
                ax.set_ylim(bottom=0)
            _trace_legend(ax, len(groups))
    for ax in axes:
        ax.grid(True)
        ax.set_xlim(0, horizon)
    axes[-1].set_xlabel(time_label(run))
    return save_figure(fig, path)


def _grouped(traces: dict) -> list[tuple[object, list]]:
    """(trace, ranks that have it) per distinct trace (a hashable value), in order of their lowest rank."""
    groups: dict = {}
    for rank in sorted(traces, key=sort_key):
        groups.setdefault(traces[rank], []).append(rank)
    return list(groups.items())


def _step(ax: Axes, rows: list[tuple], col: int, horizon: float, **style) -> None:
    """A piecewise-constant trace: each row's value from its time to the next row's, the last to `horizon`."""
    xs = [r[0] for r in rows] + [max(horizon, rows[-1][0])]
    ys = [r[col] for r in rows] + [rows[-1][col]]
    ax.step(xs, ys, where="post", linewidth=1.8, **style)


def _clients_label(ranks: list) -> str:
    return f"client{'s' if len(ranks) > 1 else ''} {ranks_text(ranks)}"


def _trace_legend(ax: Axes, groups: int) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if groups > MAX_TRACE_LINES:
        handles.append(Line2D([], [], linestyle="none"))
        labels.append(f"{groups - MAX_TRACE_LINES} more traces not drawn")
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  fontsize="small")
