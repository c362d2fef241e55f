"""Algorithms from outside the package (edgesync/extensions.py, algorithms/outside.py): a `module:attr` reference
and an installed entry point run like built-in names; outside code that cannot be used is refused with one line.

tests/extensions/fixture_ext stands in for a lab's installed package: `ext_fixture` and the dist-info that
declares its entry point (importlib.metadata finds it on sys.path, as it finds what pip installs)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync.algorithms import outside
from edgesync.config import ScenarioError, load_scenario
from edgesync.extensions import API_VERSION, describe
from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.runtime.sim.simulator import run_sim

FIXTURE = Path(__file__).parent / "fixture_ext"


@pytest.fixture(autouse=True)
def installed(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURE))
    monkeypatch.setenv("PYTHONPATH", str(FIXTURE))  # for processes a run starts
    monkeypatch.setattr(outside, "_RESOLVED", {})


def scenario(name: str, **entry) -> dict:
    return {"name": "outside", "seed": 3, "runtime": "sim", "sim": {"base_step_s": 0.01},
            "dataset": {"name": "fashion_mnist", "train_size": 600}, "clients": 2,
            "algorithms": [{"name": name, "lr": 0.1, **entry}],
            "stop": {"time_budget_s": 30, "max_updates": 3}, "eval": {"every_s": 0.05, "test_size": 100}}


def run(data: dict, tmp_path: Path) -> list[dict]:
    sc = load_scenario(data)
    with RunRecorder(tmp_path) as recorder:
        run_sim(sc, recorder, Progress(enabled=False))
    return read_jsonl(tmp_path / "metrics.jsonl")


@pytest.mark.parametrize("name", ["ext_fixture:HALFSTEP", "halfstep"], ids=["reference", "entry point"])
def test_an_outside_algorithm_runs_in_the_simulator_like_a_built_in_one(name, tmp_path):
    sc = load_scenario(scenario(name, local_steps=3))
    entry = sc.algorithms[0]
    assert entry.local_steps == 3 and entry.key == "halfstep"  # its results are labelled with its own name
    assert sc.resolved()["algorithms"][0]["name"] == name  # the name travels as written: every process resolves it
    rows = run(scenario(name), tmp_path)
    assert {r["algorithm"] for r in rows} == {"halfstep"} and rows[-1]["updates"] == 3


def test_an_outside_config_is_validated_like_a_built_in_one():
    with pytest.raises(ScenarioError) as err:
        load_scenario(scenario("ext_fixture:HALFSTEP", local_steps=0, local_step=2))
    lines = str(err.value).splitlines()
    assert any("algorithms.0.local_steps: Input should be greater than or equal to 1 (got 0)" in l for l in lines)
    assert any("algorithms.0.local_step: unknown key" in l and "did you mean 'local_steps'" in l for l in lines)


@pytest.mark.parametrize("name, says", [
    ("ext_fixture:NO_VERSION", f"declares no edgesync API version (set api_version=\"{API_VERSION}\""),
    ("ext_fixture:FUTURE", f"written for edgesync API 2.0, this edgesync provides API {API_VERSION}"),
    ("ext_fixture:NOT_A_SPEC", "names a dict, not an AlgorithmSpec"),
    ("ext_fixture:MISSING", "ext_fixture has no attribute 'MISSING'"),
    ("no_such_lab.algos:X", "cannot import 'no_such_lab.algos'"),
    ("nothere", "unknown algorithm 'nothere'; registered:"),
])
def test_outside_code_that_cannot_be_used_is_refused_in_one_line(name, says):
    with pytest.raises(ScenarioError) as err:
        load_scenario(scenario(name))
    assert len(str(err.value).splitlines()) == 1
    assert says in str(err.value) and "algorithms.0:" in str(err.value)


def test_an_installed_package_offers_its_entry_point_and_says_what_its_code_is():
    assert "halfstep" in outside.installed_names()
    load_scenario(scenario("halfstep"))
    info = outside.info("halfstep")
    assert (info.distribution, info.version, info.module) == ("ext-fixture", "0.3.1", "ext_fixture")
    assert len(info.code_hash) == 16 and info.code_hash == describe("ext_fixture:HALFSTEP", "ext_fixture").code_hash


def test_a_run_folder_records_the_outside_code_it_ran(tmp_path):
    from edgesync.runtime.runs import run_scenario
    data = {**scenario("ext_fixture:HALFSTEP"), "model": {"name": "ext_fixture:tiny_net", "args": {"width": 4}}}
    run_scenario(load_scenario(data), tmp_path / "run", progress=False)
    records = json.loads((tmp_path / "run" / "extensions.json").read_text())
    assert [(r["kind"], r["name"], r["distribution"], r["version"]) for r in records] == [
        ("algorithm", "ext_fixture:HALFSTEP", "ext-fixture", "0.3.1"), ("model", "ext_fixture:tiny_net", "ext-fixture", "0.3.1")]
    assert records[0]["code_hash"] == records[1]["code_hash"]  # one package, one hash


def test_edgesync_plugins_lists_what_is_installed_and_checks_it():
    from typer.testing import CliRunner
    from edgesync.cli.app import app
    result = CliRunner().invoke(app, ["plugins"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "halfstep" in result.output and "ext-fixture 0.3.1" in result.output and "ok" in result.output


def test_a_referenced_config_crosses_to_another_process_as_itself(tmp_path):
    """A simulator worker or a Ray task gets configs pickled: the renamed config resolves its reference there."""
    import pickle
    import subprocess
    import sys
    entry = load_scenario(scenario("ext_fixture:HALFSTEP", local_steps=4)).algorithms[0]
    (tmp_path / "entry.pkl").write_bytes(pickle.dumps(entry))
    code = ("import pickle, sys; e = pickle.load(open(sys.argv[1], 'rb')); "
            "print(type(e).__mro__[1].__name__, e.name, e.key, e.local_steps)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "entry.pkl")], capture_output=True, text=True)
    assert done.stdout.split() == ["HalfStepConfig", "ext_fixture:HALFSTEP", "halfstep", "4"], done.stderr
