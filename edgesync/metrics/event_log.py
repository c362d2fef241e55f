"""The run's event log: every log record of INFO and up as a JSON line of RUN_DIR/events.jsonl.

What coordinator.log says in prose (joins, losses, returns, warnings, an entry's budget), a program can read
here: the dashboard's event log (edgesync/dashboard) replays it, and a finished run keeps it. Each line:
{"wall_clock": unix time, "level": "INFO", "logger": "edgesync.membership", "message": "client 1 lost: …"}.
Written and flushed per record, not fsynced: a few lines a second at most (log_limit.py bounds the loud ones).
"""
from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from edgesync.metrics.recorder import EVENTS_FILE


class EventLog(logging.Handler):
    def __init__(self, run_dir: Path, level: int = logging.INFO):
        super().__init__(level)
        self._file = open(Path(run_dir) / EVENTS_FILE, "a", encoding="utf-8")
        self._write = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = json.dumps({"wall_clock": round(record.created, 3), "level": record.levelname,
                               "logger": record.name, "message": record.getMessage()}, ensure_ascii=False)
            with self._write:
                self._file.write(line + "\n")
                self._file.flush()
        except Exception:  # noqa: BLE001 — logging must never take the run down
            self.handleError(record)

    def close(self) -> None:
        with self._write:
            if not self._file.closed:
                self._file.close()
        super().close()
