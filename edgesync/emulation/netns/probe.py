"""Whether kernel shaping can run here: root and iproute2, then a throwaway namespace tried once (veth, htb, netem)."""
from __future__ import annotations

import functools
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass

from edgesync.emulation.netns.commands import NetnsCommandError, _delete_netns, _run


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
