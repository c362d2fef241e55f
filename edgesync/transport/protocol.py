"""The EdgeSync frame and its codec, shared by every wire contract (transport/contracts/), and the message
types of the client ↔ coordinator and lead ↔ shard contracts: every message, its frames, how they are checked.

`proto`/`v` below name the frame format, on every message. A contract's own id and version (e.g.
edgesync.coordinator/1) travel only at connect time, in HELLO and WELCOME here (contracts/version.py).

Frame layout (a client's DEALER sends these; the coordinator's ROUTER sees its identity frame first):

    frame 0   header: UTF-8 JSON object
              {"proto": "edgesync", "v": 1, "type": "<TYPE>", "meta": {...}, ["clock": s,]
               "tensors": [{"name": str, "dtype": "float32"|"float16"|"int32"|"int64"|"uint8",
                            "shape": [int, ...]}, ...]}
    frame 1…n one frame per entry of "tensors", in order: the tensor's raw bytes, C order,
              little-endian, sent and received without copies.

Message types (`MessageType`), and who sends them; each pair has its constructors below:

    client → coordinator      coordinator → client
    HELLO   host info, wishes, WELCOME   rank, run name, uplink, timeout
            outside code run
    READY   set up for algo    SETUP     one algorithm's client config (+ partition indices)
    CALIBRATED reference step  CALIBRATE measure the undisturbed step time now; or, with a base
               and isolation             step, pace steps at factor × base (and pin or cap the CPU)
    UPDATE  an algorithm's     TRAIN     an algorithm's instruction
            update
    QUERY   a question inside  REPLY     the server half's answer (ESync's State Server)
            an instruction
    EVALUATED local accuracy   EVALUATE  evaluate this model on your own data (Flower's federated eval)
    STATS   per-client totals  END       the algorithm is over: send your statistics
                               SHUTDOWN  the run is over: exit
    ERROR   what went wrong    ERROR     what was wrong with your message (or: describe the outside
                                         code you run, then say HELLO again)
    HEARTBEAT  I am alive      HEARTBEAT I am alive (each side sends one after a second of silence)

    lead coordinator → follower shard    follower shard → lead (a sharded coordinator: runtime/sharding/server.py)
    SHARD   meta `op`, a ShardOp            SHARD_STATE  op's answer: ready, or the shard's slice of the
            (contracts/shard.py): hello,                 model and its byte counters (snapshot, end)
            setup, start, apply, lost, …

A client of a sharded coordinator also sends HELLO (its rank), UPDATE parts and HEARTBEAT to each
follower shard, which sends it TRAIN parts: the same messages on a slice of the model.

`clock`, optional: the running algorithm's clock (seconds since it started) when the message reaches the other
end (when it was sent, plus its time on an emulated link). The coordinator stamps every message it sends while
an algorithm runs; clients follow time-varying emulation (traces, availability) on it (run_clock.py). A client
that has heard it stamps what it sends with its estimate of it: the coordinator's queueing delay of an update
runs from there (metrics/coordinator_load.py).

Any frame that fails these checks raises `ProtocolError`; the coordinator answers it with ERROR and
goes on serving everyone else.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Type

import numpy as np
import orjson
import torch

from edgesync.constants import PROTOCOL_NAME, PROTOCOL_VERSION
from edgesync.transport.contracts.coordinator import COORDINATOR



class MessageType(StrEnum):
    """Every message type of protocol version 1. Members are strings: they go into the header as is."""

    HELLO = "HELLO"
    WELCOME = "WELCOME"
    SETUP = "SETUP"
    READY = "READY"
    CALIBRATE = "CALIBRATE"
    CALIBRATED = "CALIBRATED"
    TRAIN = "TRAIN"
    UPDATE = "UPDATE"
    QUERY = "QUERY"
    REPLY = "REPLY"
    EVALUATE = "EVALUATE"
    EVALUATED = "EVALUATED"
    END = "END"
    STATS = "STATS"
    SHUTDOWN = "SHUTDOWN"
    ERROR = "ERROR"
    HEARTBEAT = "HEARTBEAT"
    SHARD = "SHARD"
    SHARD_STATE = "SHARD_STATE"


T = MessageType
CLIENT_TYPES = frozenset({T.HELLO, T.READY, T.CALIBRATED, T.UPDATE, T.QUERY, T.EVALUATED, T.STATS, T.ERROR,
                          T.HEARTBEAT})
COORDINATOR_TYPES = frozenset({T.WELCOME, T.SETUP, T.CALIBRATE, T.TRAIN, T.REPLY, T.EVALUATE, T.END, T.SHUTDOWN,
                               T.ERROR, T.HEARTBEAT})
FOLLOWER_TYPES = CLIENT_TYPES | {T.SHARD}  # what a follower shard accepts: its clients' messages, its lead's
LEAD_TYPES = frozenset({T.SHARD_STATE, T.ERROR, T.HEARTBEAT})  # what the lead accepts from a follower
_TYPES = {t.value: t for t in MessageType}

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float16": torch.float16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8,
}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
_ITEM_BYTES = {name: torch.empty(0, dtype=d).element_size() for name, d in DTYPES.items()}
MAX_HEADER_BYTES = 1 << 20
# orjson writes NaN and ±Inf as null (JSON has no such numbers: a diverging loss), numpy scalars as
# numbers and int keys as strings, as json.dumps would; it is ≈ 10× faster, which small messages feel.
_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
# Received frames are read-only; the contract says clone before writing (torch warns once otherwise).
warnings.filterwarnings("ignore", message="The given buffer is not writable", category=UserWarning)


class ProtocolError(ValueError):
    """A message that breaks the protocol. The text says what and is safe to send back."""


@dataclass
class Message:
    type: MessageType  # or another contract's kind (a StrEnum: the header's "type")
    meta: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    clock: float | None = None  # the algorithm's clock on arrival (while one runs; a client's: its estimate)
    # a received tensor's frame, the memory it views, by name: the update check reads these in C without a call
    # into torch (buffer_checks.py); empty in a message built here
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def _header(self, specs: list) -> dict:
        header = {"proto": PROTOCOL_NAME, "v": PROTOCOL_VERSION, "type": self.type, "meta": self.meta,
                  "tensors": specs}
        if self.clock is not None:
            header["clock"] = round(self.clock, 6)
        return header

    def wire_size(self) -> int:
        """Bytes this message puts on the wire (what the sockets count), without building frames."""
        specs = [{"name": n, "dtype": _DTYPE_NAMES.get(t.dtype, "?"), "shape": list(t.shape)}
                 for n, t in self.tensors.items()]
        head = len(_dumps(self._header(specs)))
        return head + sum(t.numel() * t.element_size() for t in self.tensors.values())

    def to_frames(self) -> list:
        """Header bytes, then each tensor's memory (no copy for contiguous CPU tensors)."""
        specs, frames = [], [b""]
        for name, t in self.tensors.items():
            dtype = _DTYPE_NAMES.get(t.dtype)
            if dtype is None:
                raise ProtocolError(f"tensor {name!r}: dtype {t.dtype} cannot be sent")
            array, data = _flat_bytes(t)
            specs.append({"name": name, "dtype": dtype, "shape": list(array.shape)})
            frames.append(data)
        frames[0] = _dumps(self._header(specs))
        return frames

    @classmethod
    def from_frames(cls, frames: list, allowed: frozenset[str] | None = None,
                    kinds: Type[StrEnum] = MessageType) -> "Message":
        """Parse and check frames (bytes, memoryviews or zmq.Frame); tensors are zero-copy views. `kinds`: the
        contract's message kinds (the Ray channel has its own, contracts/ray_worker.py)."""
        if not frames:
            raise ProtocolError("empty message")
        raw = _buffer(frames[0])
        if len(raw) > MAX_HEADER_BYTES:
            raise ProtocolError(f"header of {len(raw)} bytes exceeds {MAX_HEADER_BYTES}")
        try:  # strict JSON: NaN/Infinity literals, too-deep nesting and over-long numbers are refused
            header = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"header is not UTF-8 JSON ({exc.msg})") from None
        if not isinstance(header, dict):
            raise ProtocolError("header is not a JSON object")
        if header.get("proto") != PROTOCOL_NAME:
            raise ProtocolError(f"not an {PROTOCOL_NAME} message (proto={header.get('proto')!r})")
        version = header.get("v")
        if type(version) is not int or version != PROTOCOL_VERSION:  # not 1.0 or true, which equal 1 in Python
            raise ProtocolError(f"protocol version {header.get('v')!r} is not supported; "
                                f"this side speaks version {PROTOCOL_VERSION}")
        names = _TYPES if kinds is MessageType else kinds._value2member_map_
        kind = names.get(header.get("type")) if isinstance(header.get("type"), str) else None
        if kind is None or (allowed is not None and kind not in allowed):
            raise ProtocolError(f"unexpected message type {header.get('type')!r}")
        meta = header.get("meta", {})
        specs = header.get("tensors", [])
        if not isinstance(meta, dict) or not isinstance(specs, list):
            raise ProtocolError("header fields 'meta' must be an object and 'tensors' a list")
        if len(specs) != len(frames) - 1:
            raise ProtocolError(f"header lists {len(specs)} tensors but {len(frames) - 1} data frames came")
        tensors, raw = {}, {}
        for spec, frame in zip(specs, frames[1:]):
            buf = _buffer(frame)
            name, t = _tensor(spec, buf)
            if name in tensors:  # a second one would silently replace the first
                raise ProtocolError(f"tensor {name!r} is listed twice")
            tensors[name], raw[name] = t, buf
        clock = header.get("clock")
        if clock is not None and (type(clock) not in (int, float) or not math.isfinite(clock)):
            raise ProtocolError(f"header field 'clock' must be a number of seconds, not {clock!r}")
        return cls(kind, meta, tensors, None if clock is None else float(clock), raw)


def _flat_bytes(t: torch.Tensor) -> tuple[np.ndarray, memoryview | bytes]:
    """The tensor as a numpy array and its memory as flat bytes, copied only if it must be (a tensor
    that needs grad, one on a GPU, a strided view). The common case asks torch one thing, `.numpy()`:
    each call into torch costs µs once 0.4 MB copies have pushed its code out of the CPU caches."""
    try:
        array = t.numpy()
    except (RuntimeError, TypeError):  # needs grad / not on the CPU
        array = t.detach().cpu().numpy()
    if not array.flags.c_contiguous:  # a strided view: its bytes in logical order
        array = np.ascontiguousarray(array)
    return array, memoryview(array).cast("B") if array.size else b""


def _dumps(header: dict) -> bytes:
    try:
        return orjson.dumps(header, option=_DUMPS_OPTIONS)
    except orjson.JSONEncodeError as exc:  # a meta value that is not JSON: the sender's bug
        raise ProtocolError(f"{header['type']} meta is not JSON: {exc}") from None


def _buffer(frame) -> bytes | memoryview:
    if isinstance(frame, (bytes, memoryview)):  # a type test: hasattr's failing lookup costs an exception
        return frame
    return frame.buffer if hasattr(frame, "buffer") else memoryview(frame)  # zmq.Frame, or bytearray & co


def _tensor(spec: Any, buf: memoryview) -> tuple[str, torch.Tensor]:
    if not isinstance(spec, dict):
        raise ProtocolError("tensor spec is not an object")
    name, dtype, shape = spec.get("name"), spec.get("dtype"), spec.get("shape")
    if not isinstance(name, str) or not isinstance(dtype, str) or dtype not in DTYPES:  # a list is unhashable
        raise ProtocolError(f"tensor spec {spec!r}: needs a name and a dtype in {sorted(DTYPES)}")
    if not isinstance(shape, list):
        raise ProtocolError(f"tensor {name!r}: shape {shape!r} is not a list of non-negative ints")
    for d in shape:  # a loop, not all(<generator>): this runs for every tensor received
        if type(d) is not int or d < 0:  # `type(...) is int` also refuses true and false
            raise ProtocolError(f"tensor {name!r}: shape {shape!r} is not a list of non-negative ints")
    torch_dtype = DTYPES[dtype]
    expected = math.prod(shape) * _ITEM_BYTES[dtype]
    if len(buf) != expected:
        raise ProtocolError(f"tensor {name!r}: {len(buf)} bytes for {dtype}{shape}, expected {expected}")
    if expected == 0:
        try:
            return name, torch.zeros(shape, dtype=torch_dtype)
        except (RuntimeError, TypeError, OverflowError):  # e.g. [0, 10**30]: no bytes, but no tensor either
            raise ProtocolError(f"tensor {name!r}: shape {shape!r} is too large") from None
    flat = torch.frombuffer(buf, dtype=torch_dtype)
    return name, flat if len(shape) == 1 else flat.view(shape)


# -- constructors, in request/answer pairs ------------------------------------------------------------
def hello(rank: int | None = None, profile: str | None = None, info: dict | None = None,
          instance: str | None = None, offline: bool = False, extensions: dict | None = None) -> Message:
    """A client asks to join (`rank`: the one it wants back; `instance`: this process's token; `offline`:
    a device offline by its availability asking whether it may return, refused quietly while it may not;
    `extensions`: the outside code it runs, {name: description}, once a coordinator asked: config/outside_code.py)."""
    meta: dict[str, Any] = {"rank": rank, "profile": profile, "info": info or {}, **COORDINATOR.offer()}
    if instance is not None:
        meta["instance"] = instance
    if offline:
        meta["offline"] = True
    if extensions:
        meta["extensions"] = extensions
    return Message(T.HELLO, meta)


def welcome(rank: int, clients: int, run: str, uplink: dict, link_seed: int, timeout_s: float) -> Message:
    """The coordinator's answer to HELLO: the client's rank, the uplink it must emulate, the liveness timeout
    (and, as HELLO, the contract it speaks: checked by the other side)."""
    return Message(T.WELCOME, {"rank": rank, "clients": clients, "run": run, "uplink": uplink,
                               "link_seed": link_seed, "timeout_s": timeout_s, **COORDINATOR.offer()})


def setup(meta: dict, indices: torch.Tensor) -> Message:
    """One algorithm's client configuration and the client's training-sample indices."""
    return Message(T.SETUP, meta, {"indices": indices})


def ready(label: str) -> Message:
    return Message(T.READY, {"label": label})


def calibrate(base_s: float | None = None, core: int | None = None, cpu_share: float | None = None,
              isolation: str | None = None) -> Message:
    """Without arguments: measure the undisturbed step now. With `base_s`: pace steps at factor × base_s
    (0: at factor × the undisturbed step), pinned to `core` (an index into the client's CPUs) or capped at
    `cpu_share` CPUs, as `isolation` (auto, affinity, cgroup, none) allows."""
    if base_s is None:
        return Message(T.CALIBRATE)
    return Message(T.CALIBRATE, {"base_s": base_s, "core": core, "cpu_share": cpu_share, "isolation": isolation})


def calibrated(reference_s: float | None, device: str | None = None, isolation: str | None = None) -> Message:
    """The undisturbed step time, the device it ran on, and how the process is isolated (one line)."""
    return Message(T.CALIBRATED, {"reference_s": reference_s, "device": device, "isolation": isolation})


def train(meta: dict, tensors: dict[str, torch.Tensor]) -> Message:
    """An instruction of the server half (`Instruction.meta`, `Instruction.tensors`)."""
    return Message(T.TRAIN, meta, tensors)


def update(meta: dict, tensors: dict[str, torch.Tensor]) -> Message:
    """A client half's answer to TRAIN (`Update.meta`, `Update.tensors`)."""
    return Message(T.UPDATE, meta, tensors)


def query(meta: dict) -> Message:
    return Message(T.QUERY, meta)


def reply(meta: dict) -> Message:
    return Message(T.REPLY, meta)


def evaluate(label: str, params: torch.Tensor, buffers: torch.Tensor | None = None) -> Message:
    """Evaluate this model on your own training split (a federated evaluation)."""
    tensors = {"params": params}
    if buffers is not None and buffers.numel():
        tensors["buffers"] = buffers
    return Message(T.EVALUATE, {"label": label}, tensors)


def evaluated(label: str, local_acc: float, local_loss: float, examples: int) -> Message:
    return Message(T.EVALUATED, {"label": label, "local_acc": local_acc, "local_loss": local_loss,
                                 "examples": examples})


def end() -> Message:
    return Message(T.END)


def stats(meta: dict) -> Message:
    """A client's totals for the algorithm that ended (compute_s, wait_s, wall_s, steps, …)."""
    return Message(T.STATS, meta)


def shutdown(reason: str = "the run is over", aborted: bool = False) -> Message:
    """The run is over (`aborted`: it failed, `reason` says why): exit."""
    return Message(T.SHUTDOWN, {"reason": reason, "aborted": aborted})


def error(reason: str, fatal: bool = False, hello: bool = False, describe: dict[str, str] | None = None) -> Message:
    """What was wrong. `fatal`: the client must stop; `hello`: reconnect and say HELLO (a restarted coordinator);
    `describe`: {name: kind} of the outside code the run uses: say HELLO again at once, describing it."""
    meta: dict[str, Any] = {"reason": reason, "fatal": fatal}
    if hello:
        meta["hello"] = True
    if describe:
        meta["describe"] = describe
    return Message(T.ERROR, meta)


def heartbeat() -> Message:
    return Message(T.HEARTBEAT)


def gpu_name(device: str | torch.device) -> str | None:
    """The CUDA GPU's name for a cuda device, None for the CPU (or without a usable GPU)."""
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" and torch.cuda.is_available() else None


def usable_cores() -> int:
    """The CPUs this process may run on when it started (pinning a client later must not shrink it)."""
    return _USABLE_CORES


def _cores_now() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


_USABLE_CORES = _cores_now()


def host_info(device: str) -> dict[str, Any]:
    """What a client reports about itself in HELLO."""
    import os
    import platform

    import psutil

    info: dict[str, Any] = {
        "host": platform.node(), "pid": os.getpid(), "cpus": os.cpu_count(), "cores": usable_cores(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "torch": torch.__version__, "device": device, "gpu": gpu_name(device),
    }
    return info


def to_jsonable(value: Any) -> Any:
    """Meta values must be plain JSON: numpy scalars become Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    return value
