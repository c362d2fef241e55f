"""A run folder's report: report.md (setup, comparison table, per-client table) and plots/*.png.

Reads only the folder (scenario.yaml, metrics.jsonl, clients.jsonl, updates.jsonl, summary.json), so a
finished or a crashed run can be re-plotted at any time:

    python -c "from pathlib import Path; from edgesync.metrics.report import render_report; \
               print(render_report(Path('runs/fmnist-4x')))"

Accuracies are fractions in [0, 1] in the files and are shown in percent. This module loads the folder
and writes report.md; the plots are drawn by `edgesync.metrics.plots`, the sections on participation,
availability and traces written by `edgesync.metrics.churn_report`.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import matplotlib
import yaml

from edgesync.emulation.profiles import ConstantProfile, parse_profile
from edgesync.metrics.churn import ChurnRecords
from edgesync.metrics.churn_report import (AVAILABILITY_PLOT, ROUNDS_PLOT, TRACES_PLOT, availability_section,
                                           has_availability, has_participation, has_traces,
                                           needs_rounds_histogram, participation_section, traces_section)
from edgesync.metrics.formatting import NONE, RunData, code, md_table, num, pct, secs, sort_key, whole
from edgesync.metrics.plots import (PLOT_STYLE, plot_accuracy, plot_availability, plot_bytes, plot_compute_ratio,
                                    plot_rounds_per_client, plot_staleness, plot_traces)
from edgesync.metrics.coordinator_report import bottleneck_warnings, coordinator_section, has_coordinator_load
from edgesync.metrics.recorder import (CLIENTS_FILE, COORDINATOR_FILE, METRICS_FILE, PLOTS_DIR, REPORT_FILE,
                                       SCENARIO_FILE, SUMMARY_FILE, TUNING_FILE, UPDATES_FILE, read_jsonl, write_atomic)
from edgesync.metrics.seeds import INTERVAL_METHOD, with_seed_aggregates
from edgesync.metrics.summary import GAP_FIRST_N, compute_ratio, speedup, staleness_means, summarize
from edgesync.metrics.tuning_report import tuning_section

BYTES_PER_MB = 1e6                 # the report's MB are decimal megabytes
STALENESS_PLOT = "staleness_vs_time.png"  # only for runs whose algorithms log lag and gap
PLOT_FILES = {  # file name -> caption in report.md
    "accuracy_vs_time.png": "Test accuracy vs time",
    "accuracy_vs_updates.png": "Test accuracy vs global model updates",
    "bytes_vs_time.png": "Cumulative traffic (up + down) vs time",
    "compute_ratio.png": "Compute-time ratio per client",
}


def render_report(run_dir: Path) -> Path:
    """Write run_dir/report.md and run_dir/plots/*.png from the folder's files; returns report.md's path."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    plots_dir = run_dir / PLOTS_DIR
    plots_dir.mkdir(parents=True, exist_ok=True)
    churn = ChurnRecords(run)
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
    path = run_dir / REPORT_FILE
    write_atomic(path, format_report(run, churn))
    return path


# ---------------------------------------------------------------------------------------------- loading

def load_run(run_dir: Path) -> RunData:
    """Read a run folder; summary.json when present, else the summary recomputed from the jsonl files."""
    run_dir = Path(run_dir)
    scenario = _load_yaml(run_dir / SCENARIO_FILE)
    metrics = read_jsonl(run_dir / METRICS_FILE)
    clients = read_jsonl(run_dir / CLIENTS_FILE)
    stored = _load_json(run_dir / SUMMARY_FILE)
    target = num(_get(scenario, "stop", "target_acc"))
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
        virtual_time=_kind(scenario.get("runtime")) == "sim",
        updates=read_jsonl(run_dir / UPDATES_FILE),
        tuning=_load_json(run_dir / TUNING_FILE) or None,
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

def format_report(run: RunData, churn: ChurnRecords | None = None) -> str:
    """The text of report.md (`churn`: the run's rounds and presence records, when the caller has them)."""
    churn = churn or ChurnRecords(run)
    lines = [f"# {run.name}", "", _setup_paragraph(run), ""]
    if run.aggregates:
        lines += ["## Comparison over seeds", "", SEEDS_NOTE, "", *_seeds_table(run), ""]
        lines += ["## Comparison per seed", "", *_comparison_table(run), ""]
    else:
        lines += ["## Comparison", "", *_comparison_table(run), ""]
    lines += [_notes(run), "", *(line for warning in bottleneck_warnings(run) for line in (warning, ""))]
    lines += coordinator_section(run) if has_coordinator_load(run) else []
    if run.tuning:
        lines += tuning_section(run.tuning)
    lines += ["## Clients", "", *_clients_table(run), ""]
    if any(r.get("achieved_factor") is not None for r in run.clients):
        lines += ["## Emulation fidelity", "", FIDELITY_NOTE, "", *_fidelity_table(run), ""]
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
        lines += ["## Staleness", "", STALENESS_NOTE, "", *_staleness_table(run), ""]
        lines += [f"![Staleness of applied updates: lag and gap vs time]({PLOTS_DIR}/{STALENESS_PLOT})", ""]
    return "\n".join(lines)


def _setup_paragraph(run: RunData) -> str:
    s = run.scenario
    parts = [_describe_clients(run)]
    for what, value in [
        ("dataset", _first(_get(s, "dataset"), _get(s, "data", "dataset"), _get(s, "data", "name"))),
        ("model", _get(s, "model")),
        ("partition", _partition_view(_first(_get(s, "partition"), _get(s, "data", "partition")))),
        ("seed", None if run.aggregates else _get(s, "seed")),  # with seeds, listed below
        ("runtime", _get(s, "runtime")),
    ]:
        text = _describe(value)
        if text:
            parts.append(f"{what} {text}")
    seeds = sorted({s for e in run.aggregates.values() for s in e["seeds"]})
    if seeds:
        parts.append(f"seeds {', '.join(map(str, seeds))}")
    sentence = "; ".join(p for p in parts if p) or "no scenario recorded"
    shown = run.aggregates or {label: run.summary[label] for label in run.labels}
    entries = ", ".join(code(label) + (f" ({e['algorithm']})" if e.get("algorithm") not in (None, label) else "")
                        for label, e in shown.items())
    tested = "validation" if run.on_validation else "test"
    target = f" Target {tested} accuracy: {pct(run.target_acc)}." if run.target_acc is not None else ""
    started = _started(run.metrics)
    coordinator = _coordinator_time(s) if run.virtual_time else ""
    return (f"**Setup.** {sentence[0].upper()}{sentence[1:]}.{coordinator} "
            f"Entries compared: {entries or NONE}.{target}{started}")


def _coordinator_time(scenario: dict) -> str:
    """How the simulator charged the coordinator's work (`sim.server_time`), with the costs it used."""
    mode = _get(scenario, "sim", "server_time")
    if mode == "zero":
        return " Coordinator time: zero (idealised)."
    if mode == "measured":
        return " Coordinator time: measured (its wall time at each event of this run)."
    if mode != "model":
        return ""
    costs = _get(scenario, "sim", "measured_server_s")
    parts = []
    for label, c in costs.items() if isinstance(costs, dict) else ():
        v = {k: num(c.get(k)) for k in ("decode_update", "collect", "apply", "encode_send", "query")} \
            if isinstance(c, dict) else {}
        if v and None not in v.values():
            parts.append(f"{code(label)} {_ms(v['decode_update'] + v['collect'])} / "
                         f"{_ms(v['decode_update'] + v['apply'])}, {_ms(v['encode_send'])}, {_ms(v['query'])}")
    listed = f" (ms per update collected / applied, per message sent, per query: {'; '.join(parts)})" if parts else ""
    return f" Coordinator time: model, costs measured once on the machine that ran it{listed}."


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.3g}"


def _describe_clients(run: RunData) -> str:
    """'4 clients (2 × x1, 1 × x5, 1 × x10) on 2 hosts, devices 1 × cuda:0, 3 × cpu' from clients.jsonl,
    else from the scenario."""
    by_rank: dict[Any, dict] = {}
    for row in run.clients:
        by_rank.setdefault(row.get("client"), row)
    if by_rank:
        profiles = Counter(str(r.get("profile", "?")) for r in by_rank.values())
        hosts = {r.get("host") for r in by_rank.values() if r.get("host")}
        on_hosts = f" on {len(hosts)} hosts" if len(hosts) > 1 else (f" on {next(iter(hosts))}" if hosts else "")
        # the simulator's clients have no device of their own ("virtual"): nothing to say
        devices = Counter(_device(r) for r in by_rank.values() if r.get("device") not in (None, "", "virtual"))
        on_devices = ", devices " + ", ".join(f"{n} × {d}" for d, n in devices.items()) if devices else ""
        return f"{_clients_phrase(len(by_rank), profiles)}{on_hosts}{on_devices}"
    spec = _get(run.scenario, "clients")
    if isinstance(spec, bool):
        return ""
    if isinstance(spec, int):
        return _clients_phrase(spec, Counter())
    if isinstance(spec, dict):
        count = num(_first(spec.get("count"), spec.get("n")))
        profile = _describe(_first(spec.get("profile"), spec.get("profiles")))
        if count is None:
            return ""
        return f"{int(count)} clients" + (f" ({profile})" if profile else "")
    if isinstance(spec, list):
        profiles = Counter()
        for c in spec:
            c = c if isinstance(c, dict) else {"profile": c}
            count = num(_first(c.get("count"), c.get("n"))) or 1
            profiles[_profile_label(c.get("profile"))] += int(count)
        return _clients_phrase(sum(profiles.values()), profiles)
    return ""


def _profile_label(profile: Any) -> str:
    """A client's profile as clients.jsonl names it: 'x10' for 'x10' or {'kind': 'constant', 'factor': 10},
    'gamma-hetero(μ=1,Vm=0.6)' for a gamma mapping, 'x1' when absent; else its description."""
    if profile is None:
        return ConstantProfile().label
    try:
        return parse_profile(profile).label
    except (ValueError, TypeError):  # not a valid profile (pydantic's ValidationError is a ValueError)
        return _describe(profile) or "?"


def _partition_view(partition: Any) -> Any:
    """A partition with only the parameter its kind uses: alpha for dirichlet, shards_per_client for shards
    (a resolved scenario carries them all; a written one may omit the kind, which defaults to iid)."""
    used = {"iid": (), "sorted_slices": (), "dirichlet": ("alpha",), "shards": ("shards_per_client",)}
    if not isinstance(partition, dict):
        return partition
    kind = partition.get("kind", "iid")
    if kind not in used:
        return partition
    return {"kind": kind, **{k: partition[k] for k in used[kind] if k in partition}}


def _clients_phrase(n: int, profiles: Counter) -> str:
    mix = ", ".join(f"{count} × {profile}" for profile, count in profiles.items())
    return f"{n} client{'s' if n != 1 else ''}" + (f" ({mix})" if mix else "")


def _started(metrics: list[dict]) -> str:
    stamps = [t for t in (num(r.get("wall_clock")) for r in metrics) if t is not None]
    if not stamps:
        return ""
    when = datetime.fromtimestamp(min(stamps), tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f" First evaluation recorded {when} (wall clock)."


def _comparison_table(run: RunData) -> list[str]:
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
            _times(num(e.get("speedup_vs")) if paired else speedup(num(base), ttt)),
            whole(e.get("updates")), _rate(e.get("samples_per_s")),
            _mb(e.get("bytes_up")), _mb(e.get("bytes_down")), _fixed(e.get("compute_ratio_mean"), 2),
        ])
    return md_table(header, rows, align="l" + "r" * (len(header) - 1))


SEEDS_NOTE = (f"Each figure is the mean over the entry's seeds ± the half-width of its 95% confidence interval "
              f"({INTERVAL_METHOD}; summary.json keeps every seed's value under `stats`). Speedups are paired: "
              f"each seed's time against the first entry's run of the same seed. A time to target some seeds "
              f"never reached has no mean; the column says how many reached it.")


def _seeds_table(run: RunData) -> list[str]:
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


def _clients_table(run: RunData) -> list[str]:
    if not run.clients:
        return ["No client records (clients.jsonl is missing or empty)."]
    order = {label: i for i, label in enumerate(run.labels)}
    rows = sorted(run.clients, key=lambda r: (order.get(str(r.get("algorithm")), len(order)),
                                               str(r.get("algorithm")), sort_key(r.get("client"))))
    header = ["Entry", "Client", "Profile", "Host", "Device", "Compute (s)", "Wait (s)", "Ratio", "Steps",
              "Samples"]
    body = [[code(r.get("algorithm")), _text(r.get("client")), _text(r.get("profile")), _text(r.get("host")),
             _text(_device(r)), secs(num(r.get("compute_s"))), secs(num(r.get("wait_s"))),
             _fixed(compute_ratio(r), 2), whole(r.get("steps")), whole(r.get("samples"))] for r in rows]
    return md_table(header, body, align="lrlllrrrrr")


FIDELITY_NOTE = ("Each client's slowdown relative to the fastest profile's clients in the same entry: achieved "
                 "= its median step time over theirs, target = its profile's median factor over theirs. Base "
                 "step: the ×1 device's step time the run paced at; isolation: how the client's process was "
                 "pinned or capped.")


def _fidelity_table(run: RunData) -> list[str]:
    order = {label: i for i, label in enumerate(run.labels)}
    rows = sorted((r for r in run.clients if r.get("achieved_factor") is not None),
                  key=lambda r: (order.get(str(r.get("algorithm")), len(order)), sort_key(r.get("client"))))
    header = ["Entry", "Client", "Profile", "Host", "Base step (ms)", "Median step (ms)", "Target ×", "Achieved ×",
              "Error", "Isolation"]
    ms = lambda v: _fixed(None if num(v) is None else num(v) * 1e3, 2)
    body = [[code(r.get("algorithm")), _text(r.get("client")), _text(r.get("profile")), _text(r.get("host")),
             ms(r.get("base_step_s")), ms(r.get("median_step_s")), _fixed(r.get("target_factor"), 2),
             _fixed(r.get("achieved_factor"), 2), _pct(r.get("fidelity_error")), _text(r.get("isolation"))]
            for r in rows]
    return md_table(header, body, align="lrllrrrrrl")


STALENESS_NOTE = (f"Per applied update (updates.jsonl): the lag τ, DANA's gap G = ‖θ_apply − θ_computed‖₂/√k and "
                  f"G / RMS(g), the gap normalised by the RMS of the client's raw gradient (the same normaliser "
                  f"for every algorithm). Means over the whole run, and over each entry's first N applied "
                  f"updates (N = {GAP_FIRST_N}, or fewer if it applied fewer): the same early stretch for all.")


def _staleness_table(run: RunData) -> list[str]:
    """One row per entry that logged gaps (as the staleness plot): the summary's staleness means, computed
    from updates.jsonl, so that a folder whose summary.json predates a field still shows it."""
    labels = [label for label in run.labels if any(r.get("algorithm") == label and "gap" in r for r in run.updates)]
    header = ["Entry", "Updates", "Mean lag", "Mean gap G", "Mean G / RMS(g)", "First N", "Mean G, first N",
              "Mean G / RMS(g), first N"]
    body = []
    for label in labels:
        rows = [r for r in run.updates if r.get("algorithm") == label]
        m = staleness_means(rows)
        body.append([code(label), whole(sum("gap" in r for r in rows)), _fixed(m["mean_lag"], 2),
                     _sig(m["mean_gap"]), _sig(m["mean_gap_normalized"]), whole(m["gap_first_n"]),
                     _sig(m["mean_gap_first_n"]), _sig(m["mean_gap_normalized_first_n"])])
    return md_table(header, body, align="lrrrrrrr")


def _sig(value: Any) -> str:
    """Three significant digits: gaps run from 1e-5 to 10."""
    v = num(value)
    return NONE if v is None else f"{v:.3g}"


def _pct(value: Any) -> str:
    return NONE if num(value) is None else f"{num(value):+.1%}"


def _device(row: dict) -> str | None:
    """A client's device as the report shows it: 'cuda:0 (NVIDIA H100 80GB HBM3)' when its row names the GPU."""
    device, gpu = row.get("device"), row.get("gpu")
    if device is None or device == "":
        return None
    return f"{device} ({gpu})" if gpu and str(device).startswith("cuda") else str(device)


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


def _text(value: Any) -> str:
    return NONE if value is None or value == "" else str(value).replace("|", "\\|")


def _times(value: float | None) -> str:
    return NONE if value is None else f"{value:.2f}×"


def _rate(value: Any) -> str:
    v = num(value)
    return NONE if v is None else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


def _mb(value: Any) -> str:
    v = num(value)
    if v is None:
        return NONE
    mb = v / BYTES_PER_MB
    return f"{mb:,.2f}" if mb == 0 or abs(mb) >= 0.01 else f"{mb:.2g}"


def _fixed(value: Any, digits: int) -> str:
    v = num(value)
    return NONE if v is None or math.isinf(v) else f"{v:.{digits}f}"
