"""The scenario's `stop` (when an algorithm's run ends) and `eval` (how the global model is tested)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgesync.config.strict import Strict


class StopSpec(Strict):
    time_budget_s: float = Field(60.0, gt=0, description="wall (or virtual) seconds per algorithm")
    target_acc: float | None = Field(0.8, gt=0, le=1, description="accuracy for time-to-accuracy")
    stop_at_target: bool = Field(False, description="end an algorithm once it reaches target_acc")
    max_updates: int | None = Field(None, ge=1, description="global model updates per algorithm")


class EvalSpec(Strict):
    every_s: float = Field(2.0, gt=0, description="evaluate the global model this often")
    test_size: int | None = Field(2000, ge=1, description="test samples per evaluation; null = all")
    batch_size: int = Field(1000, ge=1)
    on: Literal["test", "validation"] = Field("test", description="what the global model is tested on: the "
                                              "test set, or the validation set `tune` carves from the training "
                                              "data (a tuning run; needs `tune`)")
