"""The benchmarks that judge over seeds use the one verdict rule (edgesync/metrics/verdict.py): EQ3's sharding
ordering and parameter server vs all-reduce, read from synthetic run folders whose figures are known."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import allreduce_rounds  # noqa: E402
import eq3_sharding  # noqa: E402


def test_eq3_orders_sharding_by_the_one_rule(tmp_path):
    # per seed s: none 10, layer 9.9 + s/10, memory 30 (MPS ÷ LPS ≈ 3: holds; LPS ÷ none 0.99, 1, 1.01: its
    # interval [0.965, 1.035] straddles 1 inside ±0.1: no difference)
    summary = {}
    for s in (0, 1, 2):
        for n in eq3_sharding.WORKERS:
            for sharding, v in (("none", 10.0), ("layer", 9.9 + s / 10), ("memory", 30.0)):
                summary[f"shat@clients={n}×gamma-homo,sharding={sharding},seed={s}"] = {"updates_per_s": v}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    rows, verdicts = eq3_sharding.panel(eq3_sharding.throughputs(tmp_path))
    assert len(rows) == 9 and len(verdicts) == 3
    for v in verdicts:
        mps_lps, lps_none, same = v.split("|")[2:5]
        assert mps_lps.strip().endswith(": holds") and lps_none.strip().endswith(": inconclusive")  # ≥ 1? no telling
        assert same.strip() == "no difference (within ±0.1)"


def test_all_reduce_is_no_faster_unless_the_interval_says_so(tmp_path):
    summary = {}
    for s, (ps, ar) in enumerate([(10.0, 7.0), (10.0, 13.0), (10.0, 10.0)]):  # 0.7, 1.3, 1.0: straddles, wide
        for algorithm in allreduce_rounds.ALGORITHMS:
            for form, duration in (("ps", ps), ("allreduce", ar)):
                summary[f"{algorithm}-{form}@seed={s}"] = {"duration_s": duration, "updates": 20, "bytes_up": 8e6,
                                                           "bytes_down": 8e6, "final_acc": 0.8}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    rows = allreduce_rounds.setting_rows("no limit", allreduce_rounds.figures_of(tmp_path), allreduce_rounds.CLIENTS)
    verdicts = [r for r in rows if "allreduce" in r.split("|")[3]]
    assert len(verdicts) == 2 and all("inconclusive (the interval straddles 1" in r for r in verdicts)
    assert not any("no difference" in r for r in rows)
