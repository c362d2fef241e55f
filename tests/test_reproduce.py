"""`edgesync reproduce`: every experiment's overrides make a valid scenario, and every claim is read from
run folders — here synthetic summaries, so each verdict can be checked by hand."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from edgesync import reproduce as rp
from edgesync.metrics.seeds import interval, with_seed_aggregates
from edgesync.reproduce.censoring import Censored, censored_ratio, guarded
from edgesync.reproduce.experiments import TUNING_SEED
from edgesync.config import load_scenario
from edgesync.runtime.tuning import entry_grids

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("exp", rp.EXPERIMENTS, ids=lambda e: e.key)
@pytest.mark.parametrize("quick", [True, False])
def test_every_experiment_is_a_valid_scenario(exp, quick):
    seeds = rp.SEEDS["quick" if quick else "full"]
    sc = load_scenario(REPO / exp.scenario, [*(exp.quick if quick else exp.full), "runtime=sim", f"seeds={seeds}"])
    assert sc.runtime == "sim" and sc.algorithms and sc.seeds == seeds and len(seeds) >= (3 if quick else 5)


def row(acc=0.85, t=10.0, bytes_up=1000, updates=100, bytes_per_s=100.0, gap=0.001, diverged=False,
        updates_per_s=10.0, duration=300.0):
    return {"final_acc": acc, "time_to_target_s": t, "bytes_up": bytes_up, "updates": updates,
            "bytes_per_s": bytes_per_s, "mean_gap": gap, "mean_gap_first_n": gap, "diverged": diverged,
            "updates_per_s": updates_per_s,
            "duration_s": duration}


SUMMARIES = {
    "esync_iid": {"ssgd": row(t=60.0, bytes_per_s=35.0), "asgd": row(bytes_per_s=228.0), "esync": row(t=10.0,
                                                                                                     bytes_per_s=35.0)},
    "esync_noniid": {"asgd": row(acc=0.90), "esync": row(acc=0.88)},
    "shat_scale": {"asp@clients=16": row(acc=0.70), "shat@clients=16": row(acc=0.72)},
    "shat_hetero": {"asp@profile=x100": row(acc=0.84), "shat@profile=x100": row(acc=0.83)},
    "dgs": {"asgd": row(acc=0.86, t=180.0, bytes_up=738_000, updates=1000),
            "dgs": row(acc=0.87, t=20.0, bytes_up=15_000, updates=1000)},
    "dana": {"nag_asgd@clients=1×x1": row(acc=0.88), "nag_asgd@clients=16×gamma-homo": row(diverged=True, gap=0.02),
             "dana_dc@clients=16×gamma-homo": row(acc=0.85, gap=0.001),
             "dana_dc@clients=16×gamma-hetero": row(acc=0.875, gap=0.0005)},
    "shat_sharding": {f"shat@clients=16×gamma-homo,sharding={s}": row(updates_per_s=v)
                      for s, v in (("none", 20.0), ("layer", 21.0), ("memory", 63.0))},
}
EXPECTED = [6.0, 35 / 228, -2.0, 2.0, -1.0, 15 / 738, 9.0, 1.0, 20.0, -3.0, -78.0, -0.5, 3.0, 1.05]  # seed 0's
# Three seeds: seed s multiplies every time by (1 + s/10) and adds s/200 to every accuracy but the one-worker
# run's: ratios of two entries stay the same (paired within a seed), differences grow by 0, 0.5, 1 pt.
SEED_SHIFT = {0: (1.0, 0.0), 1: (1.1, 0.005), 2: (1.2, 0.01)}


def seeded(summary: dict, seeds=(0, 1, 2)) -> dict:
    runs = {}
    for s in seeds:
        scale, shift = SEED_SHIFT[s]
        for label, entry in summary.items():
            e = dict(entry)
            e["time_to_target_s"] = None if e["time_to_target_s"] is None else e["time_to_target_s"] * scale
            if label != "nag_asgd@clients=1×x1" and not label.startswith("asgd") and not label.startswith("asp"):
                e["final_acc"] += shift
            tag = "@seed=" if "@" not in label else ",seed="
            runs[f"{label}{tag}{s}"] = e
    return with_seed_aggregates(runs, baseline=next(iter(runs)))


def write_runs(root: Path, seeds=(0, 1, 2)) -> None:
    for key, summary in SUMMARIES.items():
        (root / key).mkdir(parents=True)
        (root / key / "summary.json").write_text(json.dumps(seeded(summary, seeds)))


@pytest.mark.parametrize("values, direction, threshold, expected", [
    ([6.0, 6.2, 5.8], "≥", 5, "holds"),            # mean 6, half-width 0.497: [5.50, 6.50] above 5
    ([4.0, 6.0, 5.0], "≥", 5, "inconclusive"),     # [2.52, 7.48] straddles 5
    ([3.0, 3.2, 2.8], "≥", 5, "does not hold"),    # [2.50, 3.50] below 5
    ([0.15, 0.16, 0.14], "≤", 0.2, "holds"),
    ([0.25, 0.26, 0.24], "≤", 0.2, "does not hold"),
    ([5.0, 5.0, 5.0], "≥", 5, "holds"),            # an interval touching the threshold from its side holds
    ([9.0], "≥", 5, "inconclusive"),               # one seed: no interval
    ([9.0, 9.5], "≥", 5, "inconclusive"),          # two seeds: an interval, but fewer than three
])
def test_three_way_verdicts_on_known_intervals(values, direction, threshold, expected):
    assert rp.verdict(values, direction, threshold) == expected


def test_claims_are_computed_per_seed_from_the_run_folders(tmp_path):
    write_runs(tmp_path)
    results = rp.evaluate(tmp_path)
    assert [r["claim"].text for r in results] == [c.text for c in rp.CLAIMS]
    for r, seed0 in zip(results, EXPECTED):
        assert r["per_seed"][0] == pytest.approx(seed0), r["claim"].text
        assert r["seeds"] == 3 and r["interval"].n == 3
    by_text = {r["claim"].text: r for r in results}
    # ratios are paired within a seed: the same in every seed, a zero-width interval
    speedup = by_text["ESync time to 0.80 vs tuned SSGD, one ×10 straggler"]
    assert speedup["per_seed"] == pytest.approx({0: 6.0, 1: 6.0, 2: 6.0}) and speedup["verdict"] == "holds"
    assert speedup["magnitude"] == "does not hold"  # faster (≥ 1×) in every seed, but short of the paper's 7×
    # ESync − ASGD non-i.i.d.: −2, −1.5, −1 pt: mean −1.5, sd 0.5, half-width 4.302653·0.5/√3 = 1.242 → [−2.74, −0.26]
    noniid = by_text["non-i.i.d.: ESync final acc − ASGD final acc"]
    assert noniid["interval"].mean == pytest.approx(-1.5)
    assert noniid["interval"].high == pytest.approx(-1.5 + 4.302653 * 0.5 / 3 ** 0.5)
    assert noniid["verdict"] == "does not hold"
    # SHAT − ASP with a ×100 straggler: −1, −0.5, 0 pt → [−2.24, 0.74]: inconclusive
    assert by_text["SHAT final acc − ASP final acc, one ×100 straggler (HE2)"]["verdict"] == "inconclusive"
    # DGS keeps its accuracy (+1, +1.5, +2 pt): past the 1 pt non-inferiority margin and the paper's "no loss"
    accuracy = by_text["DGS final acc − ASGD final acc, same updates"]
    assert (accuracy["verdict"], accuracy["magnitude"]) == ("holds", "holds")
    text = rp.table(results)
    built = text[text.index("Fixed by the configuration, not verdicts"):]
    assert "rate 0.01" in built and "4 / 26 = 0.154" in built and "[" in text and "(3 seeds)" in text
    assert "in the simulator the busiest server's link bounds the throughput" in built
    assert "Measured claims: 10; direction: " in text and " hold, " in text
    assert "Figures fixed by the configuration, listed apart and not counted: 4." in text
    assert "| ≥ 7× | does not hold |" in text and "the paper gives no number | n/a |" in text
    # the figures the configuration fixes come after every measured claim
    last_measured = text.index("DANA-DC final acc − one worker, N = 16 heterogeneous")
    assert text.index("SHAT throughput, layer-wise sharding ÷ none") > last_measured
    assert text.index("DGS bytes per update") > text.index("NAG-ASGD final acc")


def test_one_seed_gives_figures_but_no_verdict(tmp_path):
    write_runs(tmp_path, seeds=(0,))
    results = rp.evaluate(tmp_path)
    assert all(r["verdict"] == "inconclusive" for r in results)
    assert [r["value"] for r in results] == pytest.approx(EXPECTED)


def _dgs_speedup(tmp_path, **seed1):
    """The DGS speedup claim (ASGD's time ÷ DGS's, 9× in every seed) with seed 1's rows changed:
    `seed1` maps "asgd"/"dgs" to the fields to set (seed 1 scales every time by 1.1)."""
    summary = json.loads((tmp_path / "dgs" / "summary.json").read_text())
    for label, fields in seed1.items():
        summary[f"{label}@seed=1"].update(fields)
    (tmp_path / "dgs" / "summary.json").write_text(json.dumps(summary))
    return next(r for r in rp.evaluate(tmp_path) if r["claim"].text.startswith("DGS time"))


def test_a_method_that_did_not_reach_the_target_is_censored_and_cannot_make_the_claim_hold(tmp_path):
    write_runs(tmp_path)
    # DGS watched for 330 s without reaching: its time is at least 330 s, so ASGD's 198 s ÷ 330 s = 0.6 bounds
    # the ratio from above (it flatters DGS). Kept, not dropped: 9, 0.6, 9 → inconclusive.
    speedup = _dgs_speedup(tmp_path, dgs={"time_to_target_s": None, "duration_s": 330.0})
    assert speedup["per_seed"] == pytest.approx({0: 9.0, 1: 0.6, 2: 9.0}) and speedup["interval"].n == 3
    assert speedup["censored"][1].flatters_method and speedup["verdict"] == "inconclusive"
    assert "(3 seeds; both reached the target in 2/3, 1 censored at its run's end)" in rp.table([speedup])
    # the same bound at 9×: the interval alone would say "holds", but only because the censored time flatters DGS
    speedup = _dgs_speedup(tmp_path, dgs={"time_to_target_s": None, "duration_s": 22.0})
    assert speedup["per_seed"][1] == pytest.approx(9.0) and speedup["verdict"] == "inconclusive"
    assert "holds only with the method's unreached times counted at its runs' ends" in speedup["caveat"]


def test_a_baseline_that_did_not_reach_the_target_counts_against_the_method_and_the_claim_can_hold(tmp_path):
    write_runs(tmp_path)
    # ASGD watched for 198 s without reaching: its time is at least 198 s, DGS's is 22 s, the ratio at least 9
    speedup = _dgs_speedup(tmp_path, asgd={"time_to_target_s": None, "duration_s": 198.0})
    assert speedup["per_seed"] == pytest.approx({0: 9.0, 1: 9.0, 2: 9.0})
    assert not speedup["censored"][1].flatters_method and speedup["verdict"] == "holds"
    assert speedup["caveat"] == ""


def test_a_seed_where_neither_reached_gives_no_figure_and_no_verdict_stands_without_it(tmp_path):
    write_runs(tmp_path)
    speedup = _dgs_speedup(tmp_path, asgd={"time_to_target_s": None}, dgs={"time_to_target_s": None})
    assert speedup["per_seed"][1] is None and speedup["interval"].n == 2 and speedup["value"] == pytest.approx(9.0)
    assert speedup["verdict"] == "inconclusive" and "1 of 3 gave none" in speedup["caveat"]
    assert "(2 of 3 seeds; no figure in 1/3: neither reached the target; both reached the target in 2/3)" \
        in rp.table([speedup])
    summary = json.loads((tmp_path / "dgs" / "summary.json").read_text())
    for label in summary:
        summary[label]["time_to_target_s"] = None
    (tmp_path / "dgs" / "summary.json").write_text(json.dumps(summary))
    speedup = next(r for r in rp.evaluate(tmp_path) if r["claim"].text.startswith("DGS time"))
    assert speedup["value"] is None and speedup["verdict"] == "n/a" and speedup["why"] == "neither reached the target"


@pytest.mark.parametrize("verdict, per_seed, censored, expected", [
    ("does not hold", {0: 2.0, 1: 2.5}, {1: Censored(2.5, flatters_method=False)}, "inconclusive"),
    ("does not hold", {0: 2.0, 1: 2.5}, {1: Censored(2.5, flatters_method=True)}, "does not hold"),
    ("holds", {0: 9.0, 1: 9.0}, {1: Censored(9.0, flatters_method=False)}, "holds"),
    ("holds", {0: 9.0, 1: 9.0}, {1: Censored(9.0, flatters_method=True)}, "inconclusive"),
    ("does not hold", {0: 2.0, 1: None}, {}, "inconclusive"),
    ("inconclusive", {0: 2.0, 1: None}, {}, "inconclusive"),
    ("n/a", {0: None}, {}, "n/a"),
])
def test_a_verdict_stands_only_if_the_seeds_without_a_plain_figure_cannot_turn_it(verdict, per_seed, censored,
                                                                                 expected):
    assert guarded(verdict, per_seed, censored)[0] == expected


def test_a_censored_ratio_bounds_the_figure_from_the_side_of_the_unreached_time():
    rows = {"base": {"time_to_target_s": None, "duration_s": 300.0}, "method": {"time_to_target_s": 30.0}}
    assert censored_ratio(rows, "base", "method") == Censored(10.0, flatters_method=False)
    rows = {"base": {"time_to_target_s": 60.0}, "method": {"time_to_target_s": None, "duration_s": 120.0}}
    assert censored_ratio(rows, "base", "method") == Censored(0.5, flatters_method=True)
    rows["base"]["time_to_target_s"] = None  # neither reached: nothing to compare
    assert censored_ratio(rows, "base", "method") is None


def test_the_seeds_in_which_an_entry_the_claim_reads_diverged_are_named(tmp_path):
    write_runs(tmp_path)
    gap = next(r for r in rp.evaluate(tmp_path) if r["claim"].text.startswith("NAG-ASGD mean gap ÷ DANA-DC"))
    assert gap["diverged"] == {s: ["nag_asgd@clients=16×gamma-homo"] for s in (0, 1, 2)}
    assert "diverged in 3/3 (nag_asgd@clients=16×gamma-homo)" in rp.table([gap])
    hetero = next(r for r in rp.evaluate(tmp_path) if r["claim"].text.endswith("N = 16 heterogeneous")
                  and r["claim"].text.startswith("DANA-DC final acc"))
    assert hetero["diverged"] == {}


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


def edgesync_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`edgesync ARGS` in this process (the command line's own entry point, without a process of its own and
    its torch import): exit status, stdout, stderr."""
    from edgesync.cli import main
    monkeypatch.setattr(sys, "argv", ["edgesync", *args])
    capsys.readouterr()
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_reads_finished_runs_and_refuses_an_unknown_experiment(tmp_path, monkeypatch, capsys):
    write_runs(tmp_path)
    code, stdout, stderr = edgesync_cli(monkeypatch, capsys, "reproduce", "--from", str(tmp_path))
    assert code == 0, stderr
    assert "DANA-DC final acc" in stdout and (tmp_path / "claims.md").exists()
    code, _, stderr = edgesync_cli(monkeypatch, capsys, "reproduce", "--only", "nope")
    assert code == 2 and "unknown ['nope']" in stderr


@pytest.mark.slow
def test_run_suite_runs_each_experiment_and_records_how(tmp_path, monkeypatch):
    tiny = ("dataset.train_size=1000", "algorithms=[{name: ssgd, lr: 0.1, batch_size: 8}, "  # small batches: cheap
            "{name: asgd, lr: 0.1, batch_size: 8}, {name: esync, lr: 0.1, batch_size: 8}]",
            "stop={time_budget_s: 1, target_acc: 0.3}", "eval={every_s: 1, test_size: 200}", "sim.base_step_s=0.05",
            "sim.server_time=zero")  # no calibration: the next test checks the measured step and costs
    monkeypatch.setattr(rp.suite, "EXPERIMENTS",  # where run_suite reads them
                        (rp.Experiment("esync_iid", "scenarios/esync_fmnist_iid.yaml", quick=tiny),))
    # Execute
    rp.run_suite(tmp_path, quick=True, progress=False, seeds=[0, 1])
    # Assert
    manifest = rp.read_manifest(tmp_path)
    assert list(manifest) == ["esync_iid"] and rp.folder_key(tmp_path) == "quick-sim"
    assert manifest["esync_iid"]["runtime"] == "sim" and manifest["esync_iid"]["wall_s"] > 0
    assert manifest["esync_iid"]["overrides"][-2:] == ["runtime=sim", "seeds=[0, 1]"]
    assert manifest["esync_iid"]["seeds"] == [0, 1] and "cores" in manifest["esync_iid"]["machine"]
    claims = {r["claim"].text: r for r in rp.evaluate(tmp_path)}
    ratio = claims["ESync bytes/s ÷ ASGD bytes/s"]
    assert sorted(ratio["per_seed"]) == [0, 1]
    assert all(0 < v < 1 for v in ratio["per_seed"].values())  # ESync sends less than ASGD even in 1 s
    note = rp.docs_note(tmp_path, "quick-sim")
    assert "seeds 0, 1" in note and "base step 50.00 ms" in note and "cores" in note


@pytest.mark.slow
def test_run_suite_runs_experiments_side_by_side_in_worker_processes(tmp_path, monkeypatch, capsys):
    # The step time is measured (no sim.base_step_s): a virtual second costs about a second of CPU per client
    # whatever the batch size, so the runs are short, with two of the four clients (x1 and x10).
    tiny = ("dataset.train_size=600", "clients=[x1, x10]", "algorithms=[{name: asgd, lr: 0.1}, {name: esync, lr: 0.1}]",
            "stop={time_budget_s: 0.25, target_acc: 0.3}", "eval={every_s: 0.25, test_size: 100}")
    monkeypatch.setenv("EDGESYNC_CACHE", str(tmp_path / "cache"))  # a cache of its own: the test reads it
    # run_suite reads the experiments where it lives, edgesync/reproduce/suite.py
    monkeypatch.setattr(rp.suite, "EXPERIMENTS", (
        rp.Experiment("esync_iid", "scenarios/esync_fmnist_iid.yaml", quick=tiny),
        rp.Experiment("esync_noniid", "scenarios/esync_fmnist_noniid.yaml", quick=tiny)))
    monkeypatch.setattr(rp.suite, "PROGRESS_EVERY_S", 0.5)  # while they run, what they have finished so far
    rp.run_suite(tmp_path, quick=True, progress=False, seeds=[0, 1], jobs=2)
    assert re.search(r"reproduce: \d+ min so far; esync_\w+: \d/4 runs finished", capsys.readouterr().err)
    manifest = rp.read_manifest(tmp_path)
    assert sorted(manifest) == ["esync_iid", "esync_noniid"] and {e["jobs"] for e in manifest.values()} == {2}
    assert "2 experiments at a time" in rp.docs_note(tmp_path, "quick-sim")
    for key in manifest:
        summary = json.loads((tmp_path / key / "summary.json").read_text())
        assert summary["esync"]["seeds"] == [0, 1] and summary["asgd"]["stats"]["final_acc"]["n"] == 2
    # the step time was measured once, before the workers started, and both used it
    steps = {json.dumps(yaml.safe_load((tmp_path / k / "scenario.yaml").read_text())["sim"]["measured_step_s"])
             for k in manifest}
    assert len(steps) == 1 and json.loads((tmp_path / "cache" / "step_times.json").read_text())
    # and so were the coordinator's costs of their entries (the same entries: the same costs in both)
    costs = {json.dumps(yaml.safe_load((tmp_path / k / "scenario.yaml").read_text())["sim"]["measured_server_s"],
                        sort_keys=True) for k in manifest}
    assert len(costs) == 1 and json.loads((tmp_path / "cache" / "server_costs.json").read_text())


def test_the_docs_note_reads_a_live_runs_base_steps_from_its_clients(tmp_path):
    for key, steps in (("esync_iid", (0.0216, 0.0241, 0.0230)), ("esync_noniid", (0.0220,))):
        (tmp_path / key).mkdir()
        (tmp_path / key / "scenario.yaml").write_text(yaml.safe_dump({"runtime": "live", "sim": {}}))
        (tmp_path / key / "clients.jsonl").write_text(
            "".join(json.dumps({"client": 0, "base_step_s": s}) + "\n" for s in steps))
    assert rp.base_steps(tmp_path) == [21.6, 22.0, 23.0, 24.1]
    assert "base step 21.60–24.10 ms over the runs" in rp.docs_note(tmp_path, "quick-live")


def test_a_gap_past_its_bound_or_an_accuracy_back_at_chance_is_divergence_named_not_averaged(tmp_path):
    """DANA's gap ratio once read 6.9e14 as an "inconclusive" figure: a gap past GAP_DIVERGED is a run that
    came apart, and the ratio reads the first 100 updates' gaps, before it did."""
    write_runs(tmp_path)
    summary = json.loads((tmp_path / "dana" / "summary.json").read_text())
    summary["dana_dc@clients=16×gamma-homo,seed=2"].update(mean_gap=6.9e14, final_acc=0.1, diverged=False)
    (tmp_path / "dana" / "summary.json").write_text(json.dumps(summary))
    gap = next(r for r in rp.evaluate(tmp_path) if r["claim"].text.startswith("NAG-ASGD mean gap ÷ DANA-DC"))
    assert gap["diverged"][2] == ["dana_dc@clients=16×gamma-homo", "nag_asgd@clients=16×gamma-homo"]
    assert gap["per_seed"] == pytest.approx({0: 20.0, 1: 20.0, 2: 20.0})  # the early gaps: no 1e14 in the mean
    assert "diverged in 3/3 (dana_dc@clients=16×gamma-homo, nag_asgd@clients=16×gamma-homo)" in rp.table([gap])


# -- the FL baselines: an experiment with a comparison table, no claim ----------------------------------------

def test_fl_baselines_tunes_fedavg_and_the_seven_baselines_alike_and_no_claim_reads_it():
    exp = next(e for e in rp.EXPERIMENTS if e.key == "fl_baselines")
    assert not exp.in_quick and rp.baselines.FL_BASELINES.experiment == exp.key
    assert not any(exp.key in (c.experiment, *c.also) for c in rp.CLAIMS) and exp.key not in rp.CLAIMED
    for quick in (True, False):
        seeds = rp.SEEDS["quick" if quick else "full"]
        sc = load_scenario(REPO / exp.scenario, [*(exp.quick if quick else exp.full), "runtime=sim", f"seeds={seeds}"])
        assert [a.key for a in sc.algorithms] == list(rp.baselines.FL_BASELINES.entries)
        assert sc.algorithms[0].name == "local_sgd" and sc.algorithms[0].weighted  # FedAvg's p_i
        assert sc.partition.kind == "dirichlet" and len(sc.clients) == 10
        assert {a.clients_per_round for a in sc.algorithms} == {5}  # partial participation, the same for all
        assert sc.tune.seed == TUNING_SEED not in seeds and sc.tune.validation_size == 2000
        assert all(sorted({p["lr"] for p in g.points}) == sorted(sc.tune.grid["lr"])
                   for g in entry_grids(sc))  # every entry on every lr of the one grid
    full = load_scenario(REPO / exp.scenario, [*exp.full, "runtime=sim"])
    keys = {g.label: g.keys for g in entry_grids(full)}
    assert keys["fedprox"] == ["lr", "global_lr", "mu"] and keys["fedavgm"] == ["lr", "global_lr", "server_momentum"]
    assert keys["fedadam"] == keys["scaffold"] == keys["fedavg"] == ["lr", "global_lr"]


@pytest.mark.slow
def test_a_stopped_suite_goes_on_with_its_unfinished_experiment_entry_by_entry(tmp_path, monkeypatch):
    """A suite stopped inside a tuned experiment's tuning runs: run again into the same folder it keeps the tuning
    runs that finished, runs the rest, and the folder ends as an uninterrupted suite's, row for row."""
    from edgesync.runtime.sim.simulator import Simulator

    tiny = ("dataset.train_size=600", "clients=[x1, x4]", "algorithms=[{name: asgd, lr: 0.1}, {name: ssgd, lr: 0.1}]",
            "stop={time_budget_s: 0.4, target_acc: null}", "eval={every_s: 0.2, test_size: 100}",
            "sim.base_step_s=0.02", "sim.server_time=zero",
            "tune={grid: {lr: [0.05, 0.1]}, metric: final_acc, validation_size: 200, seed: 100, extend: 0}")
    monkeypatch.setattr(rp.suite, "EXPERIMENTS", (rp.Experiment("esync_iid", "scenarios/esync_fmnist_iid.yaml",
                                                                quick=tiny),))
    rp.run_suite(tmp_path / "whole", quick=True, progress=False, seeds=[0, 1])

    original, calls = Simulator._log_clients, []

    def stop_at_the_third_entry(self, end):  # the third of the four tuning runs, before its clients' rows
        calls.append(self.config.key)
        if len(calls) == 3:
            raise KeyboardInterrupt("stopped")
        return original(self, end)

    monkeypatch.setattr(Simulator, "_log_clients", stop_at_the_third_entry)
    with pytest.raises(KeyboardInterrupt):
        rp.run_suite(tmp_path / "stopped", quick=True, progress=False, seeds=[0, 1])
    monkeypatch.setattr(Simulator, "_log_clients", original)
    assert rp.read_manifest(tmp_path / "stopped") == {}  # nothing finished
    ran = []
    monkeypatch.setattr(Simulator, "_run_algorithm", lambda self, config, run=Simulator._run_algorithm: (
        ran.append(config.key), run(self, config))[1])
    rp.run_suite(tmp_path / "stopped", quick=True, progress=False, seeds=[0, 1])
    assert ran[:2] == ["ssgd@lr=0.05", "ssgd@lr=0.1"] and len(ran) == 2 + 4  # two tuning runs left, four final
    assert rp.read_manifest(tmp_path / "stopped")["esync_iid"]["resumed"] is True
    for folder in ("", "tuning"):
        for name in ("metrics.jsonl", "updates.jsonl", "clients.jsonl"):
            read = lambda root: [{k: v for k, v in json.loads(line).items() if k != "wall_clock"}  # noqa: E731
                                 for line in (root / "esync_iid" / folder / name).read_text().splitlines()]
            assert read(tmp_path / "stopped") == read(tmp_path / "whole"), (folder, name)
    whole, stopped = (json.loads((tmp_path / f / "esync_iid" / "tuning.json").read_text()) for f in ("whole", "stopped"))
    assert stopped["entries"] == whole["entries"]


def test_a_suite_run_again_keeps_what_finished_with_the_same_settings(tmp_path, monkeypatch, capsys):
    ran = []

    def fake_run(scenario, overrides, folder, progress, parallel=1, fresh=False):
        ran.append((folder.name, fresh))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "summary.json").write_text("{}")
        return 1.0, False

    monkeypatch.setattr(rp.suite, "_run_one", fake_run)
    rp.run_suite(tmp_path, quick=True, progress=False, only=["dana", "dgs"])
    first = [name for name, _ in ran]
    assert set(first) >= {"dana", "dgs"}
    ran.clear()
    rp.run_suite(tmp_path, quick=True, progress=False, only=["dana", "dgs"])  # the same command again
    assert ran == [] and "kept (--fresh runs them again)" in capsys.readouterr().err
    rp.run_suite(tmp_path, quick=True, progress=False, only=["dgs"], seeds=[0, 1, 2, 3])  # other seeds: runs
    assert ran == [("dgs", False)]
    ran.clear()
    rp.run_suite(tmp_path, quick=True, progress=False, only=["dana"], fresh=True)
    assert [name for name, _ in ran] == [n for n in first if n.startswith("dana")] and all(f for _, f in ran)


def test_the_progress_of_a_running_experiment_counts_its_finished_runs(tmp_path):
    def finished(folder: Path, keys: list[str]) -> None:
        folder.mkdir(parents=True)
        (folder / "clients.jsonl").write_text("".join(json.dumps({"algorithm": k, "client": c}) + "\n"
                                                      for k in keys for c in (0, 1)))
    finished(tmp_path / "dgs", ["asgd@seed=0", "dgs@seed=0"])
    finished(tmp_path / "dgs" / "tuning", ["asgd@lr=0.1", "dgs@lr=0.1", "asgd@lr=0.2"])
    finished(tmp_path / "dgs" / "tuning-extended-1", ["asgd@lr=0.4"])
    assert rp.suite.progress_of(tmp_path / "dgs", 10) == "dgs: 4 tuning runs, 2/10 runs finished"
    (tmp_path / "shat").mkdir()
    assert rp.suite.progress_of(tmp_path / "shat", 6) == "shat: 0/6 runs finished"


def test_quick_runs_fl_baselines_only_when_named(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(rp.suite, "_run_one",
                        lambda scenario, overrides, folder, *rest: ran.append(folder.name) or (0.0, False))
    rp.run_suite(tmp_path / "quick", quick=True, progress=False)
    assert "fl_baselines" not in ran and "esync_iid" in ran and not set(rp.GROUPS["shootout"]) & set(ran)
    ran.clear()
    rp.run_suite(tmp_path / "only", quick=True, progress=False, only=["fl_baselines"])
    assert ran == ["fl_baselines"]
    ran.clear()
    rp.run_suite(tmp_path / "full", quick=False, progress=False)  # the full mode runs them all, the shoot-out last
    assert ran[-9:] == ["fl_baselines", *rp.GROUPS["shootout"]]


def fl_row(acc, t, duration=40.0, updates=30, diverged=False):
    return {"final_acc": acc, "best_acc": acc, "time_to_target_s": t, "duration_s": duration, "updates": updates,
            "bytes_up": 3e6, "bytes_down": 3e6, "diverged": diverged, "target_acc": 0.75}


# seed → label → row; fedavgm and the adaptive three did not run here (the table says so)
FL_RUNS = {0: {"fedavg": fl_row(0.80, 20.0), "fedprox": fl_row(0.82, 10.0), "scaffold": fl_row(0.80, 20.0, updates=15),
               "fednova": fl_row(0.75, 44.0)},
           1: {"fedavg": fl_row(0.81, 22.0), "fedprox": fl_row(0.83, 11.0), "scaffold": fl_row(0.81, 22.0, updates=15),
               "fednova": fl_row(0.76, 44.0)},
           2: {"fedavg": fl_row(0.82, 24.0), "fedprox": fl_row(0.84, 12.0), "scaffold": fl_row(0.82, None, updates=15),
               "fednova": fl_row(0.77, 48.0)}}


def write_fl_runs(root: Path) -> None:
    folder = root / "fl_baselines"
    folder.mkdir(parents=True)
    runs = {f"{label}@seed={s}": row for s, rows in FL_RUNS.items() for label, row in rows.items()}
    (folder / "summary.json").write_text(json.dumps(with_seed_aggregates(runs)))
    chosen = {"fedavg": 0.1, "fedprox": 0.05, "scaffold": 0.1, "fednova": 0.1}
    (folder / "tuning.json").write_text(json.dumps({
        "grid": {"lr": [0.05, 0.1]}, "metric": "final_acc", "seed": 100, "runs": 8, "validation": {"size": 2000},
        "extended": [], "edges_left": {"fedprox": {"lr": "lowest"}},
        "entries": {label: {"chosen": {"lr": lr}, "figure": 0.8, "all_diverged": False, "not_applicable": []}
                    for label, lr in chosen.items()}}))


def test_the_baselines_table_is_drawn_from_the_per_run_rows(tmp_path):
    write_fl_runs(tmp_path)
    data = rp.baselines.record(tmp_path, rp.baselines.FL_BASELINES)
    text = rp.baselines.render(json.loads(json.dumps(data)))  # as docs/data keeps it
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| ")}
    # FedAvg: finals 80, 81, 82 %: mean 81, sd 1, half-width 4.302653/√3 = 2.484; times 20, 22, 24 s: [17.0, 27.0]
    assert rows["fedavg"] == ("| fedavg | lr 0.1 (80 %) | 81 [78.5, 83.5] | 22 [17, 27] (3/3 reached) | 30 [30, 30] | "
                              "6 [6, 6] | — | — | — | — |")
    # FedProx: +2 pt and half FedAvg's time in every seed: higher, faster
    assert "| 2 pt [2, 2] (3 seeds) | higher | 2× [2, 2] (3 seeds; both reached the target in 3/3) | faster |" \
        in rows["fedprox"]
    # SCAFFOLD: the same accuracy (within ±1 pt); seed 2 unreached at 40 s, counted there: times ≥ (20 + 22 + 40)/3,
    # ratios 1, 1, 24/40 = 0.6 (its own time censored: flatters it): 0.867 [0.293, 1.44], straddles 1
    assert "| ≥ 27.3 (2/3 reached; the others counted at their runs' end) | 15 [15, 15] |" in rows["scaffold"]
    assert ("| 0 pt [0, 0] (3 seeds) | no difference (within ±1) | 0.867× [0.293, 1.44] (3 seeds; both reached the "
            "target in 2/3, 1 censored at its run's end) | inconclusive (the interval straddles 1 and reaches past "
            "±0.25) |") in rows["scaffold"]
    # FedNova: −5 pt; ratios 20/44, 22/44, 24/48: 0.485 [0.42, 0.55]
    assert ("| −5 pt [−5, −5] (3 seeds) | lower | 0.485× [0.42, 0.55] (3 seeds; both reached the target in 3/3) "
            "| slower |") in rows["fednova"]
    assert rows["fedavgm"].startswith("| fedavgm | not run |") and rows["fedavgm"].count("|") == 11
    assert "8 tuning runs on seed 100, chosen by final acc on 2,000 validation images" in text
    assert "on the grid's edge (the optimum may lie beyond): fedprox lr at its lowest" in text
    assert "| lr 0.05 (80 %) |" in rows["fedprox"] and "Not a paper's claim" in text


def test_a_censored_time_turns_a_comparison_only_the_way_it_could():
    from edgesync.reproduce.censoring import guarded_comparison
    flatters, understates = Censored(2.0, flatters_method=True), Censored(2.0, flatters_method=False)
    assert guarded_comparison("faster", "slower", "faster", {0: 2.0, 1: 2.0}, {1: understates}) == ("faster", "")
    assert guarded_comparison("faster", "slower", "faster", {0: 2.0, 1: 2.0}, {1: flatters})[0] == "inconclusive"
    assert guarded_comparison("slower", "slower", "faster", {0: 0.5, 1: 0.5}, {1: flatters}) == ("slower", "")
    assert guarded_comparison("slower", "slower", "faster", {0: 0.5, 1: 0.5}, {1: understates})[0] == "inconclusive"
    assert guarded_comparison("no difference (within ±0.25)", "slower", "faster", {0: 1.0, 1: 1.0},
                              {1: understates})[0] == "inconclusive"
    assert guarded_comparison("higher", "lower", "higher", {0: 2.0, 1: None}, {}) == (
        "inconclusive", "higher over the seeds with a figure, but 1 of 2 gave none")


def test_write_docs_adds_the_baselines_block_and_its_record_draws_it_again(tmp_path):
    from edgesync.docs_data import earlier_section, renderer
    write_fl_runs(tmp_path / "runs")
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n")
    data = rp.baselines.record(tmp_path / "runs", rp.baselines.FL_BASELINES)
    for _ in range(2):  # the second time keeps the first table under it
        path = rp.write_baselines(data, "full-sim", "full-sim, runs in `runs`", doc, tmp_path / "data")
    block = rp.baselines_block("fl_baselines", "full-sim")
    text, record = doc.read_text(), json.loads(path.read_text())
    assert path.name == "baselines-fl_baselines-full-sim.json" and record["block"] == block
    assert text.count(f"<!-- {block}:begin -->") == 1 and "### FedAvg and the standard FL baselines" in text
    body = text.split(f"<!-- {block}:begin -->\n")[1].split(f"\n<!-- {block}:end -->")[0]
    assert body == record["note"] + "\n\n" + renderer(block)(record["data"]) + earlier_section(record)
    assert record["note"].startswith("_Written by `edgesync reproduce` (full-sim") and path.name in record["note"]


def test_cli_prints_the_baselines_table_of_a_folder_without_claims(tmp_path, monkeypatch, capsys):
    write_fl_runs(tmp_path)
    code, stdout, stderr = edgesync_cli(monkeypatch, capsys, "reproduce", "--from", str(tmp_path))
    assert code == 0, stderr
    assert "| fedprox | lr 0.05 (80 %) |" in stdout and "| claim |" not in stdout
    assert "FedAvg and the standard FL baselines" in (tmp_path / "claims.md").read_text()
