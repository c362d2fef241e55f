"""A live client's half of all-reduce aggregation (`aggregation: allreduce`, algorithms/machinery/rounds.py).

`RingHalf` wraps the client half. Each instruction it fills from its replica of the server half when
the coordinator left θ out (`ring.current`), runs the client half, then sums [w·update, w·buffers, w]
with the round's other participants over torch.distributed — gloo on CPU, NCCL on a GPU, a process
group per draw of participants, rendezvous at the coordinator's TCPStore (host.py) — and applies
the mean to the replica, as the server does. What it sends back is a report (its weight and the
all-reduce bytes); the lowest-ranked participant then sends the mean itself, for the server to apply
(`follow_ups`: after the report, so that the round can close on the reports while the mean travels).

A process group's members must all be there before any can go on, and the slowest is still
computing: the group is built on a thread as soon as the instruction arrives, and the client waits for
it and for the collective in short polls that keep it heard (heartbeats) and listen to the coordinator.
When a participant dies the coordinator starts the round again: a waiting client sees the new
instruction, leaves the collective and sends nothing (so does one whose collective fails).
"""
from __future__ import annotations

import datetime
import logging
import socket
import threading
import time
from urllib.parse import urlsplit

import torch
import torch.distributed as dist

from edgesync import algorithms
from edgesync.algorithms.machinery.base import ClientAlgorithm, Instruction, ModelState, Update
from edgesync.runtime.allreduce.host import ring_bytes
from edgesync.transport.contracts.ring import RING
from edgesync.transport.protocol import MessageType as T

log = logging.getLogger("edgesync.client")

POLL_S = 0.0005  # between looks at a collective: well under a ring's time, negligible CPU


class RingFailed(RuntimeError):
    """The round's collective did not finish (a participant gone, or the timeout)."""


class RingHalf(ClientAlgorithm):
    def __init__(self, inner: ClientAlgorithm, setup: dict, connect: str, rank: int):
        """`setup` is the SETUP's metadata (its `ring`: the store's port, backend, prefix, timeout);
        `connect` the coordinator's address, whose host holds the store. A ring of another contract (another
        EdgeSync's coordinator): ContractMismatch, before anything is set up."""
        RING.check(setup["ring"], here="client")
        self.inner, self.rank = inner, rank  # before the base class sets ctx, which goes to the inner half
        super().__init__(inner.config, inner.trainer)
        self.uses_queries = inner.uses_queries
        ring = setup["ring"]
        self.host = urlsplit(connect).hostname or "127.0.0.1"
        self.port, self.prefix = int(ring["port"]), str(ring["prefix"])
        self.timeout_s = float(ring["timeout_s"])
        # NCCL when the coordinator says every participant trains on a GPU (host.py), else gloo on CPU
        self.backend = ring.get("backend", "gloo")
        self.device = inner.trainer.device if self.backend == "nccl" else torch.device("cpu")
        spec = algorithms.get(setup["algorithm"]["name"])
        self.server_class = spec.server
        self.replica = None  # the server half's replica: θ, buffers and what `apply` keeps (SSGD's velocity)
        self.version: int | None = None  # the round whose θ the replica holds
        self.store: dist.TCPStore | None = None
        self.group: tuple[int, object] | None = None  # (group id, process group), built on a thread
        self._building: threading.Thread | None = None
        self._built: dict = {}
        self._mean: Update | None = None  # the lead's mean, sent after its report

    # -- what the runtime sees of a client half ------------------------------------------------------
    @property
    def ctx(self):
        return self.inner.ctx

    @ctx.setter
    def ctx(self, value) -> None:
        self.inner.ctx = value

    def follow_ups(self) -> list[Update]:
        mean, self._mean = self._mean, None
        return [mean] if mean is not None else []

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)

    def on_instruction(self, instruction: Instruction) -> Update:
        ring, version = instruction.meta["ring"], int(instruction.meta["version"])
        self._start_group(int(ring["group"]), list(ring["members"]))
        tensors = self._fill(ring, version, instruction.tensors)
        update = self.inner.on_instruction(Instruction(tensors=tensors, meta=instruction.meta))
        return self._reduce(ring, version, update)

    # -- the replica ---------------------------------------------------------------------------------
    def _fill(self, ring: dict, version: int, tensors: dict) -> dict:
        if ring["current"]:
            if self.replica is None or self.version != version:
                raise RingFailed(f"the coordinator says this client holds round {version}'s model; it holds "
                                 f"round {self.version}'s")
            out = {"params": self.replica.params}
            if self.replica.buffers.numel():
                out["buffers"] = self.replica.buffers
            return out
        params = tensors["params"].clone()
        buffers = tensors["buffers"].clone() if "buffers" in tensors else torch.zeros(0)
        self.replica = self.server_class(self.config, ModelState(params, buffers), [])
        self.replica.load_replica_state({k: v.clone() for k, v in tensors.items() if k not in ("params", "buffers")})
        self.version = version
        return tensors

    # -- the collective ------------------------------------------------------------------------------
    def _reduce(self, ring: dict, version: int, update: Update) -> Update:
        replica = self.replica
        key = replica.update_key
        w = float(replica.weight(update))
        parts = [update.tensors[key].reshape(-1) * w]
        has_buffers = "buffers" in update.tensors
        if has_buffers:
            parts.append(update.tensors["buffers"].reshape(-1) * w)
        parts.append(torch.tensor([w], dtype=parts[0].dtype))
        flat = torch.cat(parts).to(self.device)
        members = list(ring["members"])
        pg = self._wait_group(int(ring["group"]))
        self._wait(pg.allreduce([flat]), "the all-reduce")
        flat = flat.cpu()
        n = update.tensors[key].numel()
        mean = flat[:n] / flat[-1]
        replica.round_lr = float(ring["lr"])
        replica.apply(mean)
        tensors = {"mean": mean}
        if has_buffers:
            replica.buffers = flat[n:-1] / flat[-1]
            tensors["buffers"] = replica.buffers
        self.version = version + 1
        self._emulate_links(float(ring.get("ring_s", 0.0)))
        sent = ring_bytes(flat.numel() * flat.element_size(), len(members))
        if self.rank == members[0]:  # no version: it is not a report of the round the server may be in
            self._mean = Update(tensors=tensors, meta={"ring": {"mean_of": version}})
        return Update(tensors={}, meta={**update.meta, "ring": {"weight": w, "bytes": sent}})

    def _start_group(self, group: int, members: list[int]) -> None:
        """Build the round's process group on a thread (it blocks until every member has come)."""
        if (self.group is not None and self.group[0] == group) or self._built.get("id") == group:
            return
        # An older group still connecting (a participant died) is left to its thread: it fails there.
        self.group, self._built = None, {"id": group}
        if self.store is None:
            self.store = dist.TCPStore(self.host, self.port, is_master=False,
                                       timeout=datetime.timedelta(seconds=self.timeout_s))
        store = dist.PrefixStore(f"{self.prefix}/g{group}", self.store)
        rank, size = members.index(self.rank), len(members)

        def build(out=self._built) -> None:
            try:
                out["pg"] = self._new_group(store, rank, size)
            except Exception as exc:  # noqa: BLE001 — told to the waiting thread
                out["error"] = exc

        self._building = threading.Thread(target=build, name=f"ring-group-{group}", daemon=True)
        self._building.start()

    def _new_group(self, store, rank: int, size: int):
        timeout = datetime.timedelta(seconds=self.timeout_s)
        if self.backend == "nccl":
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = timeout
            return dist.ProcessGroupNCCL(store, rank, size, opts)
        opts = dist.ProcessGroupGloo._Options()
        opts._timeout = timeout
        opts._devices = [dist.ProcessGroupGloo.create_device(hostname=self._own_address())]
        return dist.ProcessGroupGloo(store, rank, size, opts)

    def _own_address(self) -> str:
        """The address of the interface this client reaches the coordinator by (its peers reach it there)."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((self.host, self.port))
                return s.getsockname()[0]
            except OSError:
                return "127.0.0.1"

    def _wait_group(self, group: int):
        deadline = time.perf_counter() + self.timeout_s
        while self._building is not None and self._building.is_alive():
            if time.perf_counter() > deadline:
                raise RingFailed(f"process group {group}: not every participant came within {self.timeout_s:g} s")
            self._listen()
            self._building.join(0.01)
        self._building = None
        if "error" in self._built:
            error = self._built.pop("error")
            self._built = {}
            raise RingFailed(f"process group {group}: {error}") from error
        if "pg" in self._built:
            self.group = (group, self._built.pop("pg"))
        if self.group is None or self.group[0] != group:  # its earlier try failed: the coordinator starts again
            raise RingFailed(f"process group {group} is gone")
        return self.group[1]

    def _wait(self, work, what: str) -> None:
        deadline = time.perf_counter() + self.timeout_s
        listen_at = time.perf_counter() + 0.05
        try:
            while not work.is_completed():
                now = time.perf_counter()
                if now > deadline:
                    raise RingFailed(f"{what} outlived {self.timeout_s:g} s")
                if now > listen_at:
                    self._listen()
                    listen_at = now + 0.05
                time.sleep(POLL_S)
            work.wait()
        except RingFailed:
            self.group = None
            raise
        except RuntimeError as exc:  # gloo: a peer closed its connection
            self.group = None
            raise RingFailed(f"{what}: {exc}") from exc

    def _listen(self) -> None:
        """Stay heard, and give up when the coordinator has started the round again (a new TRAIN waits)."""
        ctx = self.ctx
        if hasattr(ctx, "replies"):
            ctx.replies()  # keeps what is not a reply for the main loop; END aborts the instruction
            ctx.heartbeat()
        if any(m.type == T.TRAIN for m in getattr(ctx, "pending", ())):
            self.group = None
            raise RingFailed("the coordinator started the round again (a participant was lost)")

    def _emulate_links(self, seconds: float) -> None:
        """The ring's time over the participants' emulated links (ring_host.ring_seconds), slept after the
        real collective (on one host its real time is the loopback's: negligible beside it)."""
        end = time.perf_counter() + seconds
        while (left := end - time.perf_counter()) > 0:
            time.sleep(min(left, 0.5))
            self._listen()


def ring_half(inner: ClientAlgorithm, setup: dict, connect: str, rank: int) -> ClientAlgorithm:
    """The client half itself, or wrapped for all-reduce when SETUP says the algorithm uses it."""
    return RingHalf(inner, setup, connect, rank) if setup.get("ring") else inner
