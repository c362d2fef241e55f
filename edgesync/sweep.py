"""Sweeps: one scenario, several values for some keys, every combination a labelled sub-run.

    sweep:
      clients: [4, 8, 16]
      algorithms.0.lr: [0.05, 0.1]

gives six variants (times the scenario's `seeds`, a last axis `seed`); each algorithm entry of a variant is labelled `KEY@k=v,…` (`ssgd@clients=8,lr=0.1`),
so one run folder, summary and report hold a paper's whole table. The combinations, their tags and
labels come from `edgesync.scenario.sweep_combinations` (which `load_scenario` also checks them with);
this module makes them the sub-runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from edgesync.scenario import Scenario, scenario_from_dict, sweep_combinations


@dataclass(frozen=True)
class Variant:
    tag: str            # "" when the scenario has no sweep or seeds, else "clients=8,lr=0.1" or "clients=8,seed=2"
    scenario: Scenario  # the scenario with the combination applied and labels suffixed


def variants(scenario: Scenario, source: str = "<scenario>") -> list[Variant]:
    """Every combination of the scenario's sweep and seeds as a validated scenario; the scenario itself,
    untagged, when it has neither."""
    if not scenario.sweep and not scenario.seeds:
        return [Variant("", scenario)]
    return [Variant(tag, scenario_from_dict(data, where)) for tag, data, where in sweep_combinations(scenario, source)]
