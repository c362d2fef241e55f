"""What a run folder says about federated realism: rounds and who took part, availability, traces.

The report's Participation, Availability and Traces sections (metrics/churn_report.py) and their plots
(metrics/churn_plots.py) read these facts from a `RunData` (`ChurnRecords`, and the trace functions for the
scenario), and only from what the folder holds:

- updates.jsonl: presence rows `{"client", "time_s", "presence": "offline"|"online"}` (a client offline
  at t = 0 has an "offline" row at 0; a client with no rows was online throughout), a row per round draw
  `{"client": -1, "round", "participants", "online"}` (a round whose participants all left is drawn
  again: one row per try) and per round close `{"client": -1, "round", "contributors"}`;
- clients.jsonl: `rounds` (rounds the client reported in; a synchronous entry leaves it out for a client
  that reported in none), `offline_s`, and a traced device's `step_timeline` ([[t, step seconds], …],
  sampled) with `base_step_s`;
- metrics.jsonl: each entry's last evaluation;
- scenario.yaml (resolved): each client's `profile` (`{kind: trace, steps}`: a device-speed trace) and
  `link`, over the scenario's `links` (`trace: [[t, rate_mbps, latency_ms], …]`, with `up`/`down`
  overrides resolved as `Scenario.client_links` does).

An old folder has none of these: every answer is then empty, and the report has no such section.
An entry's end is its last evaluation (every runtime evaluates the final model at the
entry's end), else its last logged row, else the scenario's time budget.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from edgesync.metrics.formatting import RunData, num, sort_key

DIRECTIONS = ("up", "down")


# ---------------------------------------------------------------------------------------------- records

@dataclass
class Participation:
    """One synchronous entry's rounds (updates.jsonl) and its clients' rounds (clients.jsonl)."""

    rounds: int                                  # distinct rounds drawn
    drawn: list[int] = field(default_factory=list)      # participants at each draw (a redraw is a draw)
    online: list[int] = field(default_factory=list)     # online clients at each draw
    reported: list[int] = field(default_factory=list)   # contributors of each round that closed
    per_client: dict[Any, int] = field(default_factory=dict)  # rank -> rounds reported in (0 for none)

    @property
    def never(self) -> list[Any]:
        """The clients that reported in no round."""
        return [c for c, n in self.per_client.items() if n == 0]


@dataclass
class Schedule:
    """Entries whose clients were online at the same times, and those times (from the longest of them)."""

    labels: list[str]
    drawn_from: str
    end: float
    intervals: dict[Any, list[tuple[float, float]]]


class ChurnRecords:
    """A run folder's rounds and presence rows, sorted by entry in one pass over its rows (updates.jsonl
    runs to a row per applied update: hundreds of thousands), and what the report says of them."""

    def __init__(self, run: RunData):
        self.run = run
        self.labels: list[str] = list(run.labels)  # the summary's order, then any other label the rows name
        self._presence: dict[str, list[dict]] = {}
        self._draws: dict[str, list[dict]] = {}
        self._closes: dict[str, list[dict]] = {}
        self._last_row: dict[str, float] = {}
        for r in run.updates:
            label = self._label(r)
            t = num(r.get("time_s"))
            if t is not None:
                self._last_row[label] = max(t, self._last_row.get(label, t))
            if r.get("presence") in ("online", "offline") and t is not None:
                self._presence.setdefault(label, []).append(r)
            elif isinstance(r.get("participants"), list):
                self._draws.setdefault(label, []).append(r)
            elif isinstance(r.get("contributors"), list):
                self._closes.setdefault(label, []).append(r)
        self._clients: dict[str, list[dict]] = {}
        for r in run.clients:
            self._clients.setdefault(self._label(r), []).append(r)
        self._evals_end: dict[str, float] = {}
        for r in run.metrics:
            t = num(r.get("time_s"))
            if t is not None:
                label = str(r.get("algorithm"))
                self._evals_end[label] = max(t, self._evals_end.get(label, t))

    def _label(self, row: dict) -> str:
        label = str(row.get("algorithm"))
        if label not in self.labels:
            self.labels.append(label)
        return label

    # -- entries -----------------------------------------------------------------------------------
    def end(self, label: str) -> float | None:
        """The entry's length in seconds (see the module docstring), None when nothing says."""
        for ends in (self._evals_end, self._last_row):
            if label in ends:
                return float(ends[label])
        stop = self.run.scenario.get("stop")
        budget = num(stop.get("time_budget_s")) if isinstance(stop, dict) else None
        return None if budget is None else float(budget)

    @property
    def horizon(self) -> float | None:
        """The longest entry's end: how far a plot of the whole run reaches."""
        ends = [e for e in map(self.end, self.labels) if e is not None]
        return max(ends) if ends else None

    def clients(self, label: str) -> list[Any]:
        """The entry's client ranks: from its clients.jsonl rows, its presence rows and the scenario's list."""
        ranks = {r.get("client") for r in self._clients.get(label, ())}
        ranks |= {r.get("client") for r in self._presence.get(label, ())}
        ranks |= set(range(len(scenario_clients(self.run.scenario))))
        return sorted((r for r in ranks if r is not None), key=sort_key)

    # -- rounds ------------------------------------------------------------------------------------
    @cached_property
    def participation(self) -> dict[str, Participation]:
        """label -> its rounds, for every entry whose clients carry `rounds` or that logged round rows."""
        out = {}
        for label in self.labels:
            draws, closes = self._draws.get(label, []), self._closes.get(label, [])
            rows = self._clients.get(label, [])
            if not draws and not closes and not any(num(r.get("rounds")) is not None for r in rows):
                continue
            per_client = {c: 0 for c in self.clients(label)}
            for r in rows:
                per_client[r.get("client")] = int(num(r.get("rounds")) or 0)
            out[label] = Participation(
                rounds=len({r.get("round") for r in draws}),
                drawn=[len(r["participants"]) for r in draws],
                online=[int(num(r.get("online"))) for r in draws if num(r.get("online")) is not None],
                reported=[len(r["contributors"]) for r in closes],
                per_client=per_client)
        return out

    # -- availability ------------------------------------------------------------------------------
    @cached_property
    def offline_times(self) -> dict[str, dict[Any, float]]:
        """label -> rank -> seconds offline (clients.jsonl's `offline_s`), for every entry in which some
        client was offline (a positive `offline_s`, or presence rows)."""
        out = {}
        for label in self.labels:
            times = {r.get("client"): float(num(r.get("offline_s")))
                     for r in self._clients.get(label, ()) if num(r.get("offline_s")) is not None}
            if times and (any(t > 0 for t in times.values()) or label in self._presence):
                out[label] = times
        return out

    def online_intervals(self, label: str, end: float) -> dict[Any, list[tuple[float, float]]]:
        """Each client's online stretches (start, end) in the entry, from its presence rows, up to `end`;
        a client with no presence rows was online from 0 to `end`."""
        since: dict[Any, float | None] = {c: 0.0 for c in self.clients(label)}
        out: dict[Any, list[tuple[float, float]]] = {c: [] for c in since}
        for r in sorted(self._presence.get(label, ()), key=lambda r: r["time_s"]):  # stable: file order at ties
            c, t = r.get("client"), float(r["time_s"])
            if r["presence"] == "offline":
                start = since.get(c, 0.0)
                if start is not None and t > start:
                    out.setdefault(c, []).append((start, t))
                since[c] = None
            elif since.get(c) is None:
                since[c] = t
        for c, start in since.items():
            if start is not None and end > start:
                out.setdefault(c, []).append((start, end))
        return out

    @cached_property
    def schedules(self) -> list[Schedule]:
        """The distinct availability schedules of the entries that logged presence rows, in report order.
        Every entry of a scenario faces the same periods (drawn from seed and rank), so one schedule
        unless entries differ in seed; two entries are the same schedule when their online stretches
        agree up to the shorter one's end."""
        schedules: list[Schedule] = []
        for label in self.labels:
            if label not in self._presence:
                continue
            end = self.end(label)
            intervals = self.online_intervals(label, end)
            for s in schedules:
                horizon = min(s.end, end)
                if _clipped(s.intervals, horizon) == _clipped(intervals, horizon):
                    s.labels.append(label)
                    if end > s.end:
                        s.drawn_from, s.end, s.intervals = label, end, intervals
                    break
            else:
                schedules.append(Schedule([label], label, end, intervals))
        return schedules

    # -- traces ------------------------------------------------------------------------------------
    @cached_property
    def achieved_factors(self) -> dict[Any, tuple[str, list[tuple[float, float]]]]:
        """rank -> (entry, [(t, step seconds / base step), …]) for each traced device whose steps
        clients.jsonl records (`step_timeline`, sampled) with the run's `base_step_s`: how its steps
        followed its trace, from the first entry that has them."""
        out = {}
        for label in self.labels:
            for r in self._clients.get(label, ()):
                base, timeline = num(r.get("base_step_s")), r.get("step_timeline")
                if r.get("client") in out or not base or not isinstance(timeline, list):
                    continue
                points = [(float(p[0]), float(p[1]) / base) for p in timeline
                          if isinstance(p, list) and len(p) == 2 and None not in (num(p[0]), num(p[1]))]
                if points:
                    out[r.get("client")] = (label, points)
        return out


def most_and_least(per_client: dict[Any, int], n: int) -> tuple[list[tuple[Any, int]], list[tuple[Any, int]]]:
    """The `n` clients that took part most often and the `n` least often (ties: lower rank first)."""
    ranked = sorted(per_client.items(), key=lambda item: (-item[1], sort_key(item[0])))
    least = sorted(per_client.items(), key=lambda item: (item[1], sort_key(item[0])))
    return ranked[:n], least[:n]


def _clipped(intervals: dict[Any, list[tuple[float, float]]], horizon: float) -> dict[Any, list]:
    return {c: [(s, min(e, horizon)) for s, e in iv if s < horizon] for c, iv in intervals.items()}


# ---------------------------------------------------------------------------------------------- traces

def scenario_clients(scenario: dict) -> list[dict]:
    """The resolved scenario's client list (a `{count: N, …}` mapping is N such clients)."""
    spec = scenario.get("clients")
    if isinstance(spec, dict) and isinstance(num(spec.get("count")), int):
        return [spec] * int(spec["count"])
    if isinstance(spec, list):
        return [c if isinstance(c, dict) else {"profile": c} for c in spec]
    return []


def device_traces(scenario: dict) -> dict[int, list[tuple[float, float]]]:
    """rank -> its profile's trace [(t, factor), …] for each client whose profile is a trace; ×1 from 0 to
    the first row when that is later (as the profile runs it)."""
    out = {}
    for rank, client in enumerate(scenario_clients(scenario)):
        profile = client.get("profile")
        if isinstance(profile, dict) and profile.get("kind") == "trace":
            rows = _rows(profile.get("steps"), 2)
            if rows:
                out[rank] = ([(0.0, 1.0)] if rows[0][0] > 0 else []) + rows
    return out


def link_traces(scenario: dict) -> dict[int, dict[str, list[tuple[float, float, float]]]]:
    """rank -> {"up": rows, "down": rows} of (t, rate Mbit/s, latency ms), for each client whose link has a
    trace in either direction (a direction without one is left out). The client's `link` overrides the
    scenario's `links`, each one's `up`/`down` its plain keys (config/links.py's `resolve_direction`)."""
    links = scenario.get("links") if isinstance(scenario.get("links"), dict) else {}
    out = {}
    for rank, client in enumerate(scenario_clients(scenario)):
        link = client.get("link") if isinstance(client.get("link"), dict) else {}
        traces = {}
        for d in DIRECTIONS:
            for spec in (link.get(d), link, links.get(d), links):  # highest precedence first
                if isinstance(spec, dict) and spec.get("trace") is not None:
                    rows = _rows(spec["trace"], 3)
                    if rows:
                        traces[d] = rows
                    break
        if traces:
            out[rank] = traces
    return out


def _rows(value: Any, width: int) -> list[tuple]:
    """A trace's rows as float tuples of `width`, in time order; rows that are not are left out."""
    if not isinstance(value, list):
        return []
    rows = [tuple(float(v) for v in r) for r in value
            if isinstance(r, (list, tuple)) and len(r) == width and all(num(v) is not None for v in r)]
    return sorted(rows, key=lambda r: r[0])


def ranks_text(ranks: list[Any]) -> str:
    """Client ranks in a few characters: [0, 1, 2, 3, 7, 9, 10] → '0–3, 7, 9–10'."""
    ranks = sorted(ranks, key=sort_key)
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while (j + 1 < len(ranks) and isinstance(ranks[j], int) and isinstance(ranks[j + 1], int)
               and ranks[j + 1] == ranks[j] + 1):
            j += 1
        parts.append(str(ranks[i]) if j == i else f"{ranks[i]}–{ranks[j]}")
        i = j + 1
    return ", ".join(parts)

