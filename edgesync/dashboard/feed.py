"""What the dashboard shows, read from a run folder as it grows: the same reader serves a live run and a
finished one, so a replay shows what the live page showed.

Sources (metrics/recorder.py names them): metrics.jsonl (the curves), fleet.json (the live coordinator's
fleet table, runtime/live/fleet.py; a simulator run's table comes from clients.jsonl), events.jsonl (log
records), updates.jsonl (only its availability and round-draw rows: the rest, thousands a second, are
skipped before they are decoded), summary.json (the run is over). Each poll reads what was appended since the
last one, at most `READ_LIMIT` bytes a file, so a viewer arriving late at a long run catches up in steps
instead of stalling the server. What is kept is bounded: `Bounded` drops the oldest events and availability
rows past their caps; curves keep every evaluation (a few per second at most).
"""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any

import yaml

from edgesync.metrics.recorder import (CLIENTS_FILE, EVENTS_FILE, FLEET_FILE, METRICS_FILE, SCENARIO_FILE,
                                       SUMMARY_FILE, UPDATES_FILE)
from edgesync.metrics.seeds import split_seed

READ_LIMIT = 8 << 20  # bytes read from one file per poll
MAX_FIRST_POINTS = 2000  # per entry, in what a page arriving late is sent first (thinned evenly)
FIRST_CURSOR = {"metrics": 0, "events": 0, "presence": 0, "fleet": -1}  # a new viewer's: it has seen nothing
MAX_EVENTS = 2000
MAX_PRESENCE = 20000
CURVE_KEYS = ("algorithm", "time_s", "updates", "samples", "test_acc", "test_loss", "bytes_up", "bytes_down",
              "wall_clock", "diverged")
FLEET_FROM_CLIENTS = (("profile", "profile"), ("host", "host"), ("factor", "target_factor"),
                      ("achieved", "achieved_factor"), ("steps", "steps"), ("bytes_up", "bytes_up"),
                      ("bytes_down", "bytes_down"), ("losses", "lost"))


class Tail:
    """The complete lines appended to a file since the last call (a half-written last line waits)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""

    def lines(self) -> list[bytes]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:  # replaced (a resumed run rewrote it): read it again
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(READ_LIMIT)
        self.offset += len(data)
        *whole, self.partial = (self.partial + data).split(b"\n")
        return [line for line in whole if line.strip()]


def _decode(line: bytes) -> dict | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


class Bounded:
    """An append-only list that forgets its oldest items past `cap`; readers hold absolute positions."""

    def __init__(self, cap: int):
        self.cap, self.items, self.base = cap, [], 0

    def extend(self, items: list) -> None:
        self.items.extend(items)
        if len(self.items) > self.cap:
            drop = len(self.items) - self.cap
            del self.items[:drop]
            self.base += drop

    def since(self, position: int) -> tuple[list, int]:
        return self.items[max(0, position - self.base):], self.base + len(self.items)


class RunFeed:
    """A run folder's figures for the page, polled: `poll()` reads what is new, `state()` is everything kept,
    `since(cursor)` what a viewer has not seen yet."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.tails = {name: Tail(self.run_dir / name) for name in (METRICS_FILE, EVENTS_FILE, UPDATES_FILE)}
        self.metrics = Bounded(10 ** 9)  # every evaluation (a few a second at most); a late page gets them thinned
        self.events = Bounded(MAX_EVENTS)
        self.presence = Bounded(MAX_PRESENCE)
        self.fleet: dict[str, Any] = {"current": None, "entries": {}}
        self.fleet_version = 0
        self.scenario: dict[str, Any] = {}
        self.summary: dict[str, Any] | None = None
        self.started: dict[str, float] = {}  # label → the wall clock at its time zero (its first evaluation)
        self._fleet_mtime: float | None = None
        self._clients_mtime: float | None = None

    # -- reading -------------------------------------------------------------------------------------
    def poll(self) -> None:
        if not self.scenario and (self.run_dir / SCENARIO_FILE).exists():
            self.scenario = self._scenario()
        rows = [r for r in map(_decode, self.tails[METRICS_FILE].lines()) if r and "algorithm" in r]
        for r in rows:
            if "wall_clock" in r and "time_s" in r:
                self.started.setdefault(r["algorithm"], r["wall_clock"] - r["time_s"])
        self.metrics.extend([{k: r[k] for k in CURVE_KEYS if k in r} for r in rows])
        events = [{"kind": _kind(r), "wall_clock": r.get("wall_clock"), "level": r.get("level", "INFO"),
                   "message": r.get("message", "")}
                  for r in map(_decode, self.tails[EVENTS_FILE].lines()) if r]
        presence, drawn = [], []
        for line in self.tails[UPDATES_FILE].lines():
            if b'"presence"' not in line and b'"participants"' not in line:
                continue
            row = _decode(line)
            if row is None:
                continue
            label, t = row.get("algorithm"), row.get("time_s", 0.0)
            if "presence" in row:
                presence.append({"label": label, "client": row.get("client"), "time_s": t,
                                 "online": row["presence"] == "online"})
                events.append({"kind": "availability", "wall_clock": self._wall(label, t), "level": "INFO",
                               "message": f"{label}: client {row.get('client')} {row['presence']} at {t:.1f} s"})
            else:
                drawn.append({"kind": "round", "wall_clock": self._wall(label, t), "level": "INFO",
                              "message": f"{label}: round {row.get('round')} drawn at {t:.1f} s: clients "
                                         f"{row.get('participants')} ({row.get('online')} online)"})
        self.presence.extend(presence)
        self.events.extend(sorted(events + drawn, key=lambda e: e["wall_clock"] or 0.0))
        self._read_fleet()
        if self.summary is None and (self.run_dir / SUMMARY_FILE).exists():
            try:
                self.summary = json.loads((self.run_dir / SUMMARY_FILE).read_text())
            except ValueError:  # written atomically, but a viewer may be given a folder mid-copy
                self.summary = None

    def _scenario(self) -> dict[str, Any]:
        try:
            sc = yaml.safe_load((self.run_dir / SCENARIO_FILE).read_text()) or {}
        except (OSError, yaml.YAMLError):
            return {}
        return {"name": sc.get("name"), "runtime": sc.get("runtime"), "clients": len(sc.get("clients") or []),
                "algorithms": [a.get("name") for a in sc.get("algorithms") or [] if isinstance(a, dict)]}

    def _wall(self, label: str | None, t: float) -> float | None:
        start = self.started.get(label)
        return None if start is None else start + t

    def _read_fleet(self) -> None:
        path = self.run_dir / FLEET_FILE
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            self._fleet_from_clients()
            return
        if mtime != self._fleet_mtime:
            try:
                self.fleet = json.loads(path.read_text())
            except ValueError:
                return
            self._fleet_mtime = mtime
            self.fleet_version += 1

    def _fleet_from_clients(self) -> None:
        """No fleet.json (a simulator run, or a live run from before it existed): clients.jsonl's rows,
        written as each entry ends."""
        path = self.run_dir / CLIENTS_FILE
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            return
        if mtime == self._clients_mtime:
            return
        self._clients_mtime = mtime
        entries: dict[str, dict] = {}
        for line in path.read_bytes().splitlines():
            row = _decode(line)
            if not row or "algorithm" not in row:
                continue
            entry = entries.setdefault(row["algorithm"], {"label": row["algorithm"], "final": True, "clients": []})
            client = {"client": row.get("client"), "state": "done"}
            client.update({ours: row.get(theirs) for ours, theirs in FLEET_FROM_CLIENTS})
            client["back"] = bool(row.get("rejoined"))
            steps, compute = row.get("steps"), row.get("compute_s")
            client["step_ms"] = round(1e3 * compute / steps, 2) if steps and compute else None
            entry["clients"].append(client)
        self.fleet = {"current": next(reversed(entries), None), "entries": entries}
        self.fleet_version += 1

    # -- for the page --------------------------------------------------------------------------------
    def labels(self) -> dict[str, dict]:
        out = {}
        for row in self.metrics.items:
            label = row["algorithm"]
            if label not in out:
                group, seed = split_seed(label)
                out[label] = {"group": group, "seed": seed}
        return out

    def state(self) -> dict[str, Any]:
        return self.since(FIRST_CURSOR)[0]

    def since(self, cursor: dict[str, int]) -> tuple[dict[str, Any] | None, dict[str, int]]:
        """What is new for a viewer at `cursor` (None: nothing), and its next cursor. A new viewer's first
        curves are thinned to MAX_FIRST_POINTS per entry: a long run's whole history is not one message."""
        metrics, m = self.metrics.since(cursor["metrics"])
        if cursor["metrics"] == 0:
            metrics = thinned(metrics, MAX_FIRST_POINTS)
        events, e = self.events.since(cursor["events"])
        presence, p = self.presence.since(cursor["presence"])
        fleet = self.fleet if cursor["fleet"] != self.fleet_version else None
        finished = self.summary is not None
        nothing = not (metrics or events or presence or fleet is not None) and cursor.get("finished") == finished
        new_cursor = {"metrics": m, "events": e, "presence": p, "fleet": self.fleet_version, "finished": finished}
        if nothing:
            return None, new_cursor
        return finite({"scenario": self.scenario, "labels": self.labels(), "metrics": metrics, "events": events,
                       "presence": presence, "fleet": fleet, "finished": finished,
                       "final": _finals(self.summary), "now": time.time()}), new_cursor


def thinned(rows: list[dict], limit: int) -> list[dict]:
    """At most `limit` rows per entry label, evenly spaced, its first and last kept, in the original order."""
    by_label: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_label.setdefault(row["algorithm"], []).append(i)
    keep: set[int] = set()
    for positions in by_label.values():
        if len(positions) <= limit:
            keep.update(positions)
        else:
            step = (len(positions) - 1) / (limit - 1)
            keep.update(positions[round(j * step)] for j in range(limit))
    return rows if len(keep) == len(rows) else [rows[i] for i in sorted(keep)]


def finite(value: Any) -> Any:
    """`value` with NaN and infinities as None: JSON has no spelling for them (a diverged loss, a target never
    reached), and the page shows None as a gap or a dash."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


KINDS = ((re.compile(r"^client \d+ lost"), "lost"), (re.compile(r"^client \d+ is back"), "back"),
         (re.compile(r"^client \d+ (joined|restarted|said HELLO)"), "join"))


def _kind(record: dict) -> str:
    """An event log line's kind, for the page's filter: join, lost, back, warning or info."""
    message = record.get("message", "")
    for pattern, kind in KINDS:
        if pattern.match(message):
            return kind
    return "warning" if record.get("level") in ("WARNING", "ERROR", "CRITICAL") else "info"


def _finals(summary: dict | None) -> dict[str, dict]:
    """Each entry's final figures from summary.json (the replay's and the live page's last word)."""
    if not summary:
        return {}
    keys = ("final_acc", "best_acc", "time_to_target_s", "updates", "duration_s", "bytes_up", "bytes_down")
    return {label: {k: s.get(k) for k in keys} for label, s in summary.items() if isinstance(s, dict)}
