"""The coordinator's side of all-reduce aggregation (`aggregation: allreduce`, algorithms/machinery/rounds.py).

It hosts the TCPStore where each round's participants meet to build their process group (the clients'
side: client.py), tells every client where it is in SETUP, and puts instructions on the wire: a
client whose replica already holds the round's θ gets the metadata only, and every instruction says
how long the ring takes over the participants' emulated links (`ring_seconds`, the same model the
simulator charges). The store, like gloo's and NCCL's own traffic, is not authenticated: CURVE covers
the ZeroMQ messages only (docs/lab.md).
"""
from __future__ import annotations

import datetime
import uuid

from edgesync.algorithms.machinery.base import AlgorithmConfig, Instruction
from edgesync.emulation.links import Link
from edgesync.transport.contracts.ring import RING, RingKind, ring_kind

RING_TIMEOUT_S = 24 * 3600.0  # a collective waits for the round's slowest participant, however slow


def ring_seconds(links: list[tuple[Link, Link]], nbytes: int, t: float = 0.0) -> float:
    """A ring all-reduce of `nbytes` among participants with these (up, down) links: 2(N−1) steps, each
    moving a 1/N chunk from every participant to the next at once, so each step lasts as long as its
    slowest hop (the sender's uplink and the receiver's downlink, serialisations overlapped, latencies
    added)."""
    n = len(links)
    if n < 2:
        return 0.0
    chunk = nbytes / n
    hops = []
    for i in range(n):
        up, down = links[i][0].at(t), links[(i + 1) % n][1].at(t)
        hops.append(max(up.wire_s(chunk), down.wire_s(chunk)) + up.latency_s + down.latency_s)
    return 2 * (n - 1) * max(hops)


def ring_bytes(vector_bytes: int, members: int) -> int:
    """Bytes each member of a ring all-reduce sends (and receives): 2(N−1)/N of the vector."""
    return 0 if members < 2 else int(2 * (members - 1) * vector_bytes / members)


def wire_tensors(instruction: Instruction) -> dict:
    """The tensors an instruction carries on the wire: none where the client's replica holds θ."""
    ring = instruction.meta.get("ring")
    return {} if ring_kind(ring) == RingKind.INSTRUCTION and ring["current"] else instruction.tensors


def ring_backend(asked: str, devices: list[str]) -> str:
    """One backend per ring. `auto`: NCCL when every client has a GPU of its own (NCCL refuses two ranks on
    one GPU), else gloo, which sums CPU tensors (a GPU client copies its update over). A lab whose clients
    each name cuda:0 on machines of their own says `allreduce_backend: nccl`."""
    if asked != "auto":
        return asked
    own_gpus = all(d.startswith("cuda") for d in devices) and len(set(devices)) == len(devices)
    return "nccl" if devices and own_gpus else "gloo"


def ring_vector_bytes(instruction: Instruction) -> int:
    """The bytes each participant all-reduces: [w·update, w·buffers, w] in float32."""
    params, buffers = instruction.tensors["params"], instruction.tensors.get("buffers")
    return 4 * (params.numel() + (buffers.numel() if buffers is not None else 0) + 1)


class RingHost:
    """`bind`: the coordinator's ZeroMQ address; its host is where the store listens."""

    def __init__(self, bind: str, scenario, clock=lambda: 0.0):
        """`scenario` gives the clients' links and devices; `clock`: the algorithm's time (links may follow
        traces)."""
        self.devices = [c.device for c in scenario.clients]
        host = bind.split("://", 1)[-1].rsplit(":", 1)[0]
        self.host = "0.0.0.0" if host in ("*", "") or not bind.startswith("tcp") else host
        self.client_links = scenario.client_links
        self.clock = clock
        self.store = None
        self._ring_s: tuple = (None, 0.0)  # ((group, round), the ring's emulated seconds)
        self.run_id = uuid.uuid4().hex[:8]  # keeps this run's groups apart from a resumed one's on a reused port

    def setup_meta(self, config: AlgorithmConfig) -> dict | None:
        """What SETUP tells the clients of an all-reduce algorithm (None for any other)."""
        if getattr(config, "aggregation", "ps") != "allreduce":
            return None
        if self.store is None:
            import torch.distributed as dist
            self.store = dist.TCPStore(self.host, 0, is_master=True, wait_for_workers=False,
                                       timeout=datetime.timedelta(seconds=RING_TIMEOUT_S))
        return {"port": self.store.port, "prefix": f"{self.run_id}/{config.key}", "timeout_s": RING_TIMEOUT_S,
                "backend": ring_backend(config.allreduce_backend, self.devices), **RING.offer()}

    def wire(self, instruction: Instruction) -> tuple[dict, dict]:
        """An instruction's (meta, tensors) as they travel: the round's ring time added, θ left out where
        the client holds it."""
        ring = instruction.meta.get("ring")
        if ring is None:
            return instruction.meta, instruction.tensors
        key = (ring["group"], instruction.meta["version"])
        if self._ring_s[0] != key:  # once a round: every participant's instruction says the same
            links = [self.client_links(m) for m in ring["members"]]
            self._ring_s = (key, ring_seconds(links, ring_vector_bytes(instruction), self.clock()))
        meta = {**instruction.meta, "ring": {**ring, "ring_s": self._ring_s[1]}}
        return meta, wire_tensors(instruction)

    def close(self) -> None:
        self.store = None


def count_ring_bytes(sock, identity: bytes, meta: dict) -> None:
    """An all-reduce report's bytes (what the client sent its peers this round) join the bytes it sent:
    its row's bytes_up and the algorithm's; what it received from them, as much again, is not counted
    twice."""
    ring = meta.get("ring")
    if ring_kind(ring) == RingKind.REPORT and isinstance(ring.get("bytes"), int) and ring["bytes"] > 0:
        sock.bytes_in[identity] = sock.bytes_in.get(identity, 0) + ring["bytes"]
