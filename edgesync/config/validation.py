"""Scenario data validated into a Scenario, every problem a line of one ScenarioError.

Only this package validates: callers load a scenario with `edgesync.config.load_scenario` (a file or
data), which also applies `--set` overrides and checks the sweep's variants.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from edgesync.config.errors import ScenarioError, validation_problems
from edgesync.config.scenario import Scenario


def validated(data: Any, source: str = "<scenario>", base_dir: str | Path | None = None) -> Scenario:
    """`base_dir`: where trace files named in the scenario are looked for (the scenario file's folder)."""
    if not isinstance(data, dict):
        raise ScenarioError(source, [f"a scenario is a YAML mapping, not {type(data).__name__}"])
    try:
        context = {"base_dir": base_dir, "clients": {}}  # clients: ClientSpec's memo, each mapping validated once
        return Scenario.model_validate(data, context=context)
    except ValidationError as err:
        raise ScenarioError(source, validation_problems(err, data, Scenario)) from None
