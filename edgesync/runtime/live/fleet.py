"""The fleet as the live coordinator sees it: each client's state, pace and counters, for the dashboard.

The coordinator tells this view what passes (an instruction sent, an update in) and calls `tick` from its
loop; at most once every `EVERY_S` the view writes RUN_DIR/fleet.json, one snapshot per entry label
(the entry in progress replaced, the finished ones kept: `edgesync dashboard` replays them). Writing is
the only cost to the coordinator: O(clients) once a second, no fsync, no lock; the dashboard is another
process that reads the file.

A client's state, as the coordinator knows it (it learns of an upload only when it ends, so the uplink's
time shows as computing):
    sending    its instruction is still on its emulated downlink
    computing  its instruction has arrived, its update has not
    waiting    its update is in and no instruction has been sent since (a barrier, a full buffer)
    joining    lost and speaking again: being set up before it is back
    lost       silent past the timeout, or its connection closed
    offline    its availability says so
    done       the entry has ended (its last snapshot)
`back` says a client lost earlier in this entry has returned.

The achieved factor is end to end: each client's busy time (from its instruction's arrival to its
update's) per step, over the median of the fastest profile's clients; it counts the uplink and the
coordinator's queue, which the step-level fidelity check in clients.jsonl leaves out.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgesync.emulation.profiles import FactorSampler
from edgesync.metrics.recorder import FLEET_FILE

EVERY_S = 1.0  # how often the file is rewritten while an entry trains


@dataclass
class _Track:
    instructed_at: float | None = None  # its outstanding instruction's arrival (algorithm clock)
    updated_at: float | None = None     # its last update's arrival
    busy_s: float = 0.0
    steps: int = 0
    updates: int = 0
    lag: int | None = None


def link_text(link: Any, now: float = 0.0) -> str:
    """The link as the join log describes it (`Link.describe`); a traced link's setting in force `now` seconds
    into the algorithm, marked '(trace)'."""
    return link.at(now).describe() + (" (trace)" if link.trace else "")


class FleetView:
    def __init__(self, run_dir: Path | None, every_s: float = EVERY_S):
        self.path = None if run_dir is None else Path(run_dir) / FLEET_FILE
        self.every_s = every_s
        # finished entries, encoded once: a sweep's or a resumed run's earlier coordinators', and this one's
        self.done: dict[str, str] = self._earlier()
        self.label: str | None = None
        self.tracks: dict[int, _Track] = {}
        self.static: dict[int, dict] = {}
        self.links: dict[int, tuple] = {}
        self.identities: dict[int, set[bytes]] = {}  # each socket a rank spoke from: a restarted client's bytes add up
        self._written = -1e9

    def _earlier(self) -> dict[str, str]:
        try:
            entries = json.loads(self.path.read_text())["entries"] if self.path is not None else {}
            return {label: json.dumps(entry, allow_nan=False) for label, entry in entries.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # none yet, or not one to add to
            return {}

    def start(self, label: str, scenario: Any, peers: dict) -> None:
        """A new entry trains: every client's counters start again."""
        self.label, self.tracks, self._written = label, {}, -1e9
        self.static, self.identities, self.links = {}, {}, {}
        for rank, peer in peers.items():
            self.links[rank] = scenario.client_links(rank)  # (up, down): a traced one's text changes
            factor = FactorSampler(peer.profile, seed=scenario.seed, rank=rank).mean_factor
            self.static[rank] = {"client": rank, "host": peer.info.get("host"), "profile": peer.profile.label,
                                 "factor": round(float(factor), 3)}

    def instructed(self, rank: int, arrival_s: float) -> None:
        track = self.tracks.setdefault(rank, _Track())
        if track.instructed_at is None:
            track.instructed_at = arrival_s

    def lost(self, rank: int) -> None:
        """Its outstanding instruction is void: when it is back, its busy time counts from its next one."""
        if (track := self.tracks.get(rank)) is not None:
            track.instructed_at = track.updated_at = None

    def updated(self, rank: int, meta: dict, rows: list[dict], now: float) -> None:
        track = self.tracks.setdefault(rank, _Track())
        since = max(x for x in (track.instructed_at, track.updated_at, 0.0) if x is not None)
        track.busy_s += max(0.0, now - since)
        track.steps += int(meta.get("steps", 0) or 0)
        track.updates += 1
        track.updated_at, track.instructed_at = now, None
        for row in rows:
            if row.get("client") == rank and "lag" in row:
                track.lag = row["lag"]

    def tick(self, coordinator: Any, now: float, final: bool = False) -> None:
        """Write the fleet's snapshot if `every_s` has passed since the last (or `final`: the entry ended)."""
        if self.path is None or self.label is None or (now - self._written < self.every_s and not final):
            return
        self._written = now
        entry = json.dumps({"label": self.label, "time_s": round(now, 3), "wall_clock": time.time(), "final": final,
                            "clients": self.rows(coordinator, now, ended=final)}, allow_nan=False)
        self.done.pop(self.label, None)  # the entry in progress goes last, as the newest
        entries = ", ".join(f"{json.dumps(label)}: {text}" for label, text in [*self.done.items(), (self.label, entry)])
        if final:
            self.done[self.label] = entry
        tmp = self.path.with_name(f".{FLEET_FILE}.tmp")
        tmp.write_text(f'{{"current": {json.dumps(self.label)}, "entries": {{{entries}}}}}')
        os.replace(tmp, self.path)

    def rows(self, coordinator: Any, now: float, ended: bool = False) -> list[dict]:
        liveness, sock = coordinator.members.liveness, coordinator.sock
        in0, out0 = coordinator._bytes0
        paces = {r: t.busy_s / t.steps for r, t in self.tracks.items() if t.steps}
        fastest = min((self.static[r]["factor"] for r in paces if r in self.static), default=None)
        reference = statistics.median(p for r, p in paces.items() if self.static.get(r, {}).get("factor") == fastest) \
            if fastest is not None else None
        rows, mono = [], time.monotonic()
        for rank, peer in sorted(coordinator.peers.items()):
            track = self.tracks.get(rank, _Track())
            idents = self.identities.setdefault(rank, set())
            idents.add(peer.identity)
            seen = liveness.last_seen.get(rank)
            rows.append({
                **self.static.get(rank, {"client": rank}),
                "state": self._state(coordinator, rank, track, now, ended),
                "back": liveness.returns.get(rank, 0) > 0 and rank not in liveness.lost,
                "losses": liveness.losses.get(rank, 0), "updates": track.updates, "steps": track.steps,
                "step_ms": round(1e3 * paces[rank], 2) if rank in paces else None,
                "achieved": round(paces[rank] / reference, 2) if rank in paces and reference else None,
                "lag": track.lag,
                "bytes_up": sum(max(0, sock.bytes_in.get(i, 0) - in0.get(i, 0)) for i in idents),
                "bytes_down": sum(max(0, sock.bytes_out.get(i, 0) - out0.get(i, 0)) for i in idents),
                "last_seen_s": None if seen is None else round(max(0.0, mono - seen), 1),
                **self._links(rank, now)})
        return rows

    def _links(self, rank: int, now: float) -> dict[str, str]:
        if rank not in self.links:
            return {}
        up, down = self.links[rank]
        return {"uplink": link_text(up, now), "downlink": link_text(down, now)}

    @staticmethod
    def _state(coordinator: Any, rank: int, track: _Track, now: float, ended: bool) -> str:
        if rank in coordinator.members.liveness.lost:
            if coordinator.availability.is_offline(rank, now):
                return "offline"
            return "joining" if rank in coordinator.joining else "lost"
        if ended:
            return "done"
        if track.instructed_at is not None:
            return "sending" if now < track.instructed_at else "computing"
        return "waiting" if track.updated_at is not None else "idle"
