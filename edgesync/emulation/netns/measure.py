"""The rate a lab's link achieves, measured by one TCP transfer through it (`measure_rate`)."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

from edgesync.emulation.netns.commands import NetnsCommandError
from edgesync.emulation.netns.lab import NetnsLab


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
