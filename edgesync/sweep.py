"""Sweeps: one scenario, several values for some keys, every combination a labelled sub-run.

    sweep:
      clients: [4, 8, 16]
      algorithms.0.lr: [0.05, 0.1]

gives six variants; each algorithm entry of a variant is labelled `KEY@k=v,…` (`ssgd@clients=8,lr=0.1`),
so one run folder, summary and report hold a paper's whole table. A key is shown by its last part
when that is unambiguous (`lr`), else by its whole path (`clients.3.profile`).
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from edgesync.scenario import Scenario, ScenarioError, apply_override, scenario_from_dict


@dataclass(frozen=True)
class Variant:
    tag: str            # "" when the scenario has no sweep, else "clients=8,lr=0.1"
    scenario: Scenario  # the scenario with the combination applied and labels suffixed


def _short_names(keys: list[str]) -> dict[str, str]:
    lasts = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: last if lasts.count(last) == 1 and not last.isdigit() else k for k, last in zip(keys, lasts)}


def _show(value: Any) -> str:
    if isinstance(value, dict) and "count" in value and set(value) <= {"count", "profile"}:
        return f"{value['count']}×{_show(value.get('profile', 'x1'))}"  # clients: {count: 8, profile: x2}
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return "null" if value is None else str(value)


def variants(scenario: Scenario, source: str = "<scenario>") -> list[Variant]:
    if not scenario.sweep:
        return [Variant("", scenario)]
    keys = list(scenario.sweep)
    short = _short_names(keys)
    base = scenario.resolved()
    base.pop("sweep")
    out = []
    for combo in itertools.product(*(scenario.sweep[k] for k in keys)):
        data = json.loads(json.dumps(base))  # a deep copy of plain data
        tag = ",".join(f"{short[k]}={_show(v)}" for k, v in zip(keys, combo))
        for key, value in zip(keys, combo):
            path = [int(p) if p.isdigit() else p for p in key.split(".")]
            apply_override(data, path, value, source=f"{source}: sweep {key}={_show(value)}")
        for entry in data["algorithms"]:
            entry["label"] = f"{entry.get('label') or entry['name']}@{tag}"
        out.append(Variant(tag, scenario_from_dict(data, f"{source} (sweep {tag})")))
    return out
