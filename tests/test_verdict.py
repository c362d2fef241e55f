"""The one verdict rule (edgesync/metrics/verdict.py) on hand-computed intervals: t(0.975, 2) = 4.302653."""
from __future__ import annotations

import pytest

from edgesync.metrics.verdict import against, compare, shown

T2 = 4.302653  # Student's t, 0.975, 2 degrees of freedom: half-width = T2 · sd / √3


@pytest.mark.parametrize("values, direction, bound, word", [
    ([6.0, 6.2, 5.8], "≥", 5, "holds"),          # sd 0.2, half-width 0.497: [5.50, 6.50]
    ([4.0, 6.0, 5.0], "≥", 5, "inconclusive"),   # [2.52, 7.48]
    ([3.0, 3.2, 2.8], "≥", 5, "does not hold"),
    ([0.15, 0.16, 0.14], "≤", 0.2, "holds"),
    ([5.0, 5.0, 5.0], "≥", 5, "holds"),          # touching the bound from its side
])
def test_against_a_bound(values, direction, bound, word):
    assert against(values, direction, bound).word == word


def test_fewer_than_three_seeds_or_a_missing_value_decide_nothing_and_say_why():
    v = against([9.0, 9.5], "≥", 5)
    assert v.word == "inconclusive" and v.why == "2 seeds, at least 3 needed" and v.interval.n == 2
    v = against([9.0, 9.5, float("nan")], "≥", 5)
    assert v.word == "inconclusive" and v.why == "1 of 3 values missing or not finite"
    assert against([9.0, None, 9.2, 9.1], "≥", 5).why == "1 of 4 values missing or not finite"
    with pytest.raises(ValueError, match="direction must be ≥ or ≤"):
        against([1, 2, 3], ">", 0)


def test_no_difference_only_inside_the_stated_margin():
    # 0.98, 1.00, 1.02: mean 1, sd 0.02, half-width 0.0497 → [0.950, 1.050]: inside ±0.1, not inside ±0.04
    assert compare([0.98, 1.0, 1.02], 1.0, 0.1, "faster", "slower").word == "no difference (within ±0.1)"
    v = compare([0.98, 1.0, 1.02], 1.0, 0.04, "faster", "slower")
    assert v.word == "inconclusive" and "straddles 1 and reaches past ±0.04" in v.why
    # a straddling interval is never "no difference" just because it straddles: 0.7, 1.0, 1.3 → [0.25, 1.75]
    assert compare([0.7, 1.0, 1.3], 1.0, 0.25, "faster", "slower").word == "inconclusive"
    assert compare([0.80, 0.82, 0.81], 1.0, 0.05, "faster", "slower").word == "faster"
    assert compare([1.20, 1.22, 1.21], 1.0, 0.05, "faster", "slower").word == "slower"
    with pytest.raises(ValueError, match="margin must be > 0"):
        compare([1, 1, 1], 1.0, 0, "a", "b")


def test_a_cell_shows_the_mean_the_interval_and_the_verdict():
    half = T2 * 0.2 / 3 ** 0.5
    assert shown(against([6.0, 6.2, 5.8], "≥", 5)) == f"6.00 [{6 - half:.2f}, {6 + half:.2f}]: holds"
    assert shown(against([9.0], "≥", 5)) == "9.00: inconclusive (1 seed, at least 3 needed)"
    assert shown(against([], "≥", 5)) == "n/a: inconclusive (0 seeds, at least 3 needed)"
