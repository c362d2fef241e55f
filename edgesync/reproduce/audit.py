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


def record(results: list[dict], key: str, note: str) -> dict:
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
            "verdict": r["verdict"], "magnitude": r["magnitude"]})
    return {"block": f"reproduce:{key}", "note": note, "claims": claims}


def write_data(results: list[dict], key: str, note: str, folder: Path = DATA_DIR) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = data_file(key, folder)
    path.write_text(json.dumps(record(results, key, note), indent=1, sort_keys=False) + "\n")
    return path
