"""TensorBoard event files for a run, written as its rows arrive (`output.tensorboard`, `edgesync run
--tensorboard`), so that `tensorboard --logdir RUN_DIR/tensorboard` shows a run live.

The run folder's jsonl files stay the record; this sink mirrors what they hold in TensorBoard's format.
`RunRecorder` feeds it every row it writes, so the live coordinator, the simulator and the Flower
ServerApp produce the same event files. Each entry label (`ssgd`, `esync@seed=1`,
`ssgd@clients=8,seed=2`) is one TensorBoard run, a sub-folder of RUN_DIR/tensorboard named by
`run_name`:

    metrics.jsonl   accuracy/test, loss/test, bytes/up, bytes/down, bytes/total, samples/trained
    updates.jsonl   staleness/lag, staleness/gap, staleness/gap_normalized, density/up, density/down,
                    lr/applied (whichever fields an update's row has)
    clients.jsonl   compute_ratio/client_<rank> (compute_s / wall_s), once, when the entry ends

The step is the global update count: an evaluation's `updates`, and `update` + 1 for an update's row
(the count once it is applied, so an evaluation at step n saw the updates logged at steps ≤ n). The
event's wall time is the row's `time_s`, the runtime's seconds since the entry started (virtual in the
simulator): TensorBoard's "Relative" horizontal axis then reads time-to-accuracy directly.

Cost: one event per row (all its scalars in one summary), queued to tensorboard's background writer;
a flush with each evaluation, every FLUSH_SECS and at the end, never per row. Only the entry being
run keeps a writer open (the runtimes run entries one after another); a row for another label closes
it and opens that label's. A writer always starts a new event file, so a resumed run adds to the
folders of the first attempt instead of replacing them (TensorBoard reads every file of a run).
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from edgesync.metrics.summary import compute_ratio

TENSORBOARD_DIR = "tensorboard"
FLUSH_SECS = 5  # tensorboard's writer also flushes on its own this often: per-update rows show between evaluations

EVAL_TAGS = {"test_acc": "accuracy/test", "test_loss": "loss/test", "bytes_up": "bytes/up",
             "bytes_down": "bytes/down", "samples": "samples/trained"}
UPDATE_TAGS = {"lag": "staleness/lag", "gap": "staleness/gap", "gap_normalized": "staleness/gap_normalized",
               "density_up": "density/up", "density_down": "density/down", "lr": "lr/applied"}

_KEPT = set("@=,._+-×")  # besides letters and digits: what sweep tags use, readable in a folder name
_MAX_NAME = 120  # characters before the digest; folder names are limited to 255 bytes


def run_name(label: str) -> str:
    """The folder of `label`'s TensorBoard run: the label itself when it is a safe folder name
    (`ssgd@clients=8,seed=2`), else with every other character as `_`, shortened to _MAX_NAME
    characters, and a digest of the label appended so that two labels never share a folder."""
    name = "".join(c if c.isalnum() or c in _KEPT else "_" for c in label)[:_MAX_NAME]
    if name == label and name not in ("", ".", ".."):
        return name
    return f"{name}~{hashlib.sha1(label.encode()).hexdigest()[:8]}"


def _number(value: Any) -> float | None:
    """`value` as a float for a scalar; None for a missing, boolean or non-numeric field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class TensorBoardSink:
    """Scalars of a run's rows as TensorBoard event files under `root`, one run folder per label."""

    def __init__(self, root: Path) -> None:
        # Imported only when TensorBoard output is on: a run without it never loads tensorboard.
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        self._event, self._summary, self._writer_class = Event, Summary, EventFileWriter
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._label: str | None = None
        self._writer: Any = None
        self._last: dict[str, tuple[int, float]] = {}  # label → (step, time_s) of its latest row

    def log_eval(self, row: dict) -> None:
        values = {tag: _number(row.get(key)) for key, tag in EVAL_TAGS.items()}
        up, down = values["bytes/up"], values["bytes/down"]
        values["bytes/total"] = up + down if up is not None and down is not None else None
        step = int(row.get("updates") or 0)
        self._write(row["algorithm"], step, row.get("time_s"), values)
        self._writer.flush()  # an evaluation is the moment a live view wants the latest data

    def log_updates(self, rows: list[dict]) -> None:
        for row in rows:
            if not isinstance(row.get("update"), int):
                continue
            values = {tag: _number(row.get(key)) for key, tag in UPDATE_TAGS.items()}
            self._write(row["algorithm"], row["update"] + 1, row.get("time_s"), values)

    def log_client(self, row: dict) -> None:
        ratio = compute_ratio(row)
        if ratio is None:
            return
        label = row["algorithm"]
        step, time_s = self._last.get(label, (0, 0.0))  # the entry's end: its last row
        self._write(label, step, time_s, {f"compute_ratio/client_{row['client']}": ratio})

    def close(self) -> None:
        """Flush and close the open writer; calling it again does nothing."""
        if self._writer is not None:
            self._writer.close()
            self._writer, self._label = None, None

    # -- writing -----------------------------------------------------------------------------------
    def _write(self, label: str, step: int, time_s: Any, values: dict[str, float | None]) -> None:
        scalars = [self._summary.Value(tag=tag, simple_value=v) for tag, v in values.items() if v is not None]
        if not scalars:
            return
        wall = _number(time_s)
        wall = wall if wall is not None and math.isfinite(wall) else self._last.get(label, (0, 0.0))[1]
        self._last[label] = (step, wall)
        self._writer_for(label).add_event(
            self._event(summary=self._summary(value=scalars), step=step, wall_time=wall))

    def _writer_for(self, label: str) -> Any:
        if label != self._label:
            self.close()
            self._writer = self._writer_class(str(self.root / run_name(label)), flush_secs=FLUSH_SECS)
            self._label = label
        return self._writer
