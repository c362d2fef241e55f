"""A live run over CURVE: allowed clients train to the end; an unknown key is refused, logged and told."""
from __future__ import annotations

import logging
import threading
import time

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.live.client import ClientFailed, EdgeClient
from edgesync.transport.security import ClientKeys, ServerKeys, create_keys, local_keys

REFUSAL_WITHIN_S = 20.0  # generous for a busy machine; a refusal takes milliseconds


@pytest.fixture
def keys(tmp_path):
    """Coordinator and two allowed clients (local_keys, as `edgesync run --curve`), plus a stranger's pair."""
    server, options = local_keys(tmp_path / "keys", 2)
    clients = [ClientKeys.from_files(opts[1], opts[3]) for opts in options]
    _, stranger_secret = create_keys(tmp_path / "elsewhere", "stranger")
    stranger = ClientKeys.from_files(stranger_secret, tmp_path / "keys" / "coordinator.key")
    return server, clients, stranger


def curve_run(loopback, server: ServerKeys):
    return loopback(keys=server, clients=["x1", "x1"], algorithms=[{"name": "asgd", "lr": 0.05}],
                    stop={"time_budget_s": 120, "max_updates": 8}, eval={"every_s": 2, "test_size": 200})


def test_allowed_clients_complete_a_run_over_curve(loopback, keys):
    server, clients, _ = keys
    run = curve_run(loopback, server)
    run.start(clients=0)
    for rank in (0, 1):
        run.add_client(rank=rank, keys=clients[rank])
    run.join()
    assert run.error is None, run.error
    assert not run.client_errors
    assert read_jsonl(run.run_dir / "metrics.jsonl")[-1]["updates"] == 8
    assert len(read_jsonl(run.run_dir / "clients.jsonl")) == 2
    assert run.coordinator.sock.auth is None  # closed with the coordinator


def test_an_unknown_key_is_refused_and_the_run_goes_on(loopback, keys, caplog):
    caplog.set_level(logging.INFO, logger="edgesync.security")
    server, clients, stranger = keys
    run = curve_run(loopback, server)
    run.start(clients=0)
    refusal: list[BaseException] = []

    def intrude():
        try:
            EdgeClient(run.coordinator.address, keys=stranger).run()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            refusal.append(exc)

    intruder = threading.Thread(target=intrude, daemon=True)
    started = time.monotonic()
    intruder.start()
    intruder.join(REFUSAL_WITHIN_S)
    assert not intruder.is_alive(), "the refused client hung instead of failing"
    assert time.monotonic() - started < REFUSAL_WITHIN_S
    assert len(refusal) == 1 and isinstance(refusal[0], ClientFailed)
    assert "refused this client's CURVE key" in str(refusal[0])
    assert f"its public key {stranger.public.decode()} is not in the allow-list" in caplog.text
    assert not run.coordinator.peers  # it never joined
    for rank in (0, 1):
        run.add_client(rank=rank, keys=clients[rank])
    run.join()
    assert run.error is None, run.error
    assert not run.client_errors
    assert read_jsonl(run.run_dir / "metrics.jsonl")[-1]["updates"] == 8


@pytest.mark.slow
@pytest.mark.parametrize("processes", [None, 1], ids=["a process per client", "two slots in one process"])
def test_edgesync_run_with_curve_runs_its_client_processes_over_curve(tmp_path, caplog, monkeypatch, processes):
    """`edgesync run --curve`: throw-away keys, real client processes, removed keys afterwards; with
    `live.processes` the slots of one process each come in over CURVE with that process's keys."""
    from edgesync.runtime.runs import run_scenario
    from edgesync.config import load_scenario

    made: list = []
    monkeypatch.setattr("edgesync.runtime.live.launcher.local_keys",
                        lambda folder, n: made.append(folder) or local_keys(folder, n))
    caplog.set_level(logging.INFO, logger="edgesync.security")
    caplog.set_level(logging.INFO, logger="edgesync.launcher")
    scenario = load_scenario({
        "name": "curve", "seed": 1, "clients": ["x1", "x1"], "dataset": {"name": "fashion_mnist", "train_size": 1000},
        "algorithms": [{"name": "asgd", "lr": 0.05}], "stop": {"time_budget_s": 120, "max_updates": 6},
        "eval": {"every_s": 5, "test_size": 200}, **({"live": {"processes": processes}} if processes else {})})
    run_scenario(scenario, tmp_path / "run", progress=False, curve=True)
    assert read_jsonl(tmp_path / "run" / "metrics.jsonl")[-1]["updates"] == 6
    assert caplog.text.count("admitted (public key") == 2  # both clients' sockets came in over CURVE
    if processes:
        assert "2 clients in 1 process of 2 slots" in caplog.text
    assert made and not made[0].exists()  # the throw-away keys are gone


def test_keys_made_by_the_cli_run_a_lab_and_a_client_added_later_joins(loopback, tmp_path):
    """The docs' set-up, as written: `edgesync keys` for the coordinator and client-0, the coordinator on
    DIR/allow, then `edgesync keys DIR --name client-1` while it runs: client-1 is admitted at once."""
    from typer.testing import CliRunner

    from edgesync.cli import app

    folder = tmp_path / "keys"
    made = CliRunner().invoke(app, ["keys", str(folder), "--name", "coordinator", "--name", "client-0"])
    assert made.exit_code == 0, made.output
    run = curve_run(loopback, ServerKeys.from_files(folder / "coordinator.key_secret", folder / "allow"))
    run.start(clients=0)
    added = CliRunner().invoke(app, ["keys", str(folder), "--name", "client-1"])
    assert added.exit_code == 0, added.output
    for rank in (0, 1):
        run.add_client(rank=rank, keys=ClientKeys.from_files(folder / f"client-{rank}.key_secret",
                                                             folder / "coordinator.key"))
    run.join()
    assert run.error is None, run.error
    assert not run.client_errors
    assert read_jsonl(run.run_dir / "metrics.jsonl")[-1]["updates"] == 8


def test_a_client_without_keys_is_told_that_the_coordinator_requires_curve(loopback, keys):
    """`edgesync client` without keys against a CURVE coordinator: one clear line, exit 1, fast."""
    from typer.testing import CliRunner

    from edgesync.cli import app

    server, clients, _ = keys
    run = curve_run(loopback, server)
    run.start(clients=0)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["client", "--connect", run.coordinator.address], terminal_width=400)
    assert time.monotonic() - started < REFUSAL_WITHIN_S
    assert result.exit_code == 1, result.output
    assert (f"the coordinator at {run.coordinator.address} requires CURVE: start this client with --curve-secret "
            "(its NAME.key_secret) and --server-key (the coordinator's NAME.key)") in result.output
    assert "Traceback" not in result.output
    assert not run.coordinator.peers
    for rank in (0, 1):  # the run goes on with the clients that have keys
        run.add_client(rank=rank, keys=clients[rank])
    run.join()
    assert run.error is None, run.error
