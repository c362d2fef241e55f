"""report.md's "Tuning" section, from a tuned run folder's tuning.json (edgesync/runtime/tuning.py writes it).

It says how the values were chosen (grid, metric, validation set, tuning seed and stop rules), what
each entry got, and every point's validation figure, so a reader can see that the baselines were
tuned exactly as the proposed methods were. Reads only the record: a folder re-renders at any time.
"""
from __future__ import annotations

from typing import Any

from edgesync.metrics.formatting import NONE, num, pct, secs

METRIC_NAMES = {"final_acc": "final validation accuracy", "best_acc": "best validation accuracy",
                "time_to_target": "time to the target accuracy on the validation set"}


def tuning_section(record: dict) -> list[str]:
    """The section's lines (heading included); a record without entries gives a line saying so."""
    entries = record.get("entries")
    if not isinstance(entries, dict) or not entries:
        return ["## Tuning", "", "tuning.json holds no entries.", ""]
    metric = str(record.get("metric"))
    split = record.get("validation") if isinstance(record.get("validation"), dict) else {}
    grid = record.get("grid") if isinstance(record.get("grid"), dict) else {}
    lines = ["## Tuning", "", _how(record, metric, split), "",
             "Grid: " + "; ".join(f"`{k}` {', '.join(_value(v) for v in values)}" for k, values in grid.items()) + ".",
             ""]
    lines += _edge_lines(record)
    header = ["Entry", "Chosen", f"Validation {_short(metric)}", "Points", "Not applicable"]
    rows = [[f"`{label}`", _point(e.get("chosen")) or "nothing to tune",
             _figure(metric, e.get("figure")) + (" (every point diverged)" if e.get("all_diverged") else ""),
             str(len(e.get("points") or [])), ", ".join(f"`{k}`" for k in e.get("not_applicable") or []) or NONE]
            for label, e in entries.items()]
    lines += _table(header, rows, "llrrl") + [""]
    points = [(label, p) for label, e in entries.items() for p in e.get("points") or []]
    if points:
        lines += ["Every tuning run, on the validation set (chosen in bold):", ""]
        header = ["Entry", "Point", "Final acc.", "Best acc.", "Time to target (s)", "Diverged"]
        rows = []
        for label, p in points:
            chosen = p.get("label") == entries[label].get("chosen_label")
            mark = (lambda t: f"**{t}**") if chosen else (lambda t: t)
            ttt = num(p.get("time_to_target_s"))
            rows.append([f"`{label}`", mark(_point(p.get("values")) or NONE), mark(pct(p.get("final_acc"))),
                         mark(pct(p.get("best_acc"))), secs(ttt) if ttt is not None else "not reached",
                         "yes" if p.get("diverged") else ""])
        lines += _table(header, rows, "llrrrl") + [""]
    return lines


def _edge_lines(record: dict) -> list[str]:
    """What was extended past the grid's edges, and which chosen values still lie on one (runtime/tuning_edges.py)."""
    lines = []
    for r in record.get("extended") or []:
        lines.append(f"Extended past an edge the entries chose (`{r.get('folder')}`): "
                     + "; ".join(f"`{k}` {', '.join(_value(v) for v in values)}" for k, values in r["grid"].items())
                     + ".")
    for key, why in (record.get("not_extended") or {}).items():
        lines.append(f"Not extended: {why}.")
    left = record.get("edges_left") or {}
    if left:
        lines.append("**On the grid's edge** (the optimum may lie beyond it): " + "; ".join(
            f"`{label}` {', '.join(f'`{k}` at its {side} value' for k, side in sides.items())}"
            for label, sides in left.items()) + ".")
    return [*lines, ""] if lines else []


def _how(record: dict, metric: str, split: dict) -> str:
    size, n = num(split.get("size")), num(split.get("train_samples"))
    held = (f"{int(size):,} of the {int(n):,} training samples ({size / n:.1%}"
            f"{', stratified by class' if split.get('stratified') else ''}, split seed {split.get('split_seed')})"
            if size is not None and n else "a validation set carved from the training data")
    other = "best" if metric == "final_acc" else "final"
    folder = record.get("folder", "tuning")
    return (f"Every entry was tried at every combination of the grid keys its config has, with the same values "
            f"for every entry; a key an entry lacks is not applicable to it. Validation set: {held}, held out "
            f"of training in the tuning runs and in the runs above alike; the test set chose nothing. Chosen by "
            f"{METRIC_NAMES.get(metric, metric)}; a diverged point ranks last, and ties go to the higher {other} "
            f"validation accuracy, then to the point written first in the grid. Tuning runs: seed "
            f"{record.get('seed')}, {_stop(record.get('stop'))}; their run folder is [{folder}/]({folder}/report.md).")


def _stop(stop: Any) -> str:
    """'up to 3 s, 4,000 updates, ending at the target' from the tuning runs' stop rules."""
    stop = stop if isinstance(stop, dict) else {}
    parts = []
    if num(stop.get("time_budget_s")) is not None:
        parts.append(f"up to {stop['time_budget_s']:g} s")
    if num(stop.get("max_updates")) is not None:
        parts.append(f"{int(stop['max_updates']):,} updates")
    if stop.get("stop_at_target"):
        parts.append("ending at the target")
    return "each " + ", ".join(parts) if parts else "the scenario's stop rules"


def _short(metric: str) -> str:
    return {"final_acc": "final acc.", "best_acc": "best acc.", "time_to_target": "time to target (s)"}.get(metric,
                                                                                                          metric)


def _figure(metric: str, value: Any) -> str:
    if metric == "time_to_target":
        return secs(num(value)) if num(value) is not None else "not reached"
    return pct(value)


def _point(values: Any) -> str:
    if not isinstance(values, dict):
        return ""
    return ", ".join(f"{k}={_value(v)}" for k, v in values.items())


def _value(v: Any) -> str:
    return "null" if v is None else str(v)


def _table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in [header, rule, *rows]]
