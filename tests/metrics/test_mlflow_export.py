"""MLflow from real runs (metrics/mlflow_export.py): a two-seed sweep logged to a real `mlflow server` (sqlite
backend) by `edgesync run --mlflow-uri`, read back with MLflow's client: one parent, a child per entry and seed,
parameters and metric histories equal to the run folder's; and `edgesync export mlflow` into a file store."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from edgesync.metrics.recorder import read_jsonl

REPO = Path(__file__).resolve().parents[2]
# with the plots (the suite's other runs skip them, conftest.py): MLflow gets the run's plots/ as artifacts
ENV = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "MLFLOW_TRACKING_URI": "", "EDGESYNC_PLOTS": "1"}
SERVER_START_S = 90  # the sqlite store's migrations run at the first start: ~10 s here, more under load
LABELS = ["ssgd@seed=0", "ssgd@seed=1", "asgd@seed=0", "asgd@seed=1"]
SMALL = ["--runtime", "sim", "--seeds", "0,1", "--set", "dataset.train_size=1000", "--set", "eval.test_size=200",
         "--set", "stop.max_updates=12", "--set", "stop.target_acc=null", "--set", "eval.every_s=1", "-q"]

pytestmark = pytest.mark.slow


def edgesync(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgesync.cli", *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real `mlflow server` on 127.0.0.1 with a sqlite backend and its own artifact store."""
    root, port = tmp_path_factory.mktemp("mlflow"), free_port()
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen([str(mlflow_cli), "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                             "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"],
                            # without MLflow 3's job runner (huey consumers): nothing here submits jobs, and
                            # it took tens of CPU-seconds of a CPU-bound suite (scripts/suite_cpu.py)
                            cwd=root, env={**ENV, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                            stdout=open(root / "server.log", "w"), stderr=subprocess.STDOUT)
    uri, deadline = f"http://127.0.0.1:{port}", time.monotonic() + SERVER_START_S
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"mlflow server did not start: {(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def sweep(server, tmp_path_factory):
    """`edgesync run` of the quickstart's two entries over two seeds in the simulator, logged to the server."""
    run_dir = tmp_path_factory.mktemp("sweep") / "run"
    done = edgesync("run", "scenarios/quickstart.yaml", "--out", str(run_dir), "--mlflow-uri", server, *SMALL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MLflow (" in done.stdout and "4 child runs" in done.stdout, done.stdout[-2000:]
    return run_dir


def runs_of(client: MlflowClient, experiment: str) -> tuple[object, dict[str, object]]:
    """(the parent, {label: child}) of the newest parent in `experiment`."""
    found = client.get_experiment_by_name(experiment)
    assert found is not None, [e.name for e in client.search_experiments()]
    every = client.search_runs([found.experiment_id], max_results=1000)
    parents = [r for r in every if "mlflow.parentRunId" not in r.data.tags]
    parent = max(parents, key=lambda r: r.info.start_time)
    children = {r.data.tags["edgesync.label"]: r for r in every
                if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    return parent, children


def test_a_two_seed_sweep_is_one_parent_with_a_child_per_entry_and_seed(server, sweep):
    client = MlflowClient(tracking_uri=server)
    parent, children = runs_of(client, "quickstart")
    assert sorted(children) == sorted(LABELS)
    assert parent.data.tags["edgesync.runtime"] == "sim"
    assert parent.data.tags["edgesync.torch"] and parent.data.tags["edgesync.host"]
    # the scenario as the parent's parameters, each entry's settings and seed as its child's
    assert parent.data.params["dataset.train_size"] == "1000" and parent.data.params["name"] == "quickstart"
    assert parent.data.params["clients.count"] == "4"
    entries = {e["name"]: e for e in yaml.safe_load((sweep / "scenario.yaml").read_text())["algorithms"]}
    for label, child in children.items():
        name, seed = label.split("@seed=")
        assert child.data.params["seed"] == seed and child.data.tags["edgesync.algorithm"] == name
        assert child.data.params["algorithm.name"] == name
        assert child.data.params["algorithm.lr"] == str(entries[name]["lr"])
        assert child.data.params["algorithm.batch_size"] == str(entries[name]["batch_size"])
        assert child.info.status == "FINISHED"
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"report.md", "summary.json", "scenario.yaml", "plots"} <= artifacts
    assert not list(REPO.glob(f"mlruns/*/{parent.info.run_id}"))  # the server holds them (its artifact proxy)


def test_each_childs_metric_histories_are_the_run_folders_rows(server, sweep):
    client = MlflowClient(tracking_uri=server)
    _, children = runs_of(client, "quickstart")
    metrics, updates = read_jsonl(sweep / "metrics.jsonl"), read_jsonl(sweep / "updates.jsonl")
    for label, child in children.items():
        rows = [r for r in metrics if r["algorithm"] == label]
        for key in ("test_acc", "test_loss", "bytes_up", "bytes_down"):
            history = client.get_metric_history(child.info.run_id, key)
            assert [(m.step, m.value) for m in sorted(history, key=lambda m: (m.step, m.timestamp))] == \
                [(r["updates"], r[key]) for r in sorted(rows, key=lambda r: (r["updates"], r["wall_clock"]))], key
            assert [m.timestamp for m in history] == sorted(m.timestamp for m in history)
        gaps = [(r["update"] + 1, r["gap"]) for r in updates if r["algorithm"] == label and "gap" in r]
        history = client.get_metric_history(child.info.run_id, "gap")
        assert sorted((m.step, m.value) for m in history) == sorted(gaps)
        assert bool(gaps) == label.startswith("asgd")  # SSGD has no staleness
        final = client.get_run(child.info.run_id).data.metrics["final_acc"]
        assert final == rows[-1]["test_acc"]


def test_export_puts_an_existing_folder_into_a_local_store(sweep, tmp_path, monkeypatch):
    for uri in (f"sqlite:///{tmp_path / 'mlflow.db'}", str(tmp_path / "mlruns")):  # a database; a folder (file store)
        # a local store keeps artifacts in ./mlruns beside where the command runs: not in the checkout
        done = edgesync("export", "mlflow", str(sweep), "--uri", uri, "--experiment", "again", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 reads a file store only when told to
        parent, children = runs_of(MlflowClient(tracking_uri=uri), "again")
        assert sorted(children) == sorted(LABELS)


def test_a_folder_of_run_folders_is_one_parent_with_each_folders_children(sweep, tmp_path, monkeypatch):
    suite = tmp_path / "reproduce"  # as `edgesync reproduce` leaves it: a run folder per experiment, claims.md
    for name in ("first", "second"):
        shutil.copytree(sweep, suite / name)
    (suite / "claims.md").write_text("| claim | verdict |\n")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = edgesync("export", "mlflow", str(suite), "--uri", uri, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    client = MlflowClient(tracking_uri=uri)
    parent, _ = runs_of(client, "reproduce")
    every = client.search_runs([parent.info.experiment_id], max_results=1000)
    children = [r for r in every if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted((r.data.tags["edgesync.experiment"], r.data.tags["edgesync.label"]) for r in children) == \
        sorted((name, label) for name in ("first", "second") for label in LABELS)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"claims.md", "first", "second"} <= artifacts
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "first")} >= {"first/report.md", "first/plots"}


def test_export_of_a_folder_that_is_no_run_says_so(tmp_path):
    done = edgesync("export", "mlflow", str(tmp_path), "--uri", str(tmp_path / "mlruns"), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{tmp_path}: not a run folder (no scenario.yaml or summary.json) and has none under it" in done.stderr
    shutil.rmtree(tmp_path / "mlruns", ignore_errors=True)
