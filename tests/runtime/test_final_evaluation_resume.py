"""One final evaluation per entry, resumed (issue 32): a coordinator killed after it wrote an entry's final
row — while it waits for its clients' statistics — and started again with `--resume` ends the entry
without evaluating it a second time (before: a second final row, of the model in the last periodic
checkpoint, here θ₀)."""
from __future__ import annotations

import psutil
import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.bookkeeping import checkpoint

from evaluation_rows import assert_one_row_per_evaluation, rows_by_entry
from test_faults import lab_for, scenario  # noqa: F401 - lab_for is the fixture: processes on loopback

pytestmark = pytest.mark.slow

BUDGET_S, EVERY_S = 3.0, 0.5


@pytest.mark.timing  # what it checks happens at wall-clock moments (a kill, a run's budget)
def test_a_coordinator_killed_after_an_entrys_final_row_resumes_without_a_second(lab_for):  # noqa: F811
    # the paused client is not lost before the end (client_timeout_s): END waits for its statistics
    lab = lab_for(scenario({"name": "asgd", "lr": 0.05}, ["x1", "x1"], updates=100_000, budget_s=BUDGET_S,
                           faults={"client_timeout_s": 60}))
    lab.start_coordinator("--scenario", str(lab.scenario), "--out", str(lab.run_dir))
    lab.start_client(0)
    lab.start_client(1)

    def final_row_saved() -> bool:
        try:
            return (checkpoint.load(lab.run_dir).current or {}).get("final_row") is not None
        except checkpoint.CheckpointError:  # none saved yet
            return False

    def rows() -> list[dict]:
        return rows_by_entry(lab.run_dir).get("asgd", []) if (lab.run_dir / "metrics.jsonl").exists() else []

    lab.wait_for(lambda: any(r["time_s"] > 0 for r in rows()), 120, "ASGD to train")
    paused = psutil.Process(lab.clients[1].pid)
    paused.suspend()  # ASGD goes on with client 0
    lab.wait_for(lambda: any(r["time_s"] >= BUDGET_S for r in rows()), 60, "the final evaluation")
    # The checkpoint that knows the final row is saved just after the row (a kill in between, on a busy
    # host, re-evaluates on resume: a narrower window, noted in issue 33); this test's moment is the wait
    # for the statistics that follows both.
    lab.wait_for(final_row_saved, 60, "the checkpoint of the final row")
    lab.coordinator.kill()  # waiting for the paused client's STATS: the entry is not finished
    lab.coordinator.wait()
    lab.coordinator = None
    before = (lab.run_dir / "metrics.jsonl").read_text()
    saved = checkpoint.load(lab.run_dir)
    assert saved.done == [] and saved.current["key"] == "asgd"
    paused.resume()

    lab.start_coordinator("--resume", str(lab.run_dir))
    lab.finish()
    assert (lab.run_dir / "metrics.jsonl").read_text() == before  # nothing evaluated again
    entry = rows()
    assert_one_row_per_evaluation("asgd", entry, budget_s=BUDGET_S, every_s=EVERY_S)
    assert saved.current["final_row"] == entry[-1]  # the checkpoint knew the final row was written
    assert checkpoint.load(lab.run_dir).done == ["asgd"]
    assert sorted(r["client"] for r in read_jsonl(lab.run_dir / "clients.jsonl")) == [0, 1]
    assert all(lab.clients[r].wait(30) == 0 for r in (0, 1)), lab.output()
