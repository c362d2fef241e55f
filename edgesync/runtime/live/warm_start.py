"""Client processes forked from a warm interpreter: `edgesync run` starts a local client in tens of
milliseconds and a few MB, not seconds and hundreds of MB.

Most of an `edgesync client` process's start is `import torch` (about 2 s of CPU in the CUDA build, more
on a busy host; ≈ 510 MB resident), and a local run starts one per client: on 2 cores, 16 clients spent
half a minute of CPU before anyone trained. Instead the launcher keeps one *warm* process, this module run
with `python -m`, which imports torch and the client code once and forks a child per client. The child is
the same `edgesync client …` command (its process title says so, for `ps` and `kill`), with its own log,
environment and working folder, and shares the warm process's memory until it writes to it. The warm
process never touches a device or a socket, so each child initialises its own (CUDA included).

The warm process takes one JSON request per line on stdin, answers each with the child's PID, and
reports each child's exit status when it reaps it. It exits when its parent goes (stdin closed); clients
still running finish on their own, as a client started with Popen would. `EDGESYNC_WARM_START=0` starts
every client as a process of its own instead.
"""
from __future__ import annotations

import importlib
import itertools
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Callable, Iterator, NoReturn

import psutil

from edgesync.constants import CLIENT_THREAD_ENV, MALLOC_ENV

WARM_START_ENV = "EDGESYNC_WARM_START"
COMMAND, COMMAND_MAIN = "edgesync.cli", "edgesync.cli.app"  # `python -m edgesync.cli`, and what it imports
START_TIMEOUT_S = 120.0  # the warm process's own start (imports torch), on a host that may be busy


def enabled() -> bool:
    return os.environ.get(WARM_START_ENV, "1") != "0"


class WarmProcess:
    """A child of the warm process, with the part of `subprocess.Popen`'s interface the launcher uses."""

    def __init__(self, starter: "WarmStarter", pid: int, serial: int, args: list[str]):
        self.starter, self.pid, self.serial, self.args = starter, pid, serial, args
        self.returncode: int | None = None
        self._started = _proc_stat(pid)[1]  # tells this child from a later process with its PID

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.starter.exit_code(self.serial, self.pid)
        if self.returncode is None:
            # Exited but not reaped yet: the warm process reaps every 0.1 s and its report then crosses a
            # pipe, which on a busy host can come after the coordinator saw the connection close; the
            # kernel has the exit status already, as Popen.poll would (a client "exited with code -9").
            state, started, status = _proc_stat(self.pid)
            if state == "Z" and started == self._started and status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class WarmStarter:
    """This process's line to its warm process, started on first use and kept for the process's life (a
    sweep's variants, a resumed run and every run of a test worker reuse it)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._pids: Queue = Queue()
        self._exits: dict[int, int] = {}  # by the child's serial number: PIDs come round again (pid_max)

    def start(self, argv: list[str], log: Path, env: dict[str, str], cwd: str | Path | None = None) -> WarmProcess:
        """Fork `edgesync <argv…>` from the warm process, its stdout and stderr appended to `log`, in `cwd`
        (default: this process's)."""
        request = json.dumps({"argv": argv, "log": str(log), "env": env, "cwd": str(cwd or os.getcwd())}) + "\n"
        with self._lock:
            proc = self._ensure(env)
            proc.stdin.write(request.encode())
            proc.stdin.flush()
            try:
                born = self._pids.get(timeout=START_TIMEOUT_S)
            except Empty:
                raise RuntimeError(f"the warm client process (PID {proc.pid}) did not fork a client within "
                                   f"{START_TIMEOUT_S:g} s") from None
            if born is None:
                raise RuntimeError(f"the warm client process exited with code {proc.poll()} before forking a client")
        return WarmProcess(self, born["pid"], born["serial"], ["edgesync", *argv])

    def exit_code(self, serial: int, pid: int) -> int | None:
        if serial in self._exits:
            return self._exits[serial]
        proc = self._proc
        if proc is not None and proc.poll() is not None and not psutil.pid_exists(pid):
            # The warm process is gone, so nobody reports this child's status: it has exited, code unknown.
            self._exits[serial] = -signal.SIGKILL
        return self._exits.get(serial)

    def _ensure(self, env: dict[str, str]) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._pids = Queue()
            # What every client needs from its interpreter's start (glibc reads its malloc settings then, torch
            # its thread count at import) is the warm process's own; the rest of `env` is each child's.
            own = {**env, **CLIENT_THREAD_ENV, **MALLOC_ENV, "PYTHONUNBUFFERED": "1"}
            self._proc = subprocess.Popen([sys.executable, "-m", __name__], env=own, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=None)
            threading.Thread(target=self._read, args=(self._proc, self._pids), name="warm-start-replies",
                             daemon=True).start()
        return self._proc

    def _read(self, proc: subprocess.Popen, pids: Queue) -> None:
        for line in proc.stdout:
            message = json.loads(line)
            if "exited" in message:
                self._exits[message["serial"]] = message["code"]
            else:
                pids.put(message)
        pids.put(None)  # the warm process is gone: a start waiting for a PID fails at once


def _proc_stat(pid: int) -> tuple[str | None, int | None, int | None]:
    """(state, start time in clock ticks, wait status once exited) of `pid` from /proc/PID/stat (Linux;
    the status is field 52, since Linux 3.5); Nones where there is no such process or no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None, None, None
    fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (state) on: field N is fields[N - 3]
    return fields[0], int(fields[19]), int(fields[49]) if len(fields) > 49 else None


_starter: WarmStarter | None = None
_starter_lock = threading.Lock()


def warm_starter() -> WarmStarter:
    global _starter
    with _starter_lock:
        if _starter is None:
            _starter = WarmStarter()
        return _starter


# -- the warm process --------------------------------------------------------------------------------------

def serve() -> None:
    """Import what a client needs, then fork a child per request until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the run and its clients; EOF ends this one
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever an import prints goes to stderr, not into the replies
    import torch  # noqa: F401  the cost every client would otherwise pay
    import edgesync.runtime.live.client  # noqa: F401  the client and its slots
    import edgesync.runtime.live.slots  # noqa: F401
    # The command line a child runs (by name, as `python -m edgesync.cli` would: the launcher runs the
    # `edgesync` command, it does not call into the CLI layer above it).
    importlib.import_module(COMMAND_MAIN)
    set_title("edgesync warm client starter")  # also readies setproctitle while argv and environ are intact
    serials: dict[int, int] = {}  # PID → serial number, of the children not reaped yet
    numbers = itertools.count(1)
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], 0.1)
        _reap(replies, serials)
        if not readable:
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return  # the parent is gone
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            pid = os.fork()
            if pid == 0:
                _child(json.loads(line), replies.fileno())
            serials[pid] = serial = next(numbers)
            replies.write(json.dumps({"pid": pid, "serial": serial}) + "\n")


def _reap(replies, serials: dict[int, int]) -> None:
    for pid, code in reaped():
        replies.write(json.dumps({"exited": pid, "serial": serials.pop(pid, 0), "code": code}) + "\n")


def reaped() -> Iterator[tuple[int, int]]:
    """(PID, exit code as Popen gives it) of each child of this process that has exited, reaped now."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, os.waitstatus_to_exitcode(status)


def _child(request: dict, replies_fd: int) -> NoReturn:
    """In the forked child: become `edgesync <argv…>` and exit with its code (never returns)."""
    def run() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.close(replies_fd)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        follow_pythonpath(request["env"].get("PYTHONPATH", ""))
        argv = request["argv"]
        set_title("edgesync " + " ".join(argv))  # set up in the warm process, so environ may change first
        sys.argv = ["edgesync", *argv]
        runpy.run_module(COMMAND, run_name="__main__", alter_sys=True)  # `python -m edgesync.cli …`

    exit_with(run)  # whatever goes wrong goes to the client's log


def follow_pythonpath(pythonpath: str) -> None:
    """Put the child's PYTHONPATH entries first on sys.path, as a fresh `python` would: the warm process read its
    own PYTHONPATH when it started, and a later run's may name more (an extension's folder, found by its imports
    and its entry points)."""
    entries = [os.path.abspath(p) for p in pythonpath.split(os.pathsep) if p]
    sys.path[:0] = [p for p in entries if p not in sys.path]


def exit_with(run: Callable[[], object]) -> NoReturn:
    """In a forked child: call `run` as the interpreter runs a program, and exit with the code it would
    (SystemExit's: None is 0, a message is printed and 1; an exception's traceback and 1) — never returns."""
    code = 1
    try:
        try:
            run()
            code = 0
        except SystemExit as exc:
            code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
            if code == 1 and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the child's stderr is where it goes
        import traceback
        traceback.print_exc()
    finally:
        try:
            import logging
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def set_title(title: str) -> None:
    """What `ps` shows for the child (setproctitle, where installed): the command it runs."""
    try:
        from setproctitle import setproctitle
    except ImportError:
        return
    setproctitle(title)


if __name__ == "__main__":
    serve()
