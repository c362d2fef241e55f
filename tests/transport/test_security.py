"""CURVE keys and sockets: key files, the allow-list, refusals that are errors (not hangs), message size."""
from __future__ import annotations

import logging
import stat
import time
from pathlib import Path

import pytest
import zmq
from typer.testing import CliRunner

from edgesync.cli import app
from edgesync.transport import sockets
from edgesync.transport.handshake import HandshakeFailed
from edgesync.transport.protocol import Message
from edgesync.transport.security import (
    ClientKeys, KeyFileError, ServerKeys, create_keys, load_public, load_secret,
)
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket

REFUSAL_WITHIN_S = 20.0  # generous: the machine may be busy; a refusal takes milliseconds
QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


@pytest.fixture
def lab(tmp_path):
    """Keys as a lab sets them up: the coordinator's pair, two clients, one of them in the allow-list."""
    keys = tmp_path / "keys"
    allow = tmp_path / "allow"
    allow.mkdir()
    create_keys(keys, "coordinator")
    for name in ("client-0", "stranger"):
        create_keys(keys, name)
    (allow / "client-0.key").write_bytes((keys / "client-0.key").read_bytes())
    return keys, allow


def server_keys(lab) -> ServerKeys:
    keys, allow = lab
    return ServerKeys.from_files(keys / "coordinator.key_secret", allow)


def client_keys(lab, name: str, server: str = "coordinator") -> ClientKeys:
    keys, _ = lab
    return ClientKeys.from_files(keys / f"{name}.key_secret", keys / f"{server}.key")


def test_create_keys_writes_a_public_file_and_a_private_secret_file(tmp_path):
    public, secret = create_keys(tmp_path / "k", "client-3")
    assert (public.name, secret.name) == ("client-3.key", "client-3.key_secret")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    pub, sec = load_secret(secret)
    assert load_public(public) == pub and len(sec) == 40
    assert "secret-key" not in public.read_text()


def test_create_keys_never_overwrites_a_key(tmp_path):
    create_keys(tmp_path, "coordinator")
    with pytest.raises(KeyFileError, match="coordinator.key exists"):
        create_keys(tmp_path, "coordinator")
    with pytest.raises(KeyFileError, match="key name '../x'"):
        create_keys(tmp_path, "../x")


def test_key_file_mistakes_are_named(tmp_path, lab):
    keys, allow = lab
    with pytest.raises(KeyFileError, match=r"coordinator.key: holds no secret key; pass NAME.key_secret"):
        load_secret(keys / "coordinator.key")
    with pytest.raises(KeyFileError, match="nothing.key_secret: no such key file"):
        load_secret(keys / "nothing.key_secret")
    (tmp_path / "junk.key").write_text("hello\n")
    with pytest.raises(KeyFileError, match="junk.key: not a ZeroMQ key file"):
        load_public(tmp_path / "junk.key")
    with pytest.raises(KeyFileError, match="no such folder"):
        ServerKeys.from_files(keys / "coordinator.key_secret", tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(KeyFileError, match="holds no \\*.key files, so no client could join"):
        ServerKeys.from_files(keys / "coordinator.key_secret", tmp_path / "empty")


def test_keys_command_writes_pairs_and_says_what_goes_where(tmp_path):
    result = CliRunner().invoke(app, ["keys", str(tmp_path / "k"), "--name", "coordinator", "--name", "client-0"],
                                terminal_width=400)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == [
        "client-0.key", "client-0.key_secret", "coordinator.key", "coordinator.key_secret"]
    assert "every client machine (--server-key)" in result.output
    assert "allow-list folder (--allow DIR)" in result.output
    again = CliRunner().invoke(app, ["keys", str(tmp_path / "k")], terminal_width=400)
    assert again.exit_code == 2 and "coordinator.key exists" in again.output


def exchange(coordinator: CoordinatorSocket, client: ClientSocket) -> Message:
    """HELLO from the client, WELCOME back; returns what the client got."""
    client.send(Message("HELLO", {"rank": 0}))
    deadline = time.monotonic() + REFUSAL_WITHIN_S
    while (item := coordinator.recv(0.1)) is None:
        assert time.monotonic() < deadline, "the coordinator got nothing"
    peer, msg = item
    assert msg.type == "HELLO"
    coordinator.send(peer, Message("WELCOME", {"rank": 0}))
    return client.recv(REFUSAL_WITHIN_S)


def test_an_allowed_key_talks_over_curve(lab):
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*", keys=server_keys(lab))
    client = ClientSocket(coordinator.address, keys=client_keys(lab, "client-0"))
    try:
        assert exchange(coordinator, client).type == "WELCOME"
        assert client._handshake is None  # the watch is closed once the handshake succeeded
    finally:
        client.close()
        coordinator.close()


def failure_of(client: ClientSocket) -> str:
    started = time.monotonic()
    with pytest.raises(HandshakeFailed) as info:
        client.recv(REFUSAL_WITHIN_S + 5)
    assert time.monotonic() - started < REFUSAL_WITHIN_S
    return str(info.value)


def test_an_unknown_key_is_refused_logged_and_told(lab, caplog):
    caplog.set_level(logging.INFO, logger="edgesync.security")
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*", keys=server_keys(lab))
    stranger = client_keys(lab, "stranger")
    client = ClientSocket(coordinator.address, keys=stranger)
    try:
        client.send(Message("HELLO", {}))
        reason = failure_of(client)
        assert "refused this client's CURVE key" in reason and stranger.public.decode() in reason
        assert "--allow folder" in reason
        assert coordinator.recv(0.2) is None  # nothing of the stranger reached the coordinator
        assert [key for _, key in coordinator.auth.refused] == [stranger.public.decode()]
        assert f"its public key {stranger.public.decode()} is not in the allow-list" in caplog.text
        assert "127.0.0.1" in caplog.text
    finally:
        client.close()
        coordinator.close()


def test_a_key_added_to_the_allow_list_is_admitted_without_a_restart(lab):
    keys, allow = lab
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*", keys=server_keys(lab))
    (allow / "stranger.key").write_bytes((keys / "stranger.key").read_bytes())
    client = ClientSocket(coordinator.address, keys=client_keys(lab, "stranger"))
    try:
        assert exchange(coordinator, client).type == "WELCOME"
    finally:
        client.close()
        coordinator.close()


def test_a_wrong_server_key_fails_with_a_hint(lab):
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*", keys=server_keys(lab))
    client = ClientSocket(coordinator.address, keys=client_keys(lab, "client-0", server="stranger"))
    try:
        client.send(Message("HELLO", {}))
        assert "check that --server-key is the coordinator's public key" in failure_of(client)
    finally:
        client.close()
        coordinator.close()


def test_a_plain_client_of_a_curve_coordinator_is_told_to_use_keys(lab):
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*", keys=server_keys(lab))
    client = ClientSocket(coordinator.address)
    try:
        client.send(Message("HELLO", {}))
        # ZeroMQ reports a mechanism mismatch, or (when the coordinator hangs up first) a failure with no
        # detail, repeated: either way the client is told that the coordinator may require CURVE keys
        reason = failure_of(client)
        assert ("requires CURVE: start this client with --curve-secret" in reason
                or "does it require CURVE keys?" in reason), reason
    finally:
        client.close()
        coordinator.close()


def test_a_message_over_the_size_limit_is_dropped_and_others_are_served(monkeypatch):
    monkeypatch.setattr(sockets, "MAX_MESSAGE_BYTES", 64 * 1024)
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*")
    ctx = zmq.Context.instance()
    big, small = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
    try:
        for s in (big, small):
            s.setsockopt(zmq.LINGER, 0)
            s.connect(coordinator.address)
        big.send_multipart([b"x" * (128 * 1024)])
        assert coordinator.recv(1.0) is None  # ZeroMQ dropped it (and the peer) before it was read
        small.send_multipart(Message("HELLO", {}).to_frames())
        item = coordinator.recv(REFUSAL_WITHIN_S)
        assert item is not None and item[1].type == "HELLO"
    finally:
        big.close()
        small.close()
        coordinator.close()


def test_a_curve_client_of_a_plain_coordinator_fails_with_a_hint(lab):
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*")
    client = ClientSocket(coordinator.address, keys=client_keys(lab, "client-0"))
    try:
        client.send(Message("HELLO", {}))
        reason = failure_of(client)  # ZeroMQ says "mechanism mismatch", or fails without detail 3 times
        assert "does not use CURVE" in reason or "the coordinator runs with CURVE" in reason
    finally:
        client.close()
        coordinator.close()


@pytest.mark.parametrize("args,message", [
    (["client", "--connect", "tcp://127.0.0.1:1", "--curve-secret", "x.key_secret"],
     "CURVE needs both --curve-secret (this client's NAME.key_secret) and --server-key"),
    (["client", "--connect", "tcp://127.0.0.1:1", "--curve-secret", "missing.key_secret", "--server-key", "c.key"],
     "missing.key_secret: no such key file"),
    (["coordinator", "--scenario", str(QUICKSTART), "--allow", "allow"],
     "CURVE needs both --curve-secret (the coordinator's NAME.key_secret) and --allow"),
])
def test_cli_curve_options_are_checked_before_anything_starts(args, message):
    result = CliRunner().invoke(app, args, terminal_width=400)
    assert result.exit_code == 2
    assert message in result.output
