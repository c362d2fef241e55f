"""A local Flower lab: one SuperLink and N SuperNodes on 127.0.0.1, started as processes, stopped by PID.

    lab = FlowerLab(Path("runs/.flower"), [{"partition-id": 0, "profile": "x1"},
                                           {"partition-id": 1, "profile": "x10"}]).start()
    lab.run_app(Path("."), {"scenario": "scenarios/flower_fedavg.yaml"})   # `flwr run … --stream`
    lab.stop()

This is what `edgesync flower-up` runs and what the integration test and benchmarks/flower_overhead.py
use; on real lab machines the same three commands are typed by hand (docs/flower.md). Everything
lives under `home` (FLWR_HOME): the Flower config naming the SuperLink connection `CONNECTION`, the
logs, and `lab.json` with every PID, so a lab started with `--detach` is stopped by PID later. Ports
are free ones chosen at start. The SuperLink runs with `--disable-runtime-dependency-installation`
(the app runs in this Python environment, no `uv sync`), every process with telemetry off and one
torch thread. Beside them runs one warm process that forks the lab's ServerApp and ClientApp processes
(warm_apps.py; `EDGESYNC_WARM_START=0` leaves that to Flower). `stop()` ends each process and everything it
started (SuperExec, ServerApp and ClientApp processes) by PID: SIGTERM, then SIGKILL after
`FLOWER_STOP_TIMEOUT_S`.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from edgesync.constants import CLIENT_THREAD_ENV, FLOWER_START_TIMEOUT_S, FLOWER_STOP_TIMEOUT_S, MALLOC_ENV
from edgesync.flower import warm_apps
from edgesync.flower.fab_staging import staged_app

CONNECTION = "edgesync-local"  # the SuperLink connection's name in FLWR_HOME/config.toml
STATE_FILE = "lab.json"
WARM_APPS = "warm-apps"  # the process that forks the lab's ServerApps and ClientApps (warm_apps.py)


class LabError(RuntimeError):
    pass


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports on 127.0.0.1, all held open while chosen: ports picked one at a time can repeat,
    since a process started on the first may not have bound it yet when the next is picked (a SuperLink and
    a SuperNode once got the same one, and the SuperLink could not start)."""
    held = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def toml_pairs(values: dict[str, Any]) -> str:
    """'k1=1 k2="x10"': Flower's --node-config / --run-config syntax (values are TOML; strings quoted)."""
    return " ".join(f"{k}={json.dumps(v) if isinstance(v, (str, bool)) else v}" for k, v in values.items())


def flower_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(CLIENT_THREAD_ENV)
    env.update(MALLOC_ENV)
    bindir = str(Path(sys.executable).parent)  # flower-superexec must be on PATH for the SuperLink
    env.update(FLWR_TELEMETRY_ENABLED="0", FLWR_HOME=str(home), PYTHONUNBUFFERED="1",
               PATH=bindir + os.pathsep + env.get("PATH", ""))
    return env


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        raise LabError(f"{name} not found: install Flower (pip install -e '.[flower]')")
    return found


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Proc:
    name: str
    pid: int
    port: int
    log: str
    created: float  # psutil create_time: guards against a reused PID
    node_config: dict[str, Any] = field(default_factory=dict)


class FlowerLab:
    def __init__(self, home: Path, nodes: list[dict[str, Any]], port: int | None = None):
        self.home = Path(home).resolve()
        self.nodes = nodes
        self.port = port
        self.procs: list[Proc] = []
        self._popen: list[subprocess.Popen] = []
        self.env = flower_env(self.home)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- start ---------------------------------------------------------------------------------------
    def start(self) -> FlowerLab:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        try:
            ports = [p for p in free_ports(len(self.nodes) + 1) if p != self.port]
            self.port = self.port or ports.pop()
            if warm_apps.supported():  # first: its imports overlap the SuperLink's and SuperNodes' start
                self._spawn(WARM_APPS, warm_apps.prepare(self.home, self.env), 0)
            self._spawn("superlink", [_tool("flower-superlink"), "--insecure", "--disable-runtime-dependency-installation",
                                      "--host", "127.0.0.1", "--port", str(self.port)], self.port)
            for i, cfg in enumerate(self.nodes):
                port = ports.pop()
                self._spawn(f"supernode-{i}", [_tool("flower-supernode"), "--insecure", "--superlink", self.address,
                                               "--port", str(port), "--node-config", toml_pairs(cfg)], port, cfg)
            for proc in self.procs:
                self._wait_listening(proc)
        except BaseException:
            self.stop()
            raise
        self._write_connection()
        self._write_state()
        return self

    def _spawn(self, name: str, cmd: list[str], port: int, node_config: dict | None = None) -> None:
        log = self.home / "logs" / f"{name}.log"
        with open(log, "w") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env,
                                 cwd=os.getcwd())
        self._popen.append(p)
        self.procs.append(Proc(name, p.pid, port, str(log), psutil.Process(p.pid).create_time(), node_config or {}))

    def _wait_listening(self, proc: Proc) -> None:
        deadline = time.monotonic() + FLOWER_START_TIMEOUT_S
        popen = next(p for p in self._popen if p.pid == proc.pid)
        while not self._up(proc):
            if popen.poll() is not None or time.monotonic() > deadline:
                tail = "".join(Path(proc.log).read_text(errors="replace").splitlines(True)[-15:])
                why = f"exited with code {popen.returncode}" if popen.returncode is not None else "did not start"
                raise LabError(f"{proc.name} {why} (port {proc.port}); end of {proc.log}:\n{tail}")
            time.sleep(0.2)

    def _up(self, proc: Proc) -> bool:
        return warm_apps.ready(self.env) if proc.name == WARM_APPS else _listening(proc.port)

    def _write_connection(self) -> None:
        """FLWR_HOME/config.toml naming this SuperLink, so `flwr run . edgesync-local` finds it."""
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{self.address}"\ninsecure = true\n')

    def _write_state(self) -> None:
        state = {"home": str(self.home), "address": self.address, "connection": CONNECTION,
                 "processes": [vars(p) for p in self.procs]}
        (self.home / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")

    # -- use -------------------------------------------------------------------------------------------
    def wait_for_nodes(self, count: int | None = None, timeout_s: float = FLOWER_START_TIMEOUT_S) -> None:
        """Until the SuperLink has activated `count` SuperNodes (default: all of this lab's)."""
        count = len(self.nodes) if count is None else count
        log = Path(next(p.log for p in self.procs if p.name == "superlink"))
        deadline = time.monotonic() + timeout_s
        while log.read_text(errors="replace").count("Activated node_id") < count:
            if time.monotonic() > deadline:
                raise LabError(f"fewer than {count} SuperNodes registered within {timeout_s:.0f} s (see {log})")
            time.sleep(0.2)

    def run_app(self, app_dir: Path, run_config: dict[str, Any], timeout_s: float | None = None,
                stream: bool = False) -> subprocess.CompletedProcess:
        """`flwr run APP edgesync-local -c … --stream`: returns when the run has ended. The ServerApp's
        log is captured, or shown as it comes with `stream=True`."""
        with staged_app(app_dir) as app:  # the FAB's files alone: flwr walks a whole checkout, .venv and all
            cmd = [_tool("flwr"), "run", str(app), CONNECTION, "--stream"]
            if run_config:
                cmd += ["--run-config", toml_pairs(run_config)]
            result = subprocess.run(cmd, env=self.env, capture_output=not stream, text=True, timeout=timeout_s,
                                    stdin=subprocess.DEVNULL)
        if result.returncode == 0 and (failed := self.last_run_failed()):  # `flwr run --stream` exits 0 anyway
            print(failed, file=sys.stderr)
            return subprocess.CompletedProcess(cmd, 1, result.stdout, (result.stderr or "") + failed + "\n")
        return result

    def last_run_failed(self, wait_s: float = 10.0) -> str | None:
        """Why the latest run failed (`flwr ls`: finished:failed, the ServerApp raised), or None if it did not."""
        deadline = time.monotonic() + wait_s
        while True:
            got = subprocess.run([_tool("flwr"), "ls", CONNECTION, "--format", "json"], env=self.env, text=True,
                                 capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
            try:
                runs = json.loads(got.stdout[got.stdout.index("{"):]).get("runs") or []
            except ValueError:
                return None
            if not runs:
                return None
            run = max(runs, key=lambda r: str(r.get("pending-at") or ""))
            status = str(run.get("status"))
            if status.startswith("finished") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if "failed" not in status:
            return None
        return f"Flower run {run.get('run-id')} {status}: {run.get('status-details')}"

    def alive(self) -> list[int]:
        """PIDs of this lab's processes and their descendants that are still running."""
        return [p.pid for p in _trees(self.procs)]

    # -- stop -----------------------------------------------------------------------------------------
    def stop(self) -> None:
        stop_processes(self.procs)
        for p in self._popen:
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        state = self.home / STATE_FILE
        if state.exists():
            state.unlink()

    def __enter__(self) -> FlowerLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _own(proc: Proc) -> psutil.Process | None:
    """The running process `proc` recorded, or None (exited, or its PID now belongs to another)."""
    try:
        p = psutil.Process(proc.pid)
        return p if abs(p.create_time() - proc.created) < 1.0 else None
    except psutil.NoSuchProcess:
        return None


def _trees(procs: list[Proc]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        p = _own(proc)
        if p is None:
            continue
        try:
            out += [p, *p.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return [p for p in out if p.is_running()]


def stop_processes(procs: list[Proc], timeout_s: float = FLOWER_STOP_TIMEOUT_S) -> None:
    """SIGTERM each recorded process (SuperNodes first) and, after `timeout_s`, SIGKILL whatever is
    left of them and of every process they started — all by PID."""
    order = sorted(procs, key=lambda p: p.name == "superlink")
    family = _trees(order)  # children first noted now: they are re-parented when their parent exits
    for proc in order:
        p = _own(proc)
        if p is not None:
            try:
                p.send_signal(signal.SIGTERM)
            except psutil.NoSuchProcess:
                pass
    _, left = psutil.wait_procs(family, timeout=timeout_s)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=5)


def stop_detached(home: Path) -> int:
    """Stop the lab whose `lab.json` is in `home`; returns how many processes it recorded."""
    path = Path(home) / STATE_FILE
    if not path.exists():
        raise LabError(f"no running lab recorded in {path}")
    procs = [Proc(**p) for p in json.loads(path.read_text())["processes"]]
    stop_processes(procs)
    path.unlink()
    return len(procs)
