"""An EdgeSync protocol message as Flower records, and back.

A message (type, meta, tensors: `edgesync.transport.protocol.Message`) travels as one RecordDict:

    "edgesync"   ConfigRecord  {"type": "TRAIN", "proto": "edgesync", "v": 1}
    "meta"       ConfigRecord  the meta values that are Flower config scalars (int, float, str, bool)
    "meta-json"  ConfigRecord  every other meta value (None, lists, mappings) as a JSON string
    "tensors"    ArrayRecord   one Array per tensor (flat float32 vectors, int64 indices)

A CALIBRATE with a base step that the coordinator's socket answered for the node (grid_socket.py) puts
that base step ("base_s") into the header of the node's next message.

Where a scenario varies in time (availability, device traces), the coordinator's messages carry the
algorithm's start as a wall-clock time ("epoch" in the "edgesync" record, seconds since 1970): a ClientApp
process, which lives for one message, reads the algorithm's clock as `time.time() − epoch` (exact on one
machine; across lab machines as good as their NTP, typically a millisecond or so).

A node's reply adds "stats" (its running totals, what the ZeroMQ client sends in STATS, encoded as
meta) and "metrics", a MetricRecord with Flower's conventional "num-examples". Instruction metadata
stays plain entries of "meta", so a per-node budget is e.g. {"local_steps": 12} or
{"time_budget_s": 0.8} in that node's ConfigRecord.

The same encoding, under a key prefix, keeps a node's state in `context.state` between messages
(`put` / `get`). Decoding failures raise `ProtocolError`, as a bad ZeroMQ frame does.
"""
from __future__ import annotations

import json
import math
import threading
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from edgesync.constants import PROTOCOL_NAME, PROTOCOL_VERSION
from edgesync.transport.protocol import Message, ProtocolError, to_jsonable

HEADER, META, META_JSON, TENSORS, STATS, METRICS = "edgesync", "meta", "meta-json", "tensors", "stats", "metrics"
PACE = "base_s"  # in the header: the base step of a CALIBRATE the coordinator's socket answered (grid_socket.py)


def _is_scalar(value: Any) -> bool:
    return type(value) in (bool, int, float, str)


def meta_records(meta: dict[str, Any]) -> tuple[ConfigRecord, ConfigRecord]:
    """(scalars, JSON-encoded rest): Flower's ConfigRecord holds scalars and same-typed lists only."""
    plain = {k: to_jsonable(v) for k, v in meta.items()}
    scalars = {k: v for k, v in plain.items() if _is_scalar(v)}
    rest = {k: json.dumps(v) for k, v in plain.items() if not _is_scalar(v)}
    return ConfigRecord(scalars), ConfigRecord(rest)


def meta_from(scalars: ConfigRecord | None, rest: ConfigRecord | None) -> dict[str, Any]:
    meta: dict[str, Any] = dict(scalars or {})
    for k, v in (rest or {}).items():
        try:
            meta[k] = json.loads(v)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ProtocolError(f"meta {k!r}: not JSON ({exc})") from None
    return meta


def tensors_record(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    record = ArrayRecord()
    for name, t in tensors.items():
        record[name] = Array(np.ascontiguousarray(t.detach().cpu().numpy()))
    return record


# Array.numpy() reads the .npy header with ast.literal_eval; CPython 3.11 before 3.11.9 can raise
# "SystemError: AST constructor recursion depth mismatch" when threads parse at once (simulated
# Flower nodes run in threads), so one thread at a time decodes.
_DECODE_LOCK = threading.Lock()


def tensors_from(record: ArrayRecord | None) -> dict[str, torch.Tensor]:
    out = {}
    for name, array in (record or {}).items():
        try:
            with _DECODE_LOCK:
                decoded = array.numpy()
            out[name] = torch.from_numpy(decoded)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"tensor {name!r}: {exc}") from None
    return out


def to_records(msg: Message, stats: dict[str, Any] | None = None, epoch: float | None = None) -> RecordDict:
    """The RecordDict a message travels in; `stats` are a node's running totals (replies only); `epoch` the
    wall-clock time the running algorithm started (the coordinator's messages, where the scenario varies in time)."""
    scalars, rest = meta_records(msg.meta)
    header = {"type": msg.type, "proto": PROTOCOL_NAME, "v": PROTOCOL_VERSION}
    if epoch is not None:
        header["epoch"] = float(epoch)
    content = RecordDict({HEADER: ConfigRecord(header),
                          META: scalars, META_JSON: rest, TENSORS: tensors_record(msg.tensors)})
    if stats is not None:
        s_scalars, s_rest = meta_records(stats)
        content[STATS], content[STATS + "-json"] = s_scalars, s_rest
        content[METRICS] = MetricRecord({"num-examples": int(stats.get("samples") or 0)})
    return content


def from_records(content: RecordDict) -> tuple[Message, dict[str, Any] | None]:
    """(message, stats or None) from a RecordDict; ProtocolError if it is not an EdgeSync message."""
    header = content.get(HEADER)
    if not isinstance(header, ConfigRecord) or header.get("proto") != PROTOCOL_NAME:
        raise ProtocolError("not an EdgeSync message (no 'edgesync' ConfigRecord)")
    if header.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {header.get('v')!r}, expected {PROTOCOL_VERSION}")
    msg = Message(str(header.get("type")), meta_from(content.get(META), content.get(META_JSON)),
                  tensors_from(content.get(TENSORS)))
    stats = meta_from(content[STATS], content.get(STATS + "-json")) if STATS in content else None
    return msg, stats


def epoch_of(content: RecordDict) -> float | None:
    """The running algorithm's start as a wall-clock time, if the message carries it (`to_records`)."""
    header = content.get(HEADER)
    epoch = header.get("epoch") if isinstance(header, ConfigRecord) else None
    return float(epoch) if type(epoch) in (int, float) and math.isfinite(epoch) else None


def pace_of(content: RecordDict) -> float | None:
    """The base step a message carries for the node to pace at (a CALIBRATE answered by the socket), if any."""
    header = content.get(HEADER)
    base = header.get(PACE) if isinstance(header, ConfigRecord) else None
    return float(base) if type(base) in (int, float) and math.isfinite(base) else None


def payload_bytes(content: RecordDict) -> int:
    """Bytes of the records' payload (array data with their numpy headers, keys, config values):
    Flower's own framing (protobuf, HTTP) is not counted, as ZeroMQ's is not in the live runtime."""
    return sum(record.count_bytes() for record in content.values())


def put(state: RecordDict, prefix: str, meta: dict[str, Any], tensors: dict[str, torch.Tensor] | None = None) -> None:
    """Keep `meta` and `tensors` in a RecordDict (a node's `context.state`) under `prefix`."""
    state[f"{prefix}.meta"], state[f"{prefix}.meta-json"] = meta_records(meta)
    state[f"{prefix}.tensors"] = tensors_record(tensors or {})


def get(state: RecordDict, prefix: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]] | None:
    """What `put` kept under `prefix`, or None if nothing was."""
    if f"{prefix}.meta" not in state:
        return None
    return (meta_from(state[f"{prefix}.meta"], state.get(f"{prefix}.meta-json")),
            tensors_from(state.get(f"{prefix}.tensors")))
