"""The run folder's recorder: everything a run produces is appended as it happens.

A run folder holds

    scenario.yaml    the resolved scenario, written once at the start
    metrics.jsonl    one JSON object per evaluation (label, time_s, updates, samples, test_acc, ...)
    clients.jsonl    one JSON object per (label, client) when an algorithm ends
    coordinator.jsonl  one JSON object per label when it ends: the coordinator's load (metrics/coordinator_load.py)
    fleet.json       live runs: the fleet as the coordinator sees it, rewritten once a second (runtime/live/fleet.py)
    events.jsonl     every log record of INFO and up, one JSON object each (metrics/event_log.py)
    summary.json     written atomically at the end (see `edgesync.metrics.summary.summarize`)
    report.md        and plots/*.png, written by `edgesync.metrics.report.render_report`
    tensorboard/     with `tensorboard=True` (`output.tensorboard`): the same rows as TensorBoard event
                     files, one run per entry label (`edgesync.metrics.tensorboard_sink`)

Every JSON line is flushed and fsync'ed before `log_eval` / `log_client` return, so a crash loses at most
the line being written; `read_jsonl` skips such a truncated line with a warning. Reopening a folder appends
(a resumed run keeps what the first attempt recorded).

    with RunRecorder(Path("runs/fmnist-4x")) as rec:
        rec.write_scenario(resolved)
        rec.log_eval({"algorithm": "ssgd", "time_s": 1.5, "updates": 10, ...})
        rec.log_client({"algorithm": "ssgd", "client": 0, "profile": "x1", ...})
        rec.write_summary(summarize(...))
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import IO, Any

import yaml

from edgesync.metrics.tensorboard_sink import TENSORBOARD_DIR, TensorBoardSink

SCENARIO_FILE = "scenario.yaml"
METRICS_FILE = "metrics.jsonl"
UPDATES_FILE = "updates.jsonl"
CLIENTS_FILE = "clients.jsonl"
COORDINATOR_FILE = "coordinator.jsonl"
FLEET_FILE = "fleet.json"
EVENTS_FILE = "events.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.md"
EXTENSIONS_FILE = "extensions.json"  # the outside code a run used (config/outside_code.py): package, version, hash
TUNING_FILE = "tuning.json"  # a tuned run (runtime/tuning.py): every point's validation figure, each entry's choice
TUNING_DIR = "tuning"        # … and the tuning runs' own run folder
PLOTS_DIR = "plots"


def to_plain(obj: Any) -> Any:
    """`obj` with numpy scalars/arrays, tuples and paths turned into plain JSON/YAML values.

    Python floats (NaN and inf included) are kept as they are; dict keys become strings.
    """
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    # numpy (and torch) scalars and arrays, without importing either here.
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return to_plain(obj.tolist())
    if hasattr(obj, "item") and callable(obj.item):
        return to_plain(obj.item())
    for plain in (bool, int, float, str):  # subclasses, e.g. an IntEnum or a str Enum
        if isinstance(obj, plain):
            return plain(obj)
    raise TypeError(f"cannot record a value of type {type(obj).__name__}: {obj!r}")


def dumps_line(row: dict) -> str:
    """One JSON line (with its newline) for `row`."""
    return json.dumps(to_plain(row), separators=(", ", ": ")) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path | str) -> list[dict]:
    """The JSON objects of a .jsonl file, in order; [] if the file does not exist.

    A line that does not decode to an object is skipped with a `RuntimeWarning` naming file and line: a
    truncated last line (a crash mid-write) is the expected case; a bad line further up is what a crash
    followed by a resumed run leaves behind.
    """
    path = Path(path)
    if not path.exists():
        return []
    rows: list[dict] = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            where = "truncated last line" if number == len(lines) else "undecodable line"
            warnings.warn(f"{path}:{number}: skipping {where} ({err.msg})", RuntimeWarning, stacklevel=2)
            continue
        if not isinstance(row, dict):
            warnings.warn(f"{path}:{number}: skipping a line that is not a JSON object", RuntimeWarning,
                          stacklevel=2)
            continue
        rows.append(row)
    return rows


class RunRecorder:
    """Appends a run's results to its folder as they happen. Usable as a context manager."""

    def __init__(self, run_dir: Path, tensorboard: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.plots_dir = self.run_dir / PLOTS_DIR
        self.plots_dir.mkdir(parents=True, exist_ok=True)
        self._metrics = self._open_append(self.run_dir / METRICS_FILE)
        self._clients = self._open_append(self.run_dir / CLIENTS_FILE)
        self._updates: IO[str] | None = None  # opened on the first per-update row
        self.tensorboard_dir = self.run_dir / TENSORBOARD_DIR if tensorboard else None
        self._tensorboard = TensorBoardSink(self.tensorboard_dir) if self.tensorboard_dir else None

    @staticmethod
    def _open_append(path: Path) -> IO[str]:
        f = open(path, "a", encoding="utf-8")
        # A crash mid-line leaves no final newline: end that line so the next record starts clean
        # (read_jsonl then skips the broken one instead of losing the new one too).
        if f.tell() > 0:
            with open(path, "rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    f.write("\n")
                    f.flush()
        return f

    @property
    def closed(self) -> bool:
        return self._metrics.closed

    def write_scenario(self, resolved: dict) -> Path:
        """Write the resolved scenario as scenario.yaml (atomically); returns its path."""
        path = self.run_dir / SCENARIO_FILE
        write_atomic(path, yaml.safe_dump(to_plain(resolved), sort_keys=False, allow_unicode=True))
        return path

    def write_extensions(self, records: list[dict]) -> Path:
        """Write what outside code the run used as extensions.json (atomically); returns its path."""
        path = self.run_dir / EXTENSIONS_FILE
        write_atomic(path, json.dumps(records, indent=1) + "\n")
        return path

    def log_eval(self, row: dict) -> None:
        """Append one evaluation to metrics.jsonl, durably.

        `row` needs `algorithm` (the entry's label); `wall_clock` (unix time) is added when absent.
        Every other key is written as given.
        """
        if "algorithm" not in row:
            raise ValueError(f"an evaluation row needs an 'algorithm' label; got keys {sorted(row)}")
        if "wall_clock" not in row:
            row = {**row, "wall_clock": time.time()}
        if self._updates is not None:
            self._updates.flush()
        self._append(self._metrics, row)
        if self._tensorboard is not None:
            self._tensorboard.log_eval(row)

    def log_client(self, row: dict) -> None:
        """Append one (algorithm, client) record to clients.jsonl, durably."""
        if "algorithm" not in row or "client" not in row:
            raise ValueError(f"a client row needs 'algorithm' and 'client'; got keys {sorted(row)}")
        self._append(self._clients, row)
        if self._tensorboard is not None:
            self._tensorboard.log_client(row)

    def log_coordinator(self, row: dict) -> None:
        """Append one entry's coordinator load to coordinator.jsonl, durably (opened on the first)."""
        if "algorithm" not in row:
            raise ValueError(f"a coordinator row needs an 'algorithm' label; got keys {sorted(row)}")
        with self._open_append(self.run_dir / COORDINATOR_FILE) as f:
            self._append(f, row)

    def log_updates(self, rows: list[dict]) -> None:
        """Append per-update instrumentation (lag, gap…) to updates.jsonl.

        Thousands of rows a second: they are buffered and flushed with every evaluation row, not
        fsynced one by one.
        """
        if not rows:
            return
        if self._updates is None:
            self._updates = self._open_append(self.run_dir / UPDATES_FILE)
        self._updates.write("".join(dumps_line(r) for r in rows))
        if self._tensorboard is not None:
            self._tensorboard.log_updates(rows)

    def write_summary(self, summary: dict) -> Path:
        """Write summary.json atomically (tmp file, fsync, os.replace); returns its path."""
        path = self.run_dir / SUMMARY_FILE
        write_atomic(path, json.dumps(to_plain(summary), indent=2) + "\n")
        return path

    def _append(self, f: IO[str], row: dict) -> None:
        if f.closed:
            raise ValueError(f"recorder for {self.run_dir} is closed")
        f.write(dumps_line(row))
        f.flush()
        os.fsync(f.fileno())

    def close(self) -> None:
        """Close the jsonl files and the TensorBoard writer; calling it again does nothing."""
        self._metrics.close()
        if self._updates is not None:
            self._updates.close()
        self._clients.close()
        if self._tensorboard is not None:
            self._tensorboard.close()

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
