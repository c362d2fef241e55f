"""The simulator's machine figure: the least disturbed of several rounds, the load it was measured under, kept
while quiet, measured again once a busy figure meets a quiet machine, recorded in the run folder, and shown and
redone by `edgesync calibrate`."""
from __future__ import annotations

import json
import time

import torch
import yaml
from typer.testing import CliRunner

from edgesync.cli.app import app
from edgesync.runtime.bookkeeping import calibration
from edgesync.runtime.bookkeeping.calibration import keep, measure
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario


def entry(step_s: float, busy: bool) -> dict:
    return {"step_s": step_s, "rounds_s": [step_s], "load_1min": 3.0 if busy else 0.1, "cores": 2, "busy": busy}


def test_the_figure_is_the_fastest_rounds_median_with_the_load_it_was_measured_under(monkeypatch):
    delays = iter([0.004] * 13 + [0.002] * 10 + [0.004] * 30)  # warm-up, round 1 slow, round 2 fast, the rest slow
    monkeypatch.setattr(calibration, "load_1min", lambda: 1.6)
    monkeypatch.setattr(calibration, "usable_cores", lambda: 2)
    got = measure(lambda: time.sleep(next(delays)))
    assert len(got["rounds_s"]) == calibration.ROUNDS and got["step_s"] == min(got["rounds_s"])
    assert 0.002 <= got["step_s"] < 0.0035 <= got["rounds_s"][0]  # round 2 is the one kept
    assert got["busy"] and got["load_1min"] == 1.6 and got["cores"] == 2  # 1.6 ≥ 0.75 × 2


def test_a_quiet_figure_is_kept_and_a_busy_one_only_while_the_machine_stays_busy():
    fresh = entry(0.012, busy=False)
    quiet, busy = entry(0.015, busy=False), entry(0.018, busy=True)
    assert keep(quiet, lambda: fresh, busy=lambda: False) == (quiet, False)
    assert keep(busy, lambda: fresh, busy=lambda: True) == (busy, False)  # runs side by side share one clock
    kept, changed = keep(busy, lambda: dict(fresh), busy=lambda: False)  # quiet now: measured again
    assert changed and kept["step_s"] == 0.012 and kept["replaced_s"] == 0.018 and kept["remeasured"] == 1
    assert keep(0.0151, lambda: dict(fresh), busy=lambda: True)[0]["step_s"] == 0.012  # no conditions: measured
    assert keep(None, lambda: dict(fresh))[1]


def test_a_simulated_run_records_the_figure_it_used_and_its_conditions(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGESYNC_CACHE", str(tmp_path / "cache"))
    sc = load_scenario({"name": "c", "clients": 2, "runtime": "sim", "algorithms": [{"name": "asgd"}],
                        "dataset": {"name": "fashion_mnist", "train_size": 500}, "sim": {"base_step_s": None},
                        "stop": {"max_updates": 4}, "eval": {"every_s": 1.0, "test_size": 100}})
    run_scenario(sc, tmp_path / "run", progress=False)
    sim = yaml.safe_load((tmp_path / "run" / "scenario.yaml").read_text())["sim"]
    (step,), (cal,) = sim["measured_step_s"].values(), sim["calibration"].values()
    assert cal["step_s"] == step and len(cal["rounds_s"]) == calibration.ROUNDS and "load_1min" in cal
    assert set(cal) >= {"busy", "cores", "measured_at"}


def test_calibrate_shows_the_cache_and_redo_measures_it_again(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGESYNC_CACHE", str(tmp_path))
    runner = CliRunner()
    shown = runner.invoke(app, ["calibrate"])
    assert shown.exit_code == 0 and "no step time cached for this machine yet" in shown.output
    redone = runner.invoke(app, ["calibrate", "--redo"])
    assert redone.exit_code == 0, redone.output
    assert "cnn, batch 32:" in redone.output and "(min of 5 rounds" in redone.output
    first = json.loads((tmp_path / "step_times.json").read_text())
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # a fresh `edgesync calibrate` has torch's default, the cores: the cache's key is 1's
    try:
        again = runner.invoke(app, ["calibrate", "--redo"])
    finally:
        torch.set_num_threads(threads)
    assert "forgot 1 cached step time(s) of this machine" in again.output
    assert json.loads((tmp_path / "step_times.json").read_text()) != first  # measured anew, not read back


def test_a_budget_in_base_steps_lasts_that_many_steps_of_the_runs_x1_device(tmp_path):
    sc = load_scenario({"name": "b", "clients": ["x1", "x2"], "runtime": "sim", "algorithms": [{"name": "asgd"}],
                        "dataset": {"name": "fashion_mnist", "train_size": 500}, "sim": {"base_step_s": 0.01},
                        "stop": {"budget_base_steps": 50, "stop_at_target": False},
                        "eval": {"every_s": 0.1, "test_size": 100}})
    summary = run_scenario(sc, tmp_path / "run", progress=False)
    assert summary["asgd"]["duration_s"] == 0.5  # 50 steps of 10 ms, in virtual seconds
    assert 0 < summary["asgd"]["updates"] <= 50 + 25  # at most every step of the ×1 and the ×2 device in it
