"""RunRecorder and read_jsonl: what lands in the run folder, and what survives a crash."""

import json
import math
import os

import numpy as np
import pytest
import yaml

from edgesync.metrics.recorder import RunRecorder, read_jsonl


def _row(label="ssgd", time_s=1.5, **extra):
    return {"algorithm": label, "time_s": time_s, "updates": 3, "samples": 96, "test_acc": 0.5,
            "test_loss": 1.2, "bytes_up": 10, "bytes_down": 20, **extra}


def test_recorder_writes_every_file(tmp_path):
    run_dir = tmp_path / "runs" / "one"
    scenario = {"name": "one", "seed": 7, "stop": {"target_acc": 0.85}, "clients": [{"profile": "x1"}]}

    with RunRecorder(run_dir) as rec:
        rec.write_scenario(scenario)
        rec.log_eval(_row(wall_clock=123.0, staleness_mean=np.float32(0.25)))
        rec.log_eval(_row(time_s=np.float64(2.5), updates=np.int64(4)))
        rec.log_client({"algorithm": "ssgd", "client": np.int64(0), "profile": "x1", "compute_s": 1.0})
        rec.write_summary({"ssgd": {"final_acc": np.float64(0.5), "time_to_target_s": None}})

    assert (run_dir / "plots").is_dir()
    assert yaml.safe_load((run_dir / "scenario.yaml").read_text()) == scenario
    first, second = read_jsonl(run_dir / "metrics.jsonl")
    assert first == _row(wall_clock=123.0, staleness_mean=0.25)      # extra keys kept, numpy converted
    assert second["time_s"] == 2.5 and second["updates"] == 4
    assert isinstance(second["wall_clock"], float)                     # added when the caller gave none
    assert read_jsonl(run_dir / "clients.jsonl") == [
        {"algorithm": "ssgd", "client": 0, "profile": "x1", "compute_s": 1.0}]
    assert json.loads((run_dir / "summary.json").read_text()) == {
        "ssgd": {"final_acc": 0.5, "time_to_target_s": None}}
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "clients.jsonl", "metrics.jsonl", "plots", "scenario.yaml", "summary.json"]   # no tmp file left


def test_every_logged_line_is_fsynced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))

    with RunRecorder(tmp_path) as rec:
        rec.log_eval(_row())
        rec.log_client({"algorithm": "ssgd", "client": 0})

    assert len(synced) == 2


def test_floats_are_written_as_they_are(tmp_path):
    with RunRecorder(tmp_path) as rec:
        rec.log_eval(_row(test_acc=0.1 + 0.2, test_loss=float("nan")))

    (row,) = read_jsonl(tmp_path / "metrics.jsonl")
    assert row["test_acc"] == 0.1 + 0.2
    assert math.isnan(row["test_loss"])


def test_rows_without_a_label_and_writes_after_close_are_refused(tmp_path):
    rec = RunRecorder(tmp_path)
    with pytest.raises(ValueError, match="algorithm"):
        rec.log_eval({"time_s": 1.0})
    with pytest.raises(ValueError, match="client"):
        rec.log_client({"algorithm": "ssgd"})
    rec.close()
    rec.close()                                                        # idempotent
    with pytest.raises(ValueError, match="closed"):
        rec.log_eval(_row())


def test_read_jsonl_skips_a_truncated_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    good = [_row(time_s=1.0), _row(time_s=2.0)]
    path.write_text("".join(json.dumps(r) + "\n" for r in good) + '{"algorithm": "ssgd", "time_s": 3.')

    with pytest.warns(RuntimeWarning, match="truncated last line"):
        rows = read_jsonl(path)

    assert rows == good


def test_read_jsonl_of_a_missing_file_is_empty(tmp_path):
    assert read_jsonl(tmp_path / "nope.jsonl") == []


def test_resuming_after_a_crash_mid_line_loses_only_that_line(tmp_path):
    # Prepare: a first attempt died while writing its second row
    (tmp_path / "metrics.jsonl").write_text(json.dumps(_row(time_s=1.0)) + "\n" + '{"algorithm": "ss')
    # Execute: the resumed run appends to the same folder
    with RunRecorder(tmp_path) as rec:
        rec.log_eval(_row(time_s=5.0))
    # Assert
    with pytest.warns(RuntimeWarning, match="metrics.jsonl:2"):
        rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["time_s"] for r in rows] == [1.0, 5.0]
