"""Kernel-shaped links: one network namespace per emulated host, joined to the coordinator by a veth pair.

Two ways to give a client a slow link:

- **transport pacing** (the default elsewhere in EdgeSync): the sender sleeps so that a message of
  n bytes takes n·8/rate + latency. Portable and deterministic, but it only shapes *our* messages,
  at message granularity, and TCP never sees a slow link (no queue build-up, no congestion control).
- **kernel shaping** (this module): each host runs in its own network namespace and talks to the
  coordinator (root namespace) over a veth pair whose egress qdiscs limit the rate: the downlink
  (coordinator → host i) on the root-side end, the uplink (host i → coordinator) on the
  namespace-side end. Every byte — ZeroMQ frames, TCP headers, retransmissions — pays, and TCP
  reacts as it would on a real bottleneck.

Rate always comes from the kernel (htb). Delay, jitter and loss need ``sch_netem``; where the kernel
has no netem (``netem_available()``), they are left out and the transport must add them:
``NetnsLab.kernel_emulates`` says what the kernel does and ``NetnsLab.transport_shapes(i)`` what is
left for the transport.

The kernel rate counts whole Ethernet frames, headers included: TCP payload gets about
1448/1514 ≈ 95.6% of it at MTU 1500, where transport pacing (``links.Link``) counts payload bytes.

Addresses: host i gets a private /30 from ``POOL`` (root side .1, namespace side .2), picked so that
no existing route or address in the root namespace overlaps it. Names carry the creating process's
pid and a random lab id (``es-<pid>-<lab>-<i>`` for namespaces, ``es<lab>h<i>``/``es<lab>n<i>`` for
the veth ends, the root end also tagged with an ``ifalias``), so two labs coexist and
``cleanup_stale()`` only ever removes what this module made for a process that no longer runs.

Needs root (CAP_NET_ADMIN) and iproute2 (``ip``, ``tc``).
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import ipaddress
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

POOL = ipaddress.ip_network("10.231.0.0/16")  # rarely used private range; checked against routes anyway
CMD_TIMEOUT_S = 10.0
# serialises name and address allocation across processes
LOCK_PATH = "/run/lock/edgesync-netns.lock" if os.path.isdir("/run/lock") else "/tmp/edgesync-netns.lock"
ALIAS_TAG = "edgesync.netns"  # ifalias prefix on every root-side veth end this module creates
MAX_HOSTS = 1000  # keeps interface names within Linux's 15 characters: 4 (prefix) + 6 + 1 + 3
FRAME_BYTES = 1514  # a full Ethernet frame at MTU 1500, as htb counts it (no FCS/preamble)
# netem's default queue is 1000 packets; with delay it must hold a whole bandwidth-delay product, or it
# drops packets that nobody asked it to lose.
NETEM_LIMIT = 100_000

__all__ = [
    "DirectionShape", "NetnsCommandError", "NetnsLab", "NetnsUnavailable", "available", "cleanup_stale",
    "measure_rate", "netem_available",
]

_PREFIX_RE = re.compile(r"^[a-z]{1,4}$")


class NetnsUnavailable(RuntimeError):
    """Kernel shaping cannot run here (not root, no iproute2, no netns/veth/htb); the reason is the message."""


class NetnsCommandError(subprocess.CalledProcessError):
    """An ``ip``/``tc`` command failed; the message names the command and its stderr."""

    def __str__(self) -> str:
        err = (self.stderr or "").strip() or "(no stderr)"
        return f"command failed with exit status {self.returncode}: {shlex.join(self.cmd)}: {err}"


@dataclass(frozen=True)
class DirectionShape:
    """One direction of a link. rate None = unshaped; loss is a probability in [0, 1]."""

    rate_mbps: float | None = None
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        if self.rate_mbps is not None and not self.rate_mbps > 0:
            raise ValueError(f"rate_mbps must be > 0 or None, got {self.rate_mbps!r}")
        if not self.latency_ms >= 0 or not self.jitter_ms >= 0:
            raise ValueError(f"latency_ms and jitter_ms must be >= 0, got {self.latency_ms!r}, {self.jitter_ms!r}")
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"loss must be in [0, 1], got {self.loss!r}")

    @property
    def needs_netem(self) -> bool:
        return self.latency_ms > 0 or self.jitter_ms > 0 or self.loss > 0


# ---------------------------------------------------------------------------------------------------
# Commands


def _run(cmd: list[str], *, tolerate: tuple[str, ...] = ()) -> subprocess.CompletedProcess | None:
    """Run cmd (bounded in time); a failure whose stderr contains one of `tolerate` returns None."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=CMD_TIMEOUT_S, check=True)
    except subprocess.CalledProcessError as e:
        if any(t in (e.stderr or "") for t in tolerate):
            return None
        raise NetnsCommandError(e.returncode, e.cmd, e.output, e.stderr) from None


def _json(cmd: list[str]) -> list[dict]:
    out = _run(cmd).stdout.strip()
    return json.loads(out) if out else []


_GONE = ("Cannot find device", "No such file or directory")


def _delete_netns(name: str) -> None:
    _run(["ip", "netns", "del", name], tolerate=_GONE)


def _delete_link(name: str) -> None:
    _run(["ip", "link", "del", "dev", name], tolerate=_GONE)


def _namespaces() -> list[str]:
    # `ip netns list` prints "name (id: 3)" for namespaces with an id
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def _links() -> list[dict]:
    return _json(["ip", "-j", "link", "show"])


# ---------------------------------------------------------------------------------------------------
# Availability


def _basic_requirements() -> str | None:
    """Why kernel shaping cannot run here, checked without touching the kernel; None if it may."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN) to create network namespaces and qdiscs"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` not found on PATH (install iproute2)"
    return None


@dataclass(frozen=True)
class _Probe:
    ok: bool
    netem: bool
    reason: str


@functools.lru_cache(maxsize=None)
def _probe() -> _Probe:
    """Try the real thing in a throwaway namespace: veth pair, htb, netem. Deletes it again."""
    ns = f"es-{os.getpid()}-{secrets.token_hex(3)}-probe"
    try:
        _run(["ip", "netns", "add", ns])
    except (NetnsCommandError, subprocess.TimeoutExpired) as e:
        return _Probe(False, False, f"cannot create a network namespace: {e}")
    try:
        # both ends inside the throwaway namespace: the root namespace is never touched
        step = "veth"
        _run(["ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"])
        step = "htb"
        _run(["tc", "-n", ns, "qdisc", "add", "dev", "pa", "root", "handle", "1:", "htb"])
        try:
            _run(["tc", "-n", ns, "qdisc", "add", "dev", "pb", "root", "netem", "delay", "1ms"])
            netem = True
        except NetnsCommandError:  # "Specified qdisc kind is unknown."
            netem = False
        return _Probe(True, netem, "ok")
    except (NetnsCommandError, subprocess.TimeoutExpired) as e:
        return _Probe(False, False, f"kernel lacks {step} support: {e}")
    finally:
        _delete_netns(ns)  # removes the veth pair and its qdiscs with it


def available() -> tuple[bool, str]:
    """(ok, reason). Creates nothing that outlives the call (one throwaway namespace, probed once)."""
    why = _basic_requirements()
    if why is not None:
        return False, why
    probe = _probe()
    if not probe.ok:
        return False, probe.reason
    if probe.netem:
        return True, "ok: netns, veth, htb and netem (kernel applies rate, delay, jitter, loss)"
    return True, "ok: netns, veth, htb; no netem (kernel applies rate; the transport must add delay/jitter/loss)"


def netem_available() -> bool:
    """Whether the kernel can add delay/jitter/loss (sch_netem), by trying it once; cached."""
    return _basic_requirements() is None and _probe().netem


# ---------------------------------------------------------------------------------------------------
# Shaping


def _format_rate(mbps: float) -> str:
    # tc's "mbit" is 10^6 bit/s, but an integer count of bit/s leaves no doubt
    return f"{max(1, round(mbps * 1e6))}bit"


def _burst_bytes(mbps: float) -> int:
    # Tokens beyond `burst` are thrown away, so a burst shorter than the scheduling delay of the
    # dequeue (timer slack, a busy CPU) loses rate; 5 ms of traffic covers that, and at least two
    # full frames let a frame go out whole. Small next to any transfer worth measuring.
    return max(2 * FRAME_BYTES, round(mbps * 1e6 / 8 * 0.005))


def _netem_args(shape: DirectionShape) -> list[str]:
    if not shape.needs_netem:
        return []
    args = ["limit", str(NETEM_LIMIT), "delay", f"{shape.latency_ms:g}ms"]
    if shape.jitter_ms > 0:
        args.append(f"{shape.jitter_ms:g}ms")
    if shape.loss > 0:
        args += ["loss", f"{shape.loss * 100:g}%"]
    return args


def _shape_commands(ip: list[str], tc: list[str], dev: str, shape: DirectionShape, netem: bool) -> list[list[str]]:
    """The commands that shape dev's egress (ip/tc = ["ip"]/["tc"], or with "-n", ns).

    Rate: htb rather than tbf. tbf needs a queue bound (limit/latency) and drops beyond it, which at
    1 Mbit/s means TCP losses we did not ask for; htb queues in its leaf (pfifo, txqueuelen packets)
    and TCP Small Queues keep that short. htb also gives the usual rate-then-netem tree, netem as the
    leaf of the one class. `default 1` sends all traffic through class 1:1 (htb lets unclassified
    traffic bypass shaping otherwise); ceil = rate so it never borrows; cburst = burst (its default is
    one frame, which would make ceil, not rate, the limit).
    """
    delay = _netem_args(shape) if netem else []
    cmds: list[list[str]] = []
    if shape.rate_mbps is not None:
        rate, burst = _format_rate(shape.rate_mbps), str(_burst_bytes(shape.rate_mbps))
        # One segment per skb. With GSO, TCP hands htb skbs of up to 64 KB, which htb sends whole on
        # credit: at 1 Mbit/s half a second of traffic in one burst, then silence. Frame by frame, the
        # link serialises like a real one (measured here: 1 Mbit/s goodput error +2.3% -> +0.1% vs the
        # frame-overhead bound). Costs packets per second, negligible at these rates.
        cmds.append([*ip, "link", "set", "dev", dev, "gso_max_segs", "1"])
        cmds.append([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
        # quantum only divides bandwidth between sibling classes (there are none); setting it stops
        # htb warning that rate/r2q is out of range at high and low rates
        cmds.append([*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                     "rate", rate, "ceil", rate, "burst", burst, "cburst", burst, "quantum", str(FRAME_BYTES)])
        if delay:
            cmds.append([*tc, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "netem", *delay])
    elif delay:
        cmds.append([*tc, "qdisc", "add", "dev", dev, "root", "handle", "10:", "netem", *delay])
    return cmds


# ---------------------------------------------------------------------------------------------------
# Names and addresses


def _ns_name(prefix: str, pid: int, lab: str, i: int) -> str:
    return f"{prefix}-{pid}-{lab}-{i}"


def _if_names(prefix: str, lab: str, i: int) -> tuple[str, str]:
    """(root-side, namespace-side) veth names: at most 4 + 6 + 1 + 3 = 14 characters."""
    return f"{prefix}{lab}h{i}", f"{prefix}{lab}n{i}"


def _ns_re(prefix: str) -> re.Pattern:
    return re.compile(rf"^{re.escape(prefix)}-(\d+)-([0-9a-f]{{6}})-(\d+|probe)$")


def _link_re(prefix: str) -> re.Pattern:
    return re.compile(rf"^{re.escape(prefix)}([0-9a-f]{{6}})h(\d+)$")


def _alias(pid: int, ns: str) -> str:
    return f"{ALIAS_TAG} pid={pid} ns={ns}"


def _alias_pid(alias: str | None) -> int | None:
    m = re.fullmatch(rf"{re.escape(ALIAS_TAG)} pid=(\d+) ns=\S+", alias or "")
    return int(m.group(1)) if m else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _allocation_lock():
    """Exclusive across processes, so two labs never pick the same id or subnet."""
    fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _networks_in_use() -> list[ipaddress.IPv4Network]:
    """Every IPv4 destination routed (any table) or assigned in the root namespace, but the default."""
    found = [r.get("dst", "") for r in _json(["ip", "-j", "-4", "route", "show", "table", "all"])]
    for link in _json(["ip", "-j", "-4", "addr", "show"]):
        found += [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", []) if "local" in a]
    nets = []
    for dst in found:
        with contextlib.suppress(ValueError):  # "default", and anything else that is not a prefix
            nets.append(ipaddress.ip_network(dst, strict=False))
    return nets


def _free_subnets(n: int) -> list[ipaddress.IPv4Network]:
    used = [u for u in _networks_in_use() if u.overlaps(POOL)]
    free = []
    for net in POOL.subnets(new_prefix=30):
        if not any(net.overlaps(u) for u in used):
            free.append(net)
            if len(free) == n:
                return free
    raise NetnsUnavailable(f"only {len(free)} free /30 subnets in {POOL} for {n} hosts "
                           f"(routes or addresses already overlap it)")


# ---------------------------------------------------------------------------------------------------
# The lab


@dataclass(frozen=True)
class _Host:
    ns: str
    host_if: str  # root-side veth end: downlink egress
    ns_if: str  # namespace-side veth end: uplink egress
    coordinator: str
    address: str


class NetnsLab:
    """n emulated hosts, each in its own namespace on its own shaped veth link to the root namespace.

    A coordinator in the root namespace listens on ``coordinator_address(i)`` (or on each of them);
    client i runs as ``exec_prefix(i) + [cmd...]`` and connects to ``coordinator_address(i)``.
    Use as a context manager; ``close()`` is idempotent and also runs at interpreter exit.
    """

    def __init__(self, n_hosts: int, up: list[DirectionShape], down: list[DirectionShape], prefix: str = "es"):
        if not 1 <= n_hosts <= MAX_HOSTS:
            raise ValueError(f"n_hosts must be in 1..{MAX_HOSTS}, got {n_hosts}")
        if len(up) != n_hosts or len(down) != n_hosts:
            raise ValueError(f"need one uplink and one downlink shape per host: {n_hosts} hosts, "
                             f"{len(up)} up, {len(down)} down")
        if not all(isinstance(s, DirectionShape) for s in [*up, *down]):
            raise TypeError("up and down must be lists of DirectionShape")
        if not _PREFIX_RE.match(prefix):
            raise ValueError(f"prefix must be 1-4 lowercase letters (interface names are limited to "
                             f"15 characters), got {prefix!r}")
        ok, reason = available()  # before creating anything
        if not ok:
            raise NetnsUnavailable(reason)
        self.n_hosts, self.prefix = n_hosts, prefix
        self.up, self.down = list(up), list(down)
        self.netem = netem_available()
        self.pid = os.getpid()
        self.lab_id = ""
        self.hosts: list[_Host] = []
        # what exists (or may) and must go: recorded *before* each create, names being unique to us
        self._created_ns: list[str] = []
        self._created_links: list[str] = []
        self._closed = False
        self._close_lock = threading.Lock()
        atexit.register(self._close_at_exit)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    # -- set-up ---------------------------------------------------------------------------------

    def _setup(self) -> None:
        with _allocation_lock():
            existing = set(_namespaces()) | {link["ifname"] for link in _links()}
            while True:  # an id no existing namespace or interface name contains
                self.lab_id = secrets.token_hex(3)
                if not any(self.lab_id in name for name in existing):
                    break
            subnets = _free_subnets(self.n_hosts)
            for i, net in enumerate(subnets):
                ns = _ns_name(self.prefix, self.pid, self.lab_id, i)
                host_if, ns_if = _if_names(self.prefix, self.lab_id, i)
                coord, addr = str(net.network_address + 1), str(net.network_address + 2)
                self._created_ns.append(ns)
                _run(["ip", "netns", "add", ns])
                self._created_links.append(host_if)
                # created with its peer already in the namespace: nothing else ever lands in root
                _run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns])
                _run(["ip", "link", "set", "dev", host_if, "alias", _alias(self.pid, ns)])
                _run(["ip", "addr", "add", f"{coord}/30", "dev", host_if])
                _run(["ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", ns_if])
                self.hosts.append(_Host(ns, host_if, ns_if, coord, addr))
        # addresses are visible to the next lab now; the rest needs no lock
        for i, h in enumerate(self.hosts):
            # shape before the links come up, so not one packet goes unshaped
            for cmd in (_shape_commands(["ip"], ["tc"], h.host_if, self.down[i], self.netem)
                        + _shape_commands(["ip", "-n", h.ns], ["tc", "-n", h.ns], h.ns_if, self.up[i], self.netem)):
                _run(cmd)
            _run(["ip", "-n", h.ns, "link", "set", "dev", "lo", "up"])
            _run(["ip", "-n", h.ns, "link", "set", "dev", h.ns_if, "up"])
            _run(["ip", "link", "set", "dev", h.host_if, "up"])

    # -- queries --------------------------------------------------------------------------------

    def coordinator_address(self, i: int) -> str:
        """The root-side address host i reaches the coordinator at."""
        return self.hosts[i].coordinator

    def host_address(self, i: int) -> str:
        return self.hosts[i].address

    def namespace(self, i: int) -> str:
        return self.hosts[i].ns

    def interfaces(self, i: int) -> tuple[str, str]:
        """(root-side, namespace-side) veth names of host i."""
        return self.hosts[i].host_if, self.hosts[i].ns_if

    def exec_prefix(self, i: int) -> list[str]:
        """argv prefix that runs a command inside host i's namespace."""
        return ["ip", "netns", "exec", self.hosts[i].ns]

    @property
    def kernel_emulates(self) -> dict[str, bool]:
        """Which link properties the kernel applies; the transport must add the others."""
        return {"rate": True, "delay": self.netem, "jitter": self.netem, "loss": self.netem}

    def transport_shapes(self, i: int) -> dict[str, DirectionShape]:
        """{"up", "down"}: what the transport must still emulate for host i (rate never: the kernel does it)."""
        def residual(s: DirectionShape) -> DirectionShape:
            return DirectionShape() if self.netem else DirectionShape(None, s.latency_ms, s.jitter_ms, s.loss)
        return {"up": residual(self.up[i]), "down": residual(self.down[i])}

    def describe(self) -> str:
        def rates(shapes: list[DirectionShape]) -> str:
            vals = sorted({"∞" if s.rate_mbps is None else f"{s.rate_mbps:g}" for s in shapes})
            return "/".join(vals) + " Mbit/s"
        net = "delay/jitter/loss by netem" if self.netem else "no netem: delay/jitter/loss left to the transport"
        first = self.hosts[0].coordinator if self.hosts else "-"
        return (f"NetnsLab {self.prefix}-{self.pid}-{self.lab_id}: {self.n_hosts} hosts, down {rates(self.down)}, "
                f"up {rates(self.up)} (htb), {net}, host 0 → coordinator {first}"
                + (" [closed]" if self._closed else ""))

    # -- tear-down ------------------------------------------------------------------------------

    def close(self) -> None:
        """Delete every namespace and root-side veth end this lab created. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self._close_at_exit)
        errors = []
        # the root end first: deleting it takes its peer along even if a process still holds the
        # namespace (`ip netns del` only unmounts the name; the namespace dies with its last process)
        for name in self._created_links:
            try:
                _delete_link(name)
            except (NetnsCommandError, subprocess.TimeoutExpired) as e:
                errors.append(e)
        for ns in self._created_ns:
            try:
                _delete_netns(ns)
            except (NetnsCommandError, subprocess.TimeoutExpired) as e:
                errors.append(e)
        if errors:
            raise RuntimeError(f"NetnsLab.close: {len(errors)} deletions failed; first: {errors[0]}")

    def _close_at_exit(self) -> None:
        if os.getpid() == self.pid:  # a forked child exiting does not own the lab
            self.close()

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


def cleanup_stale(prefix: str = "es") -> list[str]:
    """Remove namespaces and root-side veth ends left by a lab whose process is gone (e.g. killed).

    Only names matching this module's scheme *and* owned by a dead pid are touched: namespaces
    ``<prefix>-<pid>-<6 hex>-<i|probe>``, links ``<prefix><6 hex>h<i>`` whose ifalias is this
    module's tag with a dead pid. Labs of live processes are left alone. Returns what was removed.
    """
    if not _PREFIX_RE.match(prefix):
        raise ValueError(f"prefix must be 1-4 lowercase letters, got {prefix!r}")
    why = _basic_requirements()
    if why is not None:
        raise NetnsUnavailable(why)
    removed = []
    link_re = _link_re(prefix)
    for link in _links():
        name = link.get("ifname", "")
        pid = _alias_pid(link.get("ifalias"))
        if link_re.match(name) and pid is not None and not _pid_alive(pid):
            _delete_link(name)
            removed.append(name)
    ns_re = _ns_re(prefix)
    for ns in _namespaces():
        m = ns_re.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _delete_netns(ns)
            removed.append(ns)
    return removed


# ---------------------------------------------------------------------------------------------------
# Measuring a link

_CLIENT = r"""
import socket, sys, time
host, port, mode, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = socket.create_connection((host, port), timeout=float(sys.argv[5]))
if mode == "send":
    buf, left = bytes(65536), n
    while left > 0:
        left -= s.send(buf[:min(left, len(buf))])
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
else:
    got, first, t0, t1 = 0, 0, 0.0, 0.0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        t1 = time.perf_counter()
        if not got:
            first, t0 = len(b), t1
        got += len(b)
    print(got, first, t1 - t0)
"""


def _receive_timed(conn: socket.socket) -> tuple[int, int, float]:
    """Read to EOF: (bytes, bytes of the first read, seconds from the first read to the last)."""
    got, first, t0, t1 = 0, 0, 0.0, 0.0
    while True:
        b = conn.recv(1 << 20)
        if not b:
            break
        t1 = time.perf_counter()
        if not got:
            first, t0 = len(b), t1
        got += len(b)
    return got, first, t1 - t0


def measure_rate(lab: NetnsLab, i: int, direction: str, nbytes: int, timeout_s: float = 60.0) -> float:
    """Goodput in Mbit/s of one TCP transfer of nbytes over host i's link ("up" or "down").

    A server in the root namespace (bound to the coordinator address) and a client process inside the
    namespace. Timed at the receiver from its first read to its last, not counting the first read
    (which the token bucket's initial burst delivers early). Note the kernel rate counts whole frames,
    so TCP payload gets about 1448/1514 ≈ 95.6% of it at MTU 1500.
    """
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
    result: dict = {}
    srv = socket.create_server((lab.coordinator_address(i), 0))
    srv.settimeout(timeout_s)

    def serve() -> None:
        try:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(timeout_s)
                if direction == "up":
                    result["timed"] = _receive_timed(conn)
                    conn.sendall(b"k")  # lets the client exit only once everything arrived
                else:
                    conn.sendall(bytes(nbytes))
                    conn.shutdown(socket.SHUT_WR)
        except BaseException as e:  # reported by the caller
            result["error"] = e

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        port = srv.getsockname()[1]
        mode = "send" if direction == "up" else "recv"
        # -S: no site packages needed, and a faster start
        cmd = [*lab.exec_prefix(i), sys.executable, "-S", "-c", _CLIENT,
               lab.coordinator_address(i), str(port), mode, str(nbytes), str(timeout_s)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=True)
        except subprocess.CalledProcessError as e:
            raise NetnsCommandError(e.returncode, e.cmd, e.output, e.stderr) from None
        thread.join(timeout_s)
    finally:
        srv.close()
    if "error" in result:
        raise RuntimeError(f"measure_rate server side failed: {result['error']!r}") from result["error"]
    if direction == "up":
        got, first, secs = result["timed"]
    else:
        got, first, secs = (float(x) for x in proc.stdout.split())
    if got != nbytes:
        raise RuntimeError(f"measure_rate: {got} of {nbytes} bytes arrived")
    if secs <= 0:
        raise RuntimeError("measure_rate: transfer too short to time; send more bytes")
    return (got - first) * 8 / secs / 1e6
