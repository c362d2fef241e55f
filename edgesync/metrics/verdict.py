"""One verdict rule for every figure the project decides over seeds: `reproduce`'s claims, the cross-check,
SHAT's sharding experiment (EQ3), parameter server vs all-reduce, and the benchmarks that judge a target.

- At least MIN_SEEDS values: fewer give an interval too wide to decide anything honestly, or none at all,
  and the verdict is "inconclusive", saying so.
- The 95% Student-t interval of the mean (metrics/seeds.py) decides, never the mean alone.
- Against a threshold (`against`): "holds" when the whole interval is on the claim's side, "does not hold"
  when it is wholly on the other side, else "inconclusive".
- Two things compared (`compare`, a ratio against 1 or a difference against 0): one is lower or higher when
  the whole interval is below or above the reference; "no difference" only when the whole interval lies
  inside a stated equivalence margin around it; an interval that straddles the reference but reaches past
  the margin is "inconclusive", never "no difference".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from edgesync.metrics.seeds import Interval, interval

MIN_SEEDS = 3
HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "inconclusive"


@dataclass(frozen=True)
class Verdict:
    word: str
    interval: Interval
    why: str = ""  # what made it inconclusive, when the interval alone did not

    def __str__(self) -> str:
        return f"{self.word} ({self.why})" if self.why else self.word


def _checked(values: list) -> tuple[Interval, str]:
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    iv = interval(finite)
    if len(finite) < len(values):
        return iv, f"{len(values) - len(finite)} of {len(values)} values missing or not finite"
    if iv.n < MIN_SEEDS:
        return iv, f"{iv.n} seed{'s' if iv.n != 1 else ''}, at least {MIN_SEEDS} needed"
    return iv, ""


def against(values, direction: str, threshold: float) -> Verdict:
    """The three-way verdict of 'the mean is `direction` (≥ or ≤) `threshold`' over `values`, one per seed."""
    if direction not in ("≥", "≤"):
        raise ValueError(f"direction must be ≥ or ≤, not {direction!r}")
    values = list(values)
    iv, why = _checked(values)
    if why:
        return Verdict(UNDECIDED, iv, why)
    low_side, high_side = (iv.low >= threshold, iv.high < threshold) if direction == "≥" else \
        (iv.high <= threshold, iv.low > threshold)
    return Verdict(HOLDS if low_side else FAILS if high_side else UNDECIDED, iv)


def within(iv: Interval, reference: float, margin: float) -> bool:
    """Whether the whole interval lies inside [reference − margin, reference + margin]."""
    return iv.low is not None and reference - margin <= iv.low and iv.high <= reference + margin


def compare(values, reference: float, margin: float, lower: str, higher: str) -> Verdict:
    """Which side of `reference` the mean of `values` is on: `lower`, `higher`, "no difference (within
    ±margin)" or "inconclusive"."""
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be > 0, not {margin}")
    values = list(values)
    iv, why = _checked(values)
    if why:
        return Verdict(UNDECIDED, iv, why)
    if iv.high < reference:
        return Verdict(lower, iv)
    if iv.low > reference:
        return Verdict(higher, iv)
    if within(iv, reference, margin):
        return Verdict(f"no difference (within ±{margin:g})", iv)
    return Verdict(UNDECIDED, iv, f"the interval straddles {reference:g} and reaches past ±{margin:g}")


def shown(v: Verdict, digits: int = 2, unit: str = "") -> str:
    """'1.23 [1.10, 1.36]: holds' — the mean, its interval and the verdict, as a table cell."""
    iv = v.interval
    if iv.mean is None:
        return f"n/a: {v}"
    text = f"{iv.mean:.{digits}f}{unit}"
    if iv.low is not None:
        text += f" [{iv.low:.{digits}f}, {iv.high:.{digits}f}]"
    return f"{text}: {v}"
