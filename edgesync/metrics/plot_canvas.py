"""What every plot of the report shares: the figure (a matplotlib `Figure` on the Agg canvas, never pyplot, so
drawing touches no global backend state), its size and style (`PLOT_STYLE`, under which `render_report` draws),
saving, legends, the empty-plot message, and the line styles and time axis label of the entries."""
from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from edgesync.metrics.formatting import RunData


DPI = 120
FIG_SIZE_IN = (7.0, 4.2)           # width, height of every plot
PLOT_STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "grid.alpha": 0.35,
    "grid.linestyle": ":",
}


def new_plot(title: str, xlabel: str | None, ylabel: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=FIG_SIZE_IN, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True)
    return fig, ax


def save_figure(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, format="png", metadata={"Software": None})
    return path


def legend(ax: Axes, handles: list, labels: list[str], loc: str) -> None:
    if not handles:
        return
    if len(handles) > 7:  # many entries: outside, to the right, so no curve is hidden
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.legend(handles, labels, loc=loc, framealpha=0.9)


def no_data(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color="0.45", fontsize=11)


def line_style(i: int) -> dict:
    """Colour by entry; past ten entries the colours repeat with another dash pattern."""
    return {"color": matplotlib.colormaps["tab10"](i % 10), "linewidth": 1.8,
            "linestyle": ["-", "--", "-.", ":"][(i // 10) % 4]}


def time_label(run: RunData) -> str:
    return "Virtual time (s)" if run.virtual_time else "Wall-clock time (s)"
