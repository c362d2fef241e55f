"""Kernel-shaped links (NetnsLab): namespaces, veth pairs, htb rates, and clean-up on every path.

The first tests need nothing; the rest need root and a kernel with netns/veth/htb and skip with
`available()`'s reason otherwise. Rates are measured with a real TCP transfer between the root
namespace and a client process inside the namespace; ±10% of the configured rate (TCP payload gets
≈95.6% of a frame-counting shaper). Every command and transfer is bounded in time; about 15 s total.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading

import pytest

from edgesync.emulation import netns
from edgesync.emulation.netns import commands, naming, shaping
from edgesync.emulation.netns import (
    DirectionShape, NetnsCommandError, NetnsLab, available, cleanup_stale, measure_rate,
)

DOWN_MBPS, UP_MBPS = 20.0, 5.0


def _names() -> tuple[set[str], set[str]]:
    """(namespaces, root-namespace interface names) right now."""
    ns = {line.split()[0] for line in subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=True).stdout.splitlines() if line}
    links = {link["ifname"] for link in commands._links()}
    return ns, links


def _lab_names(lab: NetnsLab) -> set[str]:
    out = set()
    for i in range(lab.n_hosts):
        out.add(lab.namespace(i))
        out.update(lab.interfaces(i))
    return out


@pytest.fixture(scope="module")
def netns_ok():
    ok, reason = available()
    if not ok:
        pytest.skip(f"kernel link shaping unavailable: {reason}")


@pytest.fixture(scope="module")
def lab(netns_ok):
    lab = NetnsLab(2, up=[DirectionShape(UP_MBPS)] * 2, down=[DirectionShape(DOWN_MBPS)] * 2)
    yield lab
    lab.close()


# -- no root needed --------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {"rate_mbps": 0}, {"rate_mbps": -5}, {"latency_ms": -1}, {"jitter_ms": -0.5}, {"loss": 1.5}, {"loss": -0.1},
])
def test_direction_shape_rejects_invalid_values(kwargs):
    with pytest.raises(ValueError):
        DirectionShape(**kwargs)


def test_shape_commands_rate_only_without_netem():
    shape = DirectionShape(rate_mbps=20, latency_ms=30, jitter_ms=5, loss=0.01)
    cmds = shaping._shape_commands(["ip"], ["tc"], "dev0", shape, netem=False)
    text = [" ".join(c) for c in cmds]
    assert "ip link set dev dev0 gso_max_segs 1" in text
    assert "tc qdisc add dev dev0 root handle 1: htb default 1" in text
    cls = next(t for t in text if " class add " in t)
    assert "rate 20000000bit ceil 20000000bit" in cls and "cburst" in cls
    assert not any("netem" in t for t in text)  # no netem: delay/jitter/loss are the transport's


def test_shape_commands_netem_under_htb_class():
    cmds = shaping._shape_commands(["ip", "-n", "x"], ["tc", "-n", "x"], "d",
                                 DirectionShape(5, latency_ms=30, jitter_ms=5, loss=0.01), netem=True)
    last = " ".join(cmds[-1])
    assert last.startswith("tc -n x qdisc add dev d parent 1:1 handle 10: netem")
    assert "delay 30ms 5ms" in last and "loss 1%" in last
    # unshaped rate with a delay: netem at the root; nothing at all for a plain link
    (only,) = shaping._shape_commands(["ip"], ["tc"], "d", DirectionShape(latency_ms=10), netem=True)
    assert " ".join(only).startswith("tc qdisc add dev d root handle 10: netem")
    assert shaping._shape_commands(["ip"], ["tc"], "d", DirectionShape(), netem=True) == []


def test_names_fit_linux_limits_and_match_cleanup_scheme():
    host_if, ns_if = naming._if_names("abcd", "0f0f0f", netns.MAX_HOSTS - 1)
    assert len(host_if) <= 15 and len(ns_if) <= 15
    assert naming._link_re("abcd").match(host_if)
    assert not naming._link_re("abc").match(host_if)  # another prefix never matches
    assert naming._ns_re("es").match(naming._ns_name("es", 123, "a1b2c3", 7))
    assert not naming._ns_re("es").match("es-123-a1b2c3")  # someone else's name
    assert naming._alias_pid(naming._alias(42, "es-42-a1b2c3-0")) == 42
    assert naming._alias_pid("my interface") is None


def test_invalid_lab_arguments_create_nothing():
    with pytest.raises(ValueError, match="one uplink"):
        NetnsLab(2, up=[DirectionShape()], down=[DirectionShape()] * 2)
    with pytest.raises(ValueError, match="prefix"):
        NetnsLab(1, up=[DirectionShape()], down=[DirectionShape()], prefix="toolong")


def test_missing_tool_is_reported_before_anything_is_created(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda tool: None if tool == "tc" else f"/usr/sbin/{tool}")
    ok, reason = available()
    assert not ok and "`tc`" in reason
    assert netns.netem_available() is False
    with pytest.raises(netns.NetnsUnavailable, match="`tc` not found"):
        NetnsLab(1, up=[DirectionShape(5)], down=[DirectionShape(5)])


# -- a live lab ------------------------------------------------------------------------------------

def test_namespaces_interfaces_addresses_and_qdiscs_exist(lab):
    namespaces, links = _names()
    for i in range(2):
        host_if, ns_if = lab.interfaces(i)
        assert lab.namespace(i) in namespaces
        assert host_if in links and ns_if not in links  # the peer lives only inside the namespace
        inside = subprocess.run(["ip", "-n", lab.namespace(i), "-br", "addr"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
        assert ns_if in inside and f"{lab.host_address(i)}/30" in inside
        down_tc = subprocess.run(["tc", "class", "show", "dev", host_if],
                                 capture_output=True, text=True, timeout=10, check=True).stdout
        up_tc = subprocess.run(["tc", "-n", lab.namespace(i), "class", "show", "dev", ns_if],
                               capture_output=True, text=True, timeout=10, check=True).stdout
        assert "rate 20Mbit ceil 20Mbit" in down_tc and "rate 5Mbit ceil 5Mbit" in up_tc
    assert lab.coordinator_address(0) != lab.coordinator_address(1)
    assert lab.exec_prefix(1) == ["ip", "netns", "exec", lab.namespace(1)]
    assert lab.kernel_emulates["rate"] is True
    assert lab.kernel_emulates["delay"] == lab.kernel_emulates["loss"] == netns.netem_available()
    assert "2 hosts" in lab.describe() and "\n" not in lab.describe()


def test_tcp_connect_from_namespace_to_coordinator_only(lab):
    srv = socket.create_server((lab.coordinator_address(0), 0))
    srv.settimeout(10)
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(srv.accept()[0].recv(5)), daemon=True)
    thread.start()
    port = srv.getsockname()[1]
    script = ("import socket, sys\n"
              "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5); s.sendall(b'hello')\n"
              "try:\n    socket.create_connection((sys.argv[3], 9), timeout=2); print('reached')\n"
              "except OSError as e:\n    print('isolated', e.errno)\n")
    out = subprocess.run([*lab.exec_prefix(0), sys.executable, "-S", "-c", script, lab.coordinator_address(0),
                          str(port), lab.coordinator_address(1)], capture_output=True, text=True, timeout=15)
    thread.join(10)
    srv.close()
    assert out.returncode == 0, out.stderr
    assert accepted == [b"hello"]
    assert out.stdout.startswith("isolated")  # host 0 has no route to host 1's link


@pytest.mark.timing
@pytest.mark.parametrize("host", [0, 1])
@pytest.mark.parametrize("direction, mbps, nbytes", [("down", DOWN_MBPS, 4_000_000), ("up", UP_MBPS, 2_000_000)])
def test_achieved_rate_within_10_percent(lab, host, direction, mbps, nbytes):
    achieved = measure_rate(lab, host, direction, nbytes, timeout_s=20)
    assert achieved == pytest.approx(mbps, rel=0.10), f"{direction} host {host}: {achieved:.2f} Mbit/s"


def test_second_lab_coexists_and_transport_shapes_report_what_the_kernel_does_not(lab):
    shape = DirectionShape(rate_mbps=10, latency_ms=40, jitter_ms=4, loss=0.02)
    with NetnsLab(1, up=[shape], down=[DirectionShape()], prefix="est") as other:
        assert other.lab_id != lab.lab_id
        assert other.coordinator_address(0) not in {lab.coordinator_address(i) for i in range(2)}
        residual = other.transport_shapes(0)
        if other.netem:
            assert residual["up"] == DirectionShape()
        else:
            assert residual["up"] == DirectionShape(None, 40, 4, 0.02)
        assert residual["down"] == DirectionShape()


# -- clean-up ------------------------------------------------------------------------------------

def test_close_removes_everything_and_is_idempotent(netns_ok):
    with NetnsLab(2, up=[DirectionShape(5)] * 2, down=[DirectionShape()] * 2, prefix="esc") as lab:
        names = _lab_names(lab)
        namespaces, links = _names()
        assert {lab.namespace(0), lab.namespace(1)} <= namespaces
    namespaces, links = _names()
    assert not names & (namespaces | links)
    lab.close()  # twice: fine
    assert "[closed]" in lab.describe()


def test_failure_half_way_leaves_nothing_behind(netns_ok, monkeypatch):
    real, calls = shaping._format_rate, []

    def fail_on_third(mbps):  # host 0's two links succeed, host 1's downlink gets a rate tc rejects
        calls.append(mbps)
        return "bogus" if len(calls) >= 3 else real(mbps)

    def ours() -> set[str]:  # this process's "esf" lab's names: other tests' labs may come and go meanwhile
        namespaces, links = _names()
        return ({n for n in namespaces if n.startswith(f"esf-{os.getpid()}-")}
                | {n for n in links if re.fullmatch(r"esf[0-9a-f]{6}[hn]\d+", n)})

    monkeypatch.setattr(shaping, "_format_rate", fail_on_third)
    assert ours() == set()
    with pytest.raises(NetnsCommandError, match="bogus") as err:
        NetnsLab(2, up=[DirectionShape(5)] * 2, down=[DirectionShape(20)] * 2, prefix="esf")
    assert "tc" in str(err.value) and err.value.stderr  # names the command and its stderr
    assert len(calls) == 4  # host 0 shaped both ways, host 1's commands built and its downlink failed
    assert ours() == set()


def test_cleanup_stale_removes_a_killed_labs_leftovers_only(lab):
    script = ("import sys, time\n"
              "from edgesync.emulation.netns import NetnsLab, DirectionShape\n"
              "lab = NetnsLab(1, up=[DirectionShape(5)], down=[DirectionShape(5)])\n"
              "print(lab.namespace(0), lab.interfaces(0)[0], flush=True)\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        ns, host_if = proc.stdout.readline().split()
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # no atexit, no close(): what a killed run leaves
        proc.wait(10)
        proc.stdout.close()
    namespaces, links = _names()
    assert ns in namespaces and host_if in links
    removed = cleanup_stale()
    assert ns in removed and host_if in removed
    namespaces, links = _names()
    assert ns not in namespaces and host_if not in links
    assert _lab_names(lab) - {lab.interfaces(i)[1] for i in range(2)} <= namespaces | links  # live lab kept
