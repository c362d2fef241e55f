"""The scenario's `tune` section: equal tuning's grid, metric, validation set and stop rules."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from edgesync.config.strict import Strict

DEFAULT_VALIDATION_FRACTION = 0.1  # of the training samples, held out when a `tune` block gives no size
# The tuning runs' seed when `tune.seed` is left out: one no evaluation uses by default, so that no seed both
# chooses the values and judges them (a scenario that evaluates on it must name another).
DEFAULT_TUNING_SEED = 100


class TuneStopSpec(Strict):
    """The tuning runs' stop rules; a key left out (null) keeps the scenario's `stop` value."""

    time_budget_s: float | None = Field(None, gt=0, description="tuning runs: seconds per entry")
    max_updates: int | None = Field(None, ge=1, description="tuning runs: global model updates per entry")
    stop_at_target: bool | None = Field(None, description="tuning runs: end an entry once it reaches "
                                        "stop.target_acc on the validation set")


class TuneSpec(Strict):
    """Equal tuning (edgesync/runtime/tuning.py): every entry tried at the same grid, chosen on validation data."""

    grid: dict[str, list[Any]] = Field(description="algorithm config key → values; each entry is "
                                       "tried at every combination of the keys its config has")
    metric: Literal["final_acc", "best_acc", "time_to_target"] = Field(
        "final_acc", description="what chooses a point, on the validation set: the final or the best accuracy "
        "(higher wins), or the time to stop.target_acc (shorter wins)")
    validation_fraction: float | None = Field(None, gt=0, lt=1, description="fraction of the training samples "
                                              "held out for validation (stratified by class); null: "
                                              f"{DEFAULT_VALIDATION_FRACTION} unless validation_size is set")
    validation_size: int | None = Field(None, ge=1, description="held-out samples as a count, instead of "
                                        "validation_fraction")
    seed: int | None = Field(None, ge=0, description=f"the tuning runs' seed; null = {DEFAULT_TUNING_SEED}. It may "
                             "not be an evaluation seed (`seed`, or one of `seeds`): no seed both chooses and judges")

    @property
    def tuning_seed(self) -> int:
        return DEFAULT_TUNING_SEED if self.seed is None else self.seed
    extend: int = Field(0, ge=0, le=5, description="times a numeric grid key whose chosen value is the grid's "
                        "least or greatest gets one more value past that edge (one geometric step) and is tuned "
                        "again; an edge still chosen after that is reported")
    stop: TuneStopSpec = Field(TuneStopSpec(), description="the tuning runs' stop rules over the scenario's")

    @model_validator(mode="after")
    def _one_size(self) -> "TuneSpec":
        if self.validation_size is not None and self.validation_fraction is not None:
            raise ValueError(f"validation_size ({self.validation_size}) and validation_fraction "
                             f"({self.validation_fraction:g}) both size the validation set: keep one")
        return self
