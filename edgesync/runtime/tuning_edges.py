"""A tuning grid whose best value lies on its edge: found, extended past the edge, or reported.

A grid `lr: [0.01, 0.02, 0.05]` that chooses 0.05 says only that the optimum is at 0.05 *or beyond*: the
entry may be under-tuned, and a comparison that leans on it leans the method's way if the entry is the
baseline. Each entry's chosen value of each numeric key is checked against the values the grid gives that
key (`edges`); a key is numeric when its config field is a number (`ranged`): a named option is not, even
one spelled as a number (SCAFFOLD's `control_option: [1, 2]`), nor is a switch. With `tune.extend: K`, the
grid gets one more value past each edge that an entry chose (one geometric step further: 0.05 after 0.02
gives 0.125) and the new points are tuned, up to K times; a value the entry's config refuses (a momentum of
1 or more) ends the extension of that key there. An edge still chosen after that is reported in
tuning.json, the run's report and `edgesync reproduce`'s tables.
"""
from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ValidationError


def _numeric(values: list[Any]) -> bool:
    return len(values) >= 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def ranged(config: BaseModel, key: str) -> bool:
    """Whether `key` of `config` is a quantity (an int or a float field, or one that may be null): its values lie
    on a scale with two edges. A Literal's values are options and a bool a switch: neither has an edge."""
    annotation = type(config).model_fields[key].annotation
    kinds = set(get_args(annotation) or (annotation,)) - {type(None)}
    return bool(kinds) and kinds <= {int, float}


def edges(keys: list[str], chosen: dict, grid: dict[str, list[Any]], config: BaseModel) -> dict[str, str]:
    """{key: 'lowest' or 'highest'} for each numeric key of `config` whose chosen value is the grid's least or
    greatest."""
    out = {}
    for key in keys:
        values = grid.get(key, [])
        if key in chosen and ranged(config, key) and _numeric(values):
            if chosen[key] == max(values):
                out[key] = "highest"
            elif chosen[key] == min(values):
                out[key] = "lowest"
    return out


def step_past(values: list[float], side: str) -> float | None:
    """One geometric step past the `side` edge of `values` (the ratio of its two outermost values); None when
    the values are not all positive (no geometric step to take)."""
    ordered = sorted(values)
    if ordered[0] <= 0:
        return None
    if side == "highest":
        value = ordered[-1] * ordered[-1] / ordered[-2]
    else:
        value = ordered[0] * ordered[0] / ordered[1]
    return float(f"{value:.4g}")  # a value a person would write, and the same on every machine


def extended_grid(grid: dict[str, list[Any]], entries: dict[str, dict], configs: dict[str, Any]
                  ) -> tuple[dict[str, list[Any]], dict[str, str], dict[str, dict[str, float]]]:
    """The grid with one more value past every edge some entry chose (`entries`: tuning.json's per-entry
    records, each with the values it ran under `grid`; `configs`: label → the entry's config); {key: why it
    was not extended} for edges that cannot be (a value the config refuses, or no geometric step); and per
    entry the values added for it ({label: {key: value}}: only those points are run for it)."""
    new = {k: list(v) for k, v in grid.items()}
    refused: dict[str, str] = {}
    wanted: dict[str, dict[str, float]] = {}
    for label, entry in entries.items():
        for key, side in entry.get("at_edge", {}).items():
            value = step_past(entry.get("grid", {}).get(key) or grid[key], side)
            if value is None:
                refused[key] = f"{key}: no geometric step past {grid[key]}"
                continue
            config = configs[label]
            try:
                type(config).model_validate({**config.model_dump(), key: value})
            except ValidationError as exc:
                refused[key] = f"{key} = {value:g} is refused by {label}'s config: {exc.errors()[0]['msg']}"
                continue
            wanted.setdefault(label, {})[key] = value
            if value not in new[key]:
                new[key].append(value)
                new[key].sort()
    return new, refused, wanted
