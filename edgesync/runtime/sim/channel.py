"""The wire between the simulator's Ray driver and its workers (ray_backend.py, worker.py).

Ray starts the workers, places them, and hands them the training data through its object store; the
instructions and updates of a run then travel over ZeroMQ in EdgeSync's own wire format
(transport/protocol.py): a round trip with a 0.74 MB model each way takes ≈ 2.7 ms as a Ray actor call
on the development VM and ≈ 0.6 ms over this channel (benchmarks/sim_round_trip.py); beside a 26 ms
training step that difference is most of what a 2-core machine has to spare.

One ROUTER at the driver, one DEALER per worker. On a single-node cluster the channel is an ipc socket
in a folder only this user can enter; across nodes it is TCP on the driver's node address, encrypted
with CURVE under a key pair made for the run, whose public half reaches the workers only through Ray
(a process that has not been given it cannot complete the handshake).

Its own contract (transport/contracts/ray_worker.py), with kinds of its own (`RayKind`): TRAIN (driver →
worker: an instruction, with `SIM` = rank, virtual start, offline time; a tensor the worker already holds
is named, not sent: a round's θ crosses once per worker), DEVICE_BACK (the client's device came back: a
fresh client half), UPDATE (worker → driver: the result, with its virtual duration and the next step's
least factor), READY (a worker is listening; it names the contract it speaks, which the driver checks:
a worker of another version is sent REFUSED, and both sides raise `ContractMismatch` with one line),
ERROR (a worker failed: its traceback), SERVE_END (the algorithm is over: the worker's serve call returns).
"""
from __future__ import annotations

import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path

import torch
import zmq

from edgesync.transport.contracts.ray_worker import RAY_WORKER, RayKind
from edgesync.transport.contracts.version import ContractMismatch
from edgesync.transport.protocol import Message

SIM = "_sim"        # the meta key of the simulator's own fields
CACHED = 8          # tensors each worker keeps for instructions that send them again (a round's θ)
POLL_MS = 1000      # how long the driver waits for a message before asking Ray whether its workers live


def owned(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Received tensors are views of the message's frames: each gets memory of its own."""
    return {k: t.clone() for k, t in tensors.items()}


class DriverChannel:
    """The driver's end: bind, wait for every worker, send instructions, receive what comes back."""

    def __init__(self, workers: int, local: bool, host: str):
        self.context = zmq.Context()
        self.sock = self.context.socket(zmq.ROUTER)
        self.sock.sndhwm = self.sock.rcvhwm = 0   # flow is bounded by the driver (ray_backend.py's window)
        self.sock.linger = 0
        self.sock.router_mandatory = True        # a message to a worker that is not there is an error
        # Each algorithm's serve call connects anew under its worker's identity, possibly before this socket has
        # seen the previous call's connection close: without handover the new one is refused and its READY
        # lost, and the driver waits for it for ever (the intermittent hang in begin()).
        self.sock.router_handover = True
        self.folder: Path | None = None
        self.server_key: bytes | None = None
        if local:
            self.folder = Path(tempfile.mkdtemp(prefix="edgesync-sim-"))  # mode 0700: this user only
            self.address = f"ipc://{self.folder / 'channel'}"
            self.sock.bind(self.address)
        else:
            self.server_key, secret = zmq.curve_keypair()
            self.sock.curve_server, self.sock.curve_secretkey = True, secret
            port = self.sock.bind_to_random_port(f"tcp://{host}")
            self.address = f"tcp://{host}:{port}"
        self.identities = [f"w{i}".encode() for i in range(workers)]
        self.sent: list[OrderedDict] = [OrderedDict() for _ in range(workers)]  # per worker: key → tensor held

    def send(self, worker: int, message: Message) -> None:
        """TRAIN's tensors that `worker` holds already go by name (SIM "order": [name, key, sent] in the
        order both ends update what they hold), the rest as frames."""
        if message.type == RayKind.TRAIN:
            held, order, fresh = self.sent[worker], [], {}
            for name, t in message.tensors.items():
                key = f"{id(t)}:{t._version}"
                if key in held:
                    held.move_to_end(key)
                else:
                    fresh[name] = held[key] = t  # held here too: its id stays its own while the worker caches it
                    if len(held) > CACHED:
                        held.popitem(last=False)
                order.append([name, key, name in fresh])
            message = Message(RayKind.TRAIN, {**message.meta, SIM: {**message.meta[SIM], "order": order}}, fresh)
        self.sock.send_multipart([self.identities[worker], *message.to_frames()])  # copied: θ may be replaced

    def receive(self, alive) -> tuple[int, Message]:
        """The next message from any worker (worker index, message); `alive()` is asked while none comes
        and raises if a worker is gone. A READY of another contract is answered REFUSED, and a worker's REFUSED
        (it checks this driver's contract too): ContractMismatch."""
        while not self.sock.poll(POLL_MS):
            alive()
        identity, *frames = self.sock.recv_multipart(copy=False)
        worker, message = self.identities.index(identity.bytes), Message.from_frames(frames, kinds=RayKind)
        if message.type == RayKind.READY and (refused := RAY_WORKER.refusal(message.meta, here="server")):
            self.sock.send_multipart([identity.bytes, *Message(RayKind.REFUSED, {"reason": refused}).to_frames()])
            raise ContractMismatch(f"Ray worker {worker}: {refused}")
        if message.type == RayKind.REFUSED:  # the worker refuses this driver's contract
            raise ContractMismatch(f"Ray worker {worker}: {message.meta.get('reason')}")
        return worker, message

    def close(self) -> None:
        self.sock.close(0)
        self.context.term()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


class WorkerChannel:
    """A worker's end (inside its serve call): connect, say READY, receive instructions, send results."""

    def __init__(self, index: int, address: str, server_key: bytes | None):
        self.context = zmq.Context()
        self.sock = self.context.socket(zmq.DEALER)
        self.sock.identity = f"w{index}".encode()
        self.sock.sndhwm = self.sock.rcvhwm = 0
        self.sock.linger = 1000  # let the last result and END's answer leave
        if server_key is not None:
            public, secret = zmq.curve_keypair()
            self.sock.curve_publickey, self.sock.curve_secretkey, self.sock.curve_serverkey = public, secret, server_key
        self.sock.connect(address)
        self.held: OrderedDict[str, torch.Tensor] = OrderedDict()  # mirrors the driver's `sent` for this worker

    def ready(self) -> None:
        """Say it listens, naming the contract it speaks (the driver checks it)."""
        self.send(Message(RayKind.READY, RAY_WORKER.offer()))

    def receive(self) -> Message:
        """The next message; a TRAIN comes back whole (tensors it named taken from what this worker holds,
        each a copy of its own: a client half may change what it is given). REFUSED: ContractMismatch."""
        message = Message.from_frames(self.sock.recv_multipart(copy=False), kinds=RayKind)
        if message.type == RayKind.REFUSED:
            raise ContractMismatch(str(message.meta.get("reason")))
        if message.type != RayKind.TRAIN:
            return message
        received, tensors = owned(message.tensors), {}
        for name, key, sent in message.meta[SIM]["order"]:  # as the driver updated its copy of `held`
            if sent:
                self.held[key] = received[name]
                if len(self.held) > CACHED:
                    self.held.popitem(last=False)
            else:
                self.held.move_to_end(key)
            tensors[name] = self.held[key].clone()  # what is held stays as it came
        return Message(RayKind.TRAIN, message.meta, tensors)

    def send(self, message: Message) -> None:
        """Copied into the message: a client half may reuse the memory of what it returned."""
        self.sock.send_multipart(message.to_frames())

    def close(self) -> None:
        self.sock.close()
        self.context.term()
