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

A kind of profile is one subclass of `DeviceProfile`: the runtimes (the simulator's step hook and
look-ahead, the live throttle, Flower nodes) call its methods, through `FactorSampler`, and never ask
which kind it is. A kind may come from outside the package (edgesync/extensions.py): a mapping whose `kind`
is a `package.module:Class` reference or an entry point of the group `edgesync.profiles` (`outside_kind`).
"""
from __future__ import annotations

import copy
import difflib
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from edgesync.emulation.traces import Steps, given_rows
from edgesync.extensions import ExtensionError, ExtensionInfo, check_api, describe, entry_points, find_outside


class DeviceProfile(BaseModel):
    """What a profile kind is to the runtimes. A subclass sets `kind` (a Literal) and its own keys, and
    says how its factors come: `step_factor` and `mean_factor` at least; the rest have defaults. What a
    client's draws need (its generator, what `machine` drew) is its FactorSampler's, handed in."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # An outside kind's: the edgesync.api version it was written for (another major version is refused).
    api_version: ClassVar[str | None] = None

    @property
    def label(self) -> str:
        """How tables and logs name it (x10, gamma-hetero(…), trace(…))."""
        return str(getattr(self, "kind", type(self).__name__))

    @property
    def slows_steps(self) -> bool:
        """Whether any step lasts longer than undisturbed (a live client then paces its steps)."""
        return True

    @property
    def varies_in_time(self) -> bool:
        """Whether a step's factor depends on when it starts (its steps are then kept on a timeline)."""
        return False

    def machine(self, seed: int, rng: np.random.Generator) -> Any:
        """What one client draws once, before its first step (a gamma machine's mean); None here."""
        return None

    def step_factor(self, t: float, rng: np.random.Generator, machine: Any) -> float:
        """The factor of a step that starts `t` seconds into the algorithm."""
        raise NotImplementedError(f"profile {self.label} does not say its step factors")

    def mean_factor(self, machine: Any) -> float:
        """The expected factor of one client's steps (what plans such as the shared base step use)."""
        raise NotImplementedError(f"profile {self.label} does not say its mean factor")

    def least_next_factor(self, sampler: FactorSampler) -> float:
        """A lower bound on the client's next step's factor (the simulator's look-ahead on Ray workers):
        unless a kind knows better, the next draw itself, read from a copy of the sampler."""
        return copy.deepcopy(sampler).next()


class ConstantProfile(DeviceProfile):
    """Every step takes `factor` times the undisturbed step time."""

    kind: Literal["constant"] = "constant"
    factor: float = Field(1.0, ge=1.0, description="slowdown ×k (1 = undisturbed)")

    @property
    def label(self) -> str:
        return f"x{self.factor:g}"

    @property
    def slows_steps(self) -> bool:
        return self.factor != 1.0

    def step_factor(self, t: float, rng: np.random.Generator, machine: Any) -> float:
        return self.factor

    def mean_factor(self, machine: Any) -> float:
        return self.factor

    def least_next_factor(self, sampler: FactorSampler) -> float:
        return self.factor


class GammaProfile(DeviceProfile):
    """DANA's gamma-distributed execution times (App. B.3)."""

    kind: Literal["gamma"] = "gamma"
    machines: Literal["heterogeneous", "homogeneous"] = "heterogeneous"
    mean: float = Field(1.0, ge=1.0, description="μ, the mean slowdown factor (1 = as fast as the hardware)")
    v_task: float = Field(0.1, gt=0, description="coefficient of variation of one task (step)")
    v_mach: float = Field(0.6, gt=0, description="coefficient of variation between machines")

    @property
    def label(self) -> str:
        tag = "hetero" if self.machines == "heterogeneous" else "homo"
        return f"gamma-{tag}(μ={self.mean:g},Vm={self.v_mach:g})"

    def machine(self, seed: int, rng: np.random.Generator) -> tuple[float, float]:
        """(this machine's mean factor, the shape of its steps' gamma)."""
        a_task, a_mach = 1.0 / self.v_task ** 2, 1.0 / self.v_mach ** 2
        if self.machines == "heterogeneous":
            return rng.gamma(a_mach, self.mean / a_mach), a_task
        # one draw shared by the whole cluster: seeded by the scenario seed alone
        return np.random.default_rng([seed, 0x5EED]).gamma(a_task, self.mean / a_task), a_mach

    def step_factor(self, t: float, rng: np.random.Generator, machine: tuple[float, float]) -> float:
        machine_mean, shape = machine
        return float(rng.gamma(shape, machine_mean / shape))

    def mean_factor(self, machine: tuple[float, float]) -> float:
        return float(machine[0])


class TraceProfile(DeviceProfile):
    """A device whose speed changes during the run: `steps: [[t, factor], …]` (emulation/traces.py), ×1
    before the first row; e.g. a phone that throttles after a minute: [[0, 1], [60, 4]]. `file` names a
    CSV or JSON file of such rows, read once when the scenario loads (the run folder keeps them inline)."""

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

    @property
    def varies_in_time(self) -> bool:
        return True

    def step_factor(self, t: float, rng: np.random.Generator, machine: Any) -> float:
        return self.factor_at(t)

    def mean_factor(self, machine: Any) -> float:
        """Its smallest factor: plans made with it (the shared base step) hold at its most demanding moment."""
        return min([1.0 if self.steps[0][0] > 0 else math.inf] + [f for _, f in self.steps])

    def least_next_factor(self, sampler: FactorSampler) -> float:
        return self.mean_factor(None)  # when the next step starts is not known yet


# The kinds a scenario may name (its schema's union); the runtimes take any DeviceProfile.
Profile = ConstantProfile | GammaProfile | TraceProfile
KINDS: dict[str, type[DeviceProfile]] = {c.model_fields["kind"].default: c
                                         for c in (ConstantProfile, GammaProfile, TraceProfile)}

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


def parse_profile(value: str | dict | DeviceProfile, context: dict | None = None) -> DeviceProfile:
    """'x10', '×2.5', 'gamma-hetero', or a mapping {kind: constant|gamma|trace|an outside kind, ...}.

    A bad profile is a ValueError whose one-line message names the value and the problem."""
    if isinstance(value, DeviceProfile):
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
        model = (KINDS.get(kind) or outside_kind(kind)) if isinstance(kind, str) else None
        if model is None:
            names = [repr(k) for k in [*KINDS, *sorted(entry_points("profile"))]]
            raise ValueError(f"unknown profile kind {kind!r}: expected {', '.join(names[:-1])} or {names[-1]}, "
                             "or a 'package.module:Class' reference to a DeviceProfile subclass")
        try:
            return model.model_validate(value, context=context)
        except ValidationError as exc:  # one line, not pydantic's block
            problem = _problems(exc, model)
            raise ProfileError(f"profile {value!r}: {problem}", problem) from None
    raise ValueError(f"a profile is a name like 'x10' or a mapping, not {type(value).__name__}")


def _problems(exc: ValidationError, model: type[DeviceProfile]) -> str:
    out = []
    for e in exc.errors():
        where = ".".join(str(part) for part in e["loc"])
        if e["type"] == "greater_than_equal" and e.get("ctx", {}).get("ge") == 1.0:
            out.append(f"{where} {e.get('input')!r} {BELOW_ONE}")
        elif e["type"] == "extra_forbidden":
            out.append(f"{where}: {_unknown_key(where, model)}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            out.append(f"{where}: {msg}" if where else msg)
    return "; ".join(out)


def _unknown_key(key: str, model: type[DeviceProfile]) -> str:
    """'unknown key (did you mean 'v_task'?); kind gamma takes machines, mean, v_task, v_mach'."""
    allowed = [name for name in model.model_fields if name != "kind"]
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    kind = model.model_fields["kind"].default
    return f"unknown key{hint}; kind {kind} takes {', '.join(allowed) or 'no other key'}"


# Outside kinds: a DeviceProfile subclass named by a reference or an entry point, checked once per process and
# known from then on under the name the scenario used (`outside_kind`).
_OUTSIDE: dict[str, tuple[type[DeviceProfile], ExtensionInfo]] = {}
_KIND_OF = "KindOf_"  # + the name in hex: the class an outside kind is known by in this module


def outside_kind(name: str) -> type[DeviceProfile] | None:
    """The profile class an outside kind `name` stands for (a reference, or an installed entry point of
    edgesync.profiles), loaded once; None when it is neither. ExtensionError when it cannot be used."""
    if name in _OUTSIDE:
        return _OUTSIDE[name][0]
    if (outside := find_outside(name, "profile", "profile kind")) is None:
        return None
    found, module = outside
    _OUTSIDE[name] = (_renamed(_checked_kind(name, found), name), describe(name, module))
    return _OUTSIDE[name][0]


def outside_info(name: str) -> ExtensionInfo | None:
    """What identifies the code behind an outside kind already resolved in this process; None for a built-in."""
    return _OUTSIDE[name][1] if name in _OUTSIDE else None


def _checked_kind(name: str, found: object) -> type[DeviceProfile]:
    what = f"profile kind {name!r}"
    if not (isinstance(found, type) and issubclass(found, DeviceProfile)):
        shown = f"the class {found.__name__}" if isinstance(found, type) else f"an instance of {type(found).__name__}"
        raise ExtensionError(f"{what}: names {shown}, not a DeviceProfile subclass (edgesync.api)")
    check_api(found.api_version, what, on="its class, as a ClassVar[str]")
    return found


def _renamed(cls: type[DeviceProfile], name: str) -> type[DeviceProfile]:
    """`cls` whose `kind` is `name`: dumped for a live client or a Flower node, the profile says the name that
    process resolves the same way. Tables name it by the class's own kind (or class name) unless the class says
    its own label. The subclass lives in this module under a name that spells `name`, so that a profile pickled
    to another process (a simulator worker, a Ray task) finds it there (`__getattr__` below resolves it)."""
    own = cls.model_fields["kind"].default if "kind" in cls.model_fields else cls.__name__
    class_name = _KIND_OF + name.encode().hex()
    namespace: dict[str, Any] = {"__annotations__": {"kind": Literal[name]}, "kind": name, "__module__": __name__,
                                 "__qualname__": class_name, "__doc__": cls.__doc__}
    if cls.label is DeviceProfile.label:
        namespace["label"] = property(lambda self: str(own))
    return type(class_name, (cls,), namespace)


def __getattr__(attr: str):
    """An outside kind's class by its name here (pickle's lookup in a process that has not resolved it yet)."""
    if attr.startswith(_KIND_OF):
        kind = outside_kind(bytes.fromhex(attr[len(_KIND_OF):]).decode())
        if kind is not None:
            return kind
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


@dataclass
class FactorSampler:
    """Draws one client's per-step slowdown factors, reproducibly from (seed, rank): the state its
    profile's draws need, whatever the kind."""

    profile: DeviceProfile
    seed: int
    rank: int

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng([self.seed, self.rank, 0x5EED])
        self._machine = self.profile.machine(self.seed, self._rng)

    @property
    def mean_factor(self) -> float:
        """The expected factor of this client's steps (a trace's: its smallest)."""
        return self.profile.mean_factor(self._machine)

    def next(self, t: float = 0.0) -> float:
        """The factor of a step that starts `t` seconds into the algorithm (only traces look at it)."""
        return self.profile.step_factor(t, self._rng, self._machine)

    def least_next(self) -> float:
        """A lower bound on the next step's factor, drawing nothing."""
        return self.profile.least_next_factor(self)

    def skip(self, steps: int) -> None:
        """Go on past `steps` draws (a resumed client's sequence picks up where it was)."""
        for _ in range(steps):
            self.next()
