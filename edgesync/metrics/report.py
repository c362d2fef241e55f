"""A run folder's report: report.md (setup, comparison table, per-client table) and plots/*.png.

Reads only the folder (scenario.yaml, metrics.jsonl, clients.jsonl, updates.jsonl, summary.json), so a
finished or a crashed run can be re-plotted at any time:

    python -c "from pathlib import Path; from edgesync.metrics.report import render_report; \
               print(render_report(Path('runs/fmnist-4x')))"

Accuracies are fractions in [0, 1] in the files and are shown in percent. This module loads the folder
and writes report.md; the setup paragraph is report_setup.py's, the tables report_tables.py's, the cells
report_values.py's; the plots are drawn by `edgesync.metrics.plots` (and churn_plots.py), the sections on
participation, availability and traces written by `edgesync.metrics.churn_report`."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import matplotlib
import yaml

from edgesync.metrics.churn import ChurnRecords
from edgesync.metrics.client_accuracy_report import client_accuracy_section, has_client_accuracy
from edgesync.metrics.churn_plots import plot_availability, plot_rounds_per_client, plot_traces
from edgesync.metrics.churn_report import (
    AVAILABILITY_PLOT, ROUNDS_PLOT, TRACES_PLOT, availability_section, has_availability, has_participation,
    has_traces, needs_rounds_histogram, participation_section, traces_section,
)
from edgesync.metrics.coordinator_report import bottleneck_warnings, coordinator_section, has_coordinator_load
from edgesync.metrics.formatting import RunData, code, num
from edgesync.metrics.partition_report import PARTITION_PLOT, partition_section, plot_partition, read_partitions
from edgesync.metrics.plot_canvas import PLOT_STYLE
from edgesync.metrics.plots import plot_accuracy, plot_bytes, plot_compute_ratio, plot_staleness
from edgesync.metrics.recorder import (
    CLIENTS_FILE, COORDINATOR_FILE, METRICS_FILE, PLOTS_DIR, REPORT_FILE, SCENARIO_FILE, SUMMARY_FILE, TUNING_FILE,
    UPDATES_FILE, read_jsonl, write_atomic,
)
from edgesync.metrics.report_setup import setup_paragraph
from edgesync.metrics.report_tables import (
    FIDELITY_NOTE, SEEDS_NOTE, STALENESS_NOTE, clients_table, comparison_table, fidelity_table, seeds_table,
    staleness_table,
)
from edgesync.metrics.report_values import kind_name, nested
from edgesync.metrics.seeds import with_seed_aggregates
from edgesync.metrics.summary import summarize
from edgesync.metrics.stragglers_report import has_waste, waste_section
from edgesync.metrics.tuning_report import tuning_section


PLOTS_ENV = "EDGESYNC_PLOTS"
NO_PLOTS = f"Not drawn (${PLOTS_ENV} is 0): `edgesync report RUN_DIR` draws them from this folder."
STALENESS_PLOT = "staleness_vs_time.png"  # only for runs whose algorithms log lag and gap
PLOT_FILES = {  # file name -> caption in report.md
    "accuracy_vs_time.png": "Test accuracy vs time",
    "accuracy_vs_updates.png": "Test accuracy vs global model updates",
    "bytes_vs_time.png": "Cumulative traffic (up + down) vs time",
    "compute_ratio.png": "Compute-time ratio per client",
}


def plots_wanted() -> bool:
    """Whether reports draw their plots: yes unless $EDGESYNC_PLOTS is 0. Drawing is most of a small run's report
    (a few CPU-seconds of matplotlib); a batch of many runs, or a test suite, may leave them to `edgesync report
    RUN_DIR` later, which draws them from the folder."""
    return os.environ.get(PLOTS_ENV, "1").strip() != "0"


def render_report(run_dir: Path, plots: bool | None = None) -> Path:
    """Write run_dir/report.md and run_dir/plots/*.png from the folder's files; returns report.md's path.
    `plots`: whether to draw them (None: unless $EDGESYNC_PLOTS is 0; without them report.md has no images)."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    churn = ChurnRecords(run)
    path = run_dir / REPORT_FILE
    if not (plots_wanted() if plots is None else plots):
        text = "\n".join(line for line in format_report(run, churn).splitlines()
                         if not (line.startswith("![") and f"]({PLOTS_DIR}/" in line))
        write_atomic(path, text.replace("## Plots\n", f"## Plots\n\n{NO_PLOTS}\n", 1))
        return path
    plots_dir = run_dir / PLOTS_DIR
    plots_dir.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(PLOT_STYLE):
        plot_accuracy(run, "time_s", plots_dir / "accuracy_vs_time.png")
        plot_accuracy(run, "updates", plots_dir / "accuracy_vs_updates.png")
        plot_bytes(run, plots_dir / "bytes_vs_time.png")
        plot_compute_ratio(run, plots_dir / "compute_ratio.png")
        if run.has_staleness:
            plot_staleness(run, plots_dir / STALENESS_PLOT)
        if needs_rounds_histogram(churn):
            plot_rounds_per_client(run, plots_dir / ROUNDS_PLOT, churn)
        if has_availability(churn):
            plot_availability(run, plots_dir / AVAILABILITY_PLOT, churn)
        if has_traces(run):
            plot_traces(run, plots_dir / TRACES_PLOT, churn)
        if run.partitions:
            plot_partition(run.partitions, plots_dir / PARTITION_PLOT)
    write_atomic(path, format_report(run, churn))
    return path


def load_run(run_dir: Path) -> RunData:
    """Read a run folder; summary.json when present, else the summary recomputed from the jsonl files."""
    run_dir = Path(run_dir)
    scenario = _load_yaml(run_dir / SCENARIO_FILE)
    metrics = read_jsonl(run_dir / METRICS_FILE)
    clients = read_jsonl(run_dir / CLIENTS_FILE)
    stored = _load_json(run_dir / SUMMARY_FILE)
    target = num(nested(scenario, "stop", "target_acc"))
    if target is None:  # the scenario may predate the key; the stored summary knows the target
        target = next((num(e.get("target_acc")) for e in stored.values()
                       if isinstance(e, dict) and num(e.get("target_acc")) is not None), None)
    recomputed = with_seed_aggregates(summarize(metrics, clients, target, algorithms=_algorithm_names(scenario),
                                                coordinator=read_jsonl(run_dir / COORDINATOR_FILE)))
    # Stored entries first (their order), then any label the stored summary lacks.
    summary = {label: entry for label, entry in stored.items() if isinstance(entry, dict)}
    summary.update({label: entry for label, entry in recomputed.items() if label not in summary})
    return RunData(
        name=str(scenario.get("name") or run_dir.resolve().name),
        scenario=scenario, metrics=metrics, clients=clients, summary=summary, target_acc=target,
        virtual_time=kind_name(scenario.get("runtime")) == "sim",
        updates=read_jsonl(run_dir / UPDATES_FILE),
        tuning=_load_json(run_dir / TUNING_FILE) or None,
        partitions=read_partitions(run_dir),
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


def format_report(run: RunData, churn: ChurnRecords | None = None) -> str:
    """The text of report.md (`churn`: the run's rounds and presence records, when the caller has them)."""
    churn = churn or ChurnRecords(run)
    lines = [f"# {run.name}", "", setup_paragraph(run), ""]
    if run.aggregates:
        lines += ["## Comparison over seeds", "", SEEDS_NOTE, "", *seeds_table(run), ""]
        lines += ["## Comparison per seed", "", *comparison_table(run), ""]
    else:
        lines += ["## Comparison", "", *comparison_table(run), ""]
    lines += [_notes(run), "", *(line for warning in bottleneck_warnings(run) for line in (warning, ""))]
    lines += coordinator_section(run) if has_coordinator_load(run) else []
    if run.tuning:
        lines += tuning_section(run.tuning)
    lines += ["## Clients", "", *clients_table(run), ""]
    lines += partition_section(run.partitions)
    lines += client_accuracy_section(run) if has_client_accuracy(run) else []
    if any(r.get("achieved_factor") is not None for r in run.clients):
        lines += ["## Emulation fidelity", "", FIDELITY_NOTE, "", *fidelity_table(run), ""]
    if has_waste(run):
        lines += waste_section(run)
    if has_participation(churn):
        lines += participation_section(churn)
    if has_availability(churn):
        lines += availability_section(churn)
    if has_traces(run):
        lines += traces_section(run, churn)
    lines += ["## Plots", ""]
    for file, caption in PLOT_FILES.items():
        lines += [f"![{caption}]({PLOTS_DIR}/{file})", ""]
    if run.has_staleness:
        lines += ["## Staleness", "", STALENESS_NOTE, "", *staleness_table(run), ""]
        lines += [f"![Staleness of applied updates: lag and gap vs time]({PLOTS_DIR}/{STALENESS_PLOT})", ""]
    return "\n".join(lines)


def _notes(run: RunData) -> str:
    first = code(run.labels[0]) if run.labels else "the first entry"
    clock = ("virtual seconds of the simulator's clock" if run.virtual_time else "wall-clock seconds")
    against = ("the time to target of the first entry's run with the same seed divided by the entry's"
               if run.aggregates else f"{first}'s time to target divided by the entry's")
    tested = ("validation accuracy, on the samples `tune` held out of the training data (a tuning run)"
              if run.on_validation else "test accuracy")
    return (f"Times are {clock}, counted from each entry's start. Accuracy is the global model's {tested}; "
            f"time to target is the first evaluation at or above it, and speedup is {against}. MB "
            f"are 10^6 bytes on the wire per direction, measured at the transport. Compute ratio = compute time / wall time, averaged over clients.")
