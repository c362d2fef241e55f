"""The example extension from outside the package (examples/edgesync-feddyn: FedDyn and WidthNet, on edgesync.api
only), installed as a user installs it (`pip install -e examples/edgesync-feddyn`, scripts/setup.sh) and named by
its entry points, runs in every runtime: the simulator (serial and on Ray), live on loopback with 4 client
processes, and under Flower (EdgeSync's ServerApp driving the real ClientApp on in-process nodes,
tests/flower/fake_grid.py). Each run makes its rounds with every client, beats chance (0.1) and records the
package, its version and its code hash in extensions.json. The example's own tests (its known answers and the
conformance kit) are in the suite's testpaths (pyproject.toml)."""
from __future__ import annotations

import importlib.metadata as metadata
import json
import logging
import sys
from pathlib import Path

import pytest

from edgesync.config import load_scenario
from edgesync.extensions import code_hash
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "edgesync-feddyn"
try:
    VERSION = metadata.version("edgesync-feddyn")
except metadata.PackageNotFoundError:
    pytest.fail("edgesync-feddyn is not installed: scripts/setup.sh installs it "
                "(pip install --no-deps -e examples/edgesync-feddyn)", pytrace=False)
ROUNDS = 4
CLIENTS = 4


def scenario(**overrides) -> dict:
    """FedDyn on WidthNet, both by entry-point name, 4 clients of an 800-sample slice of Fashion-MNIST."""
    data = {
        "name": "feddyn-example", "seed": 4, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 800},
        "model": {"name": "widenet", "args": {"width": 8}},
        "clients": CLIENTS,
        "algorithms": [{"name": "feddyn", "alpha": 0.01, "lr": 0.1, "local_steps": 5}],
        "stop": {"max_updates": ROUNDS, "time_budget_s": 120, "target_acc": None},
        "eval": {"every_s": 100.0, "test_size": 300},  # at the start and at the end
        "sim": {"base_step_s": 0.01, "server_time": "zero"},
    }
    data.update(overrides)
    return data


@pytest.fixture(scope="module", autouse=True)
def no_report():
    """summary.json is written as always; report.md's plots (matplotlib, seconds a run) are not drawn."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
        yield


def run(tmp_path: Path, name: str, **overrides) -> Path:
    out = tmp_path / name
    run_scenario(load_scenario(scenario(**overrides)), out, progress=False)
    return out


def assert_ran_the_example(out: Path) -> None:
    """Every round made, with every client; above chance; the example's package, version and hash recorded."""
    final = read_jsonl(out / "metrics.jsonl")[-1]
    assert final["algorithm"] == "feddyn" and final["updates"] == ROUNDS and final["test_acc"] > 0.3, final
    trained = sorted(r["client"] for r in read_jsonl(out / "clients.jsonl") if r["steps"] >= ROUNDS * 5)
    assert trained == list(range(CLIENTS)), read_jsonl(out / "clients.jsonl")
    records = json.loads((out / "extensions.json").read_text())
    expected = {"distribution": "edgesync-feddyn", "version": VERSION, "code_hash": code_hash("edgesync_feddyn")}
    assert [(r["kind"], r["name"]) for r in records] == [("algorithm", "feddyn"), ("model", "widenet")]
    assert all({k: r[k] for k in expected} == expected for r in records), records
    # nobody lost its g_k: the server's h stayed the clients' mean all along (no restart of the pair)
    assert not [r for r in read_jsonl(out / "updates.jsonl") if "dyn_reset" in r]


def test_the_installed_package_is_the_example():
    import edgesync_feddyn
    assert Path(edgesync_feddyn.__file__).resolve().is_relative_to(EXAMPLE)  # editable: its code is examples/'s


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> Path:
    return run(tmp_path_factory.mktemp("feddyn"), "serial")


def test_in_the_simulator(serial):
    assert_ran_the_example(serial)


@pytest.mark.slow
@pytest.mark.ray
def test_on_the_ray_backend_as_serially(serial, tmp_path, caplog):
    pytest.importorskip("ray")
    caplog.set_level(logging.INFO, "edgesync.sim")
    out = run(tmp_path, "ray", sim={"base_step_s": 0.01, "server_time": "zero", "backend": "ray"})
    assert "Ray backend:" in caplog.text  # its clients did run on Ray workers
    assert_ran_the_example(out)
    without_clock = lambda rows: [{k: v for k, v in r.items() if k != "wall_clock"} for r in rows]  # noqa: E731
    assert without_clock(read_jsonl(out / "metrics.jsonl")) == without_clock(read_jsonl(serial / "metrics.jsonl"))


@pytest.mark.slow
def test_live_on_loopback_with_four_client_processes(tmp_path):
    assert_ran_the_example(run(tmp_path, "live", runtime="live"))


@pytest.mark.slow
def test_under_flower(tmp_path):
    """EdgeSync's ServerApp (`serve`, as `flwr run` starts it) with four nodes running the real ClientApp."""
    pytest.importorskip("flwr")
    import yaml
    from flwr.app import Context, RecordDict

    from edgesync.flower.apps import clientapp
    from edgesync.flower.coordinator import serve
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flower"))
    from fake_grid import FakeGrid

    path = tmp_path / "feddyn.yaml"
    path.write_text(yaml.safe_dump(scenario(runtime="live")))
    out = tmp_path / "flower"
    context = Context(run_id=7, node_id=0, node_config={}, state=RecordDict(),
                      run_config={"scenario": str(path), "out": str(out)})
    grid = FakeGrid(clientapp, [{}] * CLIENTS)
    try:
        serve(grid, context, tmp_path)
    finally:
        grid.close()
    assert_ran_the_example(out)
