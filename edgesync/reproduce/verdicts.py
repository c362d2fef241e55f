"""Deciding the claims: each claim's figure per seed from an experiment's summary.json, their mean and 95%
interval (metrics/seeds.py), the three-way verdict, and the Markdown table of them all."""
from __future__ import annotations

import json
import math
from pathlib import Path

from edgesync.metrics.seeds import by_seed, interval
from edgesync.metrics.verdict import against
from edgesync.reproduce.censoring import Censored, WatchedRows, censored_ratio, guarded
from edgesync.reproduce.claims import CLAIMS, Claim


def verdict(values: list[float], direction: str, threshold: float) -> str:
    """The project's one verdict rule (metrics/verdict.py): 'holds' when the whole 95% interval over at least
    three seeds is on the claim's side of the threshold, 'does not hold' when it is wholly on the other side,
    else 'inconclusive'."""
    return against(values, direction, threshold).word


def evaluate(out: Path) -> list[dict]:
    """Every claim whose experiment has a finished run folder under `out`: its figure per seed (a time a run
    did not reach censored at the run's end, censoring.py), their mean and 95% interval over every seed with
    a figure, the three-way verdict with the censored and missing seeds counted against the method, and the
    seeds in which an entry the claim reads diverged."""
    results = []
    for claim in CLAIMS:
        folder = out / claim.experiment
        summary = folder / "summary.json"
        if summary.exists():
            results.append(decide(claim, _joined(out, claim, by_seed(json.loads(summary.read_text()))), folder))
    return results


def decide(claim: Claim, groups: dict[int | None, dict[str, dict]], folder: Path | str) -> dict:
    """One claim over `groups` (seed → label → summary row): its figure per seed, censored where a time was not
    reached, the interval and both readings (what `evaluate` gives per claim; the baselines' readings too)."""
    per_seed: dict[int | None, float | None] = {}
    censored: dict[int | None, Censored] = {}
    diverged: dict[int | None, list[str]] = {}
    read: dict[int | None, dict[str, dict]] = {}  # per seed, the rows the claim read (docs/data/, audit.py)
    whys = []
    for seed, rows in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        watched = WatchedRows(rows)
        try:
            value = claim.measure(watched)
            bound = censored_ratio(watched, *claim.times) if value is None and claim.times else None
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            value = None
            whys.append(f"missing in the run ({type(exc).__name__}: {exc})")
        else:
            if bound is not None:
                value, censored[seed] = bound.value, bound
            elif value is None:
                whys.append("neither reached the target" if claim.times else "not reached")
            elif not math.isfinite(value):
                value = None
                whys.append("not finite")
        if names := watched.diverged():
            diverged[seed] = names
        read[seed] = {label: rows[label] for label in sorted(watched.read) if label in rows}
        per_seed[seed] = value
    values = [v for v in per_seed.values() if v is not None]
    iv = interval(values)
    shown, caveat = _read(values, claim.direction, claim.threshold, per_seed, censored)
    magnitude, magnitude_caveat = ("n/a", "") if claim.paper_value is None else _read(
        values, claim.direction, claim.paper_value, per_seed, censored)
    return {"claim": claim, "per_seed": per_seed, "interval": iv, "seeds": len(per_seed), "censored": censored,
            "diverged": diverged, "caveat": caveat, "why": "; ".join(dict.fromkeys(whys)), "folder": folder,
            "value": iv.mean, "verdict": shown, "magnitude": magnitude, "magnitude_caveat": magnitude_caveat,
            "rows": read}


def _joined(out: Path, claim, groups: dict) -> dict:
    """`groups` (seed → label → row) with the rows of the claim's `also` experiments that ran, seed by seed."""
    for extra in claim.also:
        path = out / extra / "summary.json"
        if path.exists():
            for seed, rows in by_seed(json.loads(path.read_text())).items():
                groups[seed] = {**rows, **groups.get(seed, {})}
    return groups


def _read(values: list[float], direction: str, bound: float, per_seed: dict, censored: dict) -> tuple[str, str]:
    """One reading of a claim: the verdict and what made it inconclusive, if anything did."""
    if not values:
        return "n/a", ""
    decided = against(values, direction, bound)
    shown, caveat = guarded(decided.word, per_seed, censored)
    return shown, caveat or decided.why


def _figure(r: dict) -> str:
    """'4.9× [4.2, 5.6] (3 seeds; reached in 2/3, the other censored at its run's end; diverged in 1/3)': the
    mean, its 95% interval, how many seeds gave the figure, and what is not a plain figure among them."""
    c, iv, n = r["claim"], r["interval"], r["seeds"]
    notes = []
    if iv.n < n and r["why"]:
        notes.append(f"no figure in {n - iv.n}/{n}: {r['why']}")
    if c.times:
        plain = iv.n - len(r["censored"])
        notes.append(f"both reached the target in {plain}/{n}" + (
            f", {len(r['censored'])} censored at its run's end" if r["censored"] else ""))
    if r["diverged"]:
        names = sorted({label for labels in r["diverged"].values() for label in labels})
        notes.append(f"diverged in {len(r['diverged'])}/{n} ({', '.join(names)})")
    if iv.mean is None:
        return "; ".join(notes) or "n/a"
    text = f"{_num(iv.mean)}{c.unit}"
    if iv.low is not None:
        text += f" [{_num(iv.low)}, {_num(iv.high)}]"
    seeds = f"{iv.n} of {n} seeds" if iv.n < n else f"{iv.n} seed{'s' if iv.n != 1 else ''}"
    return f"{text} ({'; '.join([seeds, *notes])})"


def _num(value: float) -> str:
    return f"{value:.3g}".replace("-", "−")


def table(results: list[dict], earlier: dict | None = None) -> str:
    """The claims as a Markdown table, measured claims first, each read twice (direction: better at all;
    magnitude: as strong as the paper's own figure), then the figures the configuration fixes (listed apart
    with the formula that fixes them, never counted as verdicts), and a count of the verdicts of each kind.
    With `earlier` (audit.earlier_figures: the table this one replaces) each figure keeps the one it replaced
    beside it, and a line says which run that was."""
    before = (lambda c: f" (before: {earlier['figures'].get(c.text, 'not in it')})") if earlier else (lambda c: "")
    lines = ["| claim | paper | paper's figure | ours: mean [95% CI] | direction | verdict | magnitude (the paper's "
             "figure) | verdict | run folder |", "|---|---|---|---|---|---|---|---|---|"]
    measured = [r for r in results if not r["claim"].by_construction]
    built = [r for r in results if r["claim"].by_construction]
    for r in measured:
        c = r["claim"]
        shown = r["verdict"] + (f" ({r['caveat']})" if r["caveat"] else "")
        magnitude = r["magnitude"] + (f" ({r['magnitude_caveat']})" if r["magnitude_caveat"] else "")
        paper = c.paper_figure + (f" ({c.regime})" if c.regime else "")
        lines.append(f"| {c.text} | {c.paper} | {paper} | {_figure(r)}{before(c)} | {c.target} | {shown} | "
                     f"{c.paper_target} | {magnitude} | `{r['folder']}` |")
    if built:
        lines += ["", "Fixed by the configuration, not verdicts:", "",
                  "| figure | paper | paper's figure | ours: mean [95% CI] | why it is fixed | run folder |",
                  "|---|---|---|---|---|---|"]
        for r in built:
            c = r["claim"]
            lines.append(f"| {c.text} | {c.paper} | {c.paper_figure} | {_figure(r)}{before(c)} | {c.by_construction} | "
                         f"`{r['folder']}` |")
    lines += ["", count_line(measured, built)]
    if earlier:
        lines += ["", f"Before: the figures of the table this run replaced ({earlier['note']}), kept beside each of "
                  "ours; git has every earlier table."]
    return "\n".join(lines)


def count_line(measured: list[dict], built: list[dict]) -> str:
    plural = {"holds": "hold", "does not hold": "do not hold", "inconclusive": "inconclusive", "n/a": "n/a"}

    def counted(key: str) -> str:
        counts = {v: sum(r[key] == v for r in measured) for v in plural}
        return ", ".join(f"{n} {v if n == 1 else plural[v]}" for v, n in counts.items() if n) or "none"
    return (f"Measured claims: {len(measured)}; direction: {counted('verdict')}; magnitude against the paper's "
            f"own figure: {counted('magnitude')}. Figures fixed by the configuration, listed apart and not "
            f"counted: {len(built)}. A reading holds when its whole 95% interval over at least three seeds is on "
            f"the bound's side, does not hold when it is wholly on the other side, and is inconclusive otherwise, "
            f"or when a seed without a plain figure could turn it: a time to target that was not reached is "
            f"censored at its run's end, never dropped, and a seed without any figure counts against the verdict.")
