"""What "one row per evaluation" means in a run folder's metrics.jsonl, checked alike for every runtime.

An entry is evaluated at t = 0, every `eval.every_s` before it stops, and once at its end (the final
model). Issue 32: every live entry that ended at its time budget wrote its final evaluation twice, two
rows of one model 0.3 ms apart (an evaluation due at the budget, then the final one).
"""
from __future__ import annotations

import math
from pathlib import Path

from edgesync.metrics.recorder import read_jsonl

# one model in two rows this close together is one evaluation written twice (live 0.3 ms apart, under Flower
# 50 ms); the tests' every_s is 0.5 s or more, so two evaluations of one model on purpose are further apart
SAME_INSTANT_S = 0.25


def rows_by_entry(run_dir: Path) -> dict[str, list[dict]]:
    """metrics.jsonl's rows per entry, in the order they were written."""
    entries: dict[str, list[dict]] = {}
    for row in read_jsonl(Path(run_dir) / "metrics.jsonl"):
        entries.setdefault(row["algorithm"], []).append(row)
    return entries


def evaluations_made(budget_s: float, every_s: float) -> int:
    """An entry that ran to its time budget: one at t = 0 and each every_s before the budget, then the final."""
    return math.ceil(budget_s / every_s - 1e-9) + 1


def assert_one_row_per_evaluation(key: str, rows: list[dict], budget_s: float, every_s: float) -> None:
    """`rows` (one entry's, ended by its time budget) hold each evaluation once, the final one last."""
    where = f"{key}: {[(r['time_s'], r['updates']) for r in rows]}"
    assert all(a["time_s"] < b["time_s"] for a, b in zip(rows, rows[1:])), where
    # Two rows of one model close together are one evaluation written twice only within one every_s slot: on a
    # loaded host the evaluation due at 0.5 s can run at 0.8 s, then the one due at 1.0 s finds no new update.
    def slot(row: dict) -> int:
        return math.floor(row["time_s"] / every_s + 1e-9)
    twice = [(a["time_s"], b["time_s"], a["updates"]) for a, b in zip(rows, rows[1:])
             if a["updates"] == b["updates"] and b["time_s"] - a["time_s"] < SAME_INSTANT_S and slot(a) == slot(b)]
    assert not twice, f"{key}: one model evaluated twice at one instant {twice}; {where}"
    at_end = [r for r in rows if r["time_s"] >= budget_s]
    assert len(at_end) == 1 and at_end[0] == rows[-1], f"{key}: one final evaluation, the last row; {where}"
    assert len(rows) == evaluations_made(budget_s, every_s), where
