"""The scenario's `stop` (when an algorithm's run ends) and `eval` (how the global model is tested)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from edgesync.config.strict import Strict


class StopSpec(Strict):
    time_budget_s: float | None = Field(60.0, gt=0, description="wall (or virtual) seconds per algorithm; "
                                        "null with budget_base_steps")
    budget_base_steps: int | None = Field(None, ge=1, description="the time budget in base steps instead of "
                                          "seconds: the ×1 device's step (live, the shared base step the run "
                                          "measured), so that a slower machine gets a proportionally longer "
                                          "budget; replaces time_budget_s")
    target_acc: float | None = Field(0.8, gt=0, le=1, description="accuracy for time-to-accuracy")
    stop_at_target: bool = Field(False, description="end an algorithm once it reaches target_acc")
    max_updates: int | None = Field(None, ge=1, description="global model updates per algorithm")
    collapse_evals: int | None = Field(3, ge=1, description="end an algorithm as diverged once its model, having "
                                       "learned (best accuracy at least twice chance), is back at chance (at most "
                                       "1.2 × 1/classes) for this many evaluations in a row, with a finite loss "
                                       "(a non-finite one ends it at once); null: never")

    @model_validator(mode="before")
    @classmethod
    def _one_budget(cls, data):
        if not isinstance(data, dict) or data.get("budget_base_steps") is None:
            return data
        if data.get("time_budget_s") is not None:
            raise ValueError(f"time_budget_s ({data['time_budget_s']}) and budget_base_steps "
                             f"({data['budget_base_steps']}) both set the time budget: keep one (--set "
                             "stop.budget_base_steps=null to give seconds)")
        return {**data, "time_budget_s": None}

    @model_validator(mode="after")
    def _some_budget(self) -> "StopSpec":
        if self.time_budget_s is None and self.budget_base_steps is None:
            raise ValueError("time_budget_s is null and budget_base_steps is not set: give one of them")
        return self

    def for_base_step(self, base_step_s: float) -> "StopSpec":
        """These rules with the budget in seconds, at the run's base step (itself, if it gives seconds)."""
        if self.budget_base_steps is None:
            return self
        return self.model_copy(update={"time_budget_s": round(self.budget_base_steps * base_step_s, 3)})


class EvalSpec(Strict):
    every_s: float = Field(2.0, gt=0, description="evaluate the global model this often")
    test_size: int | None = Field(2000, ge=1, description="test samples per evaluation; null = all")
    batch_size: int = Field(1000, ge=1)
    on: Literal["test", "validation"] = Field("test", description="what the global model is tested on: the "
                                              "test set, or the validation set `tune` carves from the training "
                                              "data (a tuning run; needs `tune`)")
