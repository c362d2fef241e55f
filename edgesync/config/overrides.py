"""`--set key.path=value`: parsed, and applied to a scenario's raw data before it is validated.

An override is checked exactly like the file, since it changes the data the file gave. Sweeps set
their keys the same way (edgesync/config/sweeps.py).
"""
from __future__ import annotations

from typing import Any

import yaml

from edgesync.config.errors import ScenarioError
from edgesync.config.limits import too_many_clients


def parse_override(text: str) -> tuple[list[str | int], Any]:
    """'algorithms.0.lr=0.1' → (['algorithms', 0, 'lr'], 0.1). Values are YAML: 10, x10, [1, 2], null."""
    if "=" not in text:
        raise ScenarioError("--set", [f"{text!r}: expected KEY=VALUE, e.g. stop.time_budget_s=30"])
    key, raw = text.split("=", 1)
    path: list[str | int] = [int(p) if p.isdigit() else p for p in key.strip().split(".")]
    if not key.strip() or any(p == "" for p in path):
        raise ScenarioError("--set", [f"{text!r}: empty key"])
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ScenarioError("--set", [f"{key}: value {raw!r} is not valid YAML ({exc})"]) from None
    return path, value


def apply_override(data: dict, path: list[str | int], value: Any, source: str = "--set") -> None:
    node: Any = data
    for i, part in enumerate(path[:-1]):
        where = ".".join(map(str, path[: i + 1]))
        if isinstance(node, list):
            if not isinstance(part, int) or part >= len(node):
                raise ScenarioError(source, [f"{where}: no such list item (the list has {len(node)})"])
            if path[:i] == ["clients"] and isinstance(node[part], str):
                node[part] = {"profile": node[part]}  # the `clients: [x1, x10]` shorthand
            node = node[part]
        elif isinstance(node, dict):
            if part not in node or node[part] is None:
                node[part] = {}
            elif not isinstance(node[part], (dict, list)):
                if part == "clients" and isinstance(node[part], int):
                    if problem := too_many_clients(node[part]):
                        raise ScenarioError(source, [problem.line("clients")])
                    node[part] = [{} for _ in range(node[part])]
                else:
                    raise ScenarioError(source, [f"{where}: is a value, not a section"])
            node = node[part]
        else:
            raise ScenarioError(source, [f"{where}: cannot descend into {node!r}"])
    last = path[-1]
    if not isinstance(node, (dict, list)):
        raise ScenarioError(source, [f"{'.'.join(map(str, path[:-1]))}: is a value, not a section"])
    if isinstance(node, list):
        if not isinstance(last, int) or last >= len(node):
            raise ScenarioError(source, [f"{'.'.join(map(str, path))}: no such list item"])
    node[last] = value
    if (other := ONE_OF.get(tuple(path))) is not None and value is not None and isinstance(node, dict):
        node.pop(other, None)  # the budget given last is the one meant: `--set stop.time_budget_s=30` on a file in base steps


# Keys that say one thing two ways: setting one drops the other that the file (or an earlier --set) gave.
ONE_OF = {("stop", "time_budget_s"): "budget_base_steps", ("stop", "budget_base_steps"): "time_budget_s"}
