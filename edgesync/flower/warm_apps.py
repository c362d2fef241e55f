"""A local Flower lab's ServerApp and ClientApp processes forked from a warm interpreter.

Flower runs every ClientApp message in a new process (`flwr-clientapp`, started by the SuperNode's
SuperExec), and each such process imports flwr and torch before it does anything: about 3.5 of its 5 CPU-s
on this project's small CNN, for a message whose training takes a fraction of that. A lab started by
`FlowerLab` (`edgesync flower-up`) therefore keeps one *warm* process, this module run with `python -m`,
that has imported flwr's two app commands and torch, and puts a folder first on its processes' PATH in
which `flwr-clientapp` and `flwr-serverapp` are stand-ins (warm_apps_shim.py): each asks the warm process to
fork the real command and waits for it. The child is the same command, with the stand-in's arguments,
environment, working folder, stdin, stdout and stderr; it is forked from a process that has only imported
modules, so each message still starts from a fresh process state, as Flower's isolation intends. Nothing
of EdgeSync is imported before the fork: the app's code is the one Flower installs from the FAB.

The warm process listens on an abstract Unix socket (Linux; no file to clean up) and serves only its own
user (SO_PEERCRED). `EDGESYNC_WARM_START=0` turns it off, as for local clients (runtime/live/warm_start.py).
"""
from __future__ import annotations

import array
import importlib
import json
import os
import select
import shlex
import signal
import socket
import struct
import sys
import uuid
from pathlib import Path
from typing import NoReturn

from edgesync.flower.warm_apps_shim import SOCKET_ENV
from edgesync.runtime.live.warm_start import enabled as warm_start_enabled
from edgesync.runtime.live.warm_start import exit_with, reaped, set_title

APPS = {"flwr-clientapp": "flwr.supernode.cli:flwr_clientapp", "flwr-serverapp": "flwr.superlink.cli:flwr_serverapp"}
SHIM = Path(__file__).with_name("warm_apps_shim.py")
BIN = "warm-bin"  # under FLWR_HOME: the stand-ins, first on the lab's PATH


def supported() -> bool:
    return sys.platform.startswith("linux") and warm_start_enabled()


def prepare(home: Path, env: dict[str, str]) -> list[str]:
    """Write the stand-ins under `home`, point `env` (the lab's processes' environment) at them and at a new
    socket name; returns the command that starts the warm process (with `env`)."""
    bindir = Path(home) / BIN
    bindir.mkdir(parents=True, exist_ok=True)
    real_dir = Path(sys.executable).parent
    for app in APPS:
        real = real_dir / app
        shim = bindir / app
        shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -S -E {shlex.quote(str(SHIM))} "
                        f"{shlex.quote(str(real))} \"$@\"\n")
        shim.chmod(0o755)
    env[SOCKET_ENV] = f"edgesync-warm-apps-{uuid.uuid4().hex}"
    env["PATH"] = str(bindir) + os.pathsep + env.get("PATH", "")
    return [sys.executable, "-m", __name__, env[SOCKET_ENV]]


def ready(env: dict[str, str]) -> bool:
    """Whether the warm process that `env` (as `prepare` left it) names accepts connections (it binds once
    its imports are done)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect("\0" + env[SOCKET_ENV])
            return True
        except OSError:
            return False


# -- the warm process --------------------------------------------------------------------------------------

def serve(name: str) -> None:
    """Import what the apps need, then fork one per request until stopped (SIGTERM: apps already forked
    finish on their own, as the processes Flower would have started do)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the lab's command, which stops this by PID
    import torch  # noqa: F401  the cost every app would otherwise pay
    for target in APPS.values():
        importlib.import_module(target.partition(":")[0])
    set_title("edgesync warm Flower apps")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(64)
    waiting: dict[int, socket.socket] = {}  # forked app's PID → its stand-in's connection
    while True:
        readable, _, _ = select.select([listener], [], [], 0.1)
        _reap(waiting)
        if readable:
            conn, _ = listener.accept()
            pid = _fork(conn, [listener, *waiting.values()])
            if pid is not None:
                waiting[pid] = conn


def _fork(conn: socket.socket, others: list[socket.socket]) -> int | None:
    """Read a stand-in's request and fork its app; None (the connection closed) if it is not one. `others`:
    the sockets the child must not hold (the listener, other stand-ins' connections: each stand-in learns
    from the end of its connection that the warm process is gone)."""
    fds: list[int] = []
    try:
        conn.settimeout(10)
        uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]  # pid, uid, gid
        data = _receive(conn, fds)
        if not data:
            conn.close()  # a readiness check (ready()): connected, said nothing
            return None
        request = json.loads(data)
        if uid != os.getuid() or len(fds) != 3 or request.get("app") not in APPS:
            raise ValueError(f"refused: uid {uid}, {len(fds)} descriptors, app {request.get('app')!r}")
    except (OSError, ValueError) as exc:
        print(f"warm Flower apps: {exc}", file=sys.stderr)
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        for other in others:
            other.close()
        _child(request, fds, conn)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass  # the stand-in is gone; the app runs on, as Flower's own would
    return pid


def _receive(conn: socket.socket, fds: list[int]) -> bytes:
    """The request line; the descriptors passed with it are added to `fds` (closed by the caller on error)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * array.array("i").itemsize))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += array.array("i", payload[: len(payload) - len(payload) % 4]).tolist()
        if not chunk:
            if data or fds:
                raise ValueError("the request ended early")
            return data
        data += chunk
    return data


def _reap(waiting: dict[int, socket.socket]) -> None:
    for pid, code in reaped():
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(json.dumps({"code": code}).encode() + b"\n")
            except OSError:
                pass
            conn.close()


def _child(request: dict, fds: list[int], conn: socket.socket) -> NoReturn:
    """In the forked child: become the requested Flower command and exit with its code (never returns)."""
    def run() -> None:
        conn.close()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        app = request["app"]
        sys.argv = [app, *request["argv"]]
        set_title(" ".join([app, *request["argv"]]))
        # The app's own code comes from its FAB: nothing of this checkout may answer its imports.
        for module in [m for m in sys.modules if m == "edgesync" or m.startswith("edgesync.")]:
            del sys.modules[module]
        module, _, function = APPS[app].partition(":")
        getattr(sys.modules[module], function)()

    exit_with(run)  # whatever goes wrong goes to the app's stderr (the node's log)


if __name__ == "__main__":
    serve(sys.argv[1])
