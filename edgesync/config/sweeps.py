"""Sweeps: one scenario, several values for some keys, every combination a labelled sub-run.

    sweep:
      clients: [4, 8, 16]
      algorithms.0.lr: [0.05, 0.1]

gives six variants (times the scenario's `seeds`, a last axis `seed`); each algorithm entry of a variant is
labelled `KEY@k=v,…` (`ssgd@clients=8,lr=0.1`), so one run folder, summary and report hold a paper's whole
table. `sweep_combinations` gives the combinations, their tags and labels (`load_scenario` checks each
with them); `variants` makes them the sub-runs.
"""
from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator
from dataclasses import dataclass

from edgesync.config.overrides import apply_override
from edgesync.config.scenario import Scenario
from edgesync.config.tags import show_value
from edgesync.config.validation import validated


@dataclass(frozen=True)
class Variant:
    tag: str            # "" when the scenario has no sweep or seeds, else "clients=8,lr=0.1" or "clients=8,seed=2"
    scenario: Scenario  # the scenario with the combination applied and labels suffixed


def variants(scenario: Scenario, source: str = "<scenario>") -> list[Variant]:
    """Every combination of the scenario's sweep and seeds as a validated scenario; the scenario itself,
    untagged, when it has neither."""
    if not scenario.sweep and not scenario.seeds:
        return [Variant("", scenario)]
    return [Variant(tag, validated(data, where)) for tag, data, where in sweep_combinations(scenario, source)]


def sweep_combinations(scenario: Scenario, source: str = "<scenario>") -> Iterator[tuple[str, dict, str]]:
    """(tag, data, source) of each combination of the scenario's sweep and seeds, in order; none without either.

    The combinations are the product of the value lists, in the order the keys are written, then the
    seeds (`seeds: [0, 1]` is a last axis `seed`, tag `seed=N`, so `ssgd@clients=8,seed=1`). `data` is the
    resolved scenario without its sweep, each key set to its value, and each algorithm entry labelled
    `LABEL@TAG`; the tag is `k=v,…` (`clients=8,lr=0.1`), a key shown by its last part when that is
    unambiguous (`lr`), else by its whole path (`clients.3.profile`). `source` names the combination in
    the errors of validating `data`. `variants` validates them into labelled sub-runs; the sweep's bounds
    were checked when the scenario was.
    """
    if not scenario.sweep and not scenario.seeds:
        return
    axes = {**scenario.sweep, **({"seed": scenario.seeds} if scenario.seeds else {})}  # seeds vary fastest
    keys = list(axes)
    short = _short_names(keys)
    base = scenario.resolved()
    base.pop("sweep")
    base["seeds"] = None
    for combo in itertools.product(*(axes[k] for k in keys)):
        data = pickle.loads(pickle.dumps(base))  # a deep copy of plain data (pickle: 4× json's speed)
        tag = ",".join(f"{short[k]}={show_value(v)}" for k, v in zip(keys, combo))
        for key, value in zip(keys, combo):
            path = [int(p) if p.isdigit() else p for p in key.split(".")]
            apply_override(data, path, value, source=f"{source}: sweep {key}={show_value(value)}")
        for entry in data["algorithms"]:
            entry["label"] = f"{entry.get('label') or entry['name']}@{tag}"
        yield tag, data, f"{source} (sweep {tag})"


def _short_names(keys: list[str]) -> dict[str, str]:
    lasts = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: last if lasts.count(last) == 1 and not last.isdigit() else k for k, last in zip(keys, lasts)}

