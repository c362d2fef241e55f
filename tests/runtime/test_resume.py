"""The coordinator killed mid-run (SIGKILL to the whole `edgesync run`), then `edgesync run --resume`:
finished algorithms are skipped, the one in progress goes on from its checkpoint, and metrics.jsonl
keeps every line written before the crash with no duplicates after it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.bookkeeping import checkpoint

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
UPDATES = 120

# CPU: mini-batches of 8 (a quarter of the default's compute per step), each client's step paced as an emulated
# device of 50 ms (emulation fixed): at most 20 ASGD updates a second per client, 20 SSGD rounds a second, so
# the kills below land where they should (between checkpoints, before the end) with time to spare.
SCENARIO = {
    "name": "resume", "seed": 3, "runtime": "live",
    "dataset": {"name": "fashion_mnist", "train_size": 1000},
    "clients": 2,
    "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 8}, {"name": "ssgd", "lr": 0.1, "batch_size": 8}],
    "stop": {"time_budget_s": 120, "max_updates": UPDATES, "target_acc": 0.5},
    "eval": {"every_s": 0.5, "test_size": 200},
    "checkpoint": {"every_updates": 20},
    "emulation": {"mode": "fixed", "base_step_ms": 50},
}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgesync.cli", *args]


def _wait_for_checkpoint(run_dir: Path, key: str, updates: int, proc: subprocess.Popen, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        try:
            found = checkpoint.load(run_dir)
        except checkpoint.CheckpointError:
            found = None  # being replaced: read again
        if found and found.current and found.current["key"] == key and found.current["updates"] >= updates:
            return found
        time.sleep(0.1)
    pytest.fail(f"no checkpoint of {key} at ≥ {updates} updates within {timeout_s:.0f} s")


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_checkpoint_without_losing_or_repeating_lines(tmp_path):
    scenario, run_dir = tmp_path / "resume.yaml", tmp_path / "run"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    proc = subprocess.Popen(_cli("run", str(scenario), "--out", str(run_dir), "-q"), cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        saved = _wait_for_checkpoint(run_dir, "ssgd", 40, proc, timeout_s=150)
        time.sleep(0.5)  # a few more lines after the checkpoint: they must survive the resume
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the coordinator and its clients, as a power cut would
        proc.wait()
    assert saved.done == ["asgd"]
    before = (run_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    if before and not before[-1].endswith("\n"):
        before = before[:-1]  # a line cut by the kill is the only thing that may go
    crashed_at = max(r["time_s"] for r in map(json.loads, before) if r["algorithm"] == "ssgd")

    result = subprocess.run(_cli("run", "--resume", str(run_dir), "-q"), cwd=REPO, env=ENV,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]

    after = (run_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    assert after[:len(before)] == before  # every line written before the crash is kept
    assert len(set(after)) == len(after)  # and none is written twice
    rows = [json.loads(line) for line in after]
    asgd = [r for r in rows if r["algorithm"] == "asgd"]
    assert len(asgd) == sum(json.loads(line)["algorithm"] == "asgd" for line in before)  # finished: skipped
    resumed = [r for r in rows[len(before):] if r["algorithm"] == "ssgd"]
    assert resumed, "the resumed algorithm recorded nothing"
    assert resumed[0]["time_s"] > crashed_at  # its clock goes on from the crash
    assert all(a["time_s"] < b["time_s"] for a, b in zip(resumed, resumed[1:]))
    assert resumed[0]["updates"] >= saved.current["updates"]  # from the checkpoint, not from zero
    assert resumed[-1]["updates"] == UPDATES
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary) == {"asgd", "ssgd"} and summary["ssgd"]["updates"] == UPDATES
    assert checkpoint.load(run_dir).done == ["asgd", "ssgd"]


@pytest.mark.slow
def test_a_crash_before_an_algorithms_first_checkpoint_resumes_without_repeating_its_rows(tmp_path):
    """Killed after SSGD's first evaluations but before any periodic checkpoint of it (every 10,000 updates):
    the resumed SSGD must not start a second series at update 0 and time 0 beside the first."""
    scenario, run_dir = tmp_path / "resume.yaml", tmp_path / "run"
    scenario.write_text(yaml.safe_dump({**SCENARIO, "checkpoint": {"every_updates": 10_000},
                                        "stop": {**SCENARIO["stop"], "max_updates": 60}}))
    proc = subprocess.Popen(_cli("run", str(scenario), "--out", str(run_dir), "-q"), cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while not any(r["algorithm"] == "ssgd" and r["time_s"] > 0 for r in read_jsonl(run_dir / "metrics.jsonl")):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "SSGD never evaluated"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    result = subprocess.run(_cli("run", "--resume", str(run_dir), "-q"), cwd=REPO, env=ENV,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    for key in ("asgd", "ssgd"):
        rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["algorithm"] == key]
        times = [r["time_s"] for r in rows]
        assert all(a < b for a, b in zip(times, times[1:])), (key, times)  # unique, and the clock never goes back
        assert rows[-1]["updates"] == 60
        updates = [r["time_s"] for r in read_jsonl(run_dir / "updates.jsonl") if r["algorithm"] == key]
        assert updates == sorted(updates), key


def test_resume_refuses_a_folder_without_a_checkpoint_and_a_foreign_one(tmp_path):
    """The refusals come before any client starts: the commands run in this process (typer's CliRunner),
    not as subprocesses that would each import torch again."""
    from typer.testing import CliRunner

    from edgesync.cli import app

    def edgesync(*args: str):
        result = CliRunner().invoke(app, list(args), terminal_width=400)
        assert result.exit_code == 2 or result.exception is None, result.exception  # a refusal, no crash
        return result

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    result = edgesync("run", "--resume", str(run_dir))
    assert result.exit_code == 2 and "no checkpoint to resume from" in result.stderr
    checkpoint.save(run_dir, checkpoint.Checkpoint(scenario="0123456789abcdef", done=["asgd"]))
    result = edgesync("run", "--resume", str(run_dir))
    assert result.exit_code == 2 and "written by another scenario" in result.stderr
    sim = edgesync("run", "--resume", str(run_dir), "--set", "runtime=sim")
    assert sim.exit_code == 2 and "not both" not in sim.stderr and "--resume replays" in sim.stderr


@pytest.mark.slow
def test_a_coordinator_killed_ten_seconds_in_resumes_from_a_checkpoint_by_time(tmp_path):
    """The default every_updates (200) is far off 10 s into SSGD with a ×10 client; the checkpoints by time
    (every_s) and at the algorithm's start are what `edgesync run --resume` goes on from."""
    scenario, run_dir = tmp_path / "resume.yaml", tmp_path / "run"
    scenario.write_text(yaml.safe_dump({**SCENARIO, "clients": ["x1", "x10"], "algorithms": SCENARIO["algorithms"][1:],
                                        "stop": {"time_budget_s": 18, "target_acc": 0.99},
                                        "checkpoint": {"every_s": 2}}))
    proc = subprocess.Popen(_cli("run", str(scenario), "--out", str(run_dir), "-q"), cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        saved = None
        while saved is None or saved.current is None or saved.current["elapsed_s"] < 8:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, f"no checkpoint by time 8 s into SSGD: {saved}"
            time.sleep(0.1)
            try:
                saved = checkpoint.load(run_dir)
            except checkpoint.CheckpointError:
                saved = None  # being replaced: read again
        time.sleep(1.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert saved.current["key"] == "ssgd" and 0 < saved.current["updates"] < 200  # by time, not by updates
    before = read_jsonl(run_dir / "metrics.jsonl")
    assert max(r["time_s"] for r in before) < 18

    result = subprocess.run(_cli("run", "--resume", str(run_dir), "-q"), cwd=REPO, env=ENV,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_jsonl(run_dir / "metrics.jsonl")
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(set(lines)) == len(lines)  # unique
    times = [r["time_s"] for r in rows]
    assert all(a < b for a, b in zip(times, times[1:])), times  # and the clock never goes back
    resumed = rows[len(before):]
    assert resumed and resumed[0]["updates"] >= saved.current["updates"]  # from the checkpoint, not from zero
    assert checkpoint.load(run_dir).done == ["ssgd"] and (run_dir / "summary.json").exists()


def test_checkpoints_are_due_by_updates_or_by_time_whichever_comes_first(tmp_path):
    resolved = {"name": "x"}
    by_both = checkpoint.Checkpointer(tmp_path, resolved, every_updates=200, fresh=True, every_s=30)
    assert not by_both.due(10, 29.9) and by_both.due(10, 30.0) and by_both.due(200, 1.0)
    by_both.save_progress("ssgd", {}, elapsed_s=30.0, updates=10)
    assert not by_both.due(11, 59.0) and by_both.due(11, 60.0) and by_both.due(210, 31.0)
    assert not by_both.due(11)  # no clock given: by updates only
    by_time = checkpoint.Checkpointer(tmp_path, resolved, every_updates=0, fresh=True, every_s=5)
    assert not by_time.due(10_000, 4.0) and by_time.due(0, 5.0)
    by_time.save_progress("ssgd", {}, elapsed_s=0.0, updates=0)  # the start checkpoint is written
    assert checkpoint.load(tmp_path).current["key"] == "ssgd"
    off = checkpoint.Checkpointer(tmp_path / "off", resolved, every_updates=0, fresh=True, every_s=0)
    assert not off.due(10**6, 10**6)
    (tmp_path / "off").mkdir()
    off.save_progress("ssgd", {}, elapsed_s=0.0, updates=0)
    assert not (tmp_path / "off" / checkpoint.CHECKPOINT_FILE).exists()


def test_default_run_folder_names_are_unique_and_a_named_folder_that_holds_a_run_is_claimed_only_as_told(
        tmp_path, monkeypatch):
    from datetime import datetime as real_datetime

    from edgesync.runtime import runs
    from edgesync.config import load_scenario

    class Frozen(real_datetime):
        @classmethod
        def now(cls, tz=None):
            return real_datetime(2026, 1, 2, 3, 4, 5)

    monkeypatch.setattr(runs, "datetime", Frozen)
    sc = load_scenario({**SCENARIO, "output": {"dir": str(tmp_path / "runs")}})
    first, second = runs.run_folder(sc), runs.run_folder(sc)  # two runs started in the same second
    assert first.name == "resume-20260102-030405" and second.name == "resume-20260102-030405-2"
    assert first.is_dir() and second.is_dir()

    run_dir = tmp_path / "named"
    run_dir.mkdir()
    assert runs.claim_run_folder(run_dir) is None  # an empty folder is used as it is
    (run_dir / "metrics.jsonl").write_text("{}\n")
    with pytest.raises(runs.RunFolderExists, match="resume=true.*overwrite=true"):
        runs.claim_run_folder(run_dir, options=("resume=true", "overwrite=true"))
    assert runs.claim_run_folder(run_dir, resume=True) is None and (run_dir / "metrics.jsonl").exists()
    moved = runs.claim_run_folder(run_dir, overwrite=True)
    assert moved.name == "named.old-20260102-030405" and (moved / "metrics.jsonl").read_text() == "{}\n"
    assert run_dir.is_dir() and not any(run_dir.iterdir())
    (run_dir / "metrics.jsonl").write_text("{}\n")
    assert runs.claim_run_folder(run_dir, overwrite=True).name == "named.old-20260102-030405-2"


def test_a_server_state_keeps_its_own_types_through_a_checkpoint(tmp_path):
    """What a server half saves is what it gets back: a dataclass inside its state (ESync's per-client records)
    stays one; it came back as a dict once, and a resumed ESync failed on its first query."""
    from edgesync.algorithms.esync import Record

    records = {0: Record(k=2, c=0.5, round=3)}
    checkpoint.save(tmp_path, checkpoint.Checkpoint("digest", current={"server": {"records": records}}))
    assert checkpoint.load(tmp_path).current["server"]["records"] == records
