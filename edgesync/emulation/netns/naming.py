"""Names and addresses of a lab's namespaces and veth ends: a pid and lab id in every name (so `cleanup_stale`
finds only what a dead process left), a free /30 per host, chosen under a lock shared by every process."""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import re

from edgesync.emulation.netns.commands import NetnsUnavailable, _json


POOL = ipaddress.ip_network("10.231.0.0/16")  # rarely used private range; checked against routes anyway


# serialises name and address allocation across processes
LOCK_PATH = "/run/lock/edgesync-netns.lock" if os.path.isdir("/run/lock") else "/tmp/edgesync-netns.lock"


ALIAS_TAG = "edgesync.netns"  # ifalias prefix on every root-side veth end this module creates


MAX_HOSTS = 1000  # keeps interface names within Linux's 15 characters: 4 (prefix) + 6 + 1 + 3


_PREFIX_RE = re.compile(r"^[a-z]{1,4}$")


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
