"""`NetnsLab`: n emulated hosts, each in its own namespace on its own shaped veth link to the root namespace;
`cleanup_stale` removes what a killed process left."""
from __future__ import annotations

import atexit
import os
import secrets
import subprocess
import threading
from dataclasses import dataclass

from edgesync.emulation.netns.commands import (
    NetnsCommandError, NetnsUnavailable, _delete_link, _delete_netns, _links, _namespaces, _run,
)
from edgesync.emulation.netns.naming import (
    _PREFIX_RE, MAX_HOSTS, _alias, _alias_pid, _allocation_lock, _free_subnets, _if_names, _link_re, _ns_name,
    _ns_re, _pid_alive,
)
from edgesync.emulation.netns.probe import _basic_requirements, available, netem_available
from edgesync.emulation.netns.shaping import DirectionShape, _shape_commands


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
