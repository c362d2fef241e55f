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


def keys_cli(*args: str):
    return CliRunner().invoke(app, ["keys", *map(str, args)], terminal_width=400)


def test_keys_command_makes_the_allow_list_and_prints_each_machines_command(tmp_path):
    keys = tmp_path / "keys"
    result = keys_cli(keys, "--name", "coordinator", "--name", "client-0", "--name", "client-1")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in keys.iterdir()) == [
        "allow", "client-0.key", "client-0.key_secret", "client-1.key", "client-1.key_secret",
        "coordinator.key", "coordinator.key_secret"]
    # allow/ holds the clients' public keys, byte for byte, and neither the coordinator's key nor a secret
    assert sorted(p.name for p in (keys / "allow").iterdir()) == ["client-0.key", "client-1.key"]
    for name in ("client-0", "client-1"):
        assert (keys / "allow" / f"{name}.key").read_bytes() == (keys / f"{name}.key").read_bytes()
    server = ServerKeys.from_files(keys / "coordinator.key_secret", keys / "allow")  # what --allow loads
    assert server.allow_dir == keys / "allow"
    lines = result.output.splitlines()
    assert (f"  edgesync coordinator --scenario scenarios/quickstart.yaml --bind tcp://0.0.0.0:5555 "
            f"--curve-secret {keys}/coordinator.key_secret --allow {keys}/allow") in lines
    for name in ("client-0", "client-1"):
        assert (f"  edgesync client --connect tcp://COORDINATOR-HOST:5555 --curve-secret {keys}/{name}.key_secret "
                f"--server-key {keys}/coordinator.key") in lines
        assert f"On {name}'s machine: copy {keys}/{name}.key_secret and {keys}/coordinator.key there" in result.output


def test_keys_command_prints_commands_that_the_cli_accepts(tmp_path, monkeypatch):
    """The printed commands, run as printed (relative paths, from the folder the keys were made in),
    get past every option check: the key files are where the commands say."""
    monkeypatch.chdir(tmp_path)
    result = keys_cli("keys", "--name", "coordinator", "--name", "client-0", "--host", "127.0.0.1")
    assert result.exit_code == 0, result.output
    commands = [line.split()[1:] for line in result.output.splitlines() if line.startswith("  edgesync ")]
    assert [c[0] for c in commands] == ["coordinator", "client"]
    assert commands[1][1:3] == ["--connect", "tcp://127.0.0.1:5555"]
    from edgesync.cli.shared import client_keys, server_keys
    assert server_keys(Path(commands[0][commands[0].index("--curve-secret") + 1]),
                       Path(commands[0][commands[0].index("--allow") + 1])) is not None
    assert client_keys(Path(commands[1][commands[1].index("--curve-secret") + 1]),
                       Path(commands[1][commands[1].index("--server-key") + 1])) is not None


def test_keys_command_run_again_adds_clients_and_touches_nothing_else(tmp_path):
    keys = tmp_path / "keys"
    assert keys_cli(keys, "--name", "coordinator", "--name", "client-0", "--name", "client-1").exit_code == 0
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in keys.rglob("*") if p.is_file()}
    result = keys_cli(keys, "--name", "client-2")
    assert result.exit_code == 0, result.output
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in keys.rglob("*") if p.is_file()}
    assert {p: after[p] for p in before} == before  # every earlier file as it was
    assert sorted(p.relative_to(keys).as_posix() for p in set(after) - set(before)) == [
        "allow/client-2.key", "client-2.key", "client-2.key_secret"]
    assert "edgesync client --connect tcp://COORDINATOR-HOST:5555 " \
           f"--curve-secret {keys}/client-2.key_secret --server-key {keys}/coordinator.key" in result.output
    assert "client-0.key_secret" not in result.output  # only the new client's command
    assert "admits the new clients from their next connection on, without a restart" in result.output
    # the whole set again (e.g. the first command with a name added): existing pairs are kept, not refused
    again = keys_cli(keys, "--name", "coordinator", "--name", "client-0", "--name", "client-1", "--name", "client-2")
    assert again.exit_code == 0, again.output
    assert again.output.count("exists, kept as it is") == 4
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in keys.rglob("*") if p.is_file()} == after


def test_keys_command_restores_a_missing_allow_copy_and_refuses_conflicts(tmp_path):
    keys = tmp_path / "keys"
    assert keys_cli(keys, "--name", "coordinator", "--name", "client-0").exit_code == 0
    # keys made before allow/ existed (or an allow copy deleted): running again puts the copy back
    (keys / "allow" / "client-0.key").unlink()
    assert keys_cli(keys, "--name", "client-0").exit_code == 0
    assert (keys / "allow" / "client-0.key").read_bytes() == (keys / "client-0.key").read_bytes()
    # an allow-list entry that is another key than the pair of that name: refused, nothing written
    other = keys_cli(tmp_path / "other", "--name", "client-0")
    assert other.exit_code == 0
    (keys / "allow" / "client-0.key").write_bytes((tmp_path / "other" / "client-0.key").read_bytes())
    files = sorted(keys.rglob("*"))
    clash = keys_cli(keys, "--name", "client-1", "--name", "client-0")
    assert clash.exit_code == 2 and "allow/client-0.key holds another key than" in clash.output
    assert sorted(keys.rglob("*")) == files  # client-1 was not made either
    # a name already admitted without its pair here, a lone secret, a name twice, a bad name
    (keys / "allow" / "client-7.key").write_bytes((keys / "client-0.key").read_bytes())
    assert "allow/client-7.key exists but" in keys_cli(keys, "--name", "client-7").output
    (keys / "client-8.key_secret").write_text("x")
    assert "client-8.key_secret exists without its public client-8.key" in keys_cli(keys, "--name", "client-8").output
    assert "--name given twice" in keys_cli(keys, "--name", "client-9", "--name", "client-9").output
    assert "key name '../x'" in keys_cli(keys, "--name", "../x").output
    assert sorted(keys.rglob("*")) == sorted(files + [keys / "allow" / "client-7.key", keys / "client-8.key_secret"])


def test_keys_command_coordinator_option_names_the_coordinators_pair(tmp_path):
    keys = tmp_path / "keys"
    result = keys_cli(keys, "--coordinator", "server", "--name", "server", "--name", "laptop")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (keys / "allow").iterdir()) == ["laptop.key"]
    assert f"--curve-secret {keys}/server.key_secret --allow {keys}/allow" in result.output
    assert f"--server-key {keys}/server.key" in result.output
    # clients only, with no coordinator pair in the folder: made, with a note on the missing pair
    lone = keys_cli(tmp_path / "lone", "--name", "client-0")
    assert lone.exit_code == 0
    assert "coordinator.key does not exist yet" in lone.output
    # no --name: the coordinator's pair alone, and an empty allow-list is not made
    only = keys_cli(tmp_path / "only")
    assert only.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "only").iterdir()) == ["coordinator.key", "coordinator.key_secret"]


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


def test_a_send_with_nothing_to_queue_on_ends_in_the_refusal_not_a_hang(lab, monkeypatch):
    """A connection that ZeroMQ tore down during its handshake leaves the DEALER nothing to queue on, and a
    blocking send then waits forever (a suite run hung so on the HELLO above). Until the first handshake
    has succeeded the client sends without blocking: here every such try finds nothing to queue on, and the
    refusal arrives instead of a hang."""
    real_send = sockets._send

    def nothing_to_queue_on(sock, frames, flags=0):
        if flags & zmq.NOBLOCK:
            raise zmq.Again()
        return real_send(sock, frames, flags)

    monkeypatch.setattr(sockets, "_send", nothing_to_queue_on)
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*", keys=server_keys(lab))
    client = ClientSocket(coordinator.address, keys=client_keys(lab, "stranger"))
    try:
        started = time.monotonic()
        with pytest.raises(HandshakeFailed, match="refused this client's CURVE key"):
            client.send(Message("HELLO", {}))
        assert time.monotonic() - started < REFUSAL_WITHIN_S
    finally:
        client.close(linger_ms=0)
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
        # detail, repeated: either way the client is told that the coordinator requires CURVE keys
        reason = failure_of(client)
        assert (f"the coordinator at {coordinator.address} requires CURVE: start this client with --curve-secret "
                "(its NAME.key_secret) and --server-key (the coordinator's NAME.key)") in reason, reason
    finally:
        client.close()
        coordinator.close()


def test_a_plain_client_of_a_curve_coordinator_is_told_so_every_time(lab):
    """Which of ZeroMQ's two reports comes first is a race: ten tries, one message."""
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*", keys=server_keys(lab))
    try:
        for _ in range(10):
            client = ClientSocket(coordinator.address)
            try:
                client.send(Message("HELLO", {}))
                assert "requires CURVE: start this client with --curve-secret" in failure_of(client)
            finally:
                client.close(linger_ms=0)
    finally:
        coordinator.close()


class _Events:
    """Stands in for a handshake monitor socket: hands out the given events, then nothing."""

    def __init__(self, events):
        self.events = list(events)

    def poll(self, timeout=0):
        return bool(self.events)

    def close(self, linger=None):
        pass


@pytest.mark.parametrize("curve,events,message", [
    (False, [(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)],
     "requires CURVE: start this client with --curve-secret"),
    (False, [(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, 32)] * 3,
     "requires CURVE: start this client with --curve-secret (its NAME.key_secret) and --server-key (the "
     "coordinator's NAME.key), made by `edgesync keys` (it closed the connection during 3 handshakes in a row)"),
    (False, [(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, 32)] * 2
     + [(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)],
     "requires CURVE: start this client with --curve-secret"),
    (True, [(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)],
     "does not use CURVE (plain TCP): start it with --curve-secret and --allow"),
    (True, [(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, 32)] * 3,
     "failed 3 times (no detail): check that --server-key is the coordinator's public key"),
    (True, [(zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)], "refused this client's CURVE key"),
])
def test_handshake_events_map_to_one_clear_message(monkeypatch, curve, events, message):
    from edgesync.transport import handshake
    sock = zmq.Context.instance().socket(zmq.DEALER)
    watch = handshake.HandshakeWatch(sock, "tcp://10.0.0.1:5555", curve=curve, public_key=b"K" * 40)
    watch.monitor.close(linger=0)
    sock.disable_monitor()
    watch.monitor = fake = _Events(events)
    monkeypatch.setattr(handshake, "recv_monitor_message",
                        lambda monitor: dict(zip(("event", "value"), monitor.events.pop(0)), endpoint=b""))
    monkeypatch.setattr(sock, "disable_monitor", lambda: None)
    try:
        with pytest.raises(HandshakeFailed) as info:
            watch.done()
        assert message in str(info.value) and "tcp://10.0.0.1:5555" in str(info.value)
        assert watch.monitor is None and not fake.events  # gave up at the last event, and closed the watch
    finally:
        sock.close(linger=0)


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
        reason = failure_of(client)  # ZeroMQ says "mechanism mismatch" at once (measured: every time)
        assert "does not use CURVE (plain TCP): start it with --curve-secret and --allow" in reason
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
