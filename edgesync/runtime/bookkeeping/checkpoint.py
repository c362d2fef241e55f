"""What a live coordinator saves so that `edgesync run --resume RUN_DIR` can go on after a crash.

One file, RUN_DIR/checkpoint.pt, replaced atomically (temporary file, fsync, rename, fsync of the
folder): a reader finds the previous checkpoint or the new one, never half of one. It holds

    scenario    the resolved scenario's digest: a checkpoint only resumes the run that wrote it
    done        keys of the algorithms (sweep variants included) that have finished
    current     the algorithm in progress, or None between algorithms:
                key, elapsed_s (its clock), server (the server half's state_dict), samples,
                bytes_up / bytes_down (traffic so far), best_acc, reached_target, updates,
                final_row (its final evaluation row once written, else None: then only END is left)
    rng         torch, numpy and Python RNG states of the coordinator process

Client halves keep their own state (momentum, residuals) in their processes; after a resume the
clients are new and start that state from zero, as a client that rejoins does.
"""
from __future__ import annotations

import hashlib
import io
import os
import random
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

CHECKPOINT_FILE = "checkpoint.pt"
FORMAT = 1


class CheckpointError(RuntimeError):
    pass


@dataclass
class Checkpoint:
    scenario: str
    done: list[str] = field(default_factory=list)
    current: dict[str, Any] | None = None
    rng: dict[str, Any] = field(default_factory=dict)
    format: int = FORMAT


def scenario_digest(resolved: dict) -> str:
    """A digest of what the run does; the simulator's measured step times and where and how results are
    written (`output`: a resume may turn TensorBoard output on) are not part of it."""
    plain = {k: v for k, v in resolved.items() if k not in ("sim", "output")}
    return hashlib.sha256(yaml.safe_dump(plain, sort_keys=True).encode()).hexdigest()[:16]


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def restore_rng(state: dict[str, Any]) -> None:
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    if "numpy" in state:
        np.random.set_state(state["numpy"])
    if "python" in state:
        random.setstate(state["python"])


def save(run_dir: Path, checkpoint: Checkpoint) -> Path:
    path = Path(run_dir) / CHECKPOINT_FILE
    buf = io.BytesIO()
    # its fields as they are: asdict() would also turn dataclasses inside a server's state (ESync's client
    # records) into dicts, and the resumed server half would not get back what it saved
    torch.save({f.name: getattr(checkpoint, f.name) for f in fields(checkpoint)}, buf)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(buf.getbuffer())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)  # the rename itself survives a power cut
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def load(run_dir: Path) -> Checkpoint | None:
    """The run folder's checkpoint, None if it has none; a damaged or foreign file raises CheckpointError."""
    path = Path(run_dir) / CHECKPOINT_FILE
    if not path.exists():
        return None
    try:
        data = torch.load(path, weights_only=False, map_location="cpu")  # our own file, written by save()
    except Exception as exc:
        raise CheckpointError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an EdgeSync checkpoint of format {FORMAT}")
    return Checkpoint(**data)


def remove(run_dir: Path) -> None:
    (Path(run_dir) / CHECKPOINT_FILE).unlink(missing_ok=True)


class Checkpointer:
    """The coordinator's side: which algorithms to skip, where to resume one, when to save.

    Every coordinator of a run (one per sweep variant) opens the run folder's checkpoint, so `done`
    accumulates across variants. `fresh=True` (a new run) ignores and replaces whatever file is there.
    A checkpoint is due every `every_updates` global updates and every `every_s` seconds of the
    algorithm's clock, whichever comes first (0 turns either off; both 0: no checkpoint is written at
    all); the coordinator also saves each algorithm at its start and at its end.
    """

    def __init__(self, run_dir: Path, resolved: dict, every_updates: int, fresh: bool = False,
                 every_s: float = 0.0):
        self.run_dir = Path(run_dir)
        self.every = every_updates
        self.every_s = float(every_s)
        digest = scenario_digest(resolved)
        if fresh:
            remove(self.run_dir)  # a stale file from an earlier run into this folder must not be resumed
        found = None if fresh else load(self.run_dir)
        if found is not None and found.scenario != digest:
            raise CheckpointError(f"{self.run_dir / CHECKPOINT_FILE} was written by another scenario than "
                                  f"{self.run_dir / 'scenario.yaml'}: cannot resume from it")
        self.state = found or Checkpoint(scenario=digest)
        self._next = self.every
        self._last_s = 0.0  # the algorithm's clock at its last checkpoint

    @classmethod
    def open(cls, run_dir: Path, resolved: dict, every_updates: int, resume: bool,
             every_s: float = 0.0) -> Checkpointer:
        """A fresh run's checkpoints, or (`resume`) the ones a killed run left: CheckpointError if none."""
        checkpoints = cls(run_dir, resolved, every_updates, fresh=not resume, every_s=every_s)
        if resume and checkpoints.state.current is None and not checkpoints.state.done:
            raise CheckpointError(f"{run_dir}: no checkpoint to resume from (checkpoint.pt is missing)")
        return checkpoints

    @property
    def enabled(self) -> bool:
        """Whether checkpoints are written at all (`every_updates` or `every_s` above 0)."""
        return self.every > 0 or self.every_s > 0

    def is_done(self, key: str) -> bool:
        return key in self.state.done

    def resume_point(self, key: str) -> dict[str, Any] | None:
        """The saved state of `key` if it was in progress; its RNG states are restored on the way."""
        current = self.state.current
        if current is None or current.get("key") != key:
            return None
        restore_rng(self.state.rng)
        self._next = int(current["updates"]) + self.every
        self._last_s = float(current["elapsed_s"])
        return current

    def due(self, updates: int, now_s: float | None = None) -> bool:
        """Whether to save now: `every_updates` updates or (`now_s`, the algorithm's clock) `every_s`
        seconds since the last checkpoint."""
        if self.every > 0 and updates >= self._next:
            return True
        return self.every_s > 0 and now_s is not None and now_s - self._last_s >= self.every_s

    def save_progress(self, key: str, server_state: dict, elapsed_s: float, updates: int, **counters: Any) -> None:
        self.state.current = {"key": key, "elapsed_s": elapsed_s, "server": server_state, "updates": updates,
                              **counters}
        self.state.rng = rng_state()
        self._next = updates + self.every
        self._last_s = float(elapsed_s)
        if self.enabled:
            save(self.run_dir, self.state)

    def finish(self, key: str) -> None:
        self.state.done.append(key)
        self.state.current = None
        self._next = self.every
        self._last_s = 0.0
        if self.enabled:
            save(self.run_dir, self.state)


def last_logged_s(run_dir: Path, key: str) -> float:
    """The latest time stamp `key` has in metrics.jsonl or updates.jsonl (0 if none). A resumed
    algorithm's clock goes on from there, so the lines written before a crash stay, and nothing after
    the resume repeats or precedes them; the work between the checkpoint and the crash is lost time."""
    from edgesync.metrics.recorder import METRICS_FILE, UPDATES_FILE, read_jsonl
    latest = 0.0
    for name in (METRICS_FILE, UPDATES_FILE):
        path = Path(run_dir) / name
        if path.exists():
            for row in read_jsonl(path):
                if row.get("algorithm") == key and isinstance(row.get("time_s"), (int, float)):
                    latest = max(latest, float(row["time_s"]))
    return latest
