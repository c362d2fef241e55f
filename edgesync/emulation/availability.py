"""Availability: when a device is online during a run, and when it is not.

A client's `availability:` is one of
- `{kind: trace, online: [[start, end], …]}` — the intervals (seconds since the algorithm started) in
  which it is online; offline outside them (a device that leaves for good: its last interval ends).
  Or `file:` naming a CSV/JSON file of such rows, read once when the scenario loads (traces.py);
- `{kind: exponential, mean_on_s, mean_off_s, start}` — the on/off model of availability studies: on
  and off periods alternate with exponentially distributed lengths of the given means; `start: online`
  begins online, `random` (the default) online with the stationary probability on/(on + off). Drawn
  from (seed, rank): every runtime, and every entry of a scenario, sees the same periods.
Leaving it out means always online.

`Schedule` answers the runtimes' questions — is the device online at t, when does that change next —
extending the drawn periods as far as it is asked (so a schedule never needs a horizon). What going
offline does is the runtime's: its in-flight work is lost, the algorithm hears `on_client_lost`, and
`on_client_joined` when it is back.
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from edgesync.emulation.traces import given_rows

AVAILABILITY_SALT = 0xA7A1  # keeps these draws apart from the other seeded streams of a run
# Drawn times are whole microseconds: the simulator's event grid (nanoseconds) then holds them exactly, and
# a change never lands a hair before the time the schedule says.
TIME_DIGITS = 6


class TraceAvailability(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["trace"] = "trace"
    online: tuple[tuple[float, float], ...] = Field((), description="[[start, end], …] seconds: online intervals")
    file: str | None = Field(None, description="CSV/JSON file of [start, end] rows (relative to the scenario)")

    @model_validator(mode="before")
    @classmethod
    def _rows(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        rows = given_rows(data, "online", "file", ("start", "end"), "availability online",
                          (info.context or {}).get("base_dir"),
                          required="an availability trace needs `online: [[start, end], …]` or `file:`")
        for i, (start, end) in enumerate(rows):
            if end <= start:
                raise ValueError(f"availability online row {i + 1}: ends ({end:g} s) before it starts ({start:g} s)")
            if i and start < rows[i - 1][1]:
                raise ValueError(f"availability online row {i + 1}: starts at {start:g} s, inside the interval "
                                 f"before it (ends {rows[i - 1][1]:g} s)")
        data["online"] = rows
        return data

    @property
    def label(self) -> str:
        return f"trace({len(self.online)} online intervals)"


class ExponentialAvailability(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["exponential"] = "exponential"
    mean_on_s: float = Field(gt=0, description="mean length of an online period, seconds")
    mean_off_s: float = Field(gt=0, description="mean length of an offline period, seconds")
    start: Literal["online", "random"] = Field("random", description="online at t = 0, or online with the "
                                               "stationary probability on/(on + off)")

    @property
    def label(self) -> str:
        return f"exp(on {self.mean_on_s:g} s, off {self.mean_off_s:g} s)"


Availability = TraceAvailability | ExponentialAvailability


def online_at_most(specs: list[Availability | None], sigmas: float = 3.0) -> int:
    """How many of these devices may be online at once, for planning the shared base step
    (emulation/device_model.py): every always-on device, every traced one (taken as online: a trace
    is exact but short-lived peaks are what count), and of the exponential ones, started at random, the
    mean online count plus `sigmas` standard deviations (independent on/off processes: a binomial count;
    3 sigma is exceeded about one moment in a thousand). One started online counts as online."""
    certain, mean, variance = 0, 0.0, 0.0
    for spec in specs:
        if isinstance(spec, ExponentialAvailability) and spec.start == "random":
            p = spec.mean_on_s / (spec.mean_on_s + spec.mean_off_s)
            mean += p
            variance += p * (1 - p)
        else:
            certain += 1
    random_ones = len(specs) - certain
    return certain + min(random_ones, math.ceil(mean + sigmas * math.sqrt(variance)))


def parse_availability(value: Any, context: dict | None = None) -> Availability | None:
    """A scenario's `availability:` value (a mapping with `kind`), or None for always online."""
    if value is None or isinstance(value, (TraceAvailability, ExponentialAvailability)):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"availability is a mapping with kind: trace or exponential, not {value!r}")
    kind = value.get("kind")
    model = {"trace": TraceAvailability, "exponential": ExponentialAvailability}.get(kind)
    if model is None:
        raise ValueError(f"unknown availability kind {kind!r}: expected 'trace' or 'exponential'")
    return model.model_validate(value, context=context)


class Schedule:
    """One client's online periods: `online(t)`, `next_change(t)`, `intervals_until(t)`."""

    def __init__(self, spec: Availability | None, seed: int = 0, rank: int = 0):
        self.spec = spec
        self.starts: list[float] = []
        self.ends: list[float] = []
        if spec is None:
            self.starts, self.ends = [0.0], [math.inf]
        elif isinstance(spec, TraceAvailability):
            self.starts = [s for s, _ in spec.online]
            self.ends = [e for _, e in spec.online]
        else:
            self._rng = np.random.default_rng([seed, rank, AVAILABILITY_SALT])
            p_on = spec.mean_on_s / (spec.mean_on_s + spec.mean_off_s)
            online_first = spec.start == "online" or self._rng.random() < p_on
            self._drawn_to = 0.0 if online_first else round(self._rng.exponential(spec.mean_off_s), TIME_DIGITS)

    @property
    def always(self) -> bool:
        return self.spec is None

    def _extend(self, t: float) -> None:
        """Draw on/off periods (exponential model) until they cover `t`."""
        if not isinstance(self.spec, ExponentialAvailability):
            return
        while self._drawn_to <= t:
            start = self._drawn_to
            end = round(start + self._rng.exponential(self.spec.mean_on_s), TIME_DIGITS)
            self.starts.append(start)
            self.ends.append(end)
            self._drawn_to = round(end + self._rng.exponential(self.spec.mean_off_s), TIME_DIGITS)

    def online(self, t: float) -> bool:
        self._extend(t)
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t < self.ends[i]

    def next_change(self, t: float) -> float:
        """The first time after `t` at which the device goes offline or comes online (∞ if never)."""
        self._extend(t)
        i = bisect.bisect_right(self.starts, t) - 1
        if i >= 0 and t < self.ends[i]:
            return self.ends[i]
        if i + 1 < len(self.starts):
            return self.starts[i + 1]
        if isinstance(self.spec, ExponentialAvailability):
            self._extend(self._drawn_to)
            return self.starts[i + 1]
        return math.inf

    def intervals_until(self, t: float) -> list[tuple[float, float]]:
        """The online intervals that start before `t` (the last one clipped at `t`)."""
        self._extend(t)
        return [(s, min(e, t)) for s, e in zip(self.starts, self.ends) if s < t]
