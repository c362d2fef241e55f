"""The metadata fields the coordinator reads from a client's message, checked before it reads them.

`Message.from_frames` checks a message's frames (protocol, version, type, tensor sizes); this checks
the values inside its `meta` that the coordinator and the server halves compute with: counts are
non-negative integers, times and sizes finite numbers, names strings. A field may be absent (the
reader has a default); fields the coordinator does not read are left alone. A bad value is a
`ProtocolError` naming the message type, the field, the value and what was expected, so the sender
gets an ERROR and nothing of the message is used.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from edgesync.transport.protocol import Message, ProtocolError

_LARGEST_COUNT = 2**53  # any real count fits a float exactly; larger ones are nonsense or an attack


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _LARGEST_COUNT


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) < _LARGEST_COUNT


def _non_negative(v: Any) -> bool:
    return _number(v) and v >= 0


def _positive(v: Any) -> bool:
    return _number(v) and v > 0


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _profile(v: Any) -> bool:
    return isinstance(v, (str, dict))


def _timeline(v: Any) -> bool:
    """A traced device's [[algorithm seconds, step seconds], …] (trainer.StepTimeline): bounded, finite."""
    return (isinstance(v, list) and len(v) <= 4096
            and all(isinstance(p, list) and len(p) == 2 and all(_number(x) for x in p) for p in v))


def _mapping(v: Any) -> bool:
    return isinstance(v, dict)


_EXTENSION_KEYS = frozenset({"name", "module", "distribution", "version", "code_hash", "error"})


def _extensions(v: Any) -> bool:
    """HELLO's description of a client's outside code (config/outside_code.py): {name: {an ExtensionInfo's fields,
    or "error"}}, every value a short string or null; bounded, so a client cannot make the coordinator compare much."""
    return isinstance(v, dict) and len(v) <= 64 and all(
        isinstance(name, str) and len(name) <= 300 and isinstance(info, dict) and set(info) <= _EXTENSION_KEYS
        and all(x is None or (isinstance(x, str) and len(x) <= 1000) for x in info.values())
        for name, info in v.items())


# field → (check, what is expected, whether null is allowed)
Rule = tuple[Callable[[Any], bool], str, bool]
COUNT: Rule = (_count, "an integer in [0, 2**53)", False)

FIELDS: dict[str, dict[str, Rule]] = {
    "HELLO": {"rank": (_count, "an integer ≥ 0", True), "profile": (_profile, "a profile name or mapping", True),
              "info": (_mapping, "an object", True), "instance": (_text, "a string", True),
              "extensions": (_extensions, "an object of at most 64 names, each {name, module, distribution, version, "
                                          "code_hash} or {error} of strings", True)},
    "READY": {"label": (_text, "a string", True)},
    "CALIBRATED": {"reference_s": (_positive, "a finite number of seconds > 0", True),
                   "device": (_text, "a string", True), "isolation": (_text, "a string", True)},
    "UPDATE": {"version": COUNT, "steps": COUNT, "samples": COUNT, "aborted_steps": COUNT,
               "data_size": (_positive, "a finite number > 0", True),
               "loss": (_number, "a finite number", True),
               "grad_rms": (_non_negative, "a finite number ≥ 0", True),  # algorithms/machinery/staleness.py
               "ring": (_mapping, "an object", True)},  # all-reduce reports (algorithms/machinery/rounds.py)
    "QUERY": {"round": COUNT, "k": COUNT, "c": (_non_negative, "a finite number of seconds ≥ 0", True)},
    "STATS": {"label": (_text, "a string", True), "device": (_text, "a string", True),
              "gpu": (_text, "a string", True), "isolation": (_text, "a string", True),
              "steps": (_count, "an integer ≥ 0", True), "samples": (_count, "an integer ≥ 0", True),
              **{k: (_non_negative, "a finite number ≥ 0", True)
                 for k in ("compute_s", "wait_s", "wall_s", "reference_s", "base_s", "median_step_s",
                           "median_factor")},
              "step_timeline": (_timeline, "a list of at most 4,096 [seconds, seconds] pairs", True)},
    "ERROR": {"reason": (_text, "a string", True)},
}


def check_client_fields(msg: Message) -> None:
    """Raise ProtocolError if a field the coordinator reads from `msg.meta` has the wrong type or range."""
    for name, (ok, expected, nullable) in FIELDS.get(msg.type, {}).items():
        if name not in msg.meta:
            continue
        value = msg.meta[name]
        if value is None and nullable:
            continue
        if not ok(value):
            shown = repr(value)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            raise ProtocolError(f"{msg.type} field {name!r} is {shown}, expected {expected}"
                                + (" or null" if nullable else ""))
