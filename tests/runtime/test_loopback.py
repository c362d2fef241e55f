"""A coordinator and two clients over real sockets: the whole protocol, with counts checked."""
from __future__ import annotations

import json

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.models import build_model
from edgesync.params import num_params


@pytest.mark.timing  # asserts the ×2 client's achieved factor
def test_two_algorithms_run_to_completion(loopback):
    run = loopback().start()
    run.join()
    assert run.error is None, run.error
    assert not run.client_errors

    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    clients = read_jsonl(run.run_dir / "clients.jsonl")
    assert {m["algorithm"] for m in metrics} == {"ssgd", "asgd"}
    for row in metrics:
        for key in ("algorithm", "time_s", "updates", "samples", "test_acc", "test_loss", "bytes_up", "bytes_down"):
            assert key in row
        assert 0.0 <= row["test_acc"] <= 1.0
    finals = {a: [m for m in metrics if m["algorithm"] == a][-1] for a in ("ssgd", "asgd")}
    # max_updates stops each algorithm at exactly 12 global updates.
    assert finals["ssgd"]["updates"] == 12
    assert finals["asgd"]["updates"] == 12
    # The model trains: 12 steps of lr 0.1 beat chance (0.10) on 200 test images.
    assert finals["ssgd"]["test_acc"] > 0.2

    assert len(clients) == 4
    params_bytes = 4 * num_params(build_model("cnn"))
    ssgd_rows = [c for c in clients if c["algorithm"] == "ssgd"]
    for c in ssgd_rows:
        # SSGD: every client computed every round (12 rounds, plus at most one in flight at the end).
        assert c["steps"] in (12, 13)
        assert c["samples"] == c["steps"] * 32
        # Each update carries one gradient; each instruction one model: bytes ≥ payload.
        assert c["bytes_up"] >= c["steps"] * params_bytes
        assert c["bytes_down"] >= 12 * params_bytes
        assert c["compute_s"] > 0 and c["wall_s"] >= c["compute_s"], c
    # The shared base step leaves every client room for its target: a ×k client's undisturbed step fits in
    # k × base (emulation/device_model.py plans base ≥ step / k / headroom). Not base ≥ its own step: the two
    # clients calibrate one after the other, and on a loaded host (a busy hyperthread sibling) one can measure
    # twice the other's step; the plan then needs only half of the ×2 client's.
    for c in ssgd_rows:
        assert c["reference_step_s"] > 0 and c["median_factor"] * c["base_step_s"] >= c["reference_step_s"], c
    # The x2 client was paced at twice the run's base step, which its steps never beat; relative to the x1
    # client it is at most x2 and clearly slower (threads sharing one process's GIL stretch the x1 client's
    # steps; real processes' fidelity is benchmarked in benchmarks/throttle_fidelity.py).
    slow = next(c for c in ssgd_rows if c["client"] == 1)
    assert slow["profile"] == "x2"
    assert slow["median_step_s"] >= 2 * slow["base_step_s"]
    assert slow["target_factor"] == 2.0
    assert 1.2 < slow["achieved_factor"] <= 2.2  # a paced step overshoots by up to 10 % on a loaded host (2.1003 seen)
    # The metric rows count the same bytes as the per-client rows, which also hold what arrived after
    # the last evaluation: at most the update in flight and the closing statistics of each client.
    total_up = sum(c["bytes_up"] for c in ssgd_rows)
    assert finals["ssgd"]["bytes_up"] <= total_up <= finals["ssgd"]["bytes_up"] + 2 * (params_bytes + 4096)


@pytest.mark.timing  # "more than 10 updates in 2 s of wall clock": 4 on a host loaded by the parallel part
def test_time_budget_stops_the_algorithm(loopback):
    run = loopback(algorithms=[{"name": "asgd"}], stop={"time_budget_s": 2.0})
    run.start().join()
    assert run.error is None, run.error
    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    assert 2.0 <= metrics[-1]["time_s"] < 3.5
    assert metrics[0]["time_s"] == 0.0  # the initial model is evaluated too
    assert metrics[-1]["updates"] > 10


def test_stop_at_target(loopback):
    run = loopback(algorithms=[{"name": "asgd", "lr": 0.05}],
                   stop={"time_budget_s": 30, "target_acc": 0.5, "stop_at_target": True})
    run.start().join()
    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    reached = [m for m in metrics if m["test_acc"] >= 0.5]
    assert reached, "never reached 0.5"
    # It ends within a couple of evaluation periods of first reaching the target.
    assert metrics[-1]["time_s"] - reached[0]["time_s"] < 2.0


@pytest.mark.timing
def test_requested_profile_overrides_the_scenario(loopback):
    run = loopback(algorithms=[{"name": "ssgd"}], stop={"time_budget_s": 30, "max_updates": 4})
    run.start(clients=0)
    run.add_client(rank=0, profile="x3")
    run.add_client(rank=1)
    run.join()
    assert run.error is None, run.error
    rows = {c["client"]: c for c in read_jsonl(run.run_dir / "clients.jsonl")}
    assert rows[0]["profile"] == "x3"
    assert rows[1]["profile"] == "x2"
