"""A simulated run that was stopped, gone on with entry by entry: `edgesync run --resume RUN_DIR` of a simulator
run, and `edgesync reproduce` going on where a stopped suite left an experiment.

The simulator keeps no checkpoint: it is deterministic, and each entry (an algorithm of a sweep variant) draws
everything from the scenario's seed, its own key and its clients' ranks, never from what ran before it. So an
entry that finished is kept as it is, and one that was cut short runs again from its start: its rows then come
out as an uninterrupted run's. An entry has finished when clients.jsonl holds a row for each of its clients:
the simulator writes them last, after the entry's final evaluation and its coordinator row. What a cut-short
entry left in the row files is dropped before it runs again (events.jsonl, the log, keeps the story).
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import yaml

from edgesync.metrics.recorder import (
    CLIENTS_FILE, COORDINATOR_FILE, METRICS_FILE, SCENARIO_FILE, UPDATES_FILE, read_jsonl, write_atomic,
)

ROW_FILES = (METRICS_FILE, UPDATES_FILE, CLIENTS_FILE, COORDINATOR_FILE)
MEASURED = ("measured_step_s", "calibration", "measured_server_s")  # filled in by a run, not asked for


class ResumeError(RuntimeError):
    """A folder that cannot be resumed as this scenario (another scenario wrote it, or it holds no run)."""


def sim_digest(resolved: dict) -> str:
    """What a simulated run does: the resolved scenario without what the run measured (the simulator's step times
    and the coordinator's costs, `sim.measured_*`) or where its results also go (`output`)."""
    sim = {k: v for k, v in (resolved.get("sim") or {}).items() if k not in MEASURED}
    plain = {**{k: v for k, v in resolved.items() if k not in ("sim", "output")}, "sim": sim}
    return hashlib.sha256(yaml.safe_dump(plain, sort_keys=True).encode()).hexdigest()[:16]


class FinishedEntries:
    """The entries of `run_dir` that finished; answers `is_done(key)` as the live runs' Checkpointer does, so the
    run's loops skip them alike."""

    def __init__(self, done: set[str], measured: dict):
        self.done = done
        self.measured = measured  # the stopped run's `sim.measured_*`, for a variant that is all skipped now

    def is_done(self, key: str) -> bool:
        return key in self.done

    @classmethod
    def open(cls, run_dir: Path, resolved: dict, clients: dict[str, int]) -> "FinishedEntries":
        """The finished entries of the stopped run in `run_dir`, whose scenario must be `resolved`; `clients`: each
        entry's key → its number of clients. Drops what the others left in the row files."""
        run_dir = Path(run_dir)
        path = run_dir / SCENARIO_FILE
        if not path.exists():
            raise ResumeError(f"{run_dir}: no run to resume ({SCENARIO_FILE} is missing)")
        written = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if sim_digest(written) != sim_digest(resolved):
            raise ResumeError(f"{path} describes another run than the one asked for: cannot resume it "
                              "(start a new run with --overwrite, or give another --out)")
        rows = Counter(row.get("algorithm") for row in read_jsonl(run_dir / CLIENTS_FILE))
        done = {key for key, count in clients.items() if count and rows[key] >= count}
        for name in ROW_FILES:
            keep_rows(run_dir / name, lambda row: row.get("algorithm") is None or row["algorithm"] in done)
        measured = {k: v for k, v in (written.get("sim") or {}).items() if k in MEASURED and isinstance(v, dict)}
        return cls(done, measured)


def entries_with_clients(run_dir: Path) -> set[str]:
    """The entries of `run_dir` with their clients' rows written: those that finished (a cheap count for
    progress; `FinishedEntries.open` checks each one's number of rows)."""
    return {row["algorithm"] for row in read_jsonl(Path(run_dir) / CLIENTS_FILE) if row.get("algorithm")}


def keep_rows(path: Path, keep) -> int:
    """Rewrite the JSON-lines file `path` with the rows `keep(row)` accepts, atomically (a temporary file renamed
    over it); a last line cut short by the stop is dropped. Returns how many rows went."""
    if not path.exists():
        return 0
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if (row := _parse(line)) is not None and keep(row)]  # the lines as written
    if len(kept) < len(lines):
        write_atomic(path, "".join(line + "\n" for line in kept))
    return len(lines) - len(kept)


def _parse(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None
