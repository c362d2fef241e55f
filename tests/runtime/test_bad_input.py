"""Bad input reaches a live coordinator: each gets a clear ERROR, and the run goes on for the rest."""
from __future__ import annotations

import json
import time

import pytest
import zmq

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.live.client import ClientFailed, EdgeClient


def header(**fields) -> bytes:
    base = {"proto": "edgesync", "v": 1, "type": "HELLO", "meta": {}, "tensors": []}
    base.update(fields)
    return json.dumps(base).encode()


BAD_MESSAGES = [
    ([b"\xff\xfenot json"], "not UTF-8 JSON"),
    ([b"[1, 2, 3]"], "not a JSON object"),
    ([header(v=99)], "protocol version 99 is not supported"),
    ([header(proto="other")], "not an edgesync message"),
    ([header(type="UPDATE", tensors=[{"name": "grad", "dtype": "float32", "shape": [4]}]), b"\x00" * 12],
     "12 bytes for float32[4], expected 16"),
    ([header(type="UPDATE", tensors=[{"name": "grad", "dtype": "float32", "shape": [1]}])],
     "1 tensors but 0 data frames"),
    ([header(type="SHUTDOWN")], "unexpected message type 'SHUTDOWN'"),
]


def exchange(address: str, frames: list[bytes], timeout_s: float = 5.0) -> dict:
    """Send frames from a fresh DEALER and return the decoded header of the reply."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    try:
        sock.send_multipart(frames)
        assert sock.poll(int(timeout_s * 1000)), f"no reply to {frames[:1]!r}"
        reply = sock.recv_multipart()
        return json.loads(reply[0])
    finally:
        sock.close()


@pytest.mark.parametrize("frames,reason", BAD_MESSAGES, ids=[r for _, r in BAD_MESSAGES])
def test_bad_message_while_joining_gets_an_error_reply(loopback, frames, reason):
    run = loopback(algorithms=[{"name": "asgd"}], stop={"time_budget_s": 1.0})
    run.start(clients=0)
    reply = exchange(run.coordinator.address, frames)
    assert reply["type"] == "ERROR"
    assert reason in reply["meta"]["reason"]
    # The coordinator is still serving: the real clients join and the run completes.
    run.add_client(rank=0)
    run.add_client(rank=1)
    run.join()
    assert run.error is None, run.error
    assert read_jsonl(run.run_dir / "metrics.jsonl")


def test_bad_messages_during_training_do_not_disturb_the_run(loopback):
    run = loopback(algorithms=[{"name": "asgd"}], stop={"time_budget_s": 4.0})
    run.start()
    deadline = time.monotonic() + 20
    while not (run.run_dir / "metrics.jsonl").stat().st_size and time.monotonic() < deadline:
        time.sleep(0.05)  # training has begun once the first evaluation is written
    replies = [exchange(run.coordinator.address, frames) for frames, _ in BAD_MESSAGES]
    # A well-formed message from a stranger is refused too: the run is in progress.
    replies.append(exchange(run.coordinator.address, [header(type="UPDATE")]))
    run.join()
    assert run.error is None, run.error
    assert all(r["type"] == "ERROR" for r in replies)
    assert "has not said HELLO (the run is in progress)" in replies[-1]["meta"]["reason"]
    assert replies[-1]["meta"]["hello"] and not replies[-1]["meta"]["fatal"]
    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    assert metrics[-1]["updates"] > 10
    assert all(r["test_acc"] == r["test_acc"] for r in metrics)  # no NaN got in


def test_a_taken_rank_is_refused_with_a_fatal_error(loopback):
    run = loopback(algorithms=[{"name": "asgd"}], stop={"time_budget_s": 1.0})
    run.start(clients=0)
    run.add_client(rank=0)
    deadline = time.monotonic() + 20
    while 0 not in run.coordinator.peers and time.monotonic() < deadline:
        time.sleep(0.05)
    intruder = EdgeClient(run.coordinator.address, rank=0)
    with pytest.raises(ClientFailed, match="rank 0 is taken"):
        intruder.run()
    run.add_client(rank=1)
    run.join()
    assert run.error is None, run.error


def test_unknown_profile_is_refused_before_connecting():
    with pytest.raises(ValueError, match="unknown profile 'fast'"):
        EdgeClient("tcp://127.0.0.1:1", profile="fast")


def test_a_peer_sending_garbage_in_a_loop_cannot_fill_the_log(loopback, caplog):
    """170 malformed messages from one socket: each gets its ERROR reply, but the log keeps the first
    whole and a count of the rest (it wrote 2-3 lines each before: 428 lines)."""
    run = loopback(algorithms=[{"name": "asgd"}], stop={"time_budget_s": 1.0})
    run.start(clients=0)
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(run.coordinator.address)
    caplog.set_level("WARNING", logger="edgesync.coordinator")
    try:
        for _ in range(170):
            sock.send_multipart([b"\xff\xfenot json"])
            assert sock.poll(5000), "no ERROR reply"
            assert json.loads(sock.recv_multipart()[0])["type"] == "ERROR"
    finally:
        sock.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "edgesync.coordinator"]
    assert len(lines) <= 3, lines
    assert "not UTF-8 JSON" in lines[0]  # the first occurrence, whole
    run.add_client(rank=0)
    run.add_client(rank=1)
    run.join()
    assert run.error is None, run.error


def test_a_client_that_cannot_take_part_aborts_the_join_at_once_naming_it(loopback):
    """A client that cannot use its device says HELLO, then a fatal ERROR (what `edgesync client --device
    cuda:0` does on a machine without a GPU): the run aborts at once naming it, not after JOIN_TIMEOUT_S;
    the clients that joined are told why."""
    from raw_client import RawClient
    from edgesync.transport import protocol
    run = loopback(clients=["x1", "x1", "x1"])
    run.start(clients=1)
    raw = RawClient(run.coordinator.address)
    raw.send(protocol.hello(1, None, {"host": "lab-7", "device": "cuda:0"}))
    raw.expect("WELCOME")
    deadline = time.monotonic() + 30  # client 0 must have joined to be told (its thread may start late under load)
    while 0 not in run.coordinator.peers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 0 in run.coordinator.peers, "client 0 did not join"
    started = time.monotonic()
    raw.send(protocol.error("client cannot use device cuda:0: no usable CUDA GPU", fatal=True))
    run.join(30)
    assert time.monotonic() - started < 5
    assert "client 1 (on lab-7) cannot take part: client cannot use device cuda:0" in str(run.error)
    assert any(isinstance(e, ClientFailed) and "the run was aborted: client 1 (on lab-7)" in str(e)
               for e in run.client_errors), run.client_errors
