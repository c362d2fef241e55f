"""Relative fidelity figures (metrics/fidelity.py), worked out by hand from client rows."""
import logging

import pytest

from edgesync.metrics.fidelity import annotate, warn_if_off


def row(client, profile, median_step_s, median_factor, host="vm", steps=10):
    return {"client": client, "profile": profile, "host": host, "steps": steps, "median_step_s": median_step_s,
            "median_factor": median_factor}


def test_factors_are_relative_to_the_fastest_profiles_clients():
    # the ×1 clients took 20, 22 and 18 ms (median 20); the ×10 client 190 ms → ×9.5, target ×10, −5%
    rows = [row(0, "x1", 0.020, 1.0), row(1, "x1", 0.022, 1.0), row(2, "x1", 0.018, 1.0), row(3, "x10", 0.190, 10.0)]
    worst = annotate(rows)
    assert [r["target_factor"] for r in rows] == [1.0, 1.0, 1.0, 10.0]
    assert [r["achieved_factor"] for r in rows] == [1.0, 1.1, 0.9, 9.5]
    assert rows[3]["fidelity_error"] == pytest.approx(-0.05)
    assert worst == pytest.approx(0.1)  # client 1: 1.1 / 1 − 1


def test_without_a_x1_client_the_fastest_profile_is_the_reference():
    rows = [row(0, "x2", 0.040, 2.0), row(1, "x10", 0.200, 10.0)]
    annotate(rows)
    assert (rows[1]["target_factor"], rows[1]["achieved_factor"]) == (5.0, 5.0)


def test_clients_without_steps_get_no_figures_and_one_client_has_nothing_to_compare():
    rows = [row(0, "x1", 0.020, 1.0), {"client": 1, "profile": "x10", "host": "vm", "steps": 0}]
    assert annotate(rows) is None
    assert rows[1]["achieved_factor"] is None and rows[0]["achieved_factor"] == 1.0


def test_a_client_off_by_more_than_the_tolerance_is_named_with_the_likely_cause(caplog):
    rows = [row(0, "x1", 0.036, 1.0), row(1, "x1", 0.036, 1.0), row(2, "x10", 0.144, 10.0)]  # issue 18's ×4.0
    annotate(rows)
    with caplog.at_level(logging.WARNING, logger="edgesync.fidelity"):
        warnings = warn_if_off("ssgd", rows, tolerance=0.05)
    assert len(warnings) == 1
    assert "ssgd: client 2 (x10) ran ×4.00 relative to the fastest clients, target ×10.00 (-60.0%)" in warnings[0]
    assert "too many clients per core on vm (3 clients there)" in warnings[0]
    assert warnings[0] in caplog.text
    assert warn_if_off("ssgd", rows, tolerance=0.7) == []


def test_end_to_end_factors_count_the_time_between_steps():
    # ×1 clients: 100 steps of 20 ms plus 10 ms outside each (wall 3 s); the ×10 client: 15 steps of 200 ms
    # plus 10 ms each (wall 3.15 s). End to end it is (1/0.03)/(15/3.15) = 7.0× slower; the model predicts
    # (10 × 20 + 10) / (20 + 10) = 7.0 as well: communication dilutes ×10 to ×7 for an asynchronous algorithm.
    rows = [{**row(r, "x1", 0.020, 1.0, steps=100), "wall_s": 3.0, "wait_s": 1.0} for r in (0, 1)]
    rows.append({**row(2, "x10", 0.200, 10.0, steps=15), "wall_s": 3.15, "wait_s": 0.15})
    annotate(rows)
    assert rows[2]["e2e_factor"] == pytest.approx(7.0) and rows[2]["e2e_predicted"] == pytest.approx(7.0)
    assert rows[0]["e2e_factor"] == rows[0]["e2e_predicted"] == 1.0
    # a straggler that also waited longer than the others per step (its own slow link): slower than predicted
    rows[2].update(wall_s=4.5, wait_s=1.5)
    annotate(rows)
    assert rows[2]["e2e_factor"] == pytest.approx(10.0) and rows[2]["e2e_predicted"] == pytest.approx(7.0)
    # synchronous: the barrier makes every client as slow as the slowest; the model predicts ×1 for all
    annotate(rows, synchronous=True)
    assert rows[2]["e2e_predicted"] == 1.0
