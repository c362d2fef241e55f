"""The base of every scenario section: a key the schema does not know is an error, not ignored."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
