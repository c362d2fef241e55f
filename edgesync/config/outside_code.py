"""What outside code a scenario runs (edgesync/extensions.py): each algorithm and model it names from outside the
package, with the package, version and code hash behind it — what a run folder records (extensions.json)."""
from __future__ import annotations

from typing import Any

from edgesync import algorithms
from edgesync.algorithms import outside
from edgesync.config.scenario import Scenario
from edgesync.extensions import describe, entry_points, is_reference
from edgesync.data.datasets import DATASET_NAMES
from edgesync.models import MODEL_NAMES


def outside_code(scenario: Scenario) -> list[dict[str, Any]]:
    """One record per outside algorithm, model or dataset the scenario names: {kind, name, module, distribution,
    version, code_hash}; empty for a scenario of built-in names only."""
    found = []
    for entry in scenario.algorithms:
        if entry.name not in algorithms.names():
            algorithms.get(entry.name)  # resolved already when the scenario loaded; this only reads the cache
            found.append({"kind": "algorithm", **outside.info(entry.name).as_dict()})
    for kind, name, built_in in (("model", scenario.model.name, MODEL_NAMES),
                                 ("dataset", scenario.dataset.name, DATASET_NAMES)):
        if name not in built_in:
            module = name.split(":")[0] if is_reference(name) else entry_points(kind)[name].module
            found.append({"kind": kind, **describe(name, module).as_dict()})
    return found
