"""Sweeps: `sweep:` maps dotted keys to value lists; every combination is a labelled sub-run."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import ScenarioError, load_scenario
from edgesync.config import variants


def scenario(sweep: dict, **extra) -> dict:
    return {"name": "sw", "clients": 2, "algorithms": [{"name": "ssgd", "lr": 0.1}], "sweep": sweep, **extra}


def test_without_a_sweep_there_is_one_untagged_variant():
    sc = load_scenario(scenario({}))
    (only,) = variants(sc)
    assert only.tag == "" and only.scenario is sc
    assert [a.key for a in only.scenario.algorithms] == ["ssgd"]


def test_every_combination_is_a_variant_with_a_tag_and_labels():
    sc = load_scenario(scenario({"clients": [2, 3], "algorithms.0.lr": [0.05, 0.1]},
                                     algorithms=[{"name": "ssgd"}, {"name": "asgd", "label": "a"}]))
    vs = variants(sc)
    assert [v.tag for v in vs] == ["clients=2,lr=0.05", "clients=2,lr=0.1", "clients=3,lr=0.05", "clients=3,lr=0.1"]
    assert [a.key for a in vs[0].scenario.algorithms] == ["ssgd@clients=2,lr=0.05", "a@clients=2,lr=0.05"]
    assert [a.key for a in vs[3].scenario.algorithms] == ["ssgd@clients=3,lr=0.1", "a@clients=3,lr=0.1"]
    for v, (n, lr) in zip(vs, [(2, 0.05), (2, 0.1), (3, 0.05), (3, 0.1)]):
        assert len(v.scenario.clients) == n
        assert v.scenario.algorithms[0].lr == lr
        assert v.scenario.algorithms[1].lr == 0.05  # only entry 0 is swept (0.05 is the default)
        assert v.scenario.sweep == {}               # a variant does not sweep again
    # The scenario itself is untouched.
    assert len(sc.clients) == 2 and sc.algorithms[0].lr == 0.05


def test_a_key_keeps_its_full_path_when_its_last_part_is_ambiguous_or_a_number():
    # Unique last part: shortened.
    (v1, _) = variants(load_scenario(scenario({"clients.1.profile": ["x1", "x10"]})))
    assert v1.tag == "profile=x1"
    # Two keys ending in `profile`: both keep their path.
    vs = variants(load_scenario(scenario({"clients.0.profile": ["x2"], "clients.1.profile": ["x10"]})))
    assert [v.tag for v in vs] == ["clients.0.profile=x2,clients.1.profile=x10"]
    assert [c.profile.label for c in vs[0].scenario.clients] == ["x2", "x10"]
    assert vs[0].scenario.algorithms[0].key == "ssgd@clients.0.profile=x2,clients.1.profile=x10"
    # A numeric last part (a list item) keeps its path.
    vs = variants(load_scenario(scenario({"clients.1": ["x10", {"profile": "x100"}]})))
    assert [v.tag for v in vs] == ['clients.1=x10', 'clients.1={"profile":"x100"}']
    assert [c.profile.label for c in vs[1].scenario.clients] == ["x1", "x100"]


def test_values_are_shown_as_written(tmp_path):
    vs = variants(load_scenario(scenario({"stop.target_acc": [None, 0.5], "partition": [{"kind": "iid"}]})))
    assert [v.tag for v in vs] == ['target_acc=null,partition={"kind":"iid"}',
                                   'target_acc=0.5,partition={"kind":"iid"}']
    assert vs[0].scenario.stop.target_acc is None


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_invalid_sweep_value_names_the_key_and_the_value(tmp_path):
    path = _write(tmp_path, scenario({"stop.time_budget_s": [10, -1]}))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    text = str(err.value)
    assert "stop.time_budget_s" in text and "-1" in text and "sweep" in text
    assert str(path) in text
    # A path the scenario does not have is an error too.
    path = _write(tmp_path, scenario({"clients.5.profile": ["x1"]}))
    with pytest.raises(ScenarioError, match=r"sweep clients\.5\.profile=x1: clients\.5: no such list item"):
        load_scenario(path)


@pytest.mark.parametrize("sweep,message", [
    ({"clients": []}, "sweep key 'clients' needs at least one value"),
    ({"sweep.x": [1]}, "a sweep cannot sweep itself"),
    ({"clients": 3}, "sweep.clients"),
])
def test_malformed_sweeps_are_rejected(tmp_path, sweep, message):
    with pytest.raises(ScenarioError, match="sweep") as err:
        load_scenario(_write(tmp_path, scenario(sweep)))
    assert message in str(err.value)


def _refused_at_once(path: Path) -> list[str]:
    """The problem lines of loading `path`, which must fail well under a second of work (CPU time: the wall
    time of a busy host's test says nothing about whether the sweep was expanded first)."""
    start = time.process_time()
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert time.process_time() - start < 0.5
    return str(err.value).splitlines()


def test_a_sweep_of_too_many_combinations_is_refused_before_expanding_it(tmp_path):
    # 20 learning rates × 100 seeds (the file's key order): 2,000 variants, over the bound of 1,000
    path = _write(tmp_path, scenario({"algorithms.0.lr": [i / 100 for i in range(1, 21)], "seed": list(range(100))}))
    assert _refused_at_once(path) == [f"{path}: sweep: at most 1,000 combinations (got 2,000: 20 × 100 values)"]


def test_a_sweep_whose_variants_hold_too_many_clients_in_all_is_refused(tmp_path):
    # 30 variants of 5,000 clients: 150,000 clients to build, over the bound of 100,000
    path = _write(tmp_path, scenario({"seed": list(range(30))}, clients=5000))
    assert _refused_at_once(path) == [
        f"{path}: sweep: at most 100,000 clients in all combinations together (got 150,000 in 30 combinations)"]
    # Swept client counts are summed: 4 learning rates × (8,000 + 10,000 + 2,000 + 10,000) clients.
    path = _write(tmp_path, scenario({"clients": [{"count": 8000}, 10_000, ["x1"] * 2000, 10_000],
                                      "algorithms.0.lr": [0.1, 0.2, 0.3, 0.4]}))
    assert _refused_at_once(path) == [
        f"{path}: sweep: at most 100,000 clients in all combinations together (got 120,000 in 16 combinations)"]


@pytest.mark.parametrize("value, key", [(100_000_000, "sweep.clients.1"), ({"count": 100_000_000}, "sweep.clients.1.count")])
def test_a_swept_client_count_over_the_bound_is_refused_before_any_variant(tmp_path, value, key):
    path = _write(tmp_path, scenario({"clients": [4, value]}))
    assert _refused_at_once(path) == [f"{path}: {key}: at most 10,000 clients (got 100000000)"]


def test_a_sweep_at_its_bounds_loads():
    sc = load_scenario(scenario({"seed": list(range(50)), "algorithms.0.lr": [i / 100 for i in range(1, 21)]}))
    assert len(variants(sc)) == 1000
    sc = load_scenario(scenario({"seed": list(range(10))}, clients=10_000))
    assert sum(len(v.scenario.clients) for v in variants(sc)) == 100_000


def test_a_sim_run_over_a_sweep_writes_every_label(tmp_path, monkeypatch):
    data = scenario({"clients": [2, 3]}, runtime="sim", seed=1,  # mini-batches of 8: labels and counts, not learning
                    algorithms=[{"name": "ssgd", "lr": 0.1, "batch_size": 8}, {"name": "asgd", "lr": 0.05, "batch_size": 8}],
                    dataset={"train_size": 1000}, stop={"time_budget_s": 1.05, "target_acc": None},
                    eval={"every_s": 0.5, "test_size": 200}, sim={"base_step_s": 0.1, "server_time": "zero"})
    out = tmp_path / "run"
    summary = run_scenario(load_scenario(data), out, progress=False)
    labels = ["ssgd@clients=2", "asgd@clients=2", "ssgd@clients=3", "asgd@clients=3"]
    assert list(summary) == labels
    assert list(json.loads((out / "summary.json").read_text())) == labels
    clients = read_jsonl(out / "clients.jsonl")
    for label in labels:
        rows = [r for r in clients if r["algorithm"] == label]
        assert [r["client"] for r in rows] == list(range(int(label[-1])))
    assert len(clients) == 2 * (2 + 3)
    # All x1 clients, steps of 0.1 s, 1.05 s: 10 rounds whatever the number of clients.
    assert summary["ssgd@clients=2"]["updates"] == summary["ssgd@clients=3"]["updates"] == 10
    assert summary["asgd@clients=3"]["updates"] > summary["asgd@clients=2"]["updates"]
    # The run folder records the scenario with its sweep, and the report lists every label.
    recorded = yaml.safe_load((out / "scenario.yaml").read_text())
    assert recorded["sweep"] == {"clients": [2, 3]}
    report = (out / "report.md").read_text()
    assert all(f"`{label}`" in report for label in labels)


def test_clients_as_a_count_of_alike_clients_and_its_sweep_label():
    from edgesync.config import load_scenario
    from edgesync.config import variants
    sc = load_scenario({"name": "alike", "clients": {"count": 3, "profile": "x10"},
                             "algorithms": [{"name": "asgd"}],
                             "sweep": {"clients": [{"count": 2, "profile": "gamma-hetero"}, {"count": 5}]}})
    assert [c.profile.label for c in sc.clients] == ["x10"] * 3
    runs = variants(sc)
    assert [v.tag for v in runs] == ["clients=2×gamma-hetero", "clients=5×x1"]
    assert [len(v.scenario.clients) for v in runs] == [2, 5]
    assert runs[0].scenario.algorithms[0].key == "asgd@clients=2×gamma-hetero"
    assert runs[0].scenario.clients[1].profile.kind == "gamma"


def test_seeds_are_a_last_axis_labelled_seed(tmp_path):
    path = _write(tmp_path, scenario({"clients": [2, 3]}) | {"seeds": [4, 7]})
    runs = variants(load_scenario(path))
    assert [v.tag for v in runs] == ["clients=2,seed=4", "clients=2,seed=7", "clients=3,seed=4", "clients=3,seed=7"]
    assert [v.scenario.seed for v in runs] == [4, 7, 4, 7]
    assert all(v.scenario.seeds is None for v in runs)  # a variant is one run, not a seeds axis again
    assert runs[1].scenario.algorithms[0].key.endswith("@clients=2,seed=7")


def test_seeds_given_twice_or_repeated_are_refused(tmp_path):
    both = _write(tmp_path, scenario({"seed": [1, 2]}) | {"seeds": [0, 1]})
    with pytest.raises(ScenarioError, match="give the seeds once"):
        load_scenario(both)
    repeated = tmp_path / "repeated.yaml"
    repeated.write_text(yaml.safe_dump(scenario({}) | {"seeds": [0, 1, 1]}))
    with pytest.raises(ScenarioError, match=r"seeds: each seed once \(got 1 repeated\)"):
        load_scenario(repeated)


def test_a_run_with_seeds_keeps_every_seed_and_adds_mean_and_interval(tmp_path, plots):
    data = scenario({}, runtime="sim", seeds=[0, 1, 2],  # mini-batches of 8: the seeds' bookkeeping, not learning
                    algorithms=[{"name": "ssgd", "lr": 0.1, "batch_size": 8}, {"name": "asgd", "batch_size": 8}],
                    dataset={"train_size": 1000}, stop={"time_budget_s": 1.05, "target_acc": 0.3},
                    eval={"every_s": 0.5, "test_size": 200}, sim={"base_step_s": 0.1})
    out = tmp_path / "run"
    summary = run_scenario(load_scenario(data), out, progress=False)
    runs = [f"{a}@seed={s}" for s in (0, 1, 2) for a in ("ssgd", "asgd")]
    assert list(summary) == [*runs, "ssgd", "asgd"]  # every seed's entry, then the aggregates
    stored = json.loads((out / "summary.json").read_text())
    asgd = stored["asgd"]
    assert asgd["seeds"] == [0, 1, 2]
    finals = [stored[f"asgd@seed={s}"]["final_acc"] for s in (0, 1, 2)]
    assert asgd["final_acc"] == pytest.approx(sum(finals) / 3)
    assert asgd["stats"]["final_acc"]["per_seed"] == {str(s): f for s, f in zip((0, 1, 2), finals)}
    low, high = asgd["stats"]["final_acc"]["ci95"]
    assert low <= asgd["final_acc"] <= high
    # the seeds differ (initial model, data order): not three copies of one run
    assert len(set(finals)) > 1
    report = (out / "report.md").read_text()
    assert "## Comparison over seeds" in report and "seeds 0, 1, 2" in report
    assert "| `asgd` | 3 |" in report and "±" in report
    assert (out / "plots" / "accuracy_vs_time.png").stat().st_size > 0
