"""Piecewise-constant traces: values that change at given times of a run.

A trace is a list of rows `[t, v1, v2, …]`: from `t` seconds after the algorithm started (every entry of
a scenario faces the same trace from its own start) the values are `v1, v2, …`, until the next row.
Before the first row the device's or link's own setting holds. Times are ≥ 0 and strictly increasing.

Rows are written inline in the scenario or read from a file — CSV (one row per line, an optional header
line, `#` comments) or JSON (a list of rows, or `{"rows": [...]}`). A file is read once, when the
scenario loads, relative to the scenario file's folder; the run folder's scenario.yaml keeps the rows
inline, so a replay needs no file and cannot see a changed one.

Used by device profiles (`[[t, factor], …]`), links (`[[t, rate_mbps, latency_ms], …]`) and availability
traces (`[[start, end], …]` online intervals, which follow their own rules: emulation/availability.py).
"""
from __future__ import annotations

import bisect
import csv
import json
import math
from pathlib import Path
from typing import Any, Sequence


class TraceError(ValueError):
    """A trace that cannot be used; the message names the file or row and what was expected."""


def read_rows(path: str | Path, base_dir: str | Path | None, what: str) -> list[list[float]]:
    """The rows of a trace file (CSV or JSON, told by the suffix; CSV otherwise), as lists of floats."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    try:
        text = p.read_text()
    except OSError as exc:
        raise TraceError(f"{what}: cannot read {p} ({exc.strerror})") from None
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{what}: {p} is not valid JSON ({exc})") from None
        if isinstance(data, dict) and "rows" in data:
            data = data["rows"]
        if not isinstance(data, list):
            raise TraceError(f"{what}: {p} must hold a list of rows (or {{\"rows\": [...]}})")
        return [_floats(row, f"{p} row {i + 1}") for i, row in enumerate(data)]
    rows = []
    for n, fields in enumerate(csv.reader(text.splitlines()), start=1):
        fields = [f.strip() for f in fields]
        if not fields or not fields[0] or fields[0].startswith("#"):
            continue
        if not rows and not _is_number(fields[0]):
            continue  # a header line
        rows.append(_floats(fields, f"{p} line {n}"))
    return rows


def given_rows(data: dict, key: str, file_key: str, names: Sequence[str], what: str,
               base_dir: str | Path | None, required: str | None = None) -> list[tuple[float, ...]] | None:
    """A scenario block's trace rows, given inline under `key` or in the file `data[file_key]` names (relative
    to `base_dir`, the scenario's folder), checked by `check_rows`. Neither given: None, or ValueError(`required`)."""
    rows = data.get(key)
    if not rows and data.get(file_key):
        rows = read_rows(data[file_key], base_dir, f"{what} file {data[file_key]}")
    elif rows is None:
        if required:
            raise ValueError(required)
        return None
    return check_rows(rows, names, what)


def check_rows(rows: Sequence[Sequence[Any]], names: Sequence[str], what: str) -> list[tuple[float, ...]]:
    """Rows as tuples of floats, each `len(names)` long (`names` say what the columns are, e.g.
    ("t", "factor")), with times ≥ 0 and strictly increasing. TraceError says which row is wrong."""
    if not rows:
        raise TraceError(f"{what}: a trace needs at least one row [{', '.join(names)}]")
    out: list[tuple[float, ...]] = []
    for i, row in enumerate(rows):
        values = _floats(row, f"{what} row {i + 1}")
        if len(values) != len(names):
            raise TraceError(f"{what} row {i + 1}: expected [{', '.join(names)}], got {list(row)!r}")
        if values[0] < 0:
            raise TraceError(f"{what} row {i + 1}: time {values[0]:g} s is before the start (0)")
        if out and values[0] <= out[-1][0]:
            raise TraceError(f"{what} row {i + 1}: times must increase, {values[0]:g} s follows {out[-1][0]:g} s")
        out.append(tuple(values))
    return out


class Steps:
    """A checked trace, asked for its values at a time: `at(t)` (None before the first row)."""

    def __init__(self, rows: Sequence[Sequence[float]]):
        self.rows = [tuple(r) for r in rows]
        self.times = [r[0] for r in self.rows]

    def at(self, t: float) -> tuple[float, ...] | None:
        i = bisect.bisect_right(self.times, t) - 1
        return None if i < 0 else self.rows[i][1:]

    def next_change(self, t: float) -> float:
        """The first row time after `t` (∞ when none)."""
        i = bisect.bisect_right(self.times, t)
        return self.times[i] if i < len(self.times) else math.inf

    def __bool__(self) -> bool:
        return bool(self.rows)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _floats(row: Any, where: str) -> list[float]:
    if not isinstance(row, (list, tuple)):
        raise TraceError(f"{where}: a row is a list of numbers, not {row!r}")
    out = []
    for v in row:
        if isinstance(v, bool):
            raise TraceError(f"{where}: {v!r} is not a number")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise TraceError(f"{where}: {v!r} is not a number") from None
        if not math.isfinite(f):
            raise TraceError(f"{where}: {v!r} is not a finite number")
        out.append(f)
    return out
