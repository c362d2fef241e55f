"""A run folder's report: report.md (setup, comparison table, per-client table) and plots/*.png.

Reads only the folder (scenario.yaml, metrics.jsonl, clients.jsonl, summary.json), so a finished or a
crashed run can be re-plotted at any time:

    python -c "from pathlib import Path; from edgesync.metrics.report import render_report; \
               print(render_report(Path('runs/fmnist-4x')))"

Accuracies are fractions in [0, 1] in the files and are shown in percent. Plots are drawn on matplotlib
`Figure` objects (the Agg canvas), never through pyplot, so rendering touches no global backend state.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import matplotlib
import yaml
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from edgesync.metrics.recorder import (CLIENTS_FILE, METRICS_FILE, PLOTS_DIR, REPORT_FILE, SCENARIO_FILE,
                                       SUMMARY_FILE, read_jsonl, write_atomic)
from edgesync.metrics.summary import compute_ratio, speedup, summarize

DPI = 120
FIG_SIZE_IN = (7.0, 4.2)           # width, height of every plot
BYTES_PER_MB = 1e6                 # the report's MB are decimal megabytes
MAX_LABELLED_BARS = 24             # above this many bars, the compute-ratio plot drops the value labels
MAX_ANNOTATED_HITS = 4             # above this many entries reaching the target, the stars lose their times
MAX_MARKED_POINTS = 40             # a curve with more evaluations is drawn without point markers
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
PLOT_FILES = {  # file name -> caption in report.md
    "accuracy_vs_time.png": "Test accuracy vs time",
    "accuracy_vs_updates.png": "Test accuracy vs global model updates",
    "bytes_vs_time.png": "Cumulative traffic (up + down) vs time",
    "compute_ratio.png": "Compute-time ratio per client",
}
NONE = "—"


@dataclass
class RunData:
    """What a run folder holds, read back."""

    name: str
    scenario: dict
    metrics: list[dict]
    clients: list[dict]
    summary: dict[str, dict]               # label -> summary entry, in report order
    target_acc: float | None
    virtual_time: bool                     # the simulator's clock, not the wall clock

    @property
    def labels(self) -> list[str]:
        return list(self.summary)


def render_report(run_dir: Path) -> Path:
    """Write run_dir/report.md and run_dir/plots/*.png from the folder's files; returns report.md's path."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    plots_dir = run_dir / PLOTS_DIR
    plots_dir.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(PLOT_STYLE):
        plot_accuracy(run, "time_s", plots_dir / "accuracy_vs_time.png")
        plot_accuracy(run, "updates", plots_dir / "accuracy_vs_updates.png")
        plot_bytes(run, plots_dir / "bytes_vs_time.png")
        plot_compute_ratio(run, plots_dir / "compute_ratio.png")
    path = run_dir / REPORT_FILE
    write_atomic(path, format_report(run))
    return path


# ---------------------------------------------------------------------------------------------- loading

def load_run(run_dir: Path) -> RunData:
    """Read a run folder; summary.json when present, else the summary recomputed from the jsonl files."""
    run_dir = Path(run_dir)
    scenario = _load_yaml(run_dir / SCENARIO_FILE)
    metrics = read_jsonl(run_dir / METRICS_FILE)
    clients = read_jsonl(run_dir / CLIENTS_FILE)
    stored = _load_json(run_dir / SUMMARY_FILE)
    target = _num(_get(scenario, "stop", "target_acc"))
    if target is None:  # the scenario may predate the key; the stored summary knows the target
        target = next((_num(e.get("target_acc")) for e in stored.values()
                       if isinstance(e, dict) and _num(e.get("target_acc")) is not None), None)
    recomputed = summarize(metrics, clients, target, algorithms=_algorithm_names(scenario))
    # Stored entries first (their order), then any label the stored summary lacks.
    summary = {label: entry for label, entry in stored.items() if isinstance(entry, dict)}
    summary.update({label: entry for label, entry in recomputed.items() if label not in summary})
    return RunData(
        name=str(scenario.get("name") or run_dir.resolve().name),
        scenario=scenario, metrics=metrics, clients=clients, summary=summary, target_acc=target,
        virtual_time=_kind(scenario.get("runtime")) == "sim",
    )


def _load_yaml(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        warnings.warn(f"{path}: unreadable scenario, reporting without it ({err})", RuntimeWarning)
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _load_json(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        warnings.warn(f"{path}: unreadable summary, recomputing it ({err})", RuntimeWarning)
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _algorithm_names(scenario: dict) -> dict[str, str]:
    """label -> registered name from the scenario's `algorithms` (a list of entries or a mapping)."""
    entries = scenario.get("algorithms")
    names: dict[str, str] = {}
    if isinstance(entries, dict):
        entries = [{"label": label, **(e if isinstance(e, dict) else {"name": e})} for label, e in entries.items()]
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str):
            names[entry] = entry
        elif isinstance(entry, dict):
            name = entry.get("name") or entry.get("algorithm")
            label = entry.get("label") or name
            if label is not None and name is not None:
                names[str(label)] = str(name)
    return names


# ---------------------------------------------------------------------------------------------- report.md

def format_report(run: RunData) -> str:
    """The text of report.md."""
    lines = [f"# {run.name}", "", _setup_paragraph(run), ""]
    lines += ["## Comparison", "", *_comparison_table(run), ""]
    lines += [_notes(run), ""]
    lines += ["## Clients", "", *_clients_table(run), ""]
    lines += ["## Plots", ""]
    for file, caption in PLOT_FILES.items():
        lines += [f"![{caption}]({PLOTS_DIR}/{file})", ""]
    return "\n".join(lines)


def _setup_paragraph(run: RunData) -> str:
    s = run.scenario
    parts = [_describe_clients(run)]
    for what, value in [
        ("dataset", _first(_get(s, "dataset"), _get(s, "data", "dataset"), _get(s, "data", "name"))),
        ("model", _get(s, "model")),
        ("partition", _partition_view(_first(_get(s, "partition"), _get(s, "data", "partition")))),
        ("seed", _get(s, "seed")),
        ("runtime", _get(s, "runtime")),
    ]:
        text = _describe(value)
        if text:
            parts.append(f"{what} {text}")
    sentence = "; ".join(p for p in parts if p) or "no scenario recorded"
    entries = ", ".join(_code(label) + (f" ({e['algorithm']})" if e.get("algorithm") not in (None, label) else "")
                        for label, e in run.summary.items())
    target = f" Target test accuracy: {_pct(run.target_acc)}." if run.target_acc is not None else ""
    started = _started(run.metrics)
    return (f"**Setup.** {sentence[0].upper()}{sentence[1:]}. "
            f"Entries compared: {entries or NONE}.{target}{started}")


def _describe_clients(run: RunData) -> str:
    """'4 clients (2 × x1, 1 × x5, 1 × x10) on 2 hosts' from clients.jsonl, else from the scenario."""
    by_rank: dict[Any, dict] = {}
    for row in run.clients:
        by_rank.setdefault(row.get("client"), row)
    if by_rank:
        profiles = Counter(str(r.get("profile", "?")) for r in by_rank.values())
        hosts = {r.get("host") for r in by_rank.values() if r.get("host")}
        on_hosts = f" on {len(hosts)} hosts" if len(hosts) > 1 else (f" on {next(iter(hosts))}" if hosts else "")
        return f"{_clients_phrase(len(by_rank), profiles)}{on_hosts}"
    spec = _get(run.scenario, "clients")
    if isinstance(spec, bool):
        return ""
    if isinstance(spec, int):
        return _clients_phrase(spec, Counter())
    if isinstance(spec, dict):
        count = _num(_first(spec.get("count"), spec.get("n")))
        profile = _describe(_first(spec.get("profile"), spec.get("profiles")))
        if count is None:
            return ""
        return f"{int(count)} clients" + (f" ({profile})" if profile else "")
    if isinstance(spec, list):
        profiles = Counter()
        for c in spec:
            c = c if isinstance(c, dict) else {"profile": c}
            count = _num(_first(c.get("count"), c.get("n"))) or 1
            profiles[_profile_label(c.get("profile"))] += int(count)
        return _clients_phrase(sum(profiles.values()), profiles)
    return ""


def _profile_label(profile: Any) -> str:
    """'x10' for a constant profile written as {'kind': 'constant', 'factor': 10}; else its description."""
    if isinstance(profile, dict) and profile.get("kind", "constant") == "constant" and _num(profile.get("factor")):
        return f"x{profile['factor']:g}"
    return _describe(profile) or "?"


def _partition_view(partition: Any) -> Any:
    """A partition with only the parameter its kind uses (a resolved scenario carries them all)."""
    used = {"iid": (), "sorted_slices": (), "dirichlet": ("alpha",), "shards": ("shards_per_client",)}
    if not isinstance(partition, dict) or partition.get("kind") not in used:
        return partition
    return {"kind": partition["kind"], **{k: partition[k] for k in used[partition["kind"]] if k in partition}}


def _clients_phrase(n: int, profiles: Counter) -> str:
    mix = ", ".join(f"{count} × {profile}" for profile, count in profiles.items())
    return f"{n} client{'s' if n != 1 else ''}" + (f" ({mix})" if mix else "")


def _started(metrics: list[dict]) -> str:
    stamps = [t for t in (_num(r.get("wall_clock")) for r in metrics) if t is not None]
    if not stamps:
        return ""
    when = datetime.fromtimestamp(min(stamps), tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f" First evaluation recorded {when} (wall clock)."


def _comparison_table(run: RunData) -> list[str]:
    if not run.summary:
        return ["No evaluations recorded (metrics.jsonl is missing or empty)."]
    first = run.labels[0] if run.labels else None
    base = run.summary[first].get("time_to_target_s") if first else None
    target = f"Time to {_pct(run.target_acc)} (s)" if run.target_acc is not None else "Time to target (s)"
    header = ["Entry", "Final acc.", "Best acc.", target, f"Speedup vs {first or NONE}", "Updates",
              "Samples/s", "MB up", "MB down", "Compute ratio"]
    rows = []
    for label, e in run.summary.items():
        ttt = _num(e.get("time_to_target_s"))
        evaluated = e.get("evals", 1) != 0 and e.get("final_acc") is not None
        rows.append([
            _code(label) + ("" if evaluated else " (no evaluations)"),
            _pct(e.get("final_acc")), _pct(e.get("best_acc")),
            _secs(ttt) if ttt is not None else ("not reached" if run.target_acc is not None and evaluated
                                                 else NONE),
            _times(speedup(_num(base), ttt)), _int(e.get("updates")), _rate(e.get("samples_per_s")),
            _mb(e.get("bytes_up")), _mb(e.get("bytes_down")), _fixed(e.get("compute_ratio_mean"), 2),
        ])
    return _md_table(header, rows, align="l" + "r" * (len(header) - 1))


def _clients_table(run: RunData) -> list[str]:
    if not run.clients:
        return ["No client records (clients.jsonl is missing or empty)."]
    order = {label: i for i, label in enumerate(run.labels)}
    rows = sorted(run.clients, key=lambda r: (order.get(str(r.get("algorithm")), len(order)),
                                               str(r.get("algorithm")), _sort_key(r.get("client"))))
    header = ["Entry", "Client", "Profile", "Host", "Device", "Compute (s)", "Wait (s)", "Ratio", "Steps",
              "Samples"]
    body = [[_code(r.get("algorithm")), _text(r.get("client")), _text(r.get("profile")), _text(r.get("host")),
             _text(r.get("device")), _secs(_num(r.get("compute_s"))), _secs(_num(r.get("wait_s"))),
             _fixed(compute_ratio(r), 2), _int(r.get("steps")), _int(r.get("samples"))] for r in rows]
    return _md_table(header, body, align="lrlllrrrrr")


def _notes(run: RunData) -> str:
    first = _code(run.labels[0]) if run.labels else "the first entry"
    clock = ("virtual seconds of the simulator's clock" if run.virtual_time else "wall-clock seconds")
    return (f"Times are {clock}, counted from each entry's start. Accuracy is the global model's test "
            f"accuracy; time to target is the first evaluation at or above it, and speedup is {first}'s "
            f"time to target divided by the entry's. MB are 10^6 bytes on the wire per direction, measured at "
            f"the transport. Compute ratio = compute time / wall time, averaged over clients.")


def _md_table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(cells) + " |" for cells in [header, rule, *rows]]


# ---------------------------------------------------------------------------------------------- plots

def plot_accuracy(run: RunData, x_key: str, path: Path) -> Path:
    """Test accuracy (%) against `x_key` ("time_s" or "updates"): one line per entry, the target dashed,
    a star where each entry first reaches it."""
    by_time = x_key == "time_s"
    fig, ax = _new_plot(
        "Test accuracy vs time" if by_time else "Test accuracy vs global model updates",
        _time_label(run) if by_time else "Global model updates", "Test accuracy (%)")
    series = {label: _series(run.metrics, label, x_key, lambda r: _num(r.get("test_acc"))) for label in run.labels}
    hits = {label: _first_reaching(points, run.target_acc) for label, points in series.items()}
    annotate = by_time and sum(hit is not None for hit in hits.values()) <= MAX_ANNOTATED_HITS
    any_data = False
    for i, (label, points) in enumerate(series.items()):
        style = _line_style(i)
        if not points:
            ax.plot([], [], **style, label=f"{label} (no evaluations)")
            continue
        any_data = True
        xs, ys = zip(*points)
        ax.plot(xs, [100 * y for y in ys], **style, **_point_markers(points), label=label)
        hit = hits[label]
        if hit is not None:
            ax.plot(hit[0], 100 * hit[1], marker="*", markersize=14, color=style["color"],
                    markeredgecolor="black", markeredgewidth=0.6, linestyle="none", zorder=5)
            if annotate:
                ax.annotate(f"{_secs(hit[0])} s", (hit[0], 100 * hit[1]), xytext=(5, -13),
                            textcoords="offset points", fontsize=8, color=style["color"])
    handles, labels = ax.get_legend_handles_labels()
    if run.target_acc is not None:
        ax.axhline(100 * run.target_acc, color="0.35", linestyle="--", linewidth=1.0, zorder=1)
        handles.append(Line2D([], [], color="0.35", linestyle="--", linewidth=1.0))
        labels.append(f"target {_pct(run.target_acc)}")
        if any_data:
            handles.append(Line2D([], [], marker="*", markersize=11, color="0.6", markeredgecolor="black",
                                  markeredgewidth=0.6, linestyle="none"))
            labels.append("first reaches target")
    if not any_data:
        _no_data(ax, "no evaluations recorded")
        ax.set_ylim(0, 100)
    ax.set_xlim(left=0)
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    _legend(ax, handles, labels, loc="lower right")
    return _save(fig, path)


def plot_bytes(run: RunData, path: Path) -> Path:
    """Cumulative bytes on the wire (up + down) against time, one line per entry."""
    series = {label: _series(run.metrics, label, "time_s", _total_bytes) for label in run.labels}
    peak = max((b for pts in series.values() for _, b in pts), default=0)
    scale, unit = _byte_unit(peak)
    fig, ax = _new_plot("Cumulative traffic on the wire (up + down)", _time_label(run), f"Traffic ({unit})")
    for i, (label, points) in enumerate(series.items()):
        style = _line_style(i)
        if not points:
            ax.plot([], [], **style, label=f"{label} (no evaluations)")
            continue
        xs, ys = zip(*points)
        ax.plot(xs, [y / scale for y in ys], **style, **_point_markers(points), label=label)
    if not any(series.values()):
        _no_data(ax, "no traffic recorded")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    _legend(ax, handles, labels, loc="upper left")
    return _save(fig, path)


def plot_compute_ratio(run: RunData, path: Path) -> Path:
    """Grouped bars: for each entry (group) one bar per client, its compute time / wall time."""
    fig, ax = _new_plot("Compute-time ratio per client", "Entry", "Compute time / wall time")
    labels = [label for label in run.labels if any(str(r.get("algorithm")) == label for r in run.clients)]
    labels += sorted({str(r.get("algorithm")) for r in run.clients} - set(labels))
    ranks = sorted({r.get("client") for r in run.clients}, key=_sort_key)
    profile = {}
    for r in run.clients:
        profile.setdefault(r.get("client"), r.get("profile"))
    if not labels or not ranks:
        _no_data(ax, "no client records")
        ax.set_xticks([])
        return _save(fig, path)

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
    handles, names = ax.get_legend_handles_labels()
    ax.legend(handles, names, title="Client (profile)", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, ncols=1 if len(ranks) <= 12 else 2)
    return _save(fig, path)


def _new_plot(title: str, xlabel: str | None, ylabel: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=FIG_SIZE_IN, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True)
    return fig, ax


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, format="png", metadata={"Software": None})
    return path


def _legend(ax: Axes, handles: list, labels: list[str], loc: str) -> None:
    if not handles:
        return
    if len(handles) > 7:  # many entries: outside, to the right, so no curve is hidden
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.legend(handles, labels, loc=loc, framealpha=0.9)


def _no_data(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color="0.45", fontsize=11)


def _line_style(i: int) -> dict:
    """Colour by entry; past ten entries the colours repeat with another dash pattern."""
    return {"color": matplotlib.colormaps["tab10"](i % 10), "linewidth": 1.8,
            "linestyle": ["-", "--", "-.", ":"][(i // 10) % 4]}


def _point_markers(points: list) -> dict:
    """Small dots on each evaluation, unless there are so many that they would blur the line."""
    return {"marker": "o", "markersize": 3} if len(points) <= MAX_MARKED_POINTS else {}


def _client_colors(n: int) -> list:
    """Client colours, a palette apart from the entries' tab10 so a client is not read as an entry."""
    if n <= 8:
        return [matplotlib.colormaps["Set2"](i) for i in range(n)]
    return [matplotlib.colormaps["viridis"](i / (n - 1)) for i in range(n)]


def _time_label(run: RunData) -> str:
    return "Virtual time (s)" if run.virtual_time else "Wall-clock time (s)"


def _series(metrics: list[dict], label: str, x_key: str, y_of) -> list[tuple[float, float]]:
    """(x, y) of one entry's evaluations that have both, sorted by x (stable)."""
    points = [(_num(r.get(x_key)), y_of(r)) for r in metrics if str(r.get("algorithm")) == label]
    return sorted(((x, y) for x, y in points if x is not None and y is not None), key=lambda p: p[0])


def _first_reaching(points: list[tuple[float, float]], target: float | None) -> tuple[float, float] | None:
    if target is None:
        return None
    return next(((x, y) for x, y in points if y >= target), None)


def _total_bytes(row: dict) -> float | None:
    up, down = _num(row.get("bytes_up")), _num(row.get("bytes_down"))
    return None if up is None or down is None else up + down


def _byte_unit(peak: float) -> tuple[float, str]:
    for scale, unit in [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")]:
        if peak >= scale:
            return scale, unit
    return 1.0, "bytes"


# ---------------------------------------------------------------------------------------------- helpers

def _get(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _kind(value: Any) -> str | None:
    """The name of a scenario value given either as a string or as a mapping with a name/kind/type."""
    if isinstance(value, dict):
        value = _first(value.get("name"), value.get("kind"), value.get("type"))
    return str(value).lower() if value is not None else None


def _describe(value: Any) -> str:
    """A scenario value in a few words: 'dirichlet (alpha=0.5)' for {'kind': 'dirichlet', 'alpha': 0.5}."""
    if value is None or isinstance(value, (list, tuple)) and not value:
        return ""
    if isinstance(value, dict):
        key = next((k for k in ("name", "kind", "type") if isinstance(value.get(k), (str, int))), None)
        rest = ", ".join(f"{k}={v}" for k, v in value.items()  # paths say nothing about the experiment
                         if k != key and k not in ("root", "dir", "path") and isinstance(v, (str, int, float, bool)))
        head = str(value[key]) if key else ""
        return f"{head} ({rest})" if head and rest else head or rest
    if isinstance(value, (list, tuple)):
        return ", ".join(_describe(v) for v in value)
    return str(value)


def _num(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return value


def _sort_key(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def _text(value: Any) -> str:
    return NONE if value is None or value == "" else str(value).replace("|", "\\|")


def _code(label: Any) -> str:
    """An entry label as inline code, safe inside a Markdown table."""
    return "`" + str(label).replace("|", "\\|") + "`"


def _pct(value: Any) -> str:
    v = _num(value)
    return NONE if v is None else f"{100 * v:.2f} %"


def _secs(value: float | None) -> str:
    """Seconds to a tenth (a column reads evenly); below 0.1 s two significant digits."""
    if value is None:
        return NONE
    return f"{value:,.1f}" if value == 0 or abs(value) >= 0.095 else f"{value:.2g}"


def _times(value: float | None) -> str:
    return NONE if value is None else f"{value:.2f}×"


def _int(value: Any) -> str:
    v = _num(value)
    return NONE if v is None else f"{int(round(v)):,}"


def _rate(value: Any) -> str:
    v = _num(value)
    return NONE if v is None else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


def _mb(value: Any) -> str:
    v = _num(value)
    if v is None:
        return NONE
    mb = v / BYTES_PER_MB
    return f"{mb:,.2f}" if mb == 0 or abs(mb) >= 0.01 else f"{mb:.2g}"


def _fixed(value: Any, digits: int) -> str:
    v = _num(value)
    return NONE if v is None or math.isinf(v) else f"{v:.{digits}f}"
