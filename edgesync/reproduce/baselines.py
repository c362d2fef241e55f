"""An experiment's comparison table: every entry beside a reference entry (FedAvg), not a paper's claim.

The FL baselines (FedProx, SCAFFOLD, FedAvgM, FedAdam, FedYogi, FedAdagrad, FedNova) come from papers that are
not among our sources, so `reproduce` states no claim for them: it shows what each entry measured, over the
seeds, beside the reference entry of the same experiment. One row per entry: the values tuning chose (on the
validation set), its final accuracy, time to the target, rounds and bytes (mean [95% Student-t interval] over
the seeds, metrics/seeds.py), and two readings against the reference, each figure taken within a seed (by
verdicts.py `decide`, as a claim's) and read over the seeds by the project's rule for two things compared
(metrics/verdict.py `compare`, censoring.py `guarded_comparison`): its final accuracy − the reference's
(higher, lower, or no difference within ±1 pt), and the reference's time to the target ÷ its own (faster,
slower, or within 1 ± 0.25; an unreached time censored at its run's end, counted against the entry).

`record` keeps what the table needs from a finished run folder (the rows of ROW_FIELDS per seed and the
tuning choices: docs/data/, edgesync/docs_data.py) and `render` draws the table from that record alone, so
tests/test_docs_data.py can draw it again from docs/data and compare.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from edgesync.metrics.seeds import by_seed, interval
from edgesync.metrics.verdict import compare
from edgesync.reproduce.audit import ROW_FIELDS
from edgesync.reproduce.censoring import guarded_comparison
from edgesync.reproduce.claims import Claim, _acc, _ratio, _t
from edgesync.reproduce.verdicts import _figure, decide


@dataclass(frozen=True)
class Comparison:
    experiment: str
    title: str
    reference: str                # the label every other entry is read against
    entries: tuple[str, ...]      # the labels, in the table's order, the reference first


FL_BASELINES = Comparison(
    "fl_baselines", "FedAvg and the standard FL baselines, non-i.i.d. Fashion-MNIST", "fedavg",
    ("fedavg", "fedprox", "fedavgm", "fedadam", "fedyogi", "fedadagrad", "scaffold", "fednova"))
COMPARISONS = (FL_BASELINES,)


@dataclass(frozen=True)
class Reading:
    """One paired comparison of an entry with the reference: `claim` gives a seed's figure from its rows (and
    says which of them were censored or diverged, verdicts.py `decide`), metrics/verdict.py `compare` reads the
    figures against `reference` with an equivalence margin."""

    claim: Claim
    reference: float
    margin: float
    lower: str
    higher: str  # the entry's side
    within: str  # the margin as the table's heading says it

    @property
    def heading(self) -> str:
        return f"{self.higher}, {self.lower} or no difference (within {self.within})"


def accuracy_reading(c: Comparison, label: str) -> Reading:
    """Within a seed: the entry's final accuracy − the reference's, in points (a diverged run at chance); no
    difference within ±1 pt (the claims' non-inferiority margin for DGS)."""
    return Reading(Claim(f"{label}: final acc − {c.reference}'s", "", "", c.experiment,
                         lambda r: 100 * (_acc(r[label]) - _acc(r[c.reference])), "≥", 0, " pt"),
                   0.0, 1.0, "lower", "higher", "±1 pt")


def time_reading(c: Comparison, label: str) -> Reading:
    """Within a seed: the reference's time to the target ÷ the entry's, censored where one was not reached; no
    difference within 1 ± 0.25 (the cross-check's margin for a ratio of times)."""
    return Reading(Claim(f"{label}: {c.reference}'s time to target ÷ its own", "", "", c.experiment,
                         lambda r: _ratio(_t(r, c.reference), _t(r, label)), "≥", 1, "×",
                         times=(c.reference, label)),
                   1.0, 0.25, "slower", "faster", "1 ± 0.25")


def read(reading: Reading, groups: dict, folder: str) -> tuple[str, str]:
    """(the figure over the seeds as the claims' table shows one, the reading with why it is inconclusive)."""
    r = decide(reading.claim, groups, folder)
    v = compare([x for x in r["per_seed"].values() if x is not None], reading.reference, reading.margin,
                reading.lower, reading.higher)
    word, why = guarded_comparison(v.word, reading.lower, reading.higher, r["per_seed"], r["censored"])
    why = why or v.why
    return _figure(r), word + (f" ({why})" if why else "")


def record(out: Path, c: Comparison) -> dict | None:
    """What the table is drawn from, out of `out/EXPERIMENT` (None before the experiment has run): per seed, the
    ROW_FIELDS of each entry's row, the target, and what tuning chose (tuning.json)."""
    found = read_experiment(out / c.experiment, c.entries)
    if found is None:
        return None
    return {"experiment": c.experiment, "title": c.title, "reference": c.reference, "entries": list(c.entries),
            **found}


def read_experiment(folder: Path, labels) -> dict | None:
    """An experiment's run folder as a comparison reads it (None before it has run): its folder, per seed (as a
    string, for JSON) the ROW_FIELDS of each of `labels`' rows, the target and what tuning chose."""
    summary_path = folder / "summary.json"
    if not summary_path.exists():
        return None
    groups = by_seed(json.loads(summary_path.read_text()))
    rows = {str(seed): {label: {k: row[k] for k in ROW_FIELDS if k in row}
                        for label, row in group.items() if label in labels}
            for seed, group in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))}
    target = next((row.get("target_acc") for group in groups.values() for row in group.values()), None)
    tuning_path = folder / "tuning.json"
    return {"target_acc": target, "folder": str(folder), "rows": rows,
            "tuning": _tuning(json.loads(tuning_path.read_text())) if tuning_path.exists() else None}


def seed_groups(rows: dict) -> dict:
    """`read_experiment`'s rows keyed by seed again (None, or the int), as the verdicts read them."""
    return {None if seed == "None" else int(seed): by_label for seed, by_label in rows.items()}


def _tuning(full: dict) -> dict:
    """tuning.json's grid, seed, metric, validation size and each entry's choice (not every point's figures)."""
    return {"grid": full["grid"], "metric": full["metric"], "seed": full["seed"], "runs": full["runs"],
            "validation_size": full["validation"]["size"], "extended": len(full.get("extended", [])),
            "entries": {label: {"chosen": e["chosen"], "figure": e["figure"], "all_diverged": e["all_diverged"],
                                "not_applicable": e["not_applicable"]} for label, e in full["entries"].items()},
            "edges_left": full.get("edges_left", {})}


def render(data: dict) -> str:
    """The comparison's table (and the tuning it ran with) from `record`'s output alone."""
    c = Comparison(data["experiment"], data["title"], data["reference"], tuple(data["entries"]))
    groups = seed_groups(data["rows"])
    target, tuning = data["target_acc"], data["tuning"]
    headings = [reading(c, c.reference).heading for reading in (accuracy_reading, time_reading)]
    lines = [f"**{c.title}** (`{data['folder']}`)", ""]
    if tuning:
        lines += [_tuning_line(tuning), ""]
    lines += [f"| entry | tuned: chosen (validation {tuning['metric'].replace('_', ' ') if tuning else 'figure'}) | "
              f"final acc. (%) | time to {target} (s) | rounds | MB moved (up + down) | final acc. − "
              f"{c.reference}'s (pt, paired) | {headings[0]} | {c.reference}'s time ÷ its own (paired) | "
              f"{headings[1]} |", "|---|---|---|---|---|---|---|---|---|---|"]
    for label in c.entries:
        runs = [rows[label] for rows in groups.values() if label in rows]
        if not runs:
            lines.append(f"| {label} | not run |" + " |" * 8)
            continue
        cells = [_chosen(tuning, label), _mean([_points(r) for r in runs]), _time(runs),
                 _mean([r.get("updates") for r in runs]),
                 _mean([(r["bytes_up"] + r["bytes_down"]) / 1e6 if r.get("bytes_up") is not None
                        and r.get("bytes_down") is not None else None for r in runs])]
        if label == c.reference:
            cells += ["—"] * 4
        else:
            for reading in (accuracy_reading(c, label), time_reading(c, label)):
                cells += read(reading, groups, data["folder"])
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", f"Mean [95% Student-t interval] over the seeds. Each entry is compared with {c.reference} within "
              "each seed, then over the seeds by the one verdict rule for two things compared: one side when the "
              "whole interval is on it, no difference when the whole interval lies within the stated margin, "
              "else inconclusive; a time to the target that a run did not reach is censored at its run's end and "
              "counted against the entry. Not a paper's claim: none of our source papers reports these baselines."]
    return "\n".join(lines)


def _tuning_line(tuning: dict) -> str:
    grid = "; ".join(f"`{k}` {', '.join(str(v) for v in values)}" for k, values in tuning["grid"].items())
    edges = "; ".join(f"{label} {', '.join(f'{k} at its {side}' for k, side in e.items())}"
                      for label, e in tuning["edges_left"].items())
    rounds = tuning["extended"]
    past = f", extended past its edges {rounds} time{'s' if rounds != 1 else ''}" if rounds else ""
    return (f"Every entry tuned on one grid ({grid}{past}; a key an entry lacks is not applicable to it): "
            f"{tuning['runs']} tuning runs on seed {tuning['seed']}, chosen by {tuning['metric'].replace('_', ' ')} "
            f"on {tuning['validation_size']:,} validation images."
            + (f" Chosen on the grid's edge (the optimum may lie beyond): {edges}." if edges else ""))


def _chosen(tuning: dict | None, label: str) -> str:
    entry = (tuning or {}).get("entries", {}).get(label)
    if entry is None:
        return "untuned"
    values = ", ".join(f"{k} {v}" for k, v in entry["chosen"].items()) or "nothing to tune"
    figure = entry["figure"]
    shown = ("n/a" if figure is None else f"{figure:.3g} s" if tuning["metric"] == "time_to_target"
             else f"{100 * figure:.3g} %")
    return f"{values} ({shown}{'; every point diverged' if entry['all_diverged'] else ''})"


def _points(row: dict) -> float | None:
    """A run's final accuracy in percent, a diverged run's at chance (as the claims count it)."""
    return None if row.get("final_acc") is None and not row.get("diverged") else 100 * _acc(row)


def _mean(values: list) -> str:
    """'75.3 [74.1, 76.5]', '75.3' for one value, 'n/a' for none; the count when some are missing."""
    present = [float(v) for v in values if v is not None]
    iv = interval(present)
    if iv.mean is None:
        return "n/a"
    text = _num(iv.mean) + (f" [{_num(iv.low)}, {_num(iv.high)}]" if iv.low is not None else "")
    return text + (f" ({iv.n} of {len(values)} seeds)" if iv.n < len(values) else "")


def _time(runs: list[dict]) -> str:
    """Reached in every seed: the mean [interval] and the count; in some: at least the mean with the others
    counted at their runs' end (censored); in none: not reached."""
    reached = [r["time_to_target_s"] for r in runs if r.get("time_to_target_s") is not None]
    n, k = len(runs), len(reached)
    if k == n:
        return f"{_mean(reached)} ({k}/{n} reached)"
    if k == 0:
        return f"not reached (0/{n})"
    bounds = [r.get("time_to_target_s") or r.get("duration_s") for r in runs]
    if any(b is None for b in bounds):
        return f"{k}/{n} reached"
    return f"≥ {_num(interval(bounds).mean)} ({k}/{n} reached; the others counted at their runs' end)"


def _num(value: float) -> str:
    return f"{value:.3g}".replace("-", "−")
