"""Emulated devices that keep their speed when clients share a machine (issue 18), in the runtimes.

The base-step rule itself is tested by hand in tests/emulation/test_device_model.py, the relative figures
in tests/metrics/test_fidelity.py, the OS mechanisms in tests/emulation/test_isolation.py.
"""
import json
import logging

import pytest

from edgesync.runtime.runs import run_scenario
from edgesync.config import ScenarioError, load_scenario

from loopback_run import small_scenario


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "clients.jsonl").read_text().splitlines()]


@pytest.mark.timing
def test_every_client_paces_at_one_shared_base_step_and_the_run_says_so(loopback, caplog):
    run = loopback(clients=["x1", "x1", "x4"], algorithms=[{"name": "asgd", "lr": 0.05}],
                   stop={"time_budget_s": 4})
    with caplog.at_level(logging.INFO, logger="edgesync"):
        run.start()
        run.join(90)
    assert run.error is None, run.error
    clients = rows(run.run_dir)
    bases = {r["base_step_s"] for r in clients}
    assert len(bases) == 1 and bases.pop() >= max(r["reference_step_s"] for r in clients)  # never faster than a client
    assert [r["target_factor"] for r in clients] == [1.0, 1.0, 4.0]
    assert all(r["achieved_factor"] and r["median_step_s"] for r in clients)
    # loopback clients are threads of the test process: nothing to pin or cap, and they say why
    assert {r["isolation"] for r in clients} == {"none: this client runs in a thread of a larger process"}
    assert "emulation: shared base step" in caplog.text


@pytest.mark.slow
@pytest.mark.timing
def test_the_fidelity_warning_names_the_straggler_of_an_overloaded_host(loopback, caplog):
    """The old behaviour, deliberately: four clients, each paced against its own undisturbed step, ×1 clients
    running flat out in threads of one process on a 2-core machine. The ×10 client is far from ×10 relative
    to them, and the run says so, naming it and the likely cause."""
    run = loopback(clients=["x1", "x1", "x1", "x10"], algorithms=[{"name": "asgd", "lr": 0.05}],
                   stop={"time_budget_s": 5}, emulation={"mode": "undisturbed"})
    with caplog.at_level(logging.WARNING, logger="edgesync.fidelity"):
        run.start()
        run.join(90)
    assert run.error is None, run.error
    straggler = rows(run.run_dir)[3]
    assert straggler["target_factor"] == 10.0 and straggler["achieved_factor"] < 9.5
    assert "asgd: client 3 (x10) ran ×" in caplog.text and "too many clients per core" in caplog.text


def test_the_simulator_paces_at_the_fixed_base_step_exactly(tmp_path, monkeypatch):
    scenario = load_scenario(small_scenario(runtime="sim", clients=["x1", "x3"],
                                                 algorithms=[{"name": "asgd", "lr": 0.05, "batch_size": 8}],
                                                 emulation={"base_step_ms": 20}, stop={"time_budget_s": 2}))
    run_scenario(scenario, tmp_path / "sim", progress=False)
    fast, slow = rows(tmp_path / "sim")
    assert (fast["base_step_s"], fast["median_step_s"], slow["median_step_s"]) == (0.02, 0.02, 0.06)
    assert (slow["target_factor"], slow["achieved_factor"], slow["fidelity_error"]) == (3.0, 3.0, 0.0)
    assert json.loads((tmp_path / "sim" / "summary.json").read_text())["asgd"]["fidelity_max_error"] == 0.0
    report = (tmp_path / "sim" / "report.md").read_text()
    assert "## Emulation fidelity" in report
    assert "| `asgd` | 1 | x3 | sim | 20.00 | 60.00 | 3.00 | 3.00 | +0.0% |" in report


@pytest.mark.parametrize("emulation,message", [
    ({"mode": "fixed"}, "emulation.mode fixed needs emulation.base_step_ms"),
    ({"mode": "shared", "base_step_ms": 20}, "emulation.base_step_ms fixes the device speed, but emulation.mode is shared"),
    ({"headroom": 1.5}, "emulation.headroom"),
    ({"isolation": "pin"}, "emulation.isolation"),
])
def test_impossible_emulation_settings_are_explained(emulation, message):
    with pytest.raises(ScenarioError) as err:
        load_scenario(small_scenario(emulation=emulation), source="s.yaml")
    assert message in str(err.value)


def test_two_device_speeds_are_refused():
    with pytest.raises(ScenarioError, match="two device speeds: emulation.base_step_ms is 20 ms but sim.base_step_s"):
        load_scenario(small_scenario(emulation={"base_step_ms": 20}, sim={"base_step_s": 0.05}), source="s.yaml")


@pytest.mark.parametrize("prefer,detail", [
    ("affinity", "gives this client no core or CPU quota"),  # more clients than cores: nothing to pin
    ("cgroup", "gives this client no core or CPU quota"),    # a GPU client: paced, not capped
    ("none", "isolation off"),
])
def test_a_client_given_nothing_to_apply_says_so_and_goes_on(prefer, detail):
    from edgesync.runtime.live.client import EdgeClient
    client = EdgeClient("tcp://127.0.0.1:1")  # never connects: only its isolation step runs, in this thread
    client._isolate(None, None, prefer)
    assert client._isolation.mechanism == "none" and detail in client._isolation.detail
