"""`edgesync reproduce`: every experiment's overrides make a valid scenario, and every claim is read from
run folders — here synthetic summaries, so each verdict can be checked by hand."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgesync import reproduce as rp
from edgesync.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("exp", rp.EXPERIMENTS, ids=lambda e: e.key)
@pytest.mark.parametrize("quick", [True, False])
def test_every_experiment_is_a_valid_scenario(exp, quick):
    sc = load_scenario(REPO / exp.scenario, [*(exp.quick if quick else exp.full), "runtime=sim"])
    assert sc.runtime == "sim" and sc.algorithms


def row(acc=0.85, t=10.0, bytes_up=1000, updates=100, bytes_per_s=100.0, gap=0.001, diverged=False):
    return {"final_acc": acc, "time_to_target_s": t, "bytes_up": bytes_up, "updates": updates,
            "bytes_per_s": bytes_per_s, "mean_gap": gap, "diverged": diverged}


SUMMARIES = {
    "esync_iid": {"ssgd": row(t=60.0, bytes_per_s=35.0), "asgd": row(bytes_per_s=228.0), "esync": row(t=10.0,
                                                                                                     bytes_per_s=35.0)},
    "esync_noniid": {"asgd": row(acc=0.90), "esync": row(acc=0.88)},
    "shat_scale": {"asp@clients=16": row(acc=0.70), "shat@clients=16": row(acc=0.72)},
    "shat_hetero": {"asp@profile=x100": row(acc=0.84), "shat@profile=x100": row(acc=0.83)},
    "dgs": {"asgd@clients=8": row(acc=0.86, t=180.0, bytes_up=738_000, updates=1000),
            "dgs@clients=8": row(acc=0.87, t=20.0, bytes_up=15_000, updates=1000)},
    "dana": {"nag_asgd@clients=1×x1": row(acc=0.88), "nag_asgd@clients=16×gamma-hetero": row(diverged=True, gap=0.02),
             "dana_dc@clients=16×gamma-hetero": row(acc=0.875, gap=0.001)},
}
EXPECTED = [(6.0, True), (35 / 228, True), (-2.0, False), (2.0, True), (-1.0, False), (15 / 738, True),
            (9.0, True), (1.0, True), (20.0, True), (-0.5, True), (-78.0, True)]


def write_runs(root: Path) -> None:
    for key, summary in SUMMARIES.items():
        (root / key).mkdir(parents=True)
        (root / key / "summary.json").write_text(json.dumps(summary))


def test_claims_are_computed_from_the_run_folders(tmp_path):
    write_runs(tmp_path)
    results = rp.evaluate(tmp_path)
    assert [r["claim"].text for r in results] == [c.text for c in rp.CLAIMS]
    for r, (value, holds) in zip(results, EXPECTED):
        assert r["value"] == pytest.approx(value), r["claim"].text
        assert r["holds"] is holds, r["claim"].text
    text = rp.table(results)
    assert text.count("\n") == len(rp.CLAIMS) + 1 and "does not hold" in text and str(tmp_path / "dgs") in text


def test_a_target_never_reached_is_shown_not_guessed(tmp_path):
    write_runs(tmp_path)
    summary = json.loads((tmp_path / "dgs" / "summary.json").read_text())
    summary["dgs@clients=8"]["time_to_target_s"] = None
    (tmp_path / "dgs" / "summary.json").write_text(json.dumps(summary))
    speedup = next(r for r in rp.evaluate(tmp_path) if r["claim"].text.startswith("DGS time"))
    assert speedup["value"] is None and speedup["holds"] is None and speedup["why"] == "not reached"


def test_write_docs_replaces_only_its_section(tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nhand-written text\n")
    rp.write_docs("| a |", "quick, sim", doc)
    rp.write_docs("| b |", "full, sim", doc)
    text = doc.read_text()
    assert text.startswith("# Results\n\nhand-written text\n") and "| b |" in text and "| a |" not in text
    assert text.count(rp.BEGIN) == 1 and "(full, sim)" in text


def test_cli_reads_finished_runs_and_refuses_an_unknown_experiment(tmp_path):
    write_runs(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "edgesync.cli", "reproduce", "--from", str(tmp_path)], cwd=REPO,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "DANA-DC final acc" in ok.stdout and (tmp_path / "claims.md").exists()
    bad = subprocess.run([sys.executable, "-m", "edgesync.cli", "reproduce", "--only", "nope"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown ['nope']" in bad.stderr
