"""A run across three emulated machines: a coordinator host and two client hosts, each its own
network namespace (and host name) on one emulated LAN, started with the commands docs/lab.md gives a
lab, over CURVE with keys from `edgesync keys`, each host holding only its own files.

Root only (it creates namespaces); skipped with the reason elsewhere. Every process is bounded in time
and killed on the way out; the namespaces are removed whether the test passes or fails.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netns_hosts import LanHosts, lan_available
from edgesync.emulation.netns.commands import _namespaces

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
COORDINATOR, CLIENTS = "coordinator-host", ["client-host-0", "client-host-1"]
PORT = 5555  # the documented default: every host has its own network stack, so nothing else holds it
STARTUP_S = 40.0  # the coordinator binds after loading torch and the scenario; slow on 2 busy cores
RUN_S = 120.0  # the whole run; typically 20-30 s
SCENARIO = """\
name: multihost
seed: 1
dataset: {name: fashion_mnist, train_size: 1000}
model: {name: cnn}
clients: [x1, x1]
algorithms:
  - {name: ssgd, lr: 0.1}
  - {name: asgd, lr: 0.05}
stop: {time_budget_s: 30, max_updates: 6}
eval: {every_s: 1.0, test_size: 200}
"""

pytestmark = pytest.mark.skipif(not lan_available()[0], reason=f"emulated hosts: {lan_available()[1]}")


@pytest.fixture
def lan():
    hosts = LanHosts([COORDINATOR, *CLIENTS])
    try:
        yield hosts
    finally:
        hosts.close()  # also when the test failed; kills whatever still runs in the namespaces


@pytest.fixture
def processes():
    """Popen objects a test starts; every one still running at the end is killed, by its pid."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def edgesync_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgesync.cli", *args]


def hand_out_keys(tmp_path: Path) -> dict[str, Path]:
    """`edgesync keys`, then each machine's folder gets what docs/lab.md's table says goes there."""
    made = tmp_path / "keys"
    result = subprocess.run(edgesync_cli("keys", str(made), "--name", "coordinator", "--name", "client-0",
                                         "--name", "client-1"),
                            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    homes = {host: tmp_path / host for host in [COORDINATOR, *CLIENTS]}
    (homes[COORDINATOR] / "allow").mkdir(parents=True)
    shutil.copy2(made / "coordinator.key_secret", homes[COORDINATOR])
    for i, host in enumerate(CLIENTS):
        homes[host].mkdir()
        shutil.copy2(made / f"client-{i}.key", homes[COORDINATOR] / "allow")
        shutil.copy2(made / f"client-{i}.key_secret", homes[host])
        shutil.copy2(made / "coordinator.key", homes[host])
    shutil.rmtree(made)  # no secret stays anywhere but on its own machine
    return homes


def wait_for(predicate, timeout_s: float, what: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"{what}: the process exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.mark.slow
def test_a_curve_run_across_three_namespace_hosts(lan, processes, tmp_path):
    homes = hand_out_keys(tmp_path)
    scenario = homes[COORDINATOR] / "multihost.yaml"
    scenario.write_text(SCENARIO)
    run_dir = homes[COORDINATOR] / "run"
    endpoint = f"tcp://{lan.address(COORDINATOR)}:{PORT}"

    # on the coordinator machine
    coord_out = tmp_path / "coordinator.out"
    with open(coord_out, "w") as out:
        coordinator = subprocess.Popen(
            lan.exec_prefix(COORDINATOR) + edgesync_cli(
                "coordinator", "--scenario", str(scenario), "--bind", endpoint, "--out", str(run_dir),
                "--curve-secret", str(homes[COORDINATOR] / "coordinator.key_secret"),
                "--allow", str(homes[COORDINATOR] / "allow"), "--quiet"),
            cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    processes.append(coordinator)
    wait_for(lambda: "coordinator for multihost on" in coord_out.read_text(), STARTUP_S,
             "the coordinator's start", coordinator, coord_out)

    # on each client machine
    client_outs = [tmp_path / f"{host}.out" for host in CLIENTS]
    for rank, host in enumerate(CLIENTS):
        with open(client_outs[rank], "w") as out:
            processes.append(subprocess.Popen(
                lan.exec_prefix(host) + edgesync_cli(
                    "client", "--connect", endpoint, "--rank", str(rank), "--profile", "x1", "--device", "cpu",
                    "--curve-secret", str(homes[host] / f"client-{rank}.key_secret"),
                    "--server-key", str(homes[host] / "coordinator.key")),
                cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    try:
        coordinator.wait(RUN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run did not finish within {RUN_S:.0f} s:\n{coord_out.read_text()[-3000:]}")
    assert coordinator.returncode == 0, coord_out.read_text()[-3000:]
    for rank, proc in enumerate(processes[1:]):
        proc.wait(30)  # told SHUTDOWN: they leave on their own
        assert proc.returncode == 0, client_outs[rank].read_text()[-3000:]

    # the run folder is complete
    for name in ("scenario.yaml", "metrics.jsonl", "clients.jsonl", "summary.json", "report.md"):
        assert (run_dir / name).is_file(), name
    summary = json.loads((run_dir / "summary.json").read_text())
    assert list(summary) == ["ssgd", "asgd"]
    assert all(entry["updates"] > 0 and entry["final_acc"] is not None for entry in summary.values())
    rows = [json.loads(line) for line in (run_dir / "clients.jsonl").read_text().splitlines()]
    assert {(r["algorithm"], r["client"], r["host"], r["device"]) for r in rows} == {
        (label, rank, host, "cpu") for label in summary for rank, host in enumerate(CLIENTS)}
    assert all(r["steps"] > 0 and "error" not in r for r in rows)
    report = (run_dir / "report.md").read_text()
    assert "on 2 hosts" in report
    assert "| `ssgd` | 1 | x1 | client-host-1 | cpu |" in report

    # the coordinator saw each client come in over the LAN from its own address and host
    log = (run_dir / "logs" / "coordinator.log").read_text()
    for rank, host in enumerate(CLIENTS):
        assert f"CURVE client at {lan.address(host)} admitted" in log
        assert f"client {rank} joined from {host} (cpu, profile x1" in log
    assert "refused" not in log

    # nothing of the lab outlives it
    namespaces = lan.namespaces
    lan.close()
    assert not set(namespaces) & set(_namespaces())
