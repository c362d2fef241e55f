"""The virtual-clock simulator (`runtime: sim`): virtual times, counts and bytes worked out by hand.

Every timing test fixes `sim.base_step_s`, so a ×k client's step lasts exactly k × base virtual
seconds and nothing depends on this machine's speed. The rules the expected values follow
(`Simulator._events`):

- an event (an update reaching the server) at exactly the time budget is *not* processed: the run
  ends at the budget with the state just before it;
- an evaluation due at time t sees every event before t, none at t (evaluations at a tie run first);
- the client stats count every step a client started, including one still running at the end.

Times are floats summed step by step (0.1 + 0.1 + 0.1 is 0.30000000000000004), so the simulator
schedules events and evaluations on a nanosecond grid: times that are equal in exact arithmetic are
equal there, and the tie rules above hold whatever the step time.

The runs here check the run folder's logs and summary.json, not report.md: they skip drawing the report
(about half of a small run's CPU), except the command line's run at the end, which reads it.
"""
from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import pytest
import torch
import yaml

from edgesync.algorithms.machinery.gradient_client import GradientClient, model_instruction
from edgesync.algorithms.machinery.staleness import GRAD_RMS
from edgesync.data.datasets import to_tensor
from edgesync.metrics.recorder import read_jsonl
from edgesync.models import build_model
from edgesync.params import get_buffers, get_params
from edgesync.runtime.bookkeeping import calibration
from edgesync.runtime.runs import run_scenario
from edgesync.runtime.bookkeeping.workload import client_splits, scenario_dataset
from edgesync.config import load_scenario
from edgesync.trainer import Trainer
from edgesync.transport.protocol import Message

REPO = Path(__file__).resolve().parents[2]


def _no_report(run_dir: Path) -> None:
    """In place of render_report: the logs and summary.json are written all the same."""


@pytest.fixture(autouse=True)
def no_report(monkeypatch):
    monkeypatch.setattr("edgesync.runtime.runs.render_report", _no_report)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    """sim_scenario() as it is (SSGD, clients x1 and x3, 3 virtual s), run once for the tests that read it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("edgesync.runtime.runs.render_report", _no_report)
        return run(tmp_path_factory.mktemp("default"))


@pytest.fixture
def cache_in_tmp(tmp_path, monkeypatch):
    """An empty step-time cache of the test's own, for the tests that read or remove it (the others share
    the test run's, tests/conftest.py)."""
    monkeypatch.setenv("EDGESYNC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def sim_scenario(**overrides) -> dict:
    """Clients x1 and x3, a 1,000-sample slice, steps of 0.1 virtual s, 3 virtual s per algorithm."""
    data = {
        "name": "sim",
        "seed": 1,
        "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 1000},
        "clients": ["x1", "x3"],
        "algorithms": [{"name": "ssgd", "lr": 0.1}],
        "stop": {"time_budget_s": 3.0, "target_acc": None},
        "eval": {"every_s": 0.5, "test_size": 200},
        "sim": {"base_step_s": 0.1, "server_time": "zero"},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def run(tmp_path: Path, name: str = "run", **overrides) -> Path:
    out = tmp_path / name
    run_scenario(load_scenario(sim_scenario(**overrides)), out, progress=False)
    return out


def metrics(out: Path, label: str) -> list[dict]:
    return [r for r in read_jsonl(out / "metrics.jsonl") if r["algorithm"] == label]


def client_rows(out: Path, label: str) -> dict[int, dict]:
    return {r["client"]: r for r in read_jsonl(out / "clients.jsonl") if r["algorithm"] == label}


# -- (a) SSGD: a round lasts as long as its slowest client -----------------------------------------

def test_ssgd_rounds_last_as_long_as_the_slowest_client(default_run):
    out = default_run
    final = metrics(out, "ssgd")[-1]
    # Rounds end at 0.3, 0.6, …, 2.7 (9 rounds); the 10th ends at 3.0, the budget: not processed.
    assert final["time_s"] == 3.0
    assert final["updates"] == 9
    assert final["samples"] == 9 * 2 * 32 + 32  # + the x1 client's 10th gradient, which arrived at 2.8

    rows = client_rows(out, "ssgd")
    fast, slow = rows[0], rows[1]
    # Both computed 10 steps (the 10th round started at 2.7); the x1 client waits 0.2 s every round.
    assert fast["steps"] == slow["steps"] == 10
    assert fast["compute_s"] == pytest.approx(1.0)
    assert fast["wait_s"] == pytest.approx(2.0)
    assert fast["wall_s"] == pytest.approx(3.0)
    assert fast["compute_s"] / fast["wall_s"] == pytest.approx(1 / 3)
    assert slow["compute_s"] == pytest.approx(3.0)
    assert slow["wait_s"] == pytest.approx(0.0)
    assert (fast["profile"], slow["profile"]) == ("x1", "x3")
    assert fast["reference_step_s"] == 0.1 and slow["target_factor"] == 3.0
    assert fast["host"] == "sim" and fast["device"] == "virtual"


def test_an_event_at_exactly_the_budget_is_not_processed(tmp_path):
    # Steps of 0.25 s are exact in binary: rounds end at exactly 0.75, 1.5, 2.25 and 3.0.
    out = run(tmp_path, sim={"base_step_s": 0.25}, eval={"every_s": 1.0})
    rows = metrics(out, "ssgd")
    assert [(r["time_s"], r["updates"]) for r in rows] == [(0.0, 0), (1.0, 1), (2.0, 2), (3.0, 3)]
    # The same budget a hair longer lets the 4th round in, and the final model is evaluated.
    longer = run(tmp_path, "longer", sim={"base_step_s": 0.25}, eval={"every_s": 1.0},
                 stop={"time_budget_s": 3.0001})
    rows = metrics(longer, "ssgd")
    assert [(r["time_s"], r["updates"]) for r in rows] == [(0.0, 0), (1.0, 1), (2.0, 2), (3.0, 3), (3.0001, 4)]


def test_ties_follow_exact_arithmetic_even_with_steps_of_a_tenth(tmp_path):
    # Two x1 clients: rounds end at 0.1, 0.2, …, 1.0 (ten float additions of 0.1 give 0.9999999999999999).
    # Each evaluation at 0.1·k sees the k − 1 rounds strictly before it; the 10th round, at the budget,
    # is not processed.
    out = run(tmp_path, clients=["x1", "x1"], stop={"time_budget_s": 1.0}, eval={"every_s": 0.1})
    rows = metrics(out, "ssgd")
    assert [r["time_s"] for r in rows] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert [r["updates"] for r in rows] == [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_client_busy_at_the_end_finishes_its_step_and_wall_s_includes_it(tmp_path):
    # Budget 2.95: the x3 client's 10th step runs from 2.7 to 3.0. Like a live client (which finishes
    # its step before it reads END) it is counted, and wall_s runs to its end: compute_s + wait_s =
    # wall_s, so a compute-time ratio is never above 1.
    out = run(tmp_path, stop={"time_budget_s": 2.95}, algorithms=[{"name": "asgd", "lr": 0.05}])
    for row in client_rows(out, "asgd").values():
        assert row["compute_s"] + row["wait_s"] == pytest.approx(row["wall_s"])
        assert row["compute_s"] <= row["wall_s"] + 1e-9
    assert client_rows(out, "asgd")[1]["wall_s"] == pytest.approx(3.0)


# -- (b) ASGD: nobody waits ------------------------------------------------------------------------

def test_asgd_applies_every_gradient_the_moment_it_arrives(tmp_path):
    out = run(tmp_path, algorithms=[{"name": "asgd", "lr": 0.05}])
    final = metrics(out, "asgd")[-1]
    # x1's gradients arrive at 0.1 … 2.9 (29; its 30th at 3.0 is at the budget), x3's at 0.3 … 2.7 (9).
    assert final["time_s"] == 3.0
    assert final["updates"] == 29 + 9
    assert final["samples"] == 38 * 32
    rows = client_rows(out, "asgd")
    assert rows[0]["steps"] == 30 and rows[1]["steps"] == 10
    for row in rows.values():
        assert row["compute_s"] == pytest.approx(3.0)
        assert row["wait_s"] == pytest.approx(0.0)
        assert row["wall_s"] == pytest.approx(3.0)


# -- (c) evaluation times ----------------------------------------------------------------------------

def test_evaluations_every_half_second_see_the_rounds_before_them(default_run):
    out = default_run
    rows = metrics(out, "ssgd")
    assert [r["time_s"] for r in rows] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    # Rounds end at 0.3, 0.6, 0.9, 1.2, 1.5, 1.8, …: the one ending at 1.5 (a tie) is not yet seen at 1.5.
    assert [r["updates"] for r in rows] == [0, 1, 3, 4, 6, 8, 9]
    assert rows[0]["samples"] == rows[0]["bytes_up"] == rows[0]["bytes_down"] == 0
    assert all(0 <= r["test_acc"] <= 1 and r["test_loss"] > 0 for r in rows)
    assert all(isinstance(r["wall_clock"], float) for r in rows)


# -- (d) stop rules ---------------------------------------------------------------------------------

def test_max_updates_ends_an_algorithm_at_the_update_that_reaches_it(tmp_path):
    out = run(tmp_path, stop={"max_updates": 5},
              algorithms=[{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}])
    ssgd = metrics(out, "ssgd")
    # The 5th round ends at 1.5: the final model is evaluated then, after the routine evaluation at 1.5.
    assert [(r["time_s"], r["updates"]) for r in ssgd] == [(0.0, 0), (0.5, 1), (1.0, 3), (1.5, 4), (1.5, 5)]
    asgd = metrics(out, "asgd")
    # ASGD updates: x1 at 0.1, 0.2, 0.3, 0.4; x3 at 0.3 → the 5th arrives at 0.4.
    assert [(r["time_s"], r["updates"]) for r in asgd] == [(0.0, 0), (0.4, 5)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ssgd"]["updates"] == summary["asgd"]["updates"] == 5


def test_stop_at_target_ends_at_the_first_evaluation_that_reaches_it(tmp_path):
    target = 0.2
    scenario = dict(stop={"time_budget_s": 20.0, "target_acc": target, "stop_at_target": True})
    out = run(tmp_path, **scenario)
    rows = metrics(out, "ssgd")
    reached = [r for r in rows if r["test_acc"] >= target]
    assert reached, "the target should be reached well within 20 virtual s"
    assert rows[-1] is reached[0] or rows[-1] == reached[0]   # nothing after the first success
    assert rows[-1]["time_s"] < 20.0
    assert rows[-1]["updates"] == int(rows[-1]["time_s"] / 0.3 - 1e-9)  # rounds strictly before it
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ssgd"]["time_to_target_s"] == rows[-1]["time_s"]
    # Without stop_at_target the same run goes on to the budget.
    on = run(tmp_path, "on", stop={"time_budget_s": 5.0, "target_acc": target, "stop_at_target": False})
    assert metrics(on, "ssgd")[-1]["time_s"] == 5.0


# -- (e) bytes ----------------------------------------------------------------------------------------

def test_bytes_are_the_wire_size_of_every_message(tmp_path):
    # Three x1 clients, steps of 0.25 s (exact), 4 rounds: 12 UPDATEs up, 3 + 4 × 3 = 15 TRAINs down.
    out = run(tmp_path, clients=["x1", "x1", "x1"], sim={"base_step_s": 0.25},
              stop={"max_updates": 4}, eval={"every_s": 0.6})
    sc = load_scenario(sim_scenario(clients=["x1", "x1", "x1"]))
    data = scenario_dataset(sc.dataset)
    splits = client_splits(sc, data.train_y)
    assert len({len(s) for s in splits}) == 1  # same data_size in every client's metadata
    model = build_model("cnn", num_classes=10, in_channels=1)
    params, buffers = get_params(model), get_buffers(model)
    model_tensors = {"params": params, **({"buffers": buffers} if buffers.numel() else {})}
    # A real update of the client half, for its tensors and metadata keys.
    trainer = Trainer(model=model, x=to_tensor(data.train_x, data.mean, data.std),
                      y=torch.as_tensor(data.train_y, dtype=torch.int64), batch_size=32, seed=0, subset=splits[0])
    update = GradientClient(sc.algorithms[0], trainer).on_instruction(model_instruction(params, buffers, 0))

    def train_size(version):
        return Message("TRAIN", {"version": version}, model_tensors).wire_size()

    def update_size(version, loss, grad_rms):
        meta = {**update.meta, "loss": loss, "version": version, GRAD_RMS: grad_rms}
        return Message("UPDATE", meta, update.tensors).wire_size()

    # A loss and the gradient's RMS are written as JSON in the header: between "2.0" and a 17-digit repr long
    # (the RMS as small as 1e-5: its repr has an exponent).
    lo = {v: update_size(v, 2.0, 0.5) for v in range(4)}
    hi = {v: update_size(v, 2.3010590476989746, 1.2345678901234567e-05) for v in range(4)}
    assert all(lo[v] > 4 * params.numel() for v in lo)

    rows = metrics(out, "ssgd")
    assert [(r["time_s"], r["updates"]) for r in rows] == [(0.0, 0), (0.6, 2), (1.0, 4)]
    at_06, final = rows[1], rows[2]
    # Down is exact: TRAIN messages carry only the version as metadata.
    assert at_06["bytes_down"] == 3 * (train_size(0) + train_size(1) + train_size(2))
    assert final["bytes_down"] == 3 * sum(train_size(v) for v in range(5))  # round 4's broadcast is sent
    # Up: clients × one UPDATE per round.
    assert 3 * (lo[0] + lo[1]) <= at_06["bytes_up"] <= 3 * (hi[0] + hi[1])
    assert 3 * sum(lo.values()) <= final["bytes_up"] <= 3 * sum(hi.values())
    for row in client_rows(out, "ssgd").values():
        assert row["bytes_down"] == sum(train_size(v) for v in range(5))
        assert sum(lo.values()) <= row["bytes_up"] <= sum(hi.values())
    assert sum(r["bytes_up"] for r in client_rows(out, "ssgd").values()) == final["bytes_up"]


# -- (f) determinism and replay -------------------------------------------------------------------

WALL_CLOCK = re.compile(rb', "wall_clock": [0-9.e+-]+')


def _without_wall_clock(path: Path) -> bytes:
    data = path.read_bytes()
    stripped = WALL_CLOCK.sub(b"", data)
    if path.name == "metrics.jsonl":
        assert stripped.count(b"\n") == data.count(b'"wall_clock"')  # one per row, all removed
    return stripped


@pytest.mark.slow
def test_runs_are_byte_identical_and_replay_from_the_run_folder(tmp_path, cache_in_tmp, monkeypatch):
    measured = []
    real_measure = calibration.measure

    def counting_measure(step):
        measured.append(step.__self__.batch_size)  # the trainer's bound gradient()
        return real_measure(step)

    monkeypatch.setattr(calibration, "measure", counting_measure)
    monkeypatch.setattr(calibration, "busy_now", lambda: True)  # a busy first figure stays while the load does
    overrides = dict(clients=["x1", "x2", "x4"], sim={"base_step_s": None},
                     algorithms=[{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}],
                     stop={"time_budget_s": 4.0, "max_updates": 8}, eval={"every_s": 0.1})  # SSGD: ~7 rows
    first = run(tmp_path, "first", **overrides)
    second = run(tmp_path, "second", **overrides)
    assert measured == [32], "the step time is measured once, then read from the cache"
    cache = json.loads((cache_in_tmp / "step_times.json").read_text())
    (entry,) = cache.values()
    step_s = entry["step_s"]

    for name in ("metrics.jsonl", "clients.jsonl"):
        assert _without_wall_clock(first / name) == _without_wall_clock(second / name), name
    assert (first / "summary.json").read_bytes() == (second / "summary.json").read_bytes()
    assert len(metrics(first, "ssgd")) >= 2 and metrics(first, "asgd")[-1]["updates"] == 8
    assert {r["reference_step_s"] for r in read_jsonl(first / "clients.jsonl")} == {step_s}

    recorded = yaml.safe_load((first / "scenario.yaml").read_text())
    assert recorded["runtime"] == "sim"
    assert recorded["sim"]["base_step_s"] is None
    assert {int(k): v for k, v in recorded["sim"]["measured_step_s"].items()} == {32: step_s}

    # Replaying the recorded scenario uses the recorded step time: no cache, no measurement.
    (cache_in_tmp / "step_times.json").unlink()
    replay = tmp_path / "replay"
    run_scenario(load_scenario(first / "scenario.yaml"), replay, progress=False)
    assert measured == [32]
    assert not (cache_in_tmp / "step_times.json").exists()
    for name in ("metrics.jsonl", "clients.jsonl"):
        assert _without_wall_clock(first / name) == _without_wall_clock(replay / name), name


# -- (g) gamma profiles -----------------------------------------------------------------------------

def test_gamma_heterogeneous_clients_run_at_different_speeds(tmp_path):
    gamma = {"profile": {"kind": "gamma", "machines": "heterogeneous"}}
    out = run(tmp_path, clients=[gamma] * 4, algorithms=[{"name": "asgd", "lr": 0.05}],
              stop={"time_budget_s": 2.0}, eval={"every_s": 1.0})
    rows = client_rows(out, "asgd")
    assert len(rows) == 4
    steps = [r["steps"] for r in rows.values()]
    factors = [r["target_factor"] for r in rows.values()]
    assert len(set(steps)) > 1 and len(set(factors)) == 4
    assert all(r["profile"].startswith("gamma-hetero") for r in rows.values())
    # A faster machine (smaller mean factor) does more steps in the same virtual time.
    by_factor = sorted(rows.values(), key=lambda r: r["target_factor"])
    assert by_factor[0]["steps"] >= by_factor[-1]["steps"]
    assert metrics(out, "asgd")[-1]["updates"] > 0


# -- (h) the command line -----------------------------------------------------------------------------

def test_edgesync_run_with_runtime_sim_reports_virtual_seconds(tmp_path, cache_in_tmp, monkeypatch, capsys, plots):
    from edgesync.cli import main
    from edgesync.metrics.report import render_report
    monkeypatch.setattr("edgesync.runtime.runs.render_report", render_report)  # this run draws its report
    scenario = sim_scenario(runtime="live", algorithms=[{"name": "ssgd", "lr": 0.1, "batch_size": 8},
                                                        {"name": "asgd", "batch_size": 8}],
                            stop={"time_budget_s": 1.0, "target_acc": 0.3})
    path = tmp_path / "cli.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "cli-run"
    # The command line's own entry point in this process (a process of its own would add a torch import).
    # It sets up logging into the run folder (runs.log_to): the root logger is put back afterwards.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "argv", ["edgesync", "run", str(path), "--runtime", "sim", "--out", str(out), "-q"])
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code or 0
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    result = capsys.readouterr()
    assert code == 0, result.err[-3000:]
    assert "(sim)" in result.err and "report:" in result.out
    assert yaml.safe_load((out / "scenario.yaml").read_text())["runtime"] == "sim"
    report = (out / "report.md").read_text()
    assert "virtual seconds" in report
    assert "| `ssgd` |" in report and "| `asgd` |" in report
    assert (out / "plots" / "accuracy_vs_time.png").exists()
    assert metrics(out, "ssgd")[-1]["time_s"] == 1.0
