"""Device profiles: how much slower than its undisturbed self a client's step runs.

A profile yields a slowdown factor per step. Constant ×k profiles model the stragglers of the
papers (SHAT's HE0/HE1/HE2 are one ×2/×10/×100 worker). The gamma model is DANA's App. B.3:
α_task = 1/V_task², α_mach = 1/V_mach²;
- heterogeneous machines: per client p ~ Γ(α_mach, μ/α_mach), each step ~ Γ(α_task, p/α_task);
- homogeneous machines:   q ~ Γ(α_task, μ/α_task) once for the cluster, each step ~ Γ(α_mach, q/α_mach).
μ is the mean factor (1 = as fast as the hardware). Samples are factors, not seconds: a runtime
multiplies them by the client's reference step time.

One rule for factors below 1: a profile cannot make a device faster than it is, so a constant factor
and a gamma profile's mean must be at least 1 (x0.5 is refused, everywhere: scenarios, `--profile`,
Flower nodes). Only single gamma steps can draw below 1; the live runtime runs them at full speed.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from edgesync.emulation.traces import Steps, given_rows


class ConstantProfile(BaseModel):
    """Every step takes `factor` times the undisturbed step time."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["constant"] = "constant"
    factor: float = Field(1.0, ge=1.0, description="slowdown ×k (1 = undisturbed)")

    @property
    def label(self) -> str:
        return f"x{self.factor:g}"


class GammaProfile(BaseModel):
    """DANA's gamma-distributed execution times (App. B.3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["gamma"] = "gamma"
    machines: Literal["heterogeneous", "homogeneous"] = "heterogeneous"
    mean: float = Field(1.0, ge=1.0, description="μ, the mean slowdown factor (1 = as fast as the hardware)")
    v_task: float = Field(0.1, gt=0, description="coefficient of variation of one task (step)")
    v_mach: float = Field(0.6, gt=0, description="coefficient of variation between machines")

    @property
    def label(self) -> str:
        tag = "hetero" if self.machines == "heterogeneous" else "homo"
        return f"gamma-{tag}(μ={self.mean:g},Vm={self.v_mach:g})"


class TraceProfile(BaseModel):
    """A device whose speed changes during the run: `steps: [[t, factor], …]` (emulation/traces.py), ×1
    before the first row; e.g. a phone that throttles after a minute: [[0, 1], [60, 4]]. `file` names a
    CSV or JSON file of such rows, read once when the scenario loads (the run folder keeps them inline)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["trace"] = "trace"
    steps: tuple[tuple[float, float], ...] = Field((), description="[[t seconds, factor ×k], …]")
    file: str | None = Field(None, description="CSV/JSON file of [t, factor] rows (relative to the scenario)")

    @model_validator(mode="before")
    @classmethod
    def _rows(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        rows = given_rows(data, "steps", "file", ("t", "factor"), "profile trace", (info.context or {}).get("base_dir"),
                          required="a trace profile needs `steps: [[t, factor], …]` or `file:`")
        for t, factor in rows:
            if factor < 1:
                raise ValueError(f"factor {factor:g} at {t:g} s {BELOW_ONE}")
        data["steps"] = rows
        return data

    @property
    def label(self) -> str:
        factors = [f for _, f in self.steps]
        if self.steps[0][0] > 0:
            factors.insert(0, 1.0)
        shown = "→".join(f"x{f:g}" for f in factors[:4]) + ("→…" if len(factors) > 4 else "")
        return f"trace({shown})"

    def factor_at(self, t: float) -> float:
        value = Steps(self.steps).at(t)
        return 1.0 if value is None else value[0]


Profile = ConstantProfile | GammaProfile | TraceProfile

_XK = re.compile(r"^[x×](\d+(\.\d+)?)$")

# The named profiles `edgesync profiles` lists and scenarios may use as plain strings.
NAMED: dict[str, Profile] = {
    "x1": ConstantProfile(factor=1),
    "x2": ConstantProfile(factor=2),
    "x10": ConstantProfile(factor=10),
    "x100": ConstantProfile(factor=100),
    "gamma-homo": GammaProfile(machines="homogeneous", v_mach=0.1),
    "gamma-hetero": GammaProfile(machines="heterogeneous", v_mach=0.6),
}

DESCRIPTIONS = {
    "x1": "undisturbed: as fast as the hardware",
    "x2": "one step takes 2x its undisturbed time (SHAT's HE0 straggler)",
    "x10": "one step takes 10x its undisturbed time (SHAT's HE1 straggler)",
    "x100": "one step takes 100x its undisturbed time (SHAT's HE2 straggler)",
    "gamma-homo": "DANA App. B.3 homogeneous cluster: V_task 0.1, V_mach 0.1",
    "gamma-hetero": "DANA App. B.3 heterogeneous cluster: V_task 0.1, V_mach 0.6",
}


# What every refusal of a factor below 1 says (scenarios, `--profile`, `edgesync profiles`).
BELOW_ONE = ("must be greater than or equal to 1: x1 runs as fast as the hardware, x2 takes twice as long, "
             "and nothing emulates a faster device")


class ProfileError(ValueError):
    """A bad profile: the message names the value; `problem` says what is wrong without it (for an
    option's message: `--profile x0: the factor 0 must be …`)."""

    def __init__(self, message: str, problem: str):
        super().__init__(message)
        self.problem = problem


def parse_profile(value: str | dict | Profile, context: dict | None = None) -> Profile:
    """'x10', '×2.5', 'gamma-hetero', or a mapping {kind: constant|gamma, ...}.

    A bad profile is a ValueError whose one-line message names the value and the problem."""
    if isinstance(value, (ConstantProfile, GammaProfile, TraceProfile)):
        return value
    if isinstance(value, str):
        name = value.strip().lower()
        if name in NAMED:
            return NAMED[name]
        m = _XK.match(name)
        if m:
            factor = float(m.group(1))
            if factor < 1:
                problem = f"the factor {factor:g} {BELOW_ONE}"
                raise ProfileError(f"profile {value!r}: {problem}", problem)
            return ConstantProfile(factor=factor)
        expected = (f"expected xK with K >= 1 (e.g. x1, x2, x10, x100, x2.5), "
                    f"{', '.join(n for n in NAMED if not n.startswith('x'))}, or a mapping with kind")
        raise ProfileError(f"unknown profile {value!r}: {expected}", f"unknown profile: {expected}")
    if isinstance(value, dict):
        kind = value.get("kind", "constant")
        model = {"constant": ConstantProfile, "gamma": GammaProfile, "trace": TraceProfile}.get(kind)
        if model is None:
            raise ValueError(f"unknown profile kind {kind!r}: expected 'constant', 'gamma' or 'trace'")
        try:
            return model.model_validate(value, context=context)
        except ValidationError as exc:  # one line, not pydantic's block
            problem = _problems(exc)
            raise ProfileError(f"profile {value!r}: {problem}", problem) from None
    raise ValueError(f"a profile is a name like 'x10' or a mapping, not {type(value).__name__}")


def _problems(exc: ValidationError) -> str:
    out = []
    for e in exc.errors():
        where = ".".join(str(part) for part in e["loc"])
        if e["type"] == "greater_than_equal" and e.get("ctx", {}).get("ge") == 1.0:
            out.append(f"{where} {e.get('input')!r} {BELOW_ONE}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            out.append(f"{where}: {msg}" if where else msg)
    return "; ".join(out)


@dataclass
class FactorSampler:
    """Draws one client's per-step slowdown factors, reproducibly from (seed, rank)."""

    profile: Profile
    seed: int
    rank: int

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng([self.seed, self.rank, 0x5EED])
        p = self.profile
        if isinstance(p, GammaProfile):
            a_task, a_mach = 1.0 / p.v_task ** 2, 1.0 / p.v_mach ** 2
            if p.machines == "heterogeneous":
                self._machine_mean = self._rng.gamma(a_mach, p.mean / a_mach)
                self._shape = a_task
            else:  # one draw shared by the whole cluster: seeded by the scenario seed alone
                self._machine_mean = np.random.default_rng([self.seed, 0x5EED]).gamma(a_task, p.mean / a_task)
                self._shape = a_mach

    @property
    def mean_factor(self) -> float:
        """The expected factor of this client's steps. A trace's is its smallest factor: plans made with
        it (the shared base step) hold at the trace's most demanding moment."""
        if isinstance(self.profile, GammaProfile):
            return float(self._machine_mean)
        if isinstance(self.profile, TraceProfile):
            return min([1.0 if self.profile.steps[0][0] > 0 else math.inf] + [f for _, f in self.profile.steps])
        return self.profile.factor

    def next(self, t: float = 0.0) -> float:
        """The factor of a step that starts `t` seconds into the algorithm (only traces look at it)."""
        if isinstance(self.profile, ConstantProfile):
            return self.profile.factor
        if isinstance(self.profile, TraceProfile):
            return self.profile.factor_at(t)
        return float(self._rng.gamma(self._shape, self._machine_mean / self._shape))
