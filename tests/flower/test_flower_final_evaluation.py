"""One final evaluation per entry under EdgeSync's ServerApp (issue 32), on in-process SuperNodes
(fake_grid.py): an entry ended by its time budget has each evaluation in metrics.jsonl once, and a ServerApp
that fails after an entry's final row goes on with `resume=true` without evaluating that entry again."""
from __future__ import annotations

import pytest

from edgesync.runtime.bookkeeping import checkpoint

from flower_scenario import small_scenario
from test_flower_adapter import run_on, served_until_b_fails
from tests.runtime.evaluation_rows import assert_one_row_per_evaluation, rows_by_entry

BUDGET_S, EVERY_S = 2.0, 0.5  # an evaluation is due the moment an entry stops

# Each evaluation due every 0.5 s of a 2 s budget is counted: on a busy host the first update can come after
# 1 s and the evaluations due before it are one row (seen in the parallel part of the suite), so alone.
pytestmark = pytest.mark.timing


def test_an_entry_ended_by_its_time_budget_writes_its_final_evaluation_once(fake_grid, tmp_path):
    scenario = small_scenario(clients=["x1", "x1"],
                              algorithms=[{"name": "asgd", "lr": 0.05},
                                          {"name": "local_sgd", "label": "fedavg", "lr": 0.05, "local_steps": 2}],
                              stop={"time_budget_s": BUDGET_S, "target_acc": None},
                              eval={"every_s": EVERY_S, "test_size": 200})
    run_on(fake_grid([{"partition-id": 0}, {"partition-id": 1}]), scenario, tmp_path / "run")
    entries = rows_by_entry(tmp_path / "run")
    assert set(entries) == {"asgd", "fedavg"}
    for key, rows in entries.items():
        assert_one_row_per_evaluation(key, rows, budget_s=BUDGET_S, every_s=EVERY_S)


def test_a_serverapp_failing_after_an_entrys_final_row_resumes_without_a_second(fake_grid, tmp_path, monkeypatch):
    """It fails in the federated evaluation after `b`'s final row (the hook runs before END); resumed,
    `b` is only ended: its clients' rows, no evaluation."""
    scenario = small_scenario(clients=["x1", "x1"],
                              algorithms=[{"name": "asgd", "lr": 0.05, "label": "a"},
                                          {"name": "asgd", "lr": 0.05, "label": "b"}],
                              stop={"time_budget_s": BUDGET_S, "target_acc": None},
                              eval={"every_s": EVERY_S, "test_size": 200})
    out, resume = served_until_b_fails(fake_grid, tmp_path, monkeypatch, scenario)
    before, saved = (out / "metrics.jsonl").read_text(), checkpoint.load(out)

    resume()
    assert (out / "metrics.jsonl").read_text() == before  # nothing evaluated again
    for key, rows in rows_by_entry(out).items():
        assert_one_row_per_evaluation(key, rows, budget_s=BUDGET_S, every_s=EVERY_S)
    assert saved.current["final_row"] == rows_by_entry(out)["b"][-1]  # the checkpoint knew it was written
    assert checkpoint.load(out).done == ["a", "b"]
    assert (out / "summary.json").exists()
