"""The live sharded coordinator: follower shards over real sockets, whole runs against the unsharded
server, and a lab that starts its shards by hand.

The follower shards are always `edgesync shard` processes; the clients, which are not what is tested
here, are EdgeClients in threads of this process (threaded_clients.py: a client process costs a torch
import, ~3 s of CPU) except in the killed run (the kill takes its clients' processes with it). The
runs' ×1 devices step every 100 ms (emulation fixed: no calibration), and the runs whose learning is not
checked step on mini-batches of 8."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import yaml

from edgesync import algorithms
from edgesync.algorithms.machinery.base import ModelState, Population, Update
from edgesync.flower.lab import free_ports
from edgesync.metrics.recorder import read_jsonl
from edgesync.models.shard_plan import plan
from edgesync.runtime.runs import run_scenario
from edgesync.runtime.sharding.lead import ShardLead
from edgesync.runtime.sharding.server import ShardServer
from edgesync.config import load_scenario
from edgesync.transport import protocol
from edgesync.transport.protocol import MessageType as T
from edgesync.transport.sockets import ClientSocket

from threaded_clients import threaded_clients  # noqa: F401 - a fixture

REPO = Path(__file__).resolve().parents[2]


def recv_train(sock: ClientSocket):
    for _ in range(100):
        msg = sock.recv(0.1)
        if msg is not None and msg.type == T.TRAIN:
            return msg
    raise AssertionError("no TRAIN part from the follower")


def test_a_follower_serves_its_slice_in_the_leads_order_and_saves_its_state(tmp_path):
    """ASGD (lr 0.5) on θ = 0…9 over two shards of five: the follower answers client 0's HELLO with its
    first TRAIN part (θ[5:10]); an update part of ones waits there until the lead applies the update
    (`apply`), then the follower steps its slice; the lead's global_params joins both slices; the
    follower's state survives save and load."""
    follower = ShardServer("tcp://127.0.0.1:*", state_dir=tmp_path)
    thread = threading.Thread(target=follower.serve, daemon=True)
    thread.start()
    sc = load_scenario({"name": "s", "runtime": "sim", "clients": 1, "sharding": "memory", "shards": 2,
                             "algorithms": [{"name": "asgd", "lr": 0.5}]})
    lead = ShardLead(sc, plan([10], 2, "memory"), [follower.address])
    client = ClientSocket(follower.address)

    def update(number: int) -> tuple[dict, torch.Tensor]:
        return {"version": number, "samples": 32, "steps": 1, "data_size": 100, "part": number}, torch.ones(5)

    try:
        initial = ModelState(torch.arange(10.0), torch.zeros(0), (10,))
        config = sc.algorithms[0]
        inner = algorithms.get("asgd").server(config, lead.lead_state(initial), [0])
        inner.population = Population(0, {0: 100})
        server = lead.wrap(inner, config, initial, [0])
        server.start()
        client.send(protocol.hello(rank=0))
        assert torch.equal(recv_train(client).tensors["params"], torch.arange(5.0, 10.0))
        meta, ones = update(0)
        client.send(protocol.update(meta, {"grad": ones}))
        assert client.recv(0.5) is None  # the lead has not applied it yet
        server.on_update(0, Update(tensors={"grad": ones}, meta=meta))
        assert torch.equal(recv_train(client).tensors["params"], torch.arange(5.0, 10.0) - 0.5)
        assert torch.equal(server.global_params(), torch.arange(10.0) - 0.5)
        assert lead.traffic[0] > 20 and lead.traffic[1] > 40  # the client's part up, two parts down
        saved = server.state_dict()
        meta, ones = update(1)
        client.send(protocol.update(meta, {"grad": ones}))
        server.on_update(0, Update(tensors={"grad": ones}, meta=meta))
        recv_train(client)
        server.load_state_dict(saved)  # back to one update applied
        assert torch.equal(server.global_params(), torch.arange(10.0) - 0.5)
        assert len(list(tmp_path.glob("shard-1-*.pt"))) == 1
        lead.end()
    finally:
        client.close()
        lead.close()
        thread.join(10)
    assert not thread.is_alive()  # shutdown ends it


def base(**extra) -> dict:
    return {"name": "sharded", "runtime": "live", "seed": 4, "dataset": {"train_size": 1200}, "clients": 2,
            "algorithms": [{"name": "ssgd", "lr": 0.05, "momentum": 0.9, "batch_size": 8}],
            "stop": {"max_updates": 10, "time_budget_s": 60, "target_acc": None},
            "eval": {"every_s": 100, "test_size": 500}, "emulation": {"mode": "fixed", "base_step_ms": 100},
            **extra}


def final_rows(run: Path) -> dict[str, dict]:
    return {r["algorithm"]: r for r in read_jsonl(run / "metrics.jsonl")}


@pytest.mark.slow
def test_ssgd_on_shards_trains_the_unsharded_model(tmp_path, threaded_clients):
    """SSGD's rounds do not depend on timing: 10 rounds on one server, on 3 memory-wise shards and on 2
    layer-wise ones give the same model (its test loss to float precision) and the same traffic up to
    the parts' headers. SHAT runs and learns on the shards too."""
    runs = {}
    for name, extra in (("one", {}), ("memory", {"sharding": "memory", "shards": 3}),
                        ("layer", {"sharding": "layer", "shards": 2})):
        run_scenario(load_scenario(base(**extra)), tmp_path / name, progress=False)
        runs[name] = final_rows(tmp_path / name)
    one = runs["one"]["ssgd"]
    for name in ("memory", "layer"):
        rows = runs[name]
        assert rows["ssgd"]["updates"] == one["updates"] == 10
        assert rows["ssgd"]["test_loss"] == pytest.approx(one["test_loss"], abs=1e-4)
        assert rows["ssgd"]["test_acc"] == pytest.approx(one["test_acc"], abs=0.004)
        assert rows["ssgd"]["bytes_up"] == pytest.approx(one["bytes_up"], rel=0.002)
    log = (tmp_path / "memory" / "logs" / "shard-2.log").read_text()
    assert "shard 2: ssgd on parameters of 61529" in log and "the lead says the run is over" in log
    assert list((tmp_path / "memory" / "shards").glob("shard-2-*.pt"))  # its part of the run's checkpoints


@pytest.mark.slow
def test_a_lab_starts_its_shards_by_hand(tmp_path):
    """`edgesync shard` on its own, `edgesync coordinator --shard` and two clients (EdgeClients in threads
    of this process, as `edgesync client --connect` runs one), SHAT (whose staleness depends on the order
    updates are applied in: the follower follows the lead's)."""
    from edgesync.runtime.live.client import EdgeClient

    scenario = tmp_path / "lab.yaml"
    data = base(clients=2, sharding="memory", shards=2)
    data["algorithms"] = [{"name": "shat", "lr": 0.05}]
    data["stop"] = {"max_updates": 60, "time_budget_s": 60, "target_acc": None}
    scenario.write_text(yaml.safe_dump(data))
    shard_at, coord_at = (f"tcp://127.0.0.1:{port}" for port in free_ports(2))  # distinct
    cli = [sys.executable, "-m", "edgesync.cli"]
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    shard = [*cli, "shard", "--bind", shard_at, "--state-dir", str(tmp_path / "state")]
    procs = [subprocess.Popen(shard, cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
    procs.append(subprocess.Popen([*cli, "coordinator", "--scenario", str(scenario), "--bind", coord_at,
                                   "--shard", shard_at, "--out", str(tmp_path / "run"), "-q"], cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    errors: list[BaseException] = []

    def client() -> None:
        try:
            EdgeClient(coord_at).run()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    clients = [threading.Thread(target=client, daemon=True) for _ in range(2)]
    for thread in clients:
        thread.start()
    try:
        outputs = [p.communicate(timeout=240)[0] for p in procs]
        for thread in clients:
            thread.join(30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[1].returncode == 0, outputs[1][-3000:]
    assert procs[0].returncode == 0 and "the lead says the run is over" in outputs[0]
    assert not any(t.is_alive() for t in clients) and errors == [], errors
    rows = final_rows(tmp_path / "run")
    assert rows["shat"]["updates"] >= 60 and rows["shat"]["test_acc"] > 0.3
    assert list((tmp_path / "state").glob("shard-1-*.pt"))  # its part of the lead's checkpoints, where told


# `edgesync run` with its clients in threads of its process (threaded_clients.py): SIGKILL to its process
# group ends them with the lead and its follower shards
THREADED_RUN = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                "from threaded_clients import ThreadedClients; import edgesync.runtime.live.launcher as launcher; "
                "launcher.LocalClients = ThreadedClients; from edgesync.cli.app import main; main()")


@pytest.mark.slow
def test_a_killed_sharded_run_resumes_with_its_shards_state(tmp_path, threaded_clients):
    """SIGKILL to the whole `edgesync run` (lead, followers, clients: threads of the lead's process, see
    THREADED_RUN), then the resume (`run_scenario(..., resume=True)`, as `edgesync run --resume` calls it,
    in this process with its clients in threads): new followers read their part of the checkpoint back
    (run folder's shards/), and SSGD goes on from it to its 24 rounds."""
    import json
    import signal
    import time

    from edgesync.runtime.bookkeeping import checkpoint

    data = base(clients=2, sharding="memory", shards=2, checkpoint={"every_updates": 4})
    data["algorithms"] = [{"name": "ssgd", "lr": 0.05, "momentum": 0.9}]
    data["stop"] = {"max_updates": 24, "time_budget_s": 120, "target_acc": None}
    scenario, run_dir = tmp_path / "s.yaml", tmp_path / "run"
    scenario.write_text(yaml.safe_dump(data))
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    cli = [sys.executable, "-c", THREADED_RUN, "run"]
    proc = subprocess.Popen([*cli, str(scenario), "--out", str(run_dir), "-q"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline, saved = time.monotonic() + 120, None
        while time.monotonic() < deadline and not (saved and saved.current and saved.current["updates"] >= 8):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            try:
                saved = checkpoint.load(run_dir)
            except checkpoint.CheckpointError:
                saved = None
            time.sleep(0.1)
        assert saved and saved.current["updates"] >= 8
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    run_scenario(load_scenario(run_dir / "scenario.yaml"), run_dir, progress=False, resume=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ssgd"]["updates"] == 24 and summary["ssgd"]["final_acc"] > 0.3
    assert "error" not in (run_dir / "logs" / "shard-1.log").read_text().lower()
