"""Live, every client runs the coordinator's outside code (config/outside_code.py, bookkeeping/membership.py): a
coordinator whose scenario names outside code asks a HELLO that does not describe it to (an ERROR with `describe`),
compares each name's package, version and code hash with its own, and refuses a client that differs with one line
naming the client, its host and both versions; the run goes on with the others. A run without outside code admits
clients as before: no describe round, the same HELLO.

tests/extensions/fixture_ext is ext-fixture 0.3.1; a client whose PYTHONPATH points at a copy made here with another
version and changed code stands for a lab machine with another install."""
from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq

from edgesync.config import load_scenario
from edgesync.config.outside_code import describe_here, differences, refusal_line, resolve_outside
from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.runtime.bookkeeping.membership import Membership
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.runtime.live.client import EdgeClient
from edgesync.runtime.live.coordinator import Coordinator
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.protocol import COORDINATOR_TYPES, Message
from edgesync.transport.sockets import CoordinatorSocket

from test_outside_algorithms import FIXTURE, installed  # noqa: F401 - the fixture is used by name

HALFSTEP = "ext_fixture:HALFSTEP"
TESTS = Path(__file__).resolve().parents[1]


def live_scenario(clients: int, algorithm: str = HALFSTEP) -> dict:
    return {"name": "extcheck", "seed": 1, "dataset": {"name": "fashion_mnist", "train_size": 300},
            "clients": clients, "algorithms": [{"name": algorithm, "lr": 0.1}],
            "stop": {"time_budget_s": 60, "max_updates": 4}, "eval": {"every_s": 1.0, "test_size": 100}}


# -- the comparison and its one line --------------------------------------------------------------------
def test_equal_code_passes_and_each_difference_is_one_phrase_with_both_sides():
    here = {HALFSTEP: resolve_outside("algorithm", HALFSTEP)}
    ours = here[HALFSTEP]
    assert (ours.distribution, ours.version) == ("ext-fixture", "0.3.1") and len(ours.code_hash) == 16
    assert differences(here, {HALFSTEP: ours.as_dict()}) == []

    newer = dataclasses.replace(ours, version="0.3.2", code_hash="9f8e7d6c5b4a3f2e").as_dict()
    assert differences(here, {HALFSTEP: newer}) == [f"{HALFSTEP} is ext-fixture 0.3.2 (code 9f8e7d6c5b4a3f2e) there, "
                                                    f"ext-fixture 0.3.1 (code {ours.code_hash}) here"]

    edited = dataclasses.replace(ours, code_hash="0" * 16).as_dict()  # the same version, its code changed
    assert differences(here, {HALFSTEP: edited}) == [
        f"{HALFSTEP} is ext-fixture 0.3.1 (code {'0' * 16}) there, ext-fixture 0.3.1 (code {ours.code_hash}) here"]

    missing = describe_here({"no_such_lab.algos:FEDFOO": "algorithm"})["no_such_lab.algos:FEDFOO"]
    assert "cannot import 'no_such_lab.algos'" in missing["error"]
    [phrase] = differences({"no_such_lab.algos:FEDFOO": ours}, {"no_such_lab.algos:FEDFOO": missing})
    assert phrase.startswith("no_such_lab.algos:FEDFOO is not usable (algorithm 'no_such_lab.algos:FEDFOO': cannot "
                             "import") and phrase.endswith(f"there, ext-fixture 0.3.1 (code {ours.code_hash}) here")

    line = refusal_line(2, "lab-07", differences(here, {HALFSTEP: newer}))
    assert line.startswith("client 2 on lab-07 refused: ext_fixture:HALFSTEP is ext-fixture 0.3.2 ")
    assert line.endswith(": install the coordinator's version on lab-07") and "\n" not in line


# -- the describe round, on a raw socket -----------------------------------------------------------------
class Raw:
    """A DEALER that says what a test gives it and reads the coordinator's answers (heartbeats skipped)."""

    def __init__(self, address: str):
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)

    def hello(self, rank: int | None, host: str = "lab-07", **meta) -> Message:
        return self.say(Message("HELLO", {"rank": rank, "info": {"host": host}, **COORDINATOR.offer(), **meta}))

    def say(self, message: Message) -> Message:
        """Send `message`; the coordinator's answer."""
        self.sock.send_multipart(message.to_frames())
        deadline = time.monotonic() + 30
        while self.sock.poll(int(max(0.0, deadline - time.monotonic()) * 1000)):
            msg = Message.from_frames(self.sock.recv_multipart(), COORDINATOR_TYPES)
            if msg.type != "HEARTBEAT":
                return msg
        raise AssertionError(f"no answer to {message.type} within 30 s")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def joining():
    """`joining(scenario)`: a Membership on a real socket, its join_all running in a thread."""
    started = []

    def start(data: dict) -> tuple[Membership, threading.Thread]:
        members = Membership(load_scenario(data), CoordinatorSocket("tcp://127.0.0.1:*"))
        thread = threading.Thread(target=members.join_all, args=(Progress(enabled=False),), daemon=True)
        thread.start()
        started.append((members, thread))
        return members, thread

    yield start
    for members, thread in started:
        thread.join(5)
        if not thread.is_alive():  # a ZeroMQ socket closed under the thread using it aborts the process: a join
            members.sock.close()   # still waiting (a failed test) keeps it, and its daemon thread ends with it


def test_a_client_is_asked_to_describe_then_refused_if_it_differs_and_a_corrected_one_takes_its_rank(joining):
    members, joined = joining(live_scenario(2))
    raw = Raw(members.sock.address)
    try:
        garbage = raw.hello(0, extensions={HALFSTEP: "0.3.1"})
        assert garbage.type == "ERROR" and not garbage.meta["fatal"]
        assert garbage.meta["reason"].startswith("HELLO field 'extensions' is {'ext_fixture:HALFSTEP': '0.3.1'}, "
                                                 "expected an object of at most 64 names")

        asked = raw.hello(0, instance="first")
        assert asked.type == "ERROR" and not asked.meta["fatal"] and asked.meta["describe"] == {HALFSTEP: "algorithm"}

        mine = describe_here(asked.meta["describe"])
        other = {HALFSTEP: {**mine[HALFSTEP], "version": "0.3.2"}}
        refused = raw.hello(0, instance="first", extensions=other)
        line = refused.meta["reason"]
        assert refused.type == "ERROR" and refused.meta["fatal"]
        assert line.startswith("client 0 on lab-07 refused: ext_fixture:HALFSTEP is ext-fixture 0.3.2 (code ")
        assert members.liveness.lost == {0: line} and 0 in members.peers  # lost from the start: nobody waits

        # the machine fixed, its new process says HELLO for that rank with the coordinator's code: taken back
        assert raw.hello(0, instance="second", extensions=mine).type == "WELCOME"
        other_client = Raw(members.sock.address)
        assert other_client.hello(1, host="lab-08", instance="third", extensions=mine).type == "WELCOME"
        joined.join(10)
        assert not joined.is_alive() and members.alive() == [0, 1] and not members.liveness.lost
        other_client.close()
    finally:
        raw.close()


def test_a_client_too_old_to_describe_is_refused_after_one_round_with_a_line_saying_so(joining):
    members, joined = joining(live_scenario(1))
    raw = Raw(members.sock.address)
    try:
        assert raw.hello(None, instance="old").meta["describe"] == {HALFSTEP: "algorithm"}
        again = raw.hello(None, instance="old")  # an older EdgeSync says the same HELLO again, after its backoff
        assert again.meta["fatal"] and again.meta["reason"] == (
            "client 0 on lab-07 refused: its EdgeSync does not describe the outside code this run uses "
            "(ext_fixture:HALFSTEP): it is older than the coordinator's: install the coordinator's EdgeSync "
            "version on lab-07")
        joined.join(10)
        assert not joined.is_alive() and members.alive() == []  # the join did not wait for it
    finally:
        raw.close()


def test_a_run_without_outside_code_admits_a_client_at_its_first_hello_unchanged(joining):
    members, joined = joining(live_scenario(1, algorithm="ssgd"))
    hello = EdgeClient(members.sock.address, rank=0).hello()
    assert set(hello.meta) == {"rank", "profile", "info", "instance", "protocol"}  # the HELLO of before
    raw = Raw(members.sock.address)
    try:
        assert raw.say(hello).type == "WELCOME"  # no ERROR, no describe round
        joined.join(10)
        assert members.alive() == [0]
    finally:
        raw.close()


def test_a_flower_node_describes_its_outside_code_when_the_coordinator_asks(monkeypatch):
    pytest.importorskip("flwr")
    monkeypatch.syspath_prepend(str(TESTS / "flower"))
    from fake_grid import FakeGrid

    from edgesync.flower.apps import clientapp
    from edgesync.flower.grid_socket import GridSocket, peer_of

    grid = FakeGrid(clientapp, [{"partition-id": 0}])
    try:
        members = Membership(load_scenario(live_scenario(1)), GridSocket(grid), heartbeats=False)
        members.join_all(Progress(enabled=False))
        [node] = grid.nodes
        hellos = [m for m in grid.pushed if m.metadata.message_type == "query.hello"]
        assert len(hellos) == 2  # the greeting, then the coordinator's request to describe
        assert members.alive() == [0] and members.sock.ranks == {peer_of(node): 0}
        assert members.sock.hello_meta[peer_of(node)]["extensions"] == describe_here({HALFSTEP: "algorithm"})
    finally:
        grid.close()


# -- end to end: three client processes, one with another version of the extension -----------------------
def other_version(tmp_path: Path) -> Path:
    """A copy of the fixture package as version 0.3.2 with changed code."""
    copy = tmp_path / "ext-0.3.2"
    shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    info = copy / "ext_fixture-0.3.1.dist-info"
    (info / "METADATA").write_text((info / "METADATA").read_text().replace("0.3.1", "0.3.2"))
    info.rename(copy / "ext_fixture-0.3.2.dist-info")
    with open(copy / "ext_fixture" / "__init__.py", "a") as f:
        f.write("\nCHANGED_IN_0_3_2 = True\n")
    return copy


@pytest.mark.slow
def test_a_client_with_another_version_is_refused_at_once_and_the_run_goes_on_without_it(tmp_path, caplog):
    run_dir = tmp_path / "run"
    recorder = RunRecorder(run_dir)
    coordinator = Coordinator(load_scenario(live_scenario(3)), recorder, bind="tcp://127.0.0.1:*")
    failed: list[BaseException] = []

    def serve():
        try:
            coordinator.run()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    elsewhere = other_version(tmp_path)
    clients = {}
    for rank, path in ((0, FIXTURE), (1, FIXTURE), (2, elsewhere)):
        env = {**os.environ, "PYTHONPATH": str(path)}
        clients[rank] = subprocess.Popen(
            [sys.executable, "-m", "edgesync.cli", "client", "--connect", coordinator.address, "--rank", str(rank)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, said = clients[2].communicate(timeout=60)
        assert clients[2].returncode == 1, said
        [line] = [l for l in said.splitlines() if "refused:" in l]
        host = platform.node()
        assert f"client 2 on {host} refused: ext_fixture:HALFSTEP is ext-fixture 0.3.2 (code " in line
        assert "there, ext-fixture 0.3.1 (code " in line
        assert line.endswith(f"here: install the coordinator's version on {host}")
        logged = [r for r in caplog.records if "refused:" in r.getMessage()]
        assert [(r.levelname, r.getMessage()) for r in logged] == [("WARNING", line.split("client: ", 1)[1])]

        thread.join(120)
        assert not thread.is_alive() and not failed, failed
        for rank in (0, 1):
            assert clients[rank].wait(30) == 0
    finally:
        for proc in clients.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        recorder.close()
        coordinator.close()
    rows = {r["client"]: r for r in read_jsonl(run_dir / "clients.jsonl")}
    assert rows[0]["steps"] > 0 and rows[1]["steps"] > 0 and "error" not in rows[0] and "error" not in rows[1]
    assert rows[2]["error"].startswith(f"lost: client 2 on {host} refused: ext_fixture:HALFSTEP is ext-fixture 0.3.2")
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert metrics and metrics[-1]["updates"] >= 4 and metrics[-1]["algorithm"] == "halfstep"
