"""`edgesync run` on one machine: a coordinator in this process, one process per client.

Each client process is the same `edgesync client` a lab machine runs, started with one torch
thread and glibc's mmap threshold raised (constants.py says why), forked from a warm interpreter that has
imported torch once (warm_start.py: milliseconds per client instead of seconds; netns clients, which start
inside `ip netns exec`, are started afresh). Their logs go to the run
folder's `logs/`. A client process that dies is lost to the run (the coordinator logs the end of its
log and goes on without it, docs/lab.md "Faults"); when none is left the run stops.

With `links.backend: netns` each client runs in its own network namespace behind a veth pair that
`tc` shapes (emulation/netns/), connecting to the coordinator over that pair's address — the
commands a lab runs on separate machines; the namespaces are removed on every way out.

With `curve=True` the links are CURVE-encrypted as on a shared network (docs/lab.md), with
throw-away keys in a private temporary folder that is removed after the run.

Many clients (`process_layout`): past LOCAL_PROCESSES_PER_CORE client processes per core, `edgesync run`
starts one process per core instead and spreads the clients over them as slots (`edgesync client
--rank R --slots K`, runtime/live/slots.py), and says so ("200 clients in 2 processes of 100 slots");
`live.processes` in the scenario (or `edgesync run --processes N`) chooses the count. A slotted
process's log is `logs/clients-R-S.log`; when it exits, every client it hosted is lost.
"""
from __future__ import annotations

import logging
import os
import shutil
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
from edgesync.runtime.bookkeeping.checkpoint import Checkpointer
from edgesync.runtime.live import warm_start
from edgesync.runtime.live.coordinator import Coordinator, RunAborted
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.config import Scenario
from edgesync.transport.protocol import usable_cores
from edgesync.transport.security import ServerKeys, local_keys

log = logging.getLogger("edgesync.launcher")

# One process per client while there are at most this many per core. Each client process holds its own
# data, model and allocator (forked from the warm process it shares torch's pages, ≈ 510 MB, with the
# others; docs/benchmarks.md, "Starting local clients" and "Many devices per process"), while it computes on
# one torch thread: past a few per core, more processes add memory and switching, not compute. A slot adds
# ≈ 2–3 MB.
LOCAL_PROCESSES_PER_CORE = 4
SHARD_START_TIMEOUT_S = 60.0  # a follower shard process's start (imports torch)


def process_layout(clients: int, processes: int | None, cores: int) -> list[range]:
    """The consecutive ranks each local client process hosts. `processes` (live.processes) None: one per
    client up to LOCAL_PROCESSES_PER_CORE × cores, else one per core — a process's slots take turns on
    one torch thread, so a core each is all the compute they can use, and the coordinator can pin each
    to its own core without root (emulation/device_model.py). The clients are spread evenly."""
    if processes is None:
        processes = clients if clients <= LOCAL_PROCESSES_PER_CORE * cores else max(1, cores)
    processes = max(1, min(processes, clients))
    per, extra = divmod(clients, processes)
    layout, start = [], 0
    for i in range(processes):
        count = per + (1 if i < extra else 0)
        layout.append(range(start, start + count))
        start += count
    return layout


def describe_layout(layout: list[range]) -> str:
    """'200 clients in 2 processes of 100 slots' (or '… of 34 or 33 slots')."""
    sizes = sorted({len(g) for g in layout}, reverse=True)
    clients = sum(len(g) for g in layout)
    return (f"{clients} clients in {len(layout)} process{'es' if len(layout) != 1 else ''} of "
            f"{' or '.join(map(str, sizes))} slots")


def client_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(CLIENT_THREAD_ENV)
    env.update(MALLOC_ENV)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class LocalClients:
    """The client processes of a local run; always stopped on the way out."""

    def __init__(self, address: str | list[str], count: int, log_dir: Path, data_root: str | None = None,
                 prefixes: list[list[str]] | None = None, options: list[list[str]] | None = None,
                 layout: list[range] | None = None):
        """`address` for every client, or one per client; `prefixes` run client i under e.g. `ip netns exec`;
        `options` are more `edgesync client` options for client i (its CURVE keys); `layout` the ranks each
        process hosts (default: one process per client), a process of several running them as slots
        with the options of its first."""
        log_dir.mkdir(parents=True, exist_ok=True)
        self.layout = layout or [range(rank, rank + 1) for rank in range(count)]
        self.logs = [log_dir / (f"client-{g.start}.log" if len(g) == 1 else f"clients-{g.start}-{g[-1]}.log")
                     for g in self.layout]
        self.procs: list[subprocess.Popen] = []
        self.exited: set[int] = set()  # indices into procs
        addresses = [address] * count if isinstance(address, str) else address
        for group, path in zip(self.layout, self.logs):
            first = group.start
            args = ["client", "--connect", addresses[first], "--rank", str(first)]
            if len(group) > 1:
                args += ["--slots", str(len(group))]
            if data_root:
                args += ["--data-root", data_root]
            if options:
                args += options[first]
            # Either way the log is appended to: a resumed run's clients go on in the same log.
            if prefixes is None and warm_start.enabled():
                self.procs.append(warm_start.warm_starter().start(args, path, client_env()))
                continue
            cmd = [*(prefixes[first] if prefixes else []), sys.executable, "-m", "edgesync.cli", *args]
            with open(path, "a") as out:
                self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=client_env(),
                                                   stdin=subprocess.DEVNULL))

    def check(self) -> list[tuple[int, str]]:
        """Client processes that have exited since the last call, with the end of their logs: the
        coordinator counts every client they hosted lost (the run goes on without them). If none is
        left, the run stops."""
        gone = []
        for i, p in enumerate(self.procs):
            code = p.poll()
            if code is not None and i not in self.exited:
                self.exited.add(i)
                tail = "".join(self.logs[i].read_text(errors="replace").splitlines(True)[-15:])
                why = f"its process exited with code {code}; end of {self.logs[i]}:\n{tail}"
                gone += [(rank, why) for rank in self.layout[i]]
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


def _die_with_parent() -> None:
    """In a local follower shard's process: exit when the run's process dies (Linux; a killed run leaves no
    shard listening: its --resume starts new ones)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LocalShards:
    """The follower shards of a local sharded run (`edgesync shard` processes on 127.0.0.1), each telling
    the address it listens at through a file; stopped on the way out (the lead tells them first)."""

    def __init__(self, count: int, log_dir: Path, keys: ServerKeys | None = None):
        self.procs: list[subprocess.Popen] = []
        self.addresses: list[str] = []
        if not count:
            return
        log_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="edgesync-shards-"))
        files = [folder / f"shard-{j}.address" for j in range(1, count + 1)]
        try:
            for j, file in enumerate(files, start=1):
                cmd = [sys.executable, "-m", "edgesync.cli", "shard", "--bind", "tcp://127.0.0.1:*",
                       "--address-file", str(file), "--state-dir", str(log_dir.parent / "shards")]
                if keys is not None:  # the coordinator's own key pair and allow-list (security.py, as_client)
                    cmd += ["--curve-secret", str(keys.secret_file), "--allow", str(keys.allow_dir)]
                with open(log_dir / f"shard-{j}.log", "a") as out:
                    self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=client_env(),
                                                       stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent))
            deadline = time.monotonic() + SHARD_START_TIMEOUT_S
            for j, (file, proc) in enumerate(zip(files, self.procs), start=1):
                while not file.exists():
                    if proc.poll() is not None or time.monotonic() > deadline:
                        tail = (log_dir / f"shard-{j}.log").read_text(errors="replace")[-2000:]
                        raise RunAborted(f"shard {j} did not start (see {log_dir / f'shard-{j}.log'}):\n{tail}")
                    time.sleep(0.05)
                self.addresses.append(file.read_text().strip())
        except BaseException:
            self.stop()
            raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def stop(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.terminate()
                p.wait()


def run_live(scenario: Scenario, recorder: RunRecorder, progress: Progress, logs: str = "logs",
             checkpoints: Checkpointer | None = None, curve: bool = False) -> None:
    """Run every algorithm of `scenario` with local client processes, recording into `recorder`;
    `curve` encrypts and authenticates the links with throw-away keys."""
    with _throwaway_keys(len(scenario.clients) if curve else 0) as (keys, options):
        if scenario.links.backend == "netns":
            return _run_in_namespaces(scenario, recorder, progress, logs, checkpoints, keys, options)
        shards = LocalShards(scenario.shard_count - 1, recorder.run_dir / logs, keys)
        try:
            coordinator = Coordinator(scenario, recorder, bind="tcp://127.0.0.1:*", progress=progress, keys=keys)
            coordinator.checkpoints, coordinator.shard_addresses = checkpoints, shards.addresses
        except BaseException:
            shards.stop()
            raise
        try:
            coordinator.prepare()  # a missing dataset fails here, before any client process starts
        except BaseException:
            coordinator.close()
            shards.stop()
            raise
        layout = process_layout(len(scenario.clients), scenario.live.processes, usable_cores())
        if len(layout) < len(scenario.clients):
            text = describe_layout(layout)
            log.info("%s (live.processes: %s)", text, scenario.live.processes or "automatic")
            if progress.enabled:
                progress.console.print(text, highlight=False)
        clients = LocalClients(coordinator.address, len(scenario.clients), recorder.run_dir / logs, options=options,
                               layout=layout)
        try:
            _serve(coordinator, clients)
        finally:
            shards.stop()


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
