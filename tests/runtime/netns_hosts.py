"""An emulated lab on one machine: one network namespace per host, all plugged into one switch.

    switch namespace:  bridge `lan`, one port per host
    host namespace i:  eth0 = ADDRESSES[i]/24, the other end of a veth pair whose first end is a port

Every host has its own network stack, address and (with `exec_prefix`) its own host name, so a
coordinator and clients started in them talk over the emulated LAN exactly as on separate machines.
Nothing is added to the root namespace (no address, route or interface), so the machine's own network
is never touched and the addresses cannot clash with it.

Names follow emulation/netns/naming.py's scheme (`esmh-<pid>-<6 hex>-<i>`), so
`edgesync.emulation.netns.cleanup_stale("esmh")` removes what a killed test left. `close()` kills
whatever still runs inside the namespaces (processes this lab's user started there), then deletes
them; it is idempotent and also runs at interpreter exit.

Needs root, `ip` (iproute2), `unshare` (util-linux) and a kernel with netns, veth and bridge.
"""
from __future__ import annotations

import atexit
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys

from edgesync.emulation.netns.commands import _delete_netns, _namespaces, _run
from edgesync.emulation.netns.naming import _ns_name

PREFIX = "esmh"  # "edgesync multi-host"; NetnsLab uses "es", so the two never clean up each other's
SUBNET = "10.77.0"  # a /24 that exists only inside the lab's namespaces
# Sets the host name inside a fresh UTS namespace, then becomes the command: $0 is the name.
_RENAME_AND_EXEC = 'hostname "$0" && exec "$@"'


class LanUnavailable(RuntimeError):
    """This machine cannot build the lab; the message says why."""


@functools.lru_cache(maxsize=None)
def lan_available() -> tuple[bool, str]:
    """(ok, reason), checked once: the tools, root, then a throwaway namespace with a bridge and a veth pair."""
    if not sys.platform.startswith("linux"):
        return False, f"network namespaces need Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return False, "needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return False, f"`{tool}` not found on PATH (install {package})"
    ns = _ns_name(PREFIX, os.getpid(), secrets.token_hex(3), 0)
    try:
        _run(["ip", "netns", "add", ns])
    except (subprocess.SubprocessError, OSError) as e:
        return False, f"cannot create a network namespace: {e}"
    try:
        _run(["ip", "-n", ns, "link", "add", "lan", "type", "bridge"])
        _run(["ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"])
    except (subprocess.SubprocessError, OSError) as e:
        return False, f"kernel lacks bridge or veth support: {e}"
    finally:
        _delete_netns(ns)
    return True, "ok"


class LanHosts:
    """Hosts named `names` on one emulated switch; host i has address ADDRESSES[i] = SUBNET.(i + 1)."""

    def __init__(self, names: list[str]):
        if not names or len(set(names)) != len(names) or len(names) > 250:
            raise ValueError(f"need 1 to 250 distinct host names, got {names!r}")
        ok, reason = lan_available()  # before creating anything
        if not ok:
            raise LanUnavailable(reason)
        self.names = list(names)
        self.pid = os.getpid()
        existing = set(_namespaces())
        while True:  # a lab id no existing namespace uses
            self.lab_id = secrets.token_hex(3)
            if not any(self.lab_id in ns for ns in existing):
                break
        self.switch = _ns_name(PREFIX, self.pid, self.lab_id, 0)
        self._ns = {name: _ns_name(PREFIX, self.pid, self.lab_id, i + 1) for i, name in enumerate(names)}
        self._created: list[str] = []  # recorded before each create: close() deletes exactly these
        self._closed = False
        atexit.register(self._close_at_exit)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        self._add_namespace(self.switch)
        _run(["ip", "-n", self.switch, "link", "add", "lan", "type", "bridge"])
        for i, name in enumerate(self.names):
            ns, port = self._ns[name], f"port{i}"
            self._add_namespace(ns)
            # created with its peer already in the host's namespace, named as a real machine's NIC
            _run(["ip", "-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(["ip", "-n", self.switch, "link", "set", "dev", port, "master", "lan", "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "dev", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "dev", "lo", "up"])
        _run(["ip", "-n", self.switch, "link", "set", "dev", "lan", "up"])

    def _add_namespace(self, ns: str) -> None:
        self._created.append(ns)
        _run(["ip", "netns", "add", ns])

    # -- queries ------------------------------------------------------------------------------------

    def address(self, name: str) -> str:
        return f"{SUBNET}.{self.names.index(name) + 1}"

    def namespace(self, name: str) -> str:
        return self._ns[name]

    @property
    def namespaces(self) -> list[str]:
        return [self.switch, *self._ns.values()]

    def exec_prefix(self, name: str) -> list[str]:
        """argv prefix that runs a command on host `name`: its network namespace and its own host name."""
        return ["ip", "netns", "exec", self._ns[name], "unshare", "--uts", "sh", "-c", _RENAME_AND_EXEC, name]

    def pids(self) -> list[int]:
        """Processes running inside the lab's namespaces."""
        found = []
        for ns in self._created:
            out = _run(["ip", "netns", "pids", ns], tolerate=("No such file or directory", "Invalid argument"))
            found += [int(p) for p in (out.stdout.split() if out else [])]
        return found

    # -- tear-down ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill what still runs in the namespaces, then delete them. Idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._close_at_exit)
        # a namespace with a process in it outlives `ip netns del` (only its name goes), veths included
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        errors = []
        for ns in reversed(self._created):
            try:
                _delete_netns(ns)
            except (subprocess.SubprocessError, OSError) as e:
                errors.append(e)
        if errors:
            raise RuntimeError(f"LanHosts.close: {len(errors)} namespaces not deleted; first: {errors[0]}")

    def _close_at_exit(self) -> None:
        if os.getpid() == self.pid:  # a forked child exiting does not own the lab
            self.close()

    def __enter__(self) -> LanHosts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
