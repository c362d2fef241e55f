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
    "dana": {"nag_asgd@clients=1×x1": row(acc=0.88), "nag_asgd@clients=16×gamma-homo": row(diverged=True, gap=0.02),
             "dana_dc@clients=16×gamma-homo": row(acc=0.85, gap=0.001),
             "dana_dc@clients=16×gamma-hetero": row(acc=0.875, gap=0.0005)},
}
EXPECTED = [(6.0, True), (35 / 228, True), (-2.0, False), (2.0, True), (-1.0, False), (15 / 738, True),
            (9.0, True), (1.0, True), (20.0, True), (-3.0, False), (-78.0, True), (-0.5, True)]


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


def test_write_docs_replaces_only_its_own_modes_table(tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nhand-written text\n")
    # Execute
    rp.write_docs("| q1 |", "quick-sim", "first", doc)
    rp.write_docs("| f1 |", "full-sim", "full", doc)
    rp.write_docs("| l1 |", "quick-live", "live", doc)
    rp.write_docs("| q2 |", "quick-sim", "second", doc)
    # Assert
    text = doc.read_text()
    assert text.startswith("# Results\n\nhand-written text\n")
    assert "| q2 |" in text and "| f1 |" in text and "| l1 |" in text and "| q1 |" not in text
    assert all(text.count(rp.markers(k)[0]) == 1 for k in ("quick-sim", "full-sim", "quick-live"))
    assert "(second)" in text and "(first)" not in text


def test_the_manifest_says_how_a_folder_was_run(tmp_path):
    assert rp.folder_key(tmp_path) is None  # nothing recorded
    (tmp_path / rp.MANIFEST).write_text(json.dumps({
        "dgs": {"mode": "full", "runtime": "sim", "overrides": [], "wall_s": 60.0},
        "dana": {"mode": "full", "runtime": "sim", "overrides": [], "wall_s": 30.0}}))
    assert rp.folder_key(tmp_path) == "full-sim"
    manifest = json.loads((tmp_path / rp.MANIFEST).read_text())
    manifest["dana"]["runtime"] = "live"
    (tmp_path / rp.MANIFEST).write_text(json.dumps(manifest))
    assert rp.folder_key(tmp_path) is None  # mixed


def test_cli_reads_finished_runs_and_refuses_an_unknown_experiment(tmp_path):
    write_runs(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "edgesync.cli", "reproduce", "--from", str(tmp_path)], cwd=REPO,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "DANA-DC final acc" in ok.stdout and (tmp_path / "claims.md").exists()
    bad = subprocess.run([sys.executable, "-m", "edgesync.cli", "reproduce", "--only", "nope"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown ['nope']" in bad.stderr


def test_run_suite_runs_each_experiment_and_records_how(tmp_path, monkeypatch):
    tiny = ("dataset.train_size=1000", "algorithms=[{name: ssgd, lr: 0.1}, {name: asgd, lr: 0.1}, "
            "{name: esync, lr: 0.1}]", "stop={time_budget_s: 2, target_acc: 0.3}", "eval={every_s: 1, test_size: 200}",
            "sim.base_step_s=0.05")
    monkeypatch.setattr(rp, "EXPERIMENTS", (rp.Experiment("esync_iid", "scenarios/esync_fmnist_iid.yaml", quick=tiny),))
    # Execute
    rp.run_suite(tmp_path, quick=True, progress=False)
    # Assert
    manifest = rp.read_manifest(tmp_path)
    assert list(manifest) == ["esync_iid"] and rp.folder_key(tmp_path) == "quick-sim"
    assert manifest["esync_iid"]["runtime"] == "sim" and manifest["esync_iid"]["wall_s"] > 0
    assert manifest["esync_iid"]["overrides"][-1] == "runtime=sim"
    claims = {r["claim"].text: r for r in rp.evaluate(tmp_path)}
    ratio = claims["ESync bytes/s ÷ ASGD bytes/s"]["value"]
    assert ratio is not None and 0 < ratio < 1  # ESync sends less than ASGD even in 2 s
