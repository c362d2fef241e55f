"""TensorBoard output from real runs: the event files say what metrics.jsonl, updates.jsonl and clients.jsonl
say, one TensorBoard run per entry label, in the simulator and (through `edgesync run --tensorboard`) live."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from edgesync.metrics.recorder import read_jsonl
from edgesync.metrics.summary import compute_ratio
from edgesync.metrics.tensorboard_sink import run_name
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

REPO = Path(__file__).resolve().parents[2]


def scalars(folder: Path) -> dict[str, list[tuple[int, float, float]]]:
    """tag → [(step, wall_time, value)] of one TensorBoard run folder."""
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    return {tag: [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def f32(value: float) -> float:
    return float(np.float32(value))


def assert_mirrors_the_run_folder(run_dir: Path, labels: list[str]) -> None:
    """Each label's accuracy, loss and bytes (step, time, value) equal its metrics.jsonl rows, its lag its
    updates.jsonl rows, its compute ratios its clients.jsonl rows; no other TensorBoard run."""
    board = run_dir / "tensorboard"
    assert sorted(p.name for p in board.iterdir()) == sorted(run_name(label) for label in labels)
    for label in labels:
        seen = scalars(board / run_name(label))
        evals = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["algorithm"] == label]
        assert len(evals) >= 2, label
        for key, tag in (("test_acc", "accuracy/test"), ("test_loss", "loss/test"), ("bytes_up", "bytes/up")):
            assert seen[tag] == [(r["updates"], r["time_s"], f32(r[key])) for r in evals], (label, tag)
        assert seen["bytes/total"][-1][2] == f32(evals[-1]["bytes_up"] + evals[-1]["bytes_down"])
        lags = [r for r in read_jsonl(run_dir / "updates.jsonl") if r["algorithm"] == label and "lag" in r]
        assert seen.get("staleness/lag", []) == [(r["update"] + 1, r["time_s"], float(r["lag"])) for r in lags]
        clients = [r for r in read_jsonl(run_dir / "clients.jsonl") if r["algorithm"] == label]
        assert clients
        last_step = max(s for tag, points in seen.items() if not tag.startswith("compute_ratio/") for s, _, _ in points)
        for row in clients:  # at the entry's end: its last step
            ((step, _, ratio),) = seen[f"compute_ratio/client_{row['client']}"]
            assert ratio == f32(compute_ratio(row)) and step == last_step


@pytest.mark.slow
def test_a_simulated_sweep_over_seeds_writes_one_run_per_label(tmp_path):
    data = {
        "name": "board", "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 1000},
        "clients": ["x1", "x3"],
        "algorithms": [{"name": "ssgd", "lr": 0.1, "label": "ssgd lr/10"}, {"name": "asgd", "lr": 0.05}],
        "stop": {"time_budget_s": 2.0, "target_acc": None},
        "eval": {"every_s": 0.5, "test_size": 200},
        "sim": {"base_step_s": 0.1, "server_time": "zero"},
        "seeds": [1, 2],
        "output": {"tensorboard": True},
    }
    out = tmp_path / "run"
    run_scenario(load_scenario(data), out, progress=False)
    labels = ["ssgd lr/10@seed=1", "asgd@seed=1", "ssgd lr/10@seed=2", "asgd@seed=2"]
    assert_mirrors_the_run_folder(out, labels)
    assert (out / "tensorboard" / "asgd@seed=2").is_dir()  # a plain label is its own folder name
    assert run_name("ssgd lr/10@seed=1").startswith("ssgd_lr_10@seed=1~")  # a "/" would nest folders
    asgd = scalars(out / "tensorboard" / "asgd@seed=1")
    assert len(asgd["staleness/lag"]) > 10 and max(v for _, _, v in asgd["staleness/lag"]) > 0  # the x3 client lags
    assert "staleness/lag" not in scalars(out / "tensorboard" / run_name("ssgd lr/10@seed=1"))  # a barrier


def test_a_run_without_the_key_writes_no_event_files(tmp_path):
    data = {
        "name": "plain", "seed": 1, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 500},
        "clients": ["x1"], "algorithms": [{"name": "ssgd", "lr": 0.1}],
        "stop": {"time_budget_s": 0.5, "target_acc": None},
        "eval": {"every_s": 0.5, "test_size": 100},
        "sim": {"base_step_s": 0.1, "server_time": "zero"},
    }
    out = tmp_path / "run"
    run_scenario(load_scenario(data), out, progress=False)
    assert (out / "metrics.jsonl").exists() and not (out / "tensorboard").exists()


# Live clients as emulated devices of a fixed 100 ms step on mini-batches of 8: they mostly sleep, and what
# is checked (the event files mirror the rows) does not depend on how much they learn.
PACED = ["--set", "emulation.mode=fixed", "--set", "emulation.base_step_ms=100",
         "--set", "algorithms.0.batch_size=8", "--set", "algorithms.1.batch_size=8"]


@pytest.mark.slow
def test_edgesync_run_tensorboard_on_a_live_run(tmp_path):
    """The CLI flag sets output.tensorboard, says how to view the files, and the live coordinator writes
    the same mirror of its rows as the simulator."""
    out = tmp_path / "run"
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    result = subprocess.run(
        [sys.executable, "-m", "edgesync.cli", "run", "scenarios/quickstart.yaml", "--out", str(out), "-q",
         "--tensorboard", "--set", "clients=[x1, x2]", "--set", "dataset.train_size=1000",
         "--set", "stop.time_budget_s=4", "--set", "stop.stop_at_target=false", "--set", "eval.test_size=200",
         "--set", "eval.every_s=1", *PACED],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"tensorboard --logdir {out / 'tensorboard'}" in result.stderr
    assert f"tensorboard --logdir {out / 'tensorboard'}" in (out / "logs" / "coordinator.log").read_text()
    assert yaml.safe_load((out / "scenario.yaml").read_text())["output"]["tensorboard"] is True
    assert_mirrors_the_run_folder(out, ["ssgd", "asgd"])


@pytest.mark.slow
@pytest.mark.timing  # what it checks happens at wall-clock moments (a kill, a run's budget)
def test_a_resumed_live_run_adds_to_the_event_files_of_the_killed_one(tmp_path):
    """SIGKILL during SSGD (the second entry), then `edgesync run --resume RUN_DIR --tensorboard`: ASGD's run
    keeps the first attempt's points, SSGD's gets a second event file beside the first, and both still say
    exactly what metrics.jsonl says (every line of both attempts)."""
    scenario, out = tmp_path / "resume.yaml", tmp_path / "run"
    scenario.write_text(yaml.safe_dump({
        "name": "resume", "seed": 3, "runtime": "live",
        "dataset": {"name": "fashion_mnist", "train_size": 2000}, "clients": 2,
        "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 8}, {"name": "ssgd", "lr": 0.1, "batch_size": 8}],
        "emulation": {"mode": "fixed", "base_step_ms": 100},  # as PACED
        "stop": {"time_budget_s": 6, "target_acc": None},
        "eval": {"every_s": 2, "test_size": 200}, "output": {"tensorboard": True}}))
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    cli = [sys.executable, "-m", "edgesync.cli", "run"]
    proc = subprocess.Popen([*cli, str(scenario), "--out", str(out), "-q"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # Killed just after SSGD's evaluation at 2 s reached TensorBoard's file, 2 s before its next row:
        # metrics.jsonl (written first) and the event file then hold the same rows.
        deadline = time.monotonic() + 150
        board = out / "tensorboard" / "ssgd"
        while not (board.exists() and any(t > 0 for _, t, _ in scalars(board).get("accuracy/test", []))):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "SSGD never evaluated"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    first = {p.name: sorted(p.iterdir()) for p in (out / "tensorboard").iterdir()}
    assert sorted(first) == ["asgd", "ssgd"] and all(len(files) == 1 for files in first.values())

    result = subprocess.run([*cli, "--resume", str(out), "--tensorboard", "-q"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted((out / "tensorboard" / "asgd").iterdir()) == first["asgd"]  # finished before: untouched
    ssgd_files = sorted((out / "tensorboard" / "ssgd").iterdir())
    assert len(ssgd_files) == 2 and first["ssgd"][0] in ssgd_files
    assert_mirrors_the_run_folder(out, ["asgd", "ssgd"])
