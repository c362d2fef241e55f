"""docs/scenarios.md and docs/algorithms.md stay true to the scenario schema.

- every field of every scenario model (Scenario, its nested sections, the profile models, the keys all
  algorithms share) has a row in one of scenarios.md's reference tables, and every key an algorithm adds
  has a row in algorithms.md: adding a field without documenting it fails here;
- every YAML example in the doc that is a whole scenario (its first key is `name:`) validates.
"""
from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from edgesync import algorithms
from edgesync.emulation.profiles import ConstantProfile, GammaProfile
from edgesync.config import Scenario, load_scenario

DOC = Path(__file__).resolve().parents[1] / "docs" / "scenarios.md"
ALGORITHMS_DOC = DOC.with_name("algorithms.md")
FENCE = re.compile(r"^```ya?ml[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models inside a field's annotation (through list[...], X | None, Annotated, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _schema_models() -> list[type[BaseModel]]:
    """Scenario and every model reachable from its fields, plus the configs and profiles named outright."""
    roots = [Scenario, *(spec.config for spec in algorithms.specs()), ConstantProfile, GammaProfile]
    seen: list[type[BaseModel]] = []
    todo = list(roots)
    while todo:
        model = todo.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            todo += _models_in(field.annotation)
    return seen


def _fields() -> list[tuple[str, str]]:
    return [(model.__name__, name) for model in _schema_models() for name in model.model_fields]


def _doc_for(model_name: str, field: str) -> Path:
    """Keys an algorithm adds to the common ones are documented with the algorithm."""
    config = next((s.config for s in algorithms.specs() if s.config.__name__ == model_name), None)
    if config is not None and field not in algorithms.AlgorithmConfig.model_fields:
        return ALGORITHMS_DOC
    return DOC


def _yaml_blocks() -> list[str]:
    return FENCE.findall(DOC.read_text(encoding="utf-8"))


def _scenario_blocks() -> list[str]:
    """YAML blocks whose first line that is not blank or a comment starts with `name:`."""
    out = []
    for block in _yaml_blocks():
        first = next((line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")
        if first.startswith("name:"):
            out.append(block)
    return out


def test_the_walk_reaches_every_section():
    names = {m.__name__ for m in _schema_models()}
    # Nested sections are found through the annotations, not listed by hand.
    assert {"DatasetSpec", "ModelSpec", "PartitionSpec", "ClientSpec", "StopSpec", "EvalSpec", "OutputSpec",
            "ConstantProfile", "GammaProfile"} <= names
    assert {spec.config.__name__ for spec in algorithms.specs()} <= names


@pytest.mark.parametrize("model,field", _fields(), ids=lambda v: v)
def test_every_field_is_documented(model, field):
    # A reference-table row whose first cell is the key in backticks (bare or dotted: `stop.max_updates`),
    # or, for per-algorithm keys, the key in the row's second cell.
    row = re.compile(rf"^\|\s*(?:`[\w-]+`\s*\|\s*)?`(?:[\w.]+\.)?{re.escape(field)}`\s*\|", re.MULTILINE)
    doc = _doc_for(model, field)
    assert row.search(doc.read_text(encoding="utf-8")), (
        f"{model}.{field} has no row in the reference tables of {doc.name}: document the key there")


def test_the_doc_has_whole_scenario_examples():
    assert len(_scenario_blocks()) >= 3, "expected several complete scenarios (YAML blocks starting with name:)"


@pytest.mark.parametrize("index", range(len(_scenario_blocks())))
def test_every_scenario_example_validates(index):
    block = _scenario_blocks()[index]
    data = yaml.safe_load(block)
    load_scenario(data, source=f"{DOC.name}, YAML example {index + 1} (name: {data.get('name')})")
