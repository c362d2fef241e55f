"""The scenario's `algorithms:` entries: one registered algorithm's config each (edgesync/algorithms/)."""
from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from edgesync import algorithms

# Every registered algorithm's config, told apart by its `name` (pydantic's discriminated union).
AlgorithmEntry = Annotated[Union[tuple(spec.config for spec in algorithms.specs())], Field(discriminator="name")]
