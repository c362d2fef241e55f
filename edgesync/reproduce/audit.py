"""docs/data/: the per-run figures behind each table `edgesync reproduce --write-docs` writes, so that every
figure of a block can be traced to the runs that gave it and recomputed (tests/test_docs_data.py does).

One small JSON file per block (`reproduce-KEY.json`): the block's name and note, and per claim its
definition (text, experiment, direction, bounds), each seed's figure and whether it was censored, and the
fields of the summary rows the claim read in each seed (ROW_FIELDS: what any claim reads, nothing else), with
the mean, interval and verdicts the table shows.
"""
from __future__ import annotations

import json
from pathlib import Path

from edgesync.reproduce.suite import ROOT

DATA_DIR = ROOT / "docs" / "data"
# the summary-row fields a claim may read (reproduce/claims.py), and those that say a run came apart
ROW_FIELDS = ("final_acc", "best_acc", "time_to_target_s", "duration_s", "bytes_per_s", "bytes_up", "bytes_down",
              "updates", "updates_per_s", "mean_gap", "mean_gap_first_n", "diverged")


def data_file(key: str, folder: Path = DATA_DIR) -> Path:
    return folder / f"reproduce-{key}.json"


def earlier_figures(key: str, folder: Path = DATA_DIR) -> dict | None:
    """The figures of the table a re-run replaces, from its docs/data record: {"note", "figures": {claim text:
    figure as the table showed it}}; None when there is none. The table keeps them beside the new ones."""
    path = data_file(key, folder)
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    return {"note": old["note"], "figures": {c["text"]: c.get("figure") or _compact(c) for c in old["claims"]}}


def _compact(claim: dict) -> str:
    """A record written before it kept the table's figure: its mean, interval and seeds, as the table gave them."""
    if claim.get("mean") is None:
        return "n/a"
    text = f"{claim['mean']:.3g}{claim['unit']}".replace("-", "−")
    if claim.get("ci95"):
        low, high = claim["ci95"]
        text += f" [{low:.3g}, {high:.3g}]".replace("-", "−")
    return f"{text} ({claim['n']} seeds)"


def record(results: list[dict], key: str, note: str, earlier: dict | None = None) -> dict:
    from edgesync.reproduce.verdicts import _figure
    claims = []
    for r in results:
        c, iv = r["claim"], r["interval"]
        claims.append({
            "text": c.text, "experiment": c.experiment, "direction": c.direction, "threshold": c.threshold,
            "paper_value": c.paper_value, "by_construction": bool(c.by_construction), "unit": c.unit,
            "per_seed": {str(s): v for s, v in r["per_seed"].items()},
            "censored": {str(s): {"value": b.value, "flatters_method": b.flatters_method}
                         for s, b in r["censored"].items()},
            "rows": {str(s): {label: {k: row.get(k) for k in ROW_FIELDS if k in row} for label, row in rows.items()}
                     for s, rows in r.get("rows", {}).items()},
            "mean": iv.mean, "ci95": None if iv.low is None else [iv.low, iv.high], "n": iv.n,
            "verdict": r["verdict"], "magnitude": r["magnitude"], "figure": _figure(r)})
    return {"block": f"reproduce:{key}", "note": note, "claims": claims,
            **({"earlier": earlier} if earlier else {})}


def write_data(results: list[dict], key: str, note: str, folder: Path = DATA_DIR,
               earlier: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = data_file(key, folder)
    path.write_text(json.dumps(record(results, key, note, earlier), indent=1, sort_keys=False) + "\n")
    return path
