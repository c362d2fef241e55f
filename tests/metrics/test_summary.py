"""summarize(): every expected value below is worked out by hand from the rows in `_run()`."""

import math

import pytest

from edgesync.metrics import summary as summary_module
from edgesync.metrics.summary import GAP_FIRST_N, compute_ratio, speedup, summarize, time_to_target


def _eval(label, time_s, acc, updates, samples, up, down, **extra):
    return {"algorithm": label, "time_s": time_s, "updates": updates, "samples": samples, "test_acc": acc,
            "test_loss": 1.0 - acc, "bytes_up": up, "bytes_down": down, "wall_clock": 1.7e9 + time_s, **extra}


def _client(label, rank, compute_s, wall_s, profile="x1", **extra):
    return {"algorithm": label, "client": rank, "profile": profile, "host": "h", "device": "cpu",
            "compute_s": compute_s, "wait_s": wall_s - compute_s, "wall_s": wall_s, "steps": 10, "samples": 640,
            "bytes_up": 0, "bytes_down": 0, **extra}


def _run():
    """Two entries, rows interleaved as a live run writes them (ssgd first)."""
    metrics = [
        _eval("ssgd", 0.0, 0.10, 0, 0, 0, 0),
        _eval("asgd-lr0.1", 0.0, 0.10, 0, 0, 0, 0),
        _eval("ssgd", 10.0, 0.60, 5, 640, 1000, 2000),
        _eval("asgd-lr0.1", 5.0, 0.90, 20, 1280, 4000, 4000),
        _eval("ssgd", 20.0, 0.85, 10, 1280, 2000, 4000),   # exactly the target: counts as reached
        _eval("asgd-lr0.1", 8.0, 0.88, 32, 2048, 6400, 6400),
        _eval("ssgd", 30.0, 0.80, 15, 1920, 3000, 6000),
    ]
    clients = [
        _client("ssgd", 0, 24.0, 30.0), _client("ssgd", 1, 6.0, 30.0, "x10"),
        _client("asgd-lr0.1", 0, 8.0, 8.0, fidelity_error=0.0),
        _client("asgd-lr0.1", 1, 2.0, 8.0, "x10", fidelity_error=-0.07),
    ]
    return metrics, clients


def test_summary_values_by_hand():
    # Prepare
    metrics, clients = _run()
    # Execute
    summary = summarize(metrics, clients, target_acc=0.85, algorithms={"asgd-lr0.1": "asgd"}, baseline="ssgd")
    # Assert
    assert list(summary) == ["ssgd", "asgd-lr0.1"]
    assert summary["ssgd"] == {
        "algorithm": "ssgd", "final_acc": 0.80, "best_acc": 0.85, "time_to_target_s": 20.0, "target_acc": 0.85,
        "updates": 15, "samples": 1920, "duration_s": 30.0, "samples_per_s": 64.0,      # 1920 / 30
        "updates_per_s": 0.5,                                                           # 15 / 30
        "bytes_up": 3000, "bytes_down": 6000, "bytes_per_s": 300.0,                     # 9000 / 30
        "compute_ratio_mean": 0.5,                                                      # (0.8 + 0.2) / 2
        # no client row carries final_acc (an entry without per-client evaluation): none of its spread
        "client_acc_mean": None, "client_acc_p10": None, "client_acc_worst": None, "client_eval": None,
        "fidelity_max_error": None,                                 # its rows have no fidelity figures
        "evals": 4, "speedup_vs": 1.0,
        "mean_lag": None, "mean_gap": None, "mean_gap_normalized": None,  # no updates.jsonl rows
        "gap_first_n": None, "mean_gap_first_n": None, "mean_gap_normalized_first_n": None,
        "coordinator_utilisation": None, "queue_delay_mean_s": None, "queue_delay_p95_s": None,  # no coordinator.jsonl
        "updates_served_per_s": None, "coordinator_saturated_share": None, "coordinator_bottleneck": None,
        "diverged": False,
    }
    asgd = summary["asgd-lr0.1"]
    assert asgd["algorithm"] == "asgd"
    assert (asgd["final_acc"], asgd["best_acc"], asgd["time_to_target_s"]) == (0.88, 0.90, 5.0)
    assert asgd["samples_per_s"] == 256.0                       # 2048 / 8
    assert asgd["bytes_per_s"] == 1600.0                        # 12800 / 8
    assert asgd["compute_ratio_mean"] == 0.625                  # (1.0 + 0.25) / 2
    assert asgd["speedup_vs"] == 4.0                            # 20 / 5
    assert asgd["fidelity_max_error"] == 0.07                   # |−0.07|


def test_target_never_reached_gives_null_time_and_speedup():
    metrics, clients = _run()

    summary = summarize(metrics, clients, target_acc=0.95, baseline="ssgd")

    for entry in summary.values():
        assert entry["time_to_target_s"] is None
        assert entry["speedup_vs"] is None
        assert entry["target_acc"] == 0.95


def test_only_one_entry_reaching_the_target_gives_null_speedup():
    metrics, clients = _run()

    summary = summarize(metrics, clients, target_acc=0.89, baseline="asgd-lr0.1")

    assert summary["ssgd"]["time_to_target_s"] is None          # best ssgd accuracy is 0.85
    assert summary["asgd-lr0.1"]["time_to_target_s"] == 5.0
    assert summary["ssgd"]["speedup_vs"] is None
    assert summary["asgd-lr0.1"]["speedup_vs"] == 1.0


def test_without_target_or_baseline():
    metrics, clients = _run()

    summary = summarize(metrics, clients, target_acc=None)

    assert summary["ssgd"]["time_to_target_s"] is None
    assert summary["ssgd"]["algorithm"] == "ssgd"               # the label is its own name by default
    assert "speedup_vs" not in summary["ssgd"]


def test_entry_that_never_evaluated_is_kept_with_nulls():
    metrics, clients = _run()
    clients.append(_client("dc_asgd", 0, 1.0, 4.0))

    summary = summarize(metrics, clients, target_acc=0.85, algorithms={"dana_zero": "dana_zero"}, baseline="ssgd")

    assert list(summary) == ["ssgd", "asgd-lr0.1", "dc_asgd", "dana_zero"]
    never = summary["dc_asgd"]
    assert never["evals"] == 0
    assert never["final_acc"] is None and never["best_acc"] is None and never["samples_per_s"] is None
    assert never["time_to_target_s"] is None and never["speedup_vs"] is None
    assert never["compute_ratio_mean"] == 0.25
    assert summary["dana_zero"]["compute_ratio_mean"] is None


def test_unknown_baseline_fails_loudly():
    metrics, clients = _run()

    with pytest.raises(ValueError, match="no_such"):
        summarize(metrics, clients, target_acc=0.85, baseline="no_such")


def test_helpers_handle_missing_and_bad_values():
    assert time_to_target([{"time_s": 1.0, "test_acc": math.nan}, {"time_s": 2.0, "test_acc": 0.9}], 0.5) == 2.0
    assert time_to_target([{"time_s": 1.0}], 0.5) is None
    assert speedup(10.0, 0.0) is None and speedup(None, 2.0) is None and speedup(10.0, 4.0) == 2.5
    assert compute_ratio({"compute_s": 3.0, "wall_s": 0.0}) is None
    assert compute_ratio({"compute_s": 3.0, "wall_s": 4.0}) == 0.75
    # a zero-length run: no rate, no error
    summary = summarize([_eval("ssgd", 0.0, 0.1, 0, 0, 0, 0)], [], target_acc=0.85)
    assert summary["ssgd"]["samples_per_s"] is None and summary["ssgd"]["bytes_per_s"] is None


def test_staleness_means_come_from_the_update_log():
    metrics = [{"algorithm": "asgd", "time_s": 0.0, "test_acc": 0.1, "updates": 0, "samples": 0}]
    updates = [
        {"algorithm": "asgd", "lag": 0, "gap": 0.0, "gap_normalized": 0.0},
        {"algorithm": "asgd", "lag": 3, "gap": 0.3, "gap_normalized": None},  # a zero gradient
        {"algorithm": "asgd", "lag": 6, "gap": 0.6, "gap_normalized": 2.0},
        {"algorithm": "other", "lag": 100, "gap": 9.0, "gap_normalized": 9.0},
    ]
    entry = summarize(metrics, [], None, updates=updates)["asgd"]
    assert entry["mean_lag"] == 3.0                  # (0 + 3 + 6) / 3
    assert entry["mean_gap"] == pytest.approx(0.3)   # (0 + 0.3 + 0.6) / 3
    assert entry["mean_gap_normalized"] == 1.0       # (0 + 2) / 2: the None is not a value


def test_a_diverging_runs_non_finite_gaps_are_left_out_of_the_mean():
    metrics = [{"algorithm": "nag_asgd", "time_s": 0.0, "test_acc": 0.1, "updates": 0, "samples": 0}]
    updates = [{"algorithm": "nag_asgd", "lag": 1, "gap": g, "gap_normalized": g}
               for g in (0.1, 0.3, float("inf"), float("nan"))]
    entry = summarize(metrics, [], None, updates=updates)["nag_asgd"]
    assert entry["mean_gap"] == pytest.approx(0.2) and entry["mean_gap_normalized"] == pytest.approx(0.2)


def test_first_n_means_are_over_each_labels_first_rows_with_a_gap(monkeypatch):
    # Prepare: N = 3; "dgs" has 5 rows (a synchronous-style row without a gap first), "asgd" only 2
    monkeypatch.setattr(summary_module, "GAP_FIRST_N", 3)
    metrics = [{"algorithm": a, "time_s": 0.0, "test_acc": 0.1, "updates": 0, "samples": 0} for a in ("dgs", "asgd")]
    updates = [
        {"algorithm": "dgs", "n_i": 4},                                      # no gap: not an applied async update
        {"algorithm": "dgs", "lag": 0, "gap": 0.1, "gap_normalized": 1.0},
        {"algorithm": "asgd", "lag": 1, "gap": 0.5, "gap_normalized": 5.0},
        {"algorithm": "dgs", "lag": 2, "gap": 0.2, "gap_normalized": None},  # a zero raw gradient
        {"algorithm": "dgs", "lag": 2, "gap": float("inf"), "gap_normalized": float("inf")},
        {"algorithm": "dgs", "lag": 4, "gap": 0.9, "gap_normalized": 9.0},   # the 4th: after the first 3
        {"algorithm": "asgd", "lag": 3, "gap": 0.7, "gap_normalized": 3.0},
    ]
    # Execute
    summary = summarize(metrics, [], None, updates=updates)
    # Assert
    dgs, asgd = summary["dgs"], summary["asgd"]
    assert dgs["gap_first_n"] == 3                                   # rows 0.1, 0.2, inf
    assert dgs["mean_gap_first_n"] == pytest.approx(0.15)            # (0.1 + 0.2) / 2: inf is left out
    assert dgs["mean_gap_normalized_first_n"] == 1.0                 # only 1.0 is a finite value
    assert dgs["mean_gap"] == pytest.approx(0.4)                     # (0.1 + 0.2 + 0.9) / 3 over the run
    assert dgs["mean_gap_normalized"] == 5.0                         # (1 + 9) / 2
    assert asgd["gap_first_n"] == 2                                  # fewer applied than N: the N used
    assert asgd["mean_gap_first_n"] == pytest.approx(0.6)            # (0.5 + 0.7) / 2
    assert asgd["mean_gap_normalized_first_n"] == 4.0                # (5 + 3) / 2


def test_first_n_is_the_module_constant_when_the_run_applied_more():
    metrics = [{"algorithm": "asgd", "time_s": 0.0, "test_acc": 0.1, "updates": 0, "samples": 0}]
    # gap i/1000 for update i: the first N average (N − 1)/2000; the whole run (2N updates) (2N − 1)/2000
    updates = [{"algorithm": "asgd", "lag": 0, "gap": i / 1000, "gap_normalized": i} for i in range(2 * GAP_FIRST_N)]
    entry = summarize(metrics, [], None, updates=updates)["asgd"]
    assert entry["gap_first_n"] == GAP_FIRST_N
    assert entry["mean_gap_first_n"] == pytest.approx((GAP_FIRST_N - 1) / 2000)
    assert entry["mean_gap_normalized_first_n"] == pytest.approx((GAP_FIRST_N - 1) / 2)
    assert entry["mean_gap"] == pytest.approx((2 * GAP_FIRST_N - 1) / 2000)
