"""The scenario's `algorithms:` entries: one algorithm's config each, chosen by the entry's `name` (edgesync/algorithms/).

The name picks the config model when the entry is validated, not from a union fixed at import: a built-in
name, an installed entry point or a `package.module:SPEC` reference (algorithms/outside.py) all validate
the same way, with the config's own errors at `algorithms.N.key`.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import SerializeAsAny, ValidatorFunctionWrapHandler, WrapValidator

from edgesync import algorithms
from edgesync.extensions import ExtensionError


def _by_name(value: Any, handler: ValidatorFunctionWrapHandler) -> algorithms.AlgorithmConfig:
    if isinstance(value, algorithms.AlgorithmConfig):
        return value
    if not isinstance(value, dict):
        raise ValueError("an algorithm entry is a mapping with a `name:`")
    name = value.get("name")
    if not isinstance(name, str):
        raise ValueError("each algorithm entry needs a `name:`")
    try:
        spec = algorithms.get(name)
    except (algorithms.UnknownAlgorithmError, ExtensionError) as exc:
        raise ValueError(str(exc)) from None
    return spec.config.model_validate(value)


# SerializeAsAny: an entry dumps as its own config (every key of its algorithm), not as the shared base's keys.
AlgorithmEntry = Annotated[SerializeAsAny[algorithms.AlgorithmConfig], WrapValidator(_by_name)]
