"""The straggler shoot-out (edgesync/reproduce/shootout.py, docs/stragglers.md): its experiments, the choice of the
best practitioner before any evaluation run is read, the ranking, the verdicts and picks, the compute thrown away,
and the Pareto plots — from records built by hand."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync.config import load_scenario
from edgesync.reproduce import GROUPS, shootout
from edgesync.reproduce.experiments import EXPERIMENTS
from edgesync.reproduce.shootout_setup import ENTRIES, KEYS, METHODS, OWN_MIX, PRACTITIONERS, key

ROOT = Path(__file__).resolve().parents[1]


def test_every_mix_and_split_is_an_experiment_of_the_group():
    ours = [e for e in EXPERIMENTS if e.key in KEYS]
    assert GROUPS["shootout"] == KEYS and len(ours) == 4 * 2 and not any(e.in_quick for e in ours)
    for e in ours:  # each loads, with the thirteen entries and a tuned grid
        sc = load_scenario(ROOT / e.scenario, [*e.quick, "seeds=[0, 1, 2]"])
        assert sorted(a.key for a in sc.algorithms) == sorted(ENTRIES) and sc.tune is not None and len(sc.clients) == 8
    assert set(OWN_MIX) == set(METHODS)


def run(t, acc, duration=8.0, seed_bytes=1e6) -> dict:
    return {"time_to_target_s": t, "final_acc": acc, "duration_s": duration, "bytes_up": seed_bytes,
            "bytes_down": seed_bytes, "wasted_share": 0.0}


def experiment(times: dict[str, list], tuning: dict[str, float | None]) -> dict:
    """Three seeds; `times[label]` each seed's time to target (None: not reached); tuning figures by entry."""
    rows = {str(s): {label: run(ts[s], 0.85) for label, ts in times.items()} for s in range(3)}
    return {"folder": "runs/x", "rows": rows, "target_acc": 0.8,
            "tuning": {"grid": {"lr": [0.1]}, "metric": "time_to_target", "seed": 100, "runs": 1,
                       "validation_size": 2000, "extended": 0, "edges_left": {},
                       "entries": {e: {"chosen": {"lr": 0.1}, "figure": f, "all_diverged": False,
                                       "not_applicable": []} for e, f in tuning.items()}}}


def test_the_best_practitioner_is_chosen_by_validation_not_by_the_evaluation_runs():
    # fedbuff tuned fastest on validation, so it is the reference even though ssp is faster in every seed
    e = experiment({"fedbuff": [2.0, 2.0, 2.0], "ssp": [1.0, 1.0, 1.0], "esync": [1.0, 1.1, 0.9]},
                   {"fedbuff": 1.5, "ssp": 2.5, "ssgd_backup": None})
    assert shootout.best_practitioner(e) == "fedbuff"
    assert shootout.best_practitioner({"tuning": None}) == PRACTITIONERS[0]


def test_the_verdicts_ask_each_method_on_its_own_mix():
    # ESync twice as fast as the best practitioner in each seed: faster; SHAT on the ×100 mix never reaches the
    # target while fedbuff does: counted at its run's end, against SHAT
    x10 = experiment({"fedbuff": [2.0, 2.2, 1.8], "esync": [1.0, 1.1, 0.9]}, {"fedbuff": 1.0})
    x100 = experiment({"fedbuff": [2.0, 2.0, 2.0], "shat": [None, None, None]}, {"fedbuff": 1.0})
    data = {"experiments": {key("x10", "iid"): x10, key("x100", "iid"): x100}}
    found = {v["method"]: v for v in shootout.verdicts(data)}
    assert found["esync"]["best"] == "fedbuff" and found["esync"]["word"].startswith("faster")
    assert found["esync"]["figure"].startswith("2×")
    assert found["shat"]["word"].startswith("slower")
    assert set(found) == {"esync", "shat"}  # no gamma experiment: DGS and DANA-DC not read


def test_the_table_ranks_by_time_with_unreached_runs_at_their_end():
    e = experiment({"fedbuff": [2.0, 2.0, 2.0], "ssgd": [None, None, None], "asgd": [1.0, 1.0, 1.0],
                    "esync": [3.0, 3.0, 3.0]}, {"fedbuff": 1.0})
    table = shootout.mix_table(e, "one ×10")
    ranked = [line.split("|")[2].strip() for line in table if line[:4] in ("| 1 ", "| 2 ", "| 3 ", "| 4 ")]
    assert ranked == ["`asgd`", "`fedbuff`", "`esync`", "`ssgd`"]
    assert "not reached (0/3)" in table[-1]
    picks = shootout.picks({"experiments": {key("x10", "iid"): e}})
    assert picks[0].startswith("- **one ×10 among eight, i.i.d.**: `asgd` (plain) reached 0.8 first")


def test_the_compute_thrown_away_is_the_share_of_steps_in_late_updates(tmp_path):
    rows = [{"algorithm": "ssgd_backup@seed=0", "client": 0, "steps": 100, "wasted_steps": 0},
            {"algorithm": "ssgd_backup@seed=0", "client": 3, "steps": 10, "wasted_steps": 10},
            {"algorithm": "asgd@seed=0", "client": 0, "steps": 50}]
    path = tmp_path / "clients.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert shootout._waste(path) == {("ssgd_backup", 0): pytest.approx(10 / 110), ("asgd", 0): 0.0}


def test_render_and_plot_from_a_record(tmp_path):
    e = experiment({"fedbuff": [2.0, 2.2, 1.8], "esync": [1.0, 1.1, 0.9], "ssgd": [None, 7.0, None]},
                   {"fedbuff": 1.0})
    data = {"experiments": {key("x10", "iid"): e, key("x10", "dirichlet"): e}}
    text = shootout.render(json.loads(json.dumps(data)))  # as the docs block reads it back from docs/data/
    assert "| `esync` | one ×10 among eight | i.i.d. | `fedbuff` |" in text
    assert "(img/stragglers-x10.png)" in text and "x100" not in text
    paths = shootout.plot(data, tmp_path)
    assert [p.name for p in paths] == ["stragglers-x10.png"] and paths[0].stat().st_size > 10_000
    full = {**data, "plot_prefix": "stragglers-full"}  # the full mode's record (results_doc.write_shootout)
    assert "(img/stragglers-full-x10.png)" in shootout.render(full)
    assert [p.name for p in shootout.plot(full, tmp_path)] == ["stragglers-full-x10.png"]
