"""Endpoints as users type them: HOST:PORT is tcp://HOST:PORT; anything else names the option."""
import socket

import pytest
import zmq

from edgesync.transport.addresses import AddressError, endpoint
from edgesync.transport.bind_errors import BindFailed
from edgesync.transport.sockets import CoordinatorSocket


@pytest.mark.parametrize("value, expected", [
    ("tcp://127.0.0.1:5555", "tcp://127.0.0.1:5555"),
    ("127.0.0.1:5699", "tcp://127.0.0.1:5699"),
    (" lab-server.local:5555 ", "tcp://lab-server.local:5555"),
    ("TCP://host:1", "tcp://host:1"),
    ("[::1]:5555", "tcp://[::1]:5555"),
    ("ipc:///tmp/edgesync.sock", "ipc:///tmp/edgesync.sock"),
])
def test_connect_addresses(value, expected):
    assert endpoint(value, "--connect") == expected


@pytest.mark.parametrize("value, expected", [
    ("0.0.0.0:5555", "tcp://0.0.0.0:5555"),
    ("*:5555", "tcp://*:5555"),
    (":5555", "tcp://*:5555"),
    ("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"),
    ("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"),
])
def test_bind_addresses(value, expected):
    assert endpoint(value, "--bind", bind=True) == expected


@pytest.mark.parametrize("value, needle", [
    ("", "no address"),
    ("localhost", "no port"),
    ("tcp://127.0.0.1", "no port"),
    (":5555", "no host"),
    ("*:5555", "'*' is not a host"),
    ("host:port", "port 'port' is not a number from 1 to 65535"),
    ("host:0", "from 1 to 65535"),
    ("host:70000", "from 1 to 65535"),
    ("http://host:80", "unsupported scheme 'http://'"),
    ("tcp:/host:5555", "not an address"),
    ("tcp://host:5555/path", "not a number"),
    ("tcp://bad host:5555", "'bad host' is not a host"),
])
def test_malformed_connect_addresses_name_the_option_and_value(value, needle):
    with pytest.raises(AddressError) as info:
        endpoint(value, "--connect")
    text = str(info.value)
    assert text.startswith(f"--connect {value!r}: ") and needle in text and "\n" not in text
    assert "expected tcp://HOST:5555 or HOST:5555" in text


def test_a_busy_address_is_one_line_naming_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BindFailed) as info:
            CoordinatorSocket(f"tcp://127.0.0.1:{port}")
    assert isinstance(info.value, zmq.ZMQError)  # callers that caught ZeroMQ's error still do
    assert str(info.value) == (f"tcp://127.0.0.1:{port}: the address is in use: another program (another "
                               f"coordinator?) listens on port {port}; stop it or choose another port")


def test_an_address_this_machine_lacks():
    with pytest.raises(BindFailed) as info:
        CoordinatorSocket("tcp://192.0.2.1:5555")  # TEST-NET-1: never a local address
    assert "tcp://192.0.2.1:5555: this machine has no such IP address" in str(info.value)


def test_a_client_waiting_knows_whether_anything_answers():
    """ConnectWait: with something that speaks ZeroMQ but never answers HELLO, the give-up line says so."""
    from edgesync.transport.connect_wait import ConnectWait
    from edgesync.transport.sockets import ClientSocket
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    sock = ClientSocket(f"tcp://127.0.0.1:{port}", context=ctx)
    try:
        wait = ConnectWait(f"tcp://127.0.0.1:{port}", timeout_s=2, every_s=1)
        assert sock.recv(0.5) is None and sock.reached
        assert wait.check(sock, 1.0) is None
        assert wait.check(sock, 2.0) == (f"--connect tcp://127.0.0.1:{port}: gave up after 2 s (--connect-timeout 2): "
                                         "it accepted the connection but never answered HELLO")
    finally:
        sock.close(linger_ms=0)
        router.close(linger=0)
        ctx.term()
