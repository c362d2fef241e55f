"""Scenario errors: every problem a line `FILE: key.path: problem (got VALUE)`, all of them at once.

`Problem` is what a validator raises for a problem at a key below the one it checks; `ScenarioError`
is what loading a scenario raises; `validation_problems` turns pydantic's errors into those lines,
naming a close key for a misspelt one.
"""
from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from edgesync import algorithms


class Problem(ValueError):
    """A validator's problem at a key below the one it checks (`at`), with the value shown as `got`."""

    def __init__(self, message: str, got: str, at: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.got, self.at = got, at

    def line(self, key: str) -> str:
        return f"{'.'.join(map(str, (key, *self.at)))}: {self} (got {self.got})"


class ScenarioError(ValueError):
    """A scenario that cannot be used; `str()` lists every problem, one per line."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))

    def __reduce__(self):
        # rebuilt from its two arguments: an error raised in a worker process (reproduce --jobs) reaches the
        # parent as itself, not as a broken process pool
        return type(self), (self.source, self.problems)


def _loc(loc: tuple) -> str:
    # Drop the union-member names pydantic inserts for profiles (clients.0.profile.GammaProfile.cv → …cv).
    tags = {"ConstantProfile", "GammaProfile", "constant", "gamma"}
    parts = [str(p) for p in loc if str(p) not in tags]
    return ".".join(parts) or "(top level)"


def _model_at(loc: tuple, data: Any, root: type[BaseModel]) -> type[BaseModel] | None:
    """The model class below `root` that holds the key at `loc` (for suggesting a close field name)."""
    if loc[0] == "algorithms" and len(loc) >= 3:
        try:
            return algorithms.get(data["algorithms"][loc[1]]["name"]).config
        except Exception:  # a broken entry has no model to suggest from
            return None
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model else None
        if field is None:
            return None
        candidates = [field.annotation, *getattr(field.annotation, "__args__", ())]
        model = next((a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return model


def _suggest(loc: tuple, data: Any, root: type[BaseModel]) -> str:
    """'; did you mean X?' for a misspelt key."""
    model = _model_at(loc, data, root)
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields) if model else [], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def validation_problems(err: ValidationError, data: Any, root: type[BaseModel]) -> list[str]:
    """The problem lines of `err`, raised validating `data` as a `root` (the Scenario model)."""
    problems = []
    for e in err.errors():
        if isinstance(problem := e.get("ctx", {}).get("error"), Problem):
            problems.append(problem.line(_loc(e["loc"])))
            continue
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (not part of the scenario schema" + _suggest(e["loc"], data, root) + ")"
        value = e.get("input")
        shown = "" if e["type"] in ("missing", "extra_forbidden") or isinstance(value, (dict, list)) \
            else f" (got {value!r})"
        if e["type"] == "extra_forbidden":
            shown = ""
        problems.append(f"{_loc(e['loc'])}: {msg}{shown}")
    # pydantic reports a failed union once per member; keep each line once.
    return list(dict.fromkeys(problems))
