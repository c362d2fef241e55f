"""The `ip` and `tc` commands kernel shaping runs (bounded in time, a failure named with its stderr), and the
namespaces and links they list and delete."""
from __future__ import annotations

import json
import shlex
import subprocess


CMD_TIMEOUT_S = 10.0


class NetnsUnavailable(RuntimeError):
    """Kernel shaping cannot run here (not root, no iproute2, no netns/veth/htb); the reason is the message."""


class NetnsCommandError(subprocess.CalledProcessError):
    """An ``ip``/``tc`` command failed; the message names the command and its stderr."""

    def __str__(self) -> str:
        err = (self.stderr or "").strip() or "(no stderr)"
        return f"command failed with exit status {self.returncode}: {shlex.join(self.cmd)}: {err}"


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
