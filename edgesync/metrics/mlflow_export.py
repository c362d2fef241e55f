"""A run folder in MLflow (`edgesync export mlflow RUN_DIR`, `edgesync run --mlflow`, `output.mlflow`).

One MLflow run per run folder, the *parent*, and under it one *child* run per entry × seed × sweep point (each
label of summary.json that is a run, not a seeds' aggregate), so that a sweep's or a seeded run's variants
sit together in MLflow's UI and compare side by side. A folder of run folders (`edgesync reproduce`'s) is one
parent with every run folder's children under it, each tagged with its experiment, and the folder's claims.md
and reproduce.json as the parent's artifacts (each run folder's own under its name).

    parent  params     the resolved scenario (scenario.yaml) as dotted keys; lists of settings as JSON
            tags       edgesync.runtime, edgesync.host, edgesync.platform, edgesync.torch, edgesync.version,
                       edgesync.run_dir
            artifacts  report.md, summary.json, scenario.yaml, extensions.json, plots/
    child   params     the entry's algorithm settings (its scenario entry), its sweep settings and seed,
                       and the versions of the outside code it ran (extensions.json)
            metrics    test_acc, test_loss, bytes_up, bytes_down, samples per evaluation (step: updates
                       applied); lag, gap, gap_normalized per update (step: the update's number + 1, the
                       count once it is applied, as in TensorBoard's files); the summary's figures once
                       (final_acc, time_to_target_s, samples_per_s, ...)
            tags       edgesync.label, edgesync.algorithm, edgesync.experiment

A metric's timestamp is the wall clock of the row (`wall_clock`); an update's row has only its time since the
entry started, so its timestamp is the entry's start plus that. The run folder stays the record: exporting it
again makes a new parent.

Where: `tracking_uri` as given, else MLflow's own default: `$MLFLOW_TRACKING_URI`, else ./mlruns when it
already holds runs, else the local database sqlite:///mlflow.db (MLflow 3 keeps its file store for existing
folders only: a folder given by name is used, with `MLFLOW_ALLOW_FILE_STORE` set for it). Any tracking
server works (`http://host:5000`). MLflow is imported only here (the `mlflow` extra).
"""
from __future__ import annotations

import json
import math
import os
import platform
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from edgesync.metrics.formatting import RunData, num
from edgesync.metrics.seeds import split_seed

EVAL_METRICS = ("test_acc", "test_loss", "bytes_up", "bytes_down", "samples")
UPDATE_METRICS = ("lag", "gap", "gap_normalized")
SUMMARY_METRICS = ("final_acc", "best_acc", "time_to_target_s", "updates", "duration_s", "samples_per_s",
                   "updates_per_s", "bytes_per_s", "compute_ratio_mean", "mean_lag", "mean_gap",
                   "mean_gap_normalized", "coordinator_utilisation")
ARTIFACTS = ("report.md", "summary.json", "scenario.yaml", "extensions.json")
SUITE_ARTIFACTS = ("claims.md", "reproduce.json")  # a folder of run folders: `edgesync reproduce`'s record
# MLflow's limits (mlflow.utils.validation): entities per log_batch call, the length of a parameter's value
BATCH = 1000
PARAMS_PER_BATCH = 100
MAX_PARAM = 6000


def tracking_uri(uri: str | None = None) -> str:
    """Where runs go: `uri`, else MLflow's default ($MLFLOW_TRACKING_URI, ./mlruns if it holds runs, else
    sqlite:///mlflow.db)."""
    if uri:
        return uri
    _mlflow()
    from mlflow import get_tracking_uri
    return get_tracking_uri()


def _mlflow() -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise RuntimeError("MLflow is not installed: pip install 'edgesync[mlflow]' (or mlflow)") from None


def _client(uri: str):
    _mlflow()
    from mlflow.tracking import MlflowClient
    if "://" not in uri or uri.startswith("file:"):  # a folder named by the user: MLflow's file store, on request
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return MlflowClient(tracking_uri=uri)


def run_folders(path: Path) -> list[Path]:
    """`path` itself when it is a run folder (it has scenario.yaml or summary.json), else the run folders
    directly under it (a reproduce's); ValueError when there are none."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path}: no such folder (expected a run folder, or a folder of run folders)")
    if _is_run(path):
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and _is_run(p))
    if not found:
        raise ValueError(f"{path}: not a run folder (no scenario.yaml or summary.json) and has none under it")
    return found


def _is_run(path: Path) -> bool:
    return (path / "scenario.yaml").exists() or (path / "summary.json").exists()


def export(path: Path, uri: str | None = None, experiment: str | None = None) -> dict[str, Any]:
    """Log the run folder `path` (or each run folder under it) to MLflow; returns {"uri", "experiment_id",
    "parent", "children": {label: run id}} (a folder of run folders: labels as "RUN/label")."""
    from edgesync.metrics.report import load_run

    folders = run_folders(path)
    runs = [(folder, load_run(folder)) for folder in folders]
    where = tracking_uri(uri)
    client = _client(where)
    name = experiment or (runs[0][1].name if len(runs) == 1 else Path(path).resolve().name)
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
    started = _start_ms(runs[0][1])
    parent = client.create_run(experiment_id, start_time=started, run_name=Path(path).resolve().name,
                               tags=_machine_tags(runs[0][1], Path(path)))
    parent_id = parent.info.run_id
    single = len(runs) == 1
    if single:
        _log_batches(client, parent_id, params=_flatten(runs[0][1].scenario))
    children = {}
    for folder, run in runs:
        for label in run.labels:
            key = label if single else f"{folder.name}/{label}"
            children[key] = _child(client, experiment_id, parent_id, folder, run, label, experiment=folder.name)
        _artifacts(client, parent_id, folder, None if single else folder.name)
    for name in () if single else SUITE_ARTIFACTS:
        if (Path(path) / name).exists():
            client.log_artifact(parent_id, str(Path(path) / name))
    client.set_terminated(parent_id, "FINISHED", end_time=max(_end_ms(run) for _, run in runs))
    return {"uri": where, "experiment_id": experiment_id, "parent": parent_id, "children": children}


def _child(client, experiment_id: str, parent_id: str, folder: Path, run: RunData, label: str,
           experiment: str) -> str:
    entry, settings = _entry_of(run, label)
    tags = {"mlflow.parentRunId": parent_id, "edgesync.label": label, "edgesync.experiment": experiment,
            "edgesync.algorithm": str(entry.get("name", label.partition("@")[0]))}
    rows = [r for r in run.metrics if r.get("algorithm") == label]
    child = client.create_run(experiment_id, start_time=_start_ms(run, rows), run_name=label, tags=tags)
    run_id = child.info.run_id
    params = {**_flatten(entry, "algorithm"), **settings, **_extension_params(folder)}
    _log_batches(client, run_id, params=params, metrics=_metrics(run, label, rows))
    client.set_terminated(run_id, "FINISHED", end_time=_end_ms(run, rows))
    return run_id


def _entry_of(run: RunData, label: str) -> tuple[dict, dict[str, str]]:
    """The scenario entry a label ran (its `label`, else its name, before '@') and its sweep settings and seed
    (the tag after '@': 'esync@clients=8,seed=2' → {"sweep.clients": "8", "seed": "2"})."""
    base, _, tag = label.partition("@")
    entries = run.scenario.get("algorithms") or []
    entry = next((e for e in entries if isinstance(e, dict) and (e.get("label") or e.get("name")) == base), {})
    settings = {}
    for part in filter(None, tag.split(",")):
        key, _, value = part.partition("=")
        settings["seed" if key == "seed" else f"sweep.{key}"] = value
    if "seed" not in settings and split_seed(label)[1] is None and run.scenario.get("seed") is not None:
        settings["seed"] = str(run.scenario["seed"])
    return entry, settings


def _metrics(run: RunData, label: str, rows: list[dict]) -> list[tuple[str, float, int, int]]:
    """(key, value, timestamp ms, step) of every figure a label's rows hold."""
    out = []
    for row in rows:
        ms, step = _ms(row.get("wall_clock")), int(row.get("updates") or 0)
        out += [(key, float(row[key]), ms, step) for key in EVAL_METRICS if _finite(row.get(key))]
    start = _start_s(rows)
    for row in (r for r in run.updates if r.get("algorithm") == label and "update" in r):
        ms, step = _ms(start + float(row.get("time_s") or 0.0)), int(row["update"]) + 1
        out += [(key, float(row[key]), ms, step) for key in UPDATE_METRICS if _finite(row.get(key))]
    summary = run.summary.get(label, {})
    end = _end_ms(run, rows)
    out += [(key, float(summary[key]), end, 0) for key in SUMMARY_METRICS if _finite(summary.get(key))]
    return out


def _log_batches(client, run_id: str, params: dict[str, Any] | None = None,
                 metrics: list[tuple[str, float, int, int]] | None = None) -> None:
    from mlflow.entities import Metric, Param

    items = [Param(_key(k), _param_value(v)) for k, v in (params or {}).items()]
    for chunk in _chunks(items, PARAMS_PER_BATCH):
        client.log_batch(run_id, params=chunk)
    for chunk in _chunks([Metric(k, v, ms, step) for k, v, ms, step in metrics or []], BATCH):
        client.log_batch(run_id, metrics=chunk)


def _artifacts(client, run_id: str, folder: Path, under: str | None) -> None:
    for name in ARTIFACTS:
        if (folder / name).exists():
            client.log_artifact(run_id, str(folder / name), artifact_path=under)
    if (folder / "plots").is_dir():
        client.log_artifacts(run_id, str(folder / "plots"), artifact_path=f"{under}/plots" if under else "plots")


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys, other values as they are (a list is logged as JSON); the entries by their
    labels (each child has its own settings), the clients by their count and how many have each profile."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if prefix == "algorithms" and isinstance(value, list):  # each entry's settings are its child's params
        return {prefix: json.dumps([e.get("label") or e.get("name") for e in value if isinstance(e, dict)])}
    if prefix == "clients" and isinstance(value, list):  # a fleet of 1,000 would not fit a parameter
        kinds = Counter(json.dumps(c.get("profile") if isinstance(c, dict) else c, sort_keys=True) for c in value)
        return {"clients.count": len(value), "clients.profiles": {k: n for k, n in kinds.items()}}
    return {prefix: value}


def _key(name: str) -> str:
    """A parameter's name as MLflow takes it: letters, digits, `_-. /` (a label's `@` and `=` become `_`)."""
    return "".join(c if c.isalnum() or c in "_-. /" else "_" for c in name)[:250]


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, separators=(",", ":"))
    return text if len(text) <= MAX_PARAM else text[:MAX_PARAM - 1] + "…"


def _extension_params(folder: Path) -> dict[str, str]:
    """The versions of the outside code the run used (extensions.json), as `extension.NAME`."""
    path = folder / "extensions.json"
    if not path.exists():
        return {}
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return {f"extension.{r.get('name')}": str(r.get("version") or r.get("description") or "")
            for r in records if isinstance(r, dict) and r.get("name")}


def _machine_tags(run: RunData, path: Path) -> dict[str, str]:
    runtime = run.scenario.get("runtime")
    hosts = sorted({str(c.get("host")) for c in run.clients if c.get("host")})
    tags = {"edgesync.runtime": str(runtime.get("kind") if isinstance(runtime, dict) else runtime),
            "edgesync.host": socket.gethostname(), "edgesync.platform": platform.platform(),
            "edgesync.version": _version("edgesync") or "unknown", "edgesync.run_dir": str(Path(path).resolve())}
    if hosts:
        tags["edgesync.client_hosts"] = ",".join(hosts)[:MAX_PARAM]
    torch_version = _version("torch")
    if torch_version:
        tags["edgesync.torch"] = torch_version
    return tags


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _finite(value: Any) -> bool:
    v = num(value)
    return v is not None and math.isfinite(v)


def _ms(seconds: Any) -> int:
    return int(round(1000 * float(seconds))) if _finite(seconds) else int(1000 * time.time())


def _start_s(rows: list[dict]) -> float:
    """The wall clock an entry started at: its first evaluation's wall clock less its time."""
    first = next((r for r in rows if _finite(r.get("wall_clock"))), None)
    return time.time() if first is None else float(first["wall_clock"]) - float(first.get("time_s") or 0.0)


def _start_ms(run: RunData, rows: list[dict] | None = None) -> int:
    return _ms(_start_s(run.metrics if rows is None else rows))


def _end_ms(run: RunData, rows: list[dict] | None = None) -> int:
    clocks = [float(r["wall_clock"]) for r in (run.metrics if rows is None else rows) if _finite(r.get("wall_clock"))]
    return _ms(max(clocks)) if clocks else int(1000 * time.time())
