"""Scenario configuration: YAML validated into typed models, with errors that name file, key, value and need.

`load_scenario(path_or_data, overrides)` is the one way to get a Scenario: it applies `--set key.path=value`
overrides to the raw data before validation, so they are checked exactly like the file, and checks every
combination of the scenario's `sweep` (`variants` turns them into labelled sub-runs). Every problem
becomes a `ScenarioError` whose lines read `FILE: key.path: problem (got VALUE)`.

The modules: the schema by section (data, clients, links, algorithm_entries, stop_eval, faults, emulation,
sim, live, tune, output) under the top-level model (scenario); the bounds on what a scenario may ask to
be built (limits); sweeps (sweep expansion), tune_grid (a `tune` grid's points and checks), overrides
(`--set`), errors (the problem lines), validation and loading (`load_scenario`).
"""
from edgesync.config.errors import ScenarioError
from edgesync.config.loading import load_scenario
from edgesync.config.scenario import Scenario
from edgesync.config.sweeps import Variant, variants

__all__ = ["Scenario", "ScenarioError", "Variant", "load_scenario", "variants"]
