"""`load_scenario`: the one way to get a Scenario, from a YAML file or from data already read.

`--set key.path=value` overrides are applied to the raw data before validation, so they are checked
exactly like the file, and every combination of the scenario's `sweep` and `seeds` is checked as a
scenario of its own (edgesync/config/sweeps.py makes them the sub-runs).
"""
from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from edgesync.config.errors import ScenarioError
from edgesync.config.limits import too_many_clients
from edgesync.config.overrides import apply_override, parse_override
from edgesync.config.scenario import Scenario
from edgesync.config.sweeps import sweep_combinations
from edgesync.config.validation import validated


def load_scenario(scenario: str | os.PathLike | Any, overrides: Sequence[str] = (), *, source: str | None = None,
                  base_dir: str | Path | None = None) -> Scenario:
    """The scenario a YAML file holds (a path: its name defaults to the file's stem, trace files are looked
    for beside it), or the one `scenario` data already read holds (a dict: a test's scenario, a run
    folder's scenario.yaml read back), with `overrides` (`--set` texts) applied. `source` names it in
    errors (default: the path, or "<scenario>"); `base_dir` overrides where trace files are looked for."""
    if isinstance(scenario, (str, os.PathLike)):
        path = Path(scenario)
        data, name = _read(path), source or str(path)
        if isinstance(data, dict):
            data.setdefault("name", path.stem)
        base_dir = path.parent if base_dir is None else base_dir
    else:  # data: overrides change a copy, never the caller's
        data, name = (copy.deepcopy(scenario) if overrides else scenario), source or "<scenario>"
    if isinstance(data, dict):
        if problem := too_many_clients(data.get("clients")):  # named with the file, before --set expands it
            raise ScenarioError(name, [problem.line("clients")])
        for text in overrides:
            key_path, value = parse_override(text)
            apply_override(data, key_path, value)
    where = name + (" with --set " + " ".join(overrides) if overrides else "")
    loaded = validated(data, where, base_dir)
    for _, variant, variant_source in sweep_combinations(loaded, where):  # each must be a valid scenario too
        validated(variant, variant_source, base_dir)
    return loaded


def _read(path: Path) -> Any:
    """The YAML data of a scenario file, or a ScenarioError saying why there is none."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(str(path), [f"cannot read the file ({exc.strerror})"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(str(path), [f"not valid YAML: {exc}"]) from None
    if data is None:
        raise ScenarioError(str(path), ["the file is empty"])
    return data
