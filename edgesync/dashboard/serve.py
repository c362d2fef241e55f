"""Running the dashboard: in the foreground (`edgesync dashboard RUN_DIR`) or, beside a live run, as a child
process (`DashboardProcess`): the coordinator's process then spends no time on it, whatever the viewers do.

It binds to 127.0.0.1 unless told otherwise ([HOST:]PORT; port 0: a free one). A bind beyond loopback is
refused without a token: one is made and printed in the address to open.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

LOOPBACK = ("127.0.0.1", "localhost", "::1")
START_TIMEOUT_S = 30.0
LINGER_S = 1.5  # three of the page's polls


class BindError(ValueError):
    """A --dashboard or --bind value that is not [HOST:]PORT."""


def parse_bind(value: str, option: str = "--dashboard") -> tuple[str, int]:
    """'8050' → ('127.0.0.1', 8050); '0.0.0.0:8050' → ('0.0.0.0', 8050); '[::1]:8050' → ('::1', 8050)."""
    host, sep, port = value.strip().rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535 or (sep and not host):
        raise BindError(f"{option} {value!r}: expected [HOST:]PORT, e.g. 8050 or 0.0.0.0:8050 (port 0: any free one)")
    return host, int(port)


def is_local(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def token_for(host: str, given: str | None = None) -> str | None:
    """The token a bind at `host` needs: the one given, else none on loopback, else a new one."""
    if given:
        return given
    return None if is_local(host) else secrets.token_urlsafe(16)


def address(host: str, port: int, token: str | None) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # listening everywhere: loopback works here too
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot listen at {host}:{port}: {exc.strerror or exc} (another dashboard? give another "
                        "port, or 0 for any free one)") from None
    sock.listen(64)
    return sock


def serve(run_dir: Path, host: str, port: int, token: str | None = None, live: bool = False,
          announce=print) -> None:
    """Serve `run_dir`'s dashboard until interrupted; `announce(url)` once it listens."""
    import uvicorn

    from edgesync.dashboard.app import create_app
    token = token_for(host, token)
    sock = listening_socket(host, port)
    app = create_app(Path(run_dir), token=token, live=live)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1,
                            lifespan="off")
    server = uvicorn.Server(config)
    announce(address(host, sock.getsockname()[1], token))
    server.run(sockets=[sock])


class DashboardProcess:
    """`python -m edgesync.dashboard RUN_DIR --bind HOST:PORT` beside a live run: started, its address read
    from its first line, stopped (SIGTERM, then SIGKILL) when the run ends."""

    def __init__(self, run_dir: Path, bind: str):
        host, port = parse_bind(bind)
        token = token_for(host)
        cmd = [sys.executable, "-m", "edgesync.dashboard", str(run_dir), "--bind", f"{host}:{port}", "--live",
               "--parent", str(os.getpid())]
        env = {**os.environ, "EDGESYNC_DASHBOARD_TOKEN": token or ""}  # not in argv: ps shows argv to every user
        (Path(run_dir) / "logs").mkdir(parents=True, exist_ok=True)
        self.log = Path(run_dir) / "logs" / "dashboard.log"
        with open(self.log, "a") as log:  # its warnings; a pipe nobody reads would block it once full
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                                         start_new_session=True)  # a Ctrl-C reaches the run, which stops it
        self.url = self._first_line()

    def _first_line(self) -> str:
        import selectors
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if sel.select(START_TIMEOUT_S):
                line = self.proc.stdout.readline().strip()
                if line.startswith("http"):
                    return line
        self.stop(linger_s=0)
        why = self.log.read_text(errors="replace").strip().splitlines()
        raise BindError(f"the dashboard did not start: {why[-1] if why else f'no word in {START_TIMEOUT_S:g} s'}")

    def stop(self, linger_s: float = LINGER_S) -> None:
        """Stop it, after `linger_s`: open pages get the run's last figures (summary.json) first."""
        if self.proc.poll() is None:
            time.sleep(linger_s)
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 5
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.proc.kill()
        self.proc.wait()
