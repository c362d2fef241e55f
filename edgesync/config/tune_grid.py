"""A `tune` grid: its points for one algorithm entry, their labels, and the checks that it fits the entries.

Every key must be some entry's config key, every value valid for every entry that has the key (alone
and in each combination), and the tuning runs stay within MAX_TUNE_RUNS (edgesync/runtime/tuning.py
runs them). A key of any type is tuned as the grid lists it: numbers, switches (`weighted`) and named
options (SCAFFOLD's `control_option`, FedAdam's `bias_correction`) alike. UNTUNABLE keys are refused: what
an entry is, and what every entry of a comparison must share (who takes part in a round, how its sum is
carried out), since an entry that chose its own would be compared under another setting.
"""
from __future__ import annotations

import difflib
import itertools
import json
from typing import Any

from pydantic import ValidationError

from edgesync import algorithms
from edgesync.config.errors import Problem
from edgesync.config.limits import MAX_TUNE_RUNS
from edgesync.config.stop_eval import StopSpec
from edgesync.config.tags import show_value
from edgesync.config.tune import TuneSpec


def tune_points(entry: algorithms.AlgorithmConfig, grid: dict[str, list[Any]]) -> tuple[list[str], list[dict]]:
    """(the grid keys `entry`'s config has, every combination of their values): the product of the value
    lists in the grid's order; no combination when the entry has none of the keys (nothing to tune)."""
    keys = [k for k in grid if k in type(entry).model_fields]
    if not keys:
        return [], []
    return keys, [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def tune_tag(point: dict) -> str:
    """A grid point as tuning runs are labelled by it: `lr=0.05,momentum=0.9`."""
    return ",".join(f"{k}={show_value(v)}" for k, v in point.items())


_WHAT_IT_IS = "an entry's algorithm and label are not tuned"
_SETTING = ("{what} is the setting every entry is compared under, not tuned: set it on the entries (compare "
            "values with a sweep, in a scenario of their own)")
_PARTICIPATION = _SETTING.format(what="who takes part in a round")
_AGGREGATION = _SETTING.format(what="how a round's updates are summed")
UNTUNABLE = {"name": _WHAT_IT_IS, "label": _WHAT_IT_IS, "clients_per_round": _PARTICIPATION,
             "client_fraction": _PARTICIPATION, "client_sampling": _PARTICIPATION, "aggregation": _AGGREGATION,
             "allreduce_backend": _AGGREGATION}  # key → why a grid may not name it


def _check_grid_key(key: str, values: list[Any], entries: list) -> None:
    at: tuple[str | int, ...] = ("grid", key)
    if key in UNTUNABLE:
        raise Problem(UNTUNABLE[key], json.dumps(values, default=str), at)
    if not values:
        raise Problem("needs at least one value", "[]", at)
    shown = [show_value(v) for v in values]
    if dup := sorted({v for v in shown if shown.count(v) > 1}):
        raise Problem(f"repeated value {', '.join(dup)}", json.dumps(values, default=str), at)
    having = [e for e in entries if key in type(e).model_fields]
    if not having:
        known = sorted({f for e in entries for f in type(e).model_fields} - set(UNTUNABLE))
        close = difflib.get_close_matches(key, known, n=1)
        raise Problem("no algorithm entry has this key" + (f"; did you mean {close[0]!r}?" if close else
                       f" (their keys: {', '.join(known)})"), json.dumps(values, default=str), at)
    for entry in having:
        for i, value in enumerate(values):
            if error := _invalid(entry, {key: value}):
                raise Problem(f"not valid for entry {entry.key!r} ({entry.name}): {error}", repr(value), (*at, i))


def _invalid(entry: algorithms.AlgorithmConfig, point: dict) -> str | None:
    """Why `entry` with `point`'s values is not a valid config; None if it is."""
    try:
        type(entry).model_validate({**entry.model_dump(), **point})
    except ValidationError as err:
        first = err.errors()[0]
        return first["msg"].removeprefix("Value error, ")
    return None


def check_tune(tune: TuneSpec, entries: list, stop: StopSpec | None, sweep: dict | None) -> None:
    """Raise the first problem of `tune` for the scenario's algorithm `entries`, `stop` and `sweep`."""
    if sweep:
        raise Problem("tune and sweep do not combine (the chosen values could differ per combination): "
                      "tune each combination in a scenario of its own", "a sweep of " + ", ".join(sweep))
    if not tune.grid:
        raise Problem("needs at least one key: what to tune", "{}", ("grid",))
    for key, values in tune.grid.items():
        _check_grid_key(key, values, entries)
    counts = {e.key: len(tune_points(e, tune.grid)[1]) for e in entries}
    if sum(counts.values()) > MAX_TUNE_RUNS:
        raise Problem(f"at most {MAX_TUNE_RUNS} tuning runs in all entries together",
                      f"{sum(counts.values())}: " + ", ".join(f"{k} {n}" for k, n in counts.items()), ("grid",))
    for entry in entries:  # whole combinations: rules across keys
        for point in tune_points(entry, tune.grid)[1]:
            if error := _invalid(entry, point):
                raise Problem(f"not valid for entry {entry.key!r} at {tune_tag(point)}: {error}",
                              json.dumps(point), ("grid",))
    if tune.metric == "time_to_target" and stop is not None and stop.target_acc is None:
        raise Problem("time_to_target needs a target: set stop.target_acc", repr(tune.metric), ("metric",))
