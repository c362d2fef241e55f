"""The coordinator's load (metrics/coordinator_load.py): its busy time, queueing delays, updates served and
saturation, worked out by hand in the simulator, shown when it saturates, zero when it costs nothing, and
measured live over real sockets."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from edgesync.metrics.coordinator_load import DELAY_RESERVOIR, CoordinatorLoad
from edgesync.metrics.recorder import read_jsonl
from edgesync.metrics.report import render_report
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

ROW_KEYS = {"algorithm", "clock", "from_s", "duration_s", "busy_s", "utilisation", "events", "updates",
            "updates_served_per_s", "delays", "queue_delay_mean_s", "queue_delay_p95_s", "queue_delay_max_s",
            "saturated_share", "window_s", "saturated_busy", "bottleneck_share", "bottleneck", "shards"}


def costs(decode: float, apply: float, encode: float) -> dict:
    return {"decode_update": decode, "collect": 0.0, "apply": apply, "encode_send": encode, "query": 0.0}


def sim_run(out: Path, clients: list[str], algorithms: list[dict], server_time: str, server_s: dict,
            budget_s: float = 2.0, **top) -> dict:
    """Steps of 0.1 virtual s; the coordinator's costs per entry `server_s` (with server_time model)."""
    scenario = {"name": "load", "seed": 1, "runtime": "sim", "dataset": {"name": "fashion_mnist", "train_size": 1000},
                "clients": clients, "algorithms": algorithms, "stop": {"time_budget_s": budget_s, "target_acc": None},
                "eval": {"every_s": 1.0, "test_size": 200},
                "sim": {"base_step_s": 0.1, "server_time": server_time, "measured_server_s": server_s}, **top}
    return run_scenario(load_scenario(scenario), out, progress=False)


def rows(out: Path) -> dict[str, dict]:
    return {r["algorithm"]: r for r in read_jsonl(out / "coordinator.jsonl")}


def test_two_clients_and_fixed_costs_give_the_load_worked_out_by_hand(tmp_path):
    """Two ×1 ASGD clients (steps of 0.1 s, no link time); an update costs 0.05 s to decode and 0.1 s to apply,
    a TRAIN 0.05 s to encode. At 0 both TRAINs go out (busy 0–0.1, arriving 0.05 and 0.1). Client 0's update
    comes at 0.15 and is served at once (busy 0.15–0.35); client 1's comes at 0.2 and waits 0.15 s; from then
    each update arrives 0.1 s before the coordinator is free, one every 0.2 s, and it is never idle again.
    Before the 2 s budget it starts 10 updates (0.15, 0.35, …, 1.95): delays 0, 0.15 and eight of 0.1."""
    out = tmp_path / "run"
    summary = sim_run(out, ["x1", "x1"], [{"name": "asgd", "lr": 0.05}], "model", {"asgd": costs(0.05, 0.1, 0.05)})
    row = rows(out)["asgd"]
    assert set(row) == ROW_KEYS and row["clock"] == "virtual" and row["shards"] == 1
    assert row["busy_s"] == pytest.approx(0.1 + (2.0 - 0.15))  # the last update's work is cut at the end
    assert row["utilisation"] == pytest.approx(1.95 / 2.0)
    assert row["events"] == row["updates"] == row["delays"] == 10
    assert row["updates_served_per_s"] == pytest.approx(5.0)
    assert row["queue_delay_mean_s"] == pytest.approx((0.15 + 8 * 0.1) / 10)
    assert row["queue_delay_p95_s"] == pytest.approx(0.15)  # the 10th of 10 by nearest rank
    assert row["queue_delay_max_s"] == pytest.approx(0.15)
    # window [0, 1) busy 0.1 + 0.85 = 0.95, window [1, 2) busy 1.0: both saturated
    assert row["saturated_share"] == pytest.approx(1.0) and row["bottleneck"] is True
    entry = summary["asgd"]
    assert entry["coordinator_utilisation"] == row["utilisation"]
    assert entry["queue_delay_mean_s"] == row["queue_delay_mean_s"]
    assert entry["queue_delay_p95_s"] == row["queue_delay_p95_s"]
    assert entry["updates_served_per_s"] == row["updates_served_per_s"]
    assert entry["coordinator_saturated_share"] == row["saturated_share"]
    assert entry["coordinator_bottleneck"] is True


def saturating_run(out: Path, server_time: str) -> dict:
    """Four ×1 clients, each waiting for its reply. `dana-dc` costs 50 ms an update with its reply: the four
    need 0.2 s of the coordinator per 0.1 s step plus that 0.05 s, so it sets the pace (20 updates/s); `asgd`
    costs 2 ms (idle most of the time)."""
    return sim_run(out, ["x1"] * 4, [{"name": "dana_dc", "label": "dana-dc", "lr": 0.01, "momentum": 0.9},
                                     {"name": "asgd", "lr": 0.05}],
                   server_time, {"dana-dc": costs(0.02, 0.025, 0.005), "asgd": costs(0.001, 0.0005, 0.0005)},
                   budget_s=3.0)


@pytest.mark.slow
def test_a_saturated_coordinator_is_shown_and_named_in_a_warning(tmp_path, caplog):
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="edgesync.coordinator_load"):
        summary = saturating_run(out, "model")
    busy, light = rows(out)["dana-dc"], rows(out)["asgd"]
    assert busy["utilisation"] > 0.95 and busy["saturated_share"] == pytest.approx(1.0)
    # in step: each client's cycle is the coordinator's 4 × 0.05 s, of which it computes 0.1 s, is served
    # 0.05 s and waits the remaining 0.05 s
    assert busy["queue_delay_mean_s"] == pytest.approx(0.05, rel=0.1)
    assert busy["queue_delay_p95_s"] == pytest.approx(0.05, rel=0.1)
    assert busy["queue_delay_max_s"] >= busy["queue_delay_p95_s"]
    assert busy["updates_served_per_s"] == pytest.approx(1 / 0.05, rel=0.05)  # the coordinator's pace
    assert light["utilisation"] < 0.2 and light["saturated_share"] == 0.0 and not light["bottleneck"]
    assert summary["dana-dc"]["coordinator_bottleneck"] is True
    assert summary["asgd"]["coordinator_bottleneck"] is False
    warnings = [r.getMessage() for r in caplog.records if "bottleneck" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("dana-dc: the coordinator was the bottleneck for 100%")
    report = (out / "report.md").read_text()
    assert "**Warning: the coordinator was the bottleneck of `dana-dc`**" in report
    assert "bottleneck of `asgd`" not in report
    assert "## Coordinator load" in report and "| `dana-dc` | " in report


@pytest.mark.slow
def test_a_coordinator_that_costs_nothing_is_never_busy_and_nothing_waits(tmp_path, caplog):
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="edgesync.coordinator_load"):
        summary = saturating_run(out, "zero")
    for label, row in rows(out).items():
        assert row["busy_s"] == 0.0 and row["utilisation"] == 0.0 and row["saturated_share"] == 0.0
        assert row["queue_delay_mean_s"] == row["queue_delay_p95_s"] == row["queue_delay_max_s"] == 0.0
        assert row["updates"] > 100 and not row["bottleneck"]  # every update served, at the clients' pace
        assert summary[label]["coordinator_bottleneck"] is False
    assert not [r for r in caplog.records if "bottleneck" in r.getMessage()]
    assert "Warning: the coordinator" not in (out / "report.md").read_text()


def test_a_sharded_coordinator_reports_its_busiest_shard(tmp_path):
    """Two shards split the cnn's layers unevenly: the busiest shard's work is the larger share of each update's."""
    out = tmp_path / "run"
    sim_run(out, ["x1", "x1"], [{"name": "asgd", "lr": 0.05}], "model", {"asgd": costs(0.05, 0.1, 0.05)},
            sharding="layer", shards=2)
    row = rows(out)["asgd"]
    assert row["shards"] == 2 and row["updates"] > 10
    assert 0.5 < row["utilisation"] < 0.975  # more than half of the work, less than the single coordinator's


def test_windows_delays_and_the_reservoir():
    load = CoordinatorLoad()
    load.busy(0.05, 1.97)  # windows [0, 1) and [1, 2): 0.95 and 0.97 busy, both saturated
    load.busy(2.5, 3.6)    # [2, 3): 0.5, not; [3, 3.5): the last, shorter window, busy all of its 0.5 s
    for delay in (0.0, -0.001, None, 0.3):  # a negative wait is none; None: not known
        load.served(delay, update=True)
    figures = load.finish(3.5, "wall")
    assert figures["busy_s"] == pytest.approx(1.92 + 1.0)  # cut at the end
    assert figures["saturated_share"] == pytest.approx(2.5 / 3.5) and figures["bottleneck"]
    assert figures["events"] == 4 and figures["delays"] == 3
    assert figures["queue_delay_mean_s"] == pytest.approx(0.1) and figures["queue_delay_p95_s"] == 0.3

    many = CoordinatorLoad()
    n = 3 * DELAY_RESERVOIR
    for i in range(n):
        many.served(i / n, update=False)
    figures = many.finish(1.0, "virtual")
    assert figures["queue_delay_mean_s"] == pytest.approx((n - 1) / (2 * n))  # the mean and max are exact
    assert figures["queue_delay_max_s"] == pytest.approx((n - 1) / n)
    assert figures["queue_delay_p95_s"] == pytest.approx(0.95, abs=0.01)  # from a uniform sample of 10,000
    assert figures["updates"] == 0 and figures["utilisation"] == 0.0 and not figures["bottleneck"]


@pytest.mark.timing
def test_the_live_coordinator_measures_its_load_over_real_sockets(loopback):
    run = loopback(algorithms=[{"name": "asgd", "lr": 0.05}], clients=["x1", "x1"],
                   stop={"time_budget_s": 2.0, "target_acc": None}).start()
    run.join()
    assert run.error is None and not run.client_errors
    row = rows(run.run_dir)["asgd"]
    final = read_jsonl(run.run_dir / "metrics.jsonl")[-1]
    assert set(row) == ROW_KEYS and row["clock"] == "wall"
    assert row["duration_s"] == pytest.approx(final["time_s"])
    assert 0.0 < row["utilisation"] <= 1.0 and 0.0 < row["busy_s"] < row["duration_s"]
    # every update was stamped by its client on the algorithm's clock (the clients hear it from their first TRAIN)
    assert row["updates"] >= final["updates"] > 0 and row["delays"] == row["updates"]
    assert 0.0 <= row["queue_delay_mean_s"] <= row["queue_delay_max_s"]
    assert 0.0 <= row["queue_delay_p95_s"] <= row["queue_delay_max_s"] < 1.0
    assert row["updates_served_per_s"] == pytest.approx(row["updates"] / row["duration_s"], rel=1e-3)
    render_report(run.run_dir)
    assert "## Coordinator load" in (run.run_dir / "report.md").read_text()
