"""SHAT's headline (shat.txt Fig. 5, HE2): with one ×100 straggler among 8 clients SHAT's final accuracy
is no worse than ASP's. Simulator, scenarios/shat_hetero.yaml at reproduce's ×100 setting, every algorithm
and simulator setting at its default.

Size: 400 updates per entry instead of 2,000, seeds 0 and 1, the figure their mean (as reproduce
takes it). This early, a final accuracy still moves by ±5 pt from one evaluation to the next, so
SHAT − ASP ranged from −3 to +12.5 pt over seeds 0-2, and "no worse" is read with a 5 pt allowance.
What the claim rests on, SHAT's mixing of its clients' models with the master's, already decides the
order: without it (ENSEMBLE, α = 0) the master's model is 9.5-16.5 pt below ASP's at 400 updates.
"""
from __future__ import annotations

import pytest

from claim_runs import assert_direction, claim_result, entries, run_experiment

pytestmark = [pytest.mark.slow, pytest.mark.timing]  # calibrates on a quiet machine: one core, at priority

SETTING = ["sweep={clients.7.profile: [x100]}", entries("shat_hetero", "asp", "shat")]
SIZE = ["seeds=[0, 1]", "stop.max_updates=400"]
ALLOWANCE_PT = 5.0


def test_shat_is_no_worse_than_asp_with_one_x100_straggler(tmp_path):
    run_experiment(tmp_path, "shat_hetero", [*SETTING, *SIZE])
    claim = claim_result(tmp_path, "SHAT final acc − ASP final acc, one ×100 straggler (HE2)")
    assert_direction(claim, bound=-ALLOWANCE_PT)
