"""Seeds that do not give a plain figure are counted, never dropped: a time to target that was not reached is
censored, a run that diverged is named, and a verdict stands only if these seeds cannot turn it.

- **Censored times.** A run that never reached the target was watched for `duration_s` (its budget, or
  less if it stopped early): its time to target is at least that. A claim on baseline time ÷ method time
  then gets a bound for that seed instead of no figure. The baseline censored: the ratio is *at least* the
  bound, so the bound counts against the method. The method censored: the ratio is *at most* the bound,
  which flatters the method. Neither reached: no figure.
- **The verdict with them counted against the method.** "holds" stands only if no seed's figure flatters
  the method (a censored method time) and every seed gave a figure; "does not hold" stands only if no
  seed's figure understates the method (a censored baseline time) and every seed gave a figure. Otherwise
  the verdict is "inconclusive", and the table says why.
- **Two entries compared** (`guarded_comparison`, reproduce/baselines.py): the same, for metrics/verdict.py's
  `compare` words: the entry's side ("faster") stands only if no seed's figure flatters it, the other side
  ("slower") only if none understates it, "no difference" only if every seed gave a plain figure.
- **Divergence.** The seeds in which an entry the claim reads diverged are counted and named beside the
  figure ("diverged in 1/3 seeds"); the claims themselves count a diverged run's accuracy as chance. An entry
  diverged when its run says so (a non-finite loss or update), when its final accuracy is back at chance, or
  when its mean gap is not finite or past GAP_DIVERGED.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# A mean gap (RMS distance between the parameters a gradient was computed on and those it is applied to, per
# parameter) past this is a run that came apart, not staleness: trained CNNs' parameters are themselves of RMS
# ≈ 0.05–0.2, and the healthy runs' gaps are 1e-5–1e-2 (docs/results.md, DANA).
GAP_DIVERGED = 1.0
CHANCE_ACC = 0.1  # ten classes: a final accuracy at or below it learned nothing, or forgot it


@dataclass(frozen=True)
class Censored:
    """A seed's ratio with one time to target censored at its run's duration."""

    value: float
    flatters_method: bool  # the method's own time was censored: the true ratio is at most `value`


def censored_ratio(rows: dict[str, dict], baseline: str, method: str) -> Censored | None:
    """Baseline time ÷ method time for a seed where exactly one of the two reached the target, the other's
    time taken as its run's duration (a lower bound of it); None when neither reached or a figure is missing."""
    base, meth = rows[baseline], rows[method]
    t_base, t_meth = base.get("time_to_target_s"), meth.get("time_to_target_s")
    if (t_base is None) == (t_meth is None):
        return None  # both reached (a plain figure), or neither did (nothing to compare)
    method_censored = t_meth is None
    t_base = base.get("duration_s") if t_base is None else t_base
    t_meth = meth.get("duration_s") if method_censored else t_meth
    if not t_base or not t_meth:
        return None
    return Censored(t_base / t_meth, flatters_method=method_censored)


class WatchedRows(dict):
    """One seed's rows, noting which entries a claim reads (`read`), to count the seeds where one diverged."""

    def __init__(self, rows: dict[str, dict]):
        super().__init__(rows)
        self.read: set[str] = set()

    def __getitem__(self, label: str) -> dict:
        self.read.add(label)
        return super().__getitem__(label)

    def diverged(self) -> list[str]:
        """The entries read so far that diverged (see the module docstring)."""
        return sorted(label for label in self.read if came_apart(dict.get(self, label, {})))


def came_apart(row: dict) -> bool:
    """Whether a summary row is of a run that diverged: it says so, its final accuracy is back at chance, or its
    mean gap is not finite or past GAP_DIVERGED."""
    acc, gap = row.get("final_acc"), row.get("mean_gap")
    return (bool(row.get("diverged")) or (isinstance(acc, (int, float)) and acc <= CHANCE_ACC)
            or (isinstance(gap, (int, float)) and (not math.isfinite(gap) or gap > GAP_DIVERGED)))


def guarded(verdict: str, per_seed: dict, censored: dict) -> tuple[str, str]:
    """`verdict` (from the interval over every seed with a figure, censored ones at their bound), or
    "inconclusive" when the seeds without a plain figure could turn it; the second item says why."""
    missing = [seed for seed, value in per_seed.items() if value is None]
    if verdict not in ("holds", "does not hold"):
        return verdict, f"{len(missing)} of {len(per_seed)} gave none" if missing and verdict != "n/a" else ""
    if missing:
        return "inconclusive", (f"{verdict} over the seeds with a figure, but {len(missing)} of {len(per_seed)} "
                                "gave none")
    if verdict == "holds" and any(c.flatters_method for c in censored.values()):
        return "inconclusive", ("holds only with the method's unreached times counted at its runs' ends, "
                                "which flatters it")
    if verdict == "does not hold" and any(not c.flatters_method for c in censored.values()):
        return "inconclusive", ("does not hold with the baseline's unreached times counted at its runs' ends, "
                                "which understates the method")
    return verdict, ""


def guarded_comparison(word: str, lower: str, higher: str, per_seed: dict, censored: dict) -> tuple[str, str]:
    """`word`, metrics/verdict.py `compare`'s reading of a paired figure (`higher`: the method's side, e.g.
    "faster"), or "inconclusive" when the seeds without a plain figure could turn it; the second item says why."""
    missing = [seed for seed, value in per_seed.items() if value is None]
    no_difference = word.startswith("no difference")
    if word not in (lower, higher) and not no_difference:
        return word, f"{len(missing)} of {len(per_seed)} gave none" if missing else ""
    if missing:
        return "inconclusive", f"{word} over the seeds with a figure, but {len(missing)} of {len(per_seed)} gave none"
    flatters = any(c.flatters_method for c in censored.values())
    understates = any(not c.flatters_method for c in censored.values())
    if (word == higher and flatters) or (word == lower and understates) or (no_difference and censored):
        return "inconclusive", f"{word} only with unreached times counted at their runs' ends"
    return word, ""
