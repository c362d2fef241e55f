"""`edgesync run` on one machine: a coordinator in this process, one process per client.

Each client process is the same `edgesync client` a lab machine runs, started with one torch
thread and glibc's mmap threshold raised (constants.py says why). Their logs go to the run
folder's `logs/`. A client process that dies is lost to the run (the coordinator logs the end of its
log and goes on without it, docs/lab.md "Faults"); when none is left the run stops.

With `links.backend: netns` each client runs in its own network namespace behind a veth pair that
`tc` shapes (emulation/netns.py), connecting to the coordinator over that pair's address — the
commands a lab runs on separate machines; the namespaces are removed on every way out.

With `curve=True` the links are CURVE-encrypted as on a shared network (docs/lab.md), with
throw-away keys in a private temporary folder that is removed after the run.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from edgesync.constants import CLIENT_THREAD_ENV, MALLOC_ENV
from edgesync.emulation.links import PACKET_BYTES, Link
from edgesync.emulation.netns import FRAME_BYTES, DirectionShape, NetnsLab
from edgesync.metrics.recorder import RunRecorder
from edgesync.runtime.checkpoint import Checkpointer
from edgesync.runtime.coordinator import Coordinator, RunAborted
from edgesync.runtime.progress import Progress
from edgesync.scenario import Scenario
from edgesync.transport.security import ServerKeys, local_keys

log = logging.getLogger("edgesync.launcher")


def client_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(CLIENT_THREAD_ENV)
    env.update(MALLOC_ENV)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class LocalClients:
    """The client processes of a local run; always stopped on the way out."""

    def __init__(self, address: str | list[str], count: int, log_dir: Path, data_root: str | None = None,
                 prefixes: list[list[str]] | None = None, options: list[list[str]] | None = None):
        """`address` for every client, or one per client; `prefixes` run client i under e.g. `ip netns exec`;
        `options` are more `edgesync client` options for client i (its CURVE keys)."""
        log_dir.mkdir(parents=True, exist_ok=True)
        self.logs = [log_dir / f"client-{rank}.log" for rank in range(count)]
        self.procs: list[subprocess.Popen] = []
        self.exited: set[int] = set()
        addresses = [address] * count if isinstance(address, str) else address
        for rank, path in enumerate(self.logs):
            cmd = [*(prefixes[rank] if prefixes else []), sys.executable, "-m", "edgesync.cli", "client",
                   "--connect", addresses[rank], "--rank", str(rank)]
            if data_root:
                cmd += ["--data-root", data_root]
            if options:
                cmd += options[rank]
            with open(path, "a") as out:  # a resumed run's clients go on in the same log
                self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=client_env(),
                                                   stdin=subprocess.DEVNULL))

    def check(self) -> list[tuple[int, str]]:
        """Client processes that have exited since the last call, with the end of their logs: the
        coordinator counts them lost (the run goes on without them). If none is left, the run stops."""
        gone = []
        for rank, p in enumerate(self.procs):
            code = p.poll()
            if code is not None and rank not in self.exited:
                self.exited.add(rank)
                tail = "".join(self.logs[rank].read_text(errors="replace").splitlines(True)[-15:])
                gone.append((rank, f"its process exited with code {code}; end of {self.logs[rank]}:\n{tail}"))
        if self.procs and len(self.exited) == len(self.procs):
            raise RunAborted("every client process exited; the last one: " + (gone[-1][1] if gone else "?"))
        return gone

    def stop(self, timeout_s: float = 15.0) -> None:
        """Let clients exit on their own (they were told SHUTDOWN), then terminate what is left."""
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_live(scenario: Scenario, recorder: RunRecorder, progress: Progress, logs: str = "logs",
             checkpoints: Checkpointer | None = None, curve: bool = False) -> None:
    """Run every algorithm of `scenario` with local client processes, recording into `recorder`;
    `curve` encrypts and authenticates the links with throw-away keys."""
    with _throwaway_keys(len(scenario.clients) if curve else 0) as (keys, options):
        if scenario.links.backend == "netns":
            return _run_in_namespaces(scenario, recorder, progress, logs, checkpoints, keys, options)
        coordinator = Coordinator(scenario, recorder, bind="tcp://127.0.0.1:*", progress=progress, keys=keys)
        coordinator.checkpoints = checkpoints
        try:
            coordinator.prepare()  # a missing dataset fails here, before any client process starts
        except BaseException:
            coordinator.close()
            raise
        clients = LocalClients(coordinator.address, len(scenario.clients), recorder.run_dir / logs, options=options)
        _serve(coordinator, clients)


@contextmanager
def _throwaway_keys(clients: int):
    """(ServerKeys, each client's options) for `clients` > 0, else (None, None); removed on the way out."""
    if not clients:
        yield None, None
        return
    with tempfile.TemporaryDirectory(prefix="edgesync-curve-") as folder:  # mode 700: the secrets stay private
        yield local_keys(Path(folder), clients)


def _serve(coordinator: Coordinator, clients: LocalClients) -> None:
    coordinator.health_check = clients.check
    try:
        coordinator.run()
    finally:
        clients.stop()
        coordinator.close()


def kernel_shape(link: Link) -> DirectionShape:
    """The tc shape for `link`. tc counts whole Ethernet frames and our rates count message bytes, so the
    kernel rate is raised by frame/payload (1514/1448): both backends then deliver the same goodput."""
    rate = None if link.rate_mbps is None else link.rate_mbps * FRAME_BYTES / PACKET_BYTES
    return DirectionShape(rate, link.latency_s * 1e3, link.jitter_s * 1e3, link.loss)


def _run_in_namespaces(scenario: Scenario, recorder: RunRecorder, progress: Progress, logs: str,
                       checkpoints: Checkpointer | None = None, keys: ServerKeys | None = None,
                       options: list[list[str]] | None = None) -> None:
    links = [scenario.client_links(rank) for rank in range(len(scenario.clients))]
    with NetnsLab(len(links), up=[kernel_shape(u) for u, _ in links], down=[kernel_shape(d) for _, d in links]) as lab:
        log.info("%s", lab.describe())
        progress.status(lab.describe())
        coordinator = Coordinator(scenario, recorder, bind=f"tcp://{lab.coordinator_address(0)}:*", progress=progress,
                                  keys=keys)
        coordinator.kernel_shapes = frozenset(k for k, on in lab.kernel_emulates.items() if on)
        coordinator.checkpoints = checkpoints
        try:
            port = coordinator.address.rsplit(":", 1)[1]
            for i in range(1, len(links)):  # one ROUTER, reachable from every namespace on its own pair
                coordinator.sock.bind(f"tcp://{lab.coordinator_address(i)}:{port}")
            coordinator.prepare()
        except BaseException:
            coordinator.close()
            raise
        addresses = [f"tcp://{lab.coordinator_address(i)}:{port}" for i in range(len(links))]
        clients = LocalClients(addresses, len(links), recorder.run_dir / logs,
                               prefixes=[lab.exec_prefix(i) for i in range(len(links))], options=options)
        _serve(coordinator, clients)
