"""The scenario's `output` section: where the run folder goes and what it also writes."""
from __future__ import annotations

from pydantic import Field

from edgesync.config.strict import Strict


class OutputSpec(Strict):
    dir: str = Field("runs", description="parent folder of run folders")
    name: str | None = Field(None, description="run folder name; default: scenario name + time")
    tensorboard: bool = Field(False, description="also write TensorBoard event files into RUN_DIR/tensorboard as "
                              "the run goes (one run per entry label); view: tensorboard --logdir RUN_DIR/tensorboard")
    mlflow: bool | str = Field(False, description="when the run ends, log it to MLflow (a parent run, a child per "
                               "entry, seed and sweep point; edgesync export mlflow): true for MLflow's default "
                               "($MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here), or a tracking URI (a folder, "
                               "sqlite:///FILE, http://HOST:PORT)")
