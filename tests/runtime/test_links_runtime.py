"""Links in whole runs: the simulator's virtual time, the live transport's pacing, the netns backend."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from edgesync.emulation import netns
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario
from edgesync.transport.protocol import Message

from threaded_clients import threaded_clients  # noqa: F401 - a fixture

CNN_PARAMS = 184_586


def scenario(runtime: str, links: dict, budget: float = 3.0, **extra) -> dict:
    return {"name": "links", "runtime": runtime, "seed": 2, "clients": 2,
            "dataset": {"train_size": 1000}, "sim": {"base_step_s": 0.01},
            "algorithms": [{"name": "asgd", "lr": 0.05}], "links": links,
            "stop": {"time_budget_s": budget, "target_acc": None}, "eval": {"every_s": 1.0, "test_size": 200},
            **extra}


def model_message_bytes() -> int:
    import torch
    return Message("TRAIN", {"version": 0}, {"params": torch.zeros(CNN_PARAMS)}).wire_size()


def test_simulated_link_sets_the_pace_of_asgd(tmp_path):
    # 10 Mbit/s, 50 ms: a model message (~0.74 MB) takes ~0.64 s each way; a 10 ms step is noise.
    run_scenario(load_scenario(scenario("sim", {"rate_mbps": 10, "latency_ms": 50})), tmp_path / "r",
                 progress=False)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())["asgd"]
    one_way = model_message_bytes() * 8 / 10e6 + 0.05
    per_client = 3.0 / (2 * one_way + 0.01)
    assert summary["updates"] == pytest.approx(2 * per_client, abs=2)
    assert summary["bytes_up"] == pytest.approx(summary["updates"] * model_message_bytes(), rel=0.01)


def test_simulated_links_replay_exactly_with_jitter_and_loss(tmp_path):
    links = {"rate_mbps": 50, "latency_ms": 20, "jitter_ms": 10, "loss": 0.01}
    for name in ("a", "b"):
        run_scenario(load_scenario(scenario("sim", links, budget=1.0)), tmp_path / name, progress=False)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_clock"} for r in rows]
    assert strip(read_jsonl(tmp_path / "a" / "metrics.jsonl")) == strip(read_jsonl(tmp_path / "b" / "metrics.jsonl"))


@pytest.mark.slow
def test_one_slow_client_link_slows_only_that_client(tmp_path):
    sc = scenario("sim", {}, budget=2.0)
    sc["clients"] = [{}, {"link": {"rate_mbps": 2}}]
    run_scenario(load_scenario(sc), tmp_path / "r", progress=False)
    rows = {c["client"]: c for c in read_jsonl(tmp_path / "r" / "clients.jsonl")}
    assert rows[0]["steps"] > 20 * rows[1]["steps"]  # ~3 s per round trip at 2 Mbit/s vs 10 ms steps


@pytest.mark.slow
@pytest.mark.timing
def test_live_transport_pacing_sets_the_pace_of_asgd(tmp_path):
    run_scenario(load_scenario(scenario("live", {"rate_mbps": 20, "latency_ms": 20}, budget=4.0)),
                 tmp_path / "r", progress=False)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())["asgd"]
    one_way = model_message_bytes() * 8 / 20e6 + 0.02
    # Live steps take ~10-40 ms on 2 shared cores; the link dominates: ~0.65 s per update per client.
    ceiling = 2 * 4.0 / (2 * one_way)
    assert 0.55 * ceiling <= summary["updates"] <= ceiling + 1


@pytest.mark.slow
@pytest.mark.skipif(not netns.available()[0], reason=f"netns backend: {netns.available()[1]}")
def test_live_run_in_network_namespaces_cleans_up(tmp_path):
    run_scenario(load_scenario(scenario("live", {"rate_mbps": 20, "latency_ms": 20, "backend": "netns"},
                                             budget=4.0)), tmp_path / "r", progress=False)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())["asgd"]
    one_way = model_message_bytes() * 8 / 20e6 + 0.02
    ceiling = 2 * 4.0 / (2 * one_way)
    # the floor only says traffic flowed: the 4 s budget also holds the clients' start in their namespaces, which took
    # a second or two in the suite's busy parallel lanes (6 of 12.7 once, at a floor of half the ceiling)
    assert 0.4 * ceiling <= summary["updates"] <= ceiling + 1
    assert "uplink ∞ 20 ms" in (tmp_path / "r" / "logs" / "client-0.log").read_text()  # rate left to tc
    leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"es-{os.getpid()}-" not in leftover


@pytest.mark.timing
def test_kernel_backend_shapes_goodput_and_leaves_the_rest_to_the_transport():
    from edgesync.emulation.links import Link
    from edgesync.runtime.bookkeeping.membership import transport_link
    from edgesync.runtime.live.launcher import kernel_shape

    link = Link(rate_mbps=10, latency_s=0.05, jitter_s=0.01, loss=0.001)
    shape = kernel_shape(link)
    assert shape.rate_mbps == pytest.approx(10 * 1514 / 1448)  # tc counts frames, we count payload
    assert (shape.latency_ms, shape.jitter_ms, shape.loss) == pytest.approx((50, 10, 0.001))
    # without netem the kernel does the rate only: the transport keeps latency, jitter and loss
    assert transport_link(link, frozenset({"rate"})) == Link(None, 0.05, 0.01, 0.001)
    assert transport_link(link, frozenset({"rate", "delay", "jitter", "loss"})) == Link()


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["sim", "live"])
def test_the_coordinators_own_link_is_shared_by_its_clients(tmp_path, request, runtime):
    """coordinator_link 20 Mbit/s, clients' links unlimited: four clients' updates queue on the one
    server link, each crossing it in ≈ 0.3 s; models going out cross the other direction meanwhile.
    Live, the clients are threads of this process (threaded_clients.py) stepping every 10 ms (emulation
    fixed, as the simulator's base step): the link, not the clients' processes, is what is checked."""
    sc = scenario(runtime, {}, budget=4.0, coordinator_link={"rate_mbps": 20})
    if runtime == "live":
        request.getfixturevalue("threaded_clients")
        sc["emulation"] = {"mode": "fixed", "base_step_ms": 10}
    sc["clients"] = 4
    run_scenario(load_scenario(sc), tmp_path / "r", progress=False)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())["asgd"]
    ceiling = 4.0 / (model_message_bytes() * 8 / 20e6)  # one update in per wire time of the shared link
    low = 0.85 if runtime == "sim" else 0.5  # live: the steps and the start cost some of the budget
    assert low * ceiling <= summary["updates"] <= ceiling + 1
