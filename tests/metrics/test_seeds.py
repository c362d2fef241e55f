"""The seeds axis's statistics on known inputs: t quantiles, intervals, grouping and paired speedups."""
from __future__ import annotations

import math

import pytest

from edgesync.metrics.seeds import (aggregate, by_seed, interval, per_seed_speedups, split_seed, t_975,
                                    with_seed_aggregates)


def test_t_quantiles_match_the_published_table():
    # a t table's 0.975 column, to its three decimals; beyond df = 30 it approaches the normal's 1.960
    for df, table in ((1, 12.706), (2, 4.303), (4, 2.776), (30, 2.042), (45, 2.014), (1000, 1.962)):
        assert t_975(df) == pytest.approx(table, abs=5e-4), df
    with pytest.raises(ValueError):
        t_975(0)


def test_interval_of_known_values():
    # 1, 2, 3: mean 2, sd 1, half-width t(2) / √3 = 4.302653 / √3 = 2.484138…
    iv = interval([1.0, 2.0, 3.0])
    assert iv.n == 3 and iv.mean == 2.0 and iv.sd == 1.0
    half = 4.302653 / math.sqrt(3)
    assert iv.low == pytest.approx(2 - half) and iv.high == pytest.approx(2 + half)
    assert iv.half_width == pytest.approx(2.484138, abs=1e-6)
    # five seeds of 0.80, 0.82, 0.81, 0.83, 0.79: mean 0.81, sd √(0.001/4) = 0.0158114, t(4) = 2.776445
    iv5 = interval([0.80, 0.82, 0.81, 0.83, 0.79])
    assert iv5.mean == pytest.approx(0.81) and iv5.sd == pytest.approx(0.0158114, abs=1e-7)
    assert iv5.half_width == pytest.approx(2.776445 * 0.0158114 / math.sqrt(5), abs=1e-6)


def test_one_value_has_no_interval_and_none_has_no_mean():
    assert interval([5.0]) == interval([5.0])
    one = interval([5.0])
    assert (one.n, one.mean, one.sd, one.low, one.high) == (1, 5.0, None, None, None)
    assert interval([]).mean is None


@pytest.mark.parametrize("label, expected", [
    ("esync@seed=2", ("esync", 2)),
    ("esync@clients=8,seed=0", ("esync@clients=8", 0)),
    ("asp@profile=x100,seed=11", ("asp@profile=x100", 11)),
    ("esync", ("esync", None)),
    ("esync@clients=8", ("esync@clients=8", None)),
    ("odd@seed=x", ("odd@seed=x", None)),
])
def test_split_seed(label, expected):
    assert split_seed(label) == expected


def _runs() -> dict:
    return {
        "ssgd@seed=0": {"algorithm": "ssgd", "final_acc": 0.80, "time_to_target_s": 40.0, "bytes_up": 100},
        "esync@seed=0": {"algorithm": "esync", "final_acc": 0.82, "time_to_target_s": 8.0, "bytes_up": 10},
        "ssgd@seed=1": {"algorithm": "ssgd", "final_acc": 0.78, "time_to_target_s": 50.0, "bytes_up": 120},
        "esync@seed=1": {"algorithm": "esync", "final_acc": 0.84, "time_to_target_s": 10.0, "bytes_up": 14},
        "ssgd@seed=2": {"algorithm": "ssgd", "final_acc": 0.79, "time_to_target_s": None, "bytes_up": 110},
        "esync@seed=2": {"algorithm": "esync", "final_acc": 0.83, "time_to_target_s": 9.0, "bytes_up": 12,
                         "diverged": False},
    }


def test_aggregates_hold_means_per_seed_values_and_intervals():
    agg = aggregate(_runs())
    assert list(agg) == ["ssgd", "esync"]
    esync = agg["esync"]
    assert esync["seeds"] == [0, 1, 2] and esync["algorithm"] == "esync"
    assert esync["final_acc"] == pytest.approx(0.83)
    stat = esync["stats"]["final_acc"]
    assert stat["per_seed"] == {"0": 0.82, "1": 0.84, "2": 0.83}
    assert stat["sd"] == pytest.approx(0.01) and stat["n"] == 3
    assert stat["ci95"] == pytest.approx([0.83 - 4.302653 * 0.01 / math.sqrt(3), 0.83 + 4.302653 * 0.01 / math.sqrt(3)])
    assert esync["stats"]["time_to_target_s"]["reached"] == "3/3" and esync["time_to_target_s"] == 9.0


def test_a_target_some_seeds_never_reached_has_no_mean():
    ssgd = aggregate(_runs())["ssgd"]
    assert ssgd["time_to_target_s"] is None  # never the mean of the two lucky seeds
    assert ssgd["stats"]["time_to_target_s"]["reached"] == "2/3"
    assert ssgd["stats"]["time_to_target_s"]["mean"] == 45.0  # kept in stats, with its n
    assert ssgd["stats"]["time_to_target_s"]["n"] == 2


def test_speedups_are_paired_by_seed_and_the_aggregate_is_their_mean():
    summary = with_seed_aggregates(_runs(), baseline="ssgd@seed=0")
    assert summary["esync@seed=0"]["speedup_vs"] == 5.0 and summary["esync@seed=1"]["speedup_vs"] == 5.0
    assert summary["esync@seed=2"]["speedup_vs"] is None  # its partner ssgd@seed=2 never reached the target
    assert summary["esync"]["speedup_vs"] == 5.0 and summary["esync"]["stats"]["speedup_vs"]["n"] == 2


def test_paired_speedups_inside_a_sweep_pair_by_combination():
    runs = {"ssgd@clients=4,seed=0": {"time_to_target_s": 30.0}, "ssgd@clients=8,seed=0": {"time_to_target_s": 20.0},
            "esync@clients=4,seed=0": {"time_to_target_s": 10.0}, "esync@clients=8,seed=0": {"time_to_target_s": 4.0}}
    per_seed_speedups(runs, "ssgd@clients=4,seed=0")
    assert runs["esync@clients=4,seed=0"]["speedup_vs"] == 3.0 and runs["esync@clients=8,seed=0"]["speedup_vs"] == 5.0


def test_by_seed_groups_runs_under_their_labels_without_seed():
    summary = with_seed_aggregates(_runs(), baseline="ssgd@seed=0")
    groups = by_seed(summary)
    assert sorted(groups) == [0, 1, 2]
    assert groups[1]["esync"]["final_acc"] == 0.84 and set(groups[1]) == {"ssgd", "esync"}
    assert by_seed({"ssgd": {"final_acc": 0.8}}) == {None: {"ssgd": {"final_acc": 0.8}}}  # no seeds: one group
