"""esync_budget: ESync's State Server decided at the start of each round (a registered algorithm, the
stand-in ESync's spec names where clients cannot query), on the runtime's clock."""
from __future__ import annotations

import pytest

from edgesync import algorithms
from edgesync.algorithms.esync import ESyncConfig
from edgesync.algorithms.esync_budget import ESyncBudgetConfig, step_budget
from edgesync.algorithms.registry import without_queries
from edgesync.algorithms.ssgd import SSGDConfig
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario


@pytest.mark.parametrize("c_i,c_max,slack,cap,n", [
    (0.1, 1.0, 0.0, 100, 10),   # ten of its steps while the slowest makes one
    (1.0, 1.0, 0.0, 100, 1),    # the slowest itself
    (0.3, 1.0, 0.0, 100, 3),    # ⌊3.33⌋
    (0.1, 1.0, 0.5, 100, 5),    # ε shortens the round
    (0.01, 1.0, 0.0, 20, 20),   # the cap
    (2.0, 1.0, 0.0, 100, 1),    # never fewer than one
])
def test_step_budget_is_alg2s_ready_point(c_i, c_max, slack, cap, n):
    assert step_budget(c_i, c_max, slack, cap) == n


def test_esync_names_esync_budget_as_its_stand_in_where_clients_cannot_query():
    assert algorithms.get("esync").without_queries == "esync_budget"
    config = ESyncConfig(lr=0.2, slack_s=0.1, momentum=0.5, mode="nonblocking", max_local_steps=50)
    stand_in = without_queries(config, budget="time")
    assert isinstance(stand_in, ESyncBudgetConfig)
    assert (stand_in.lr, stand_in.slack_s, stand_in.momentum, stand_in.max_local_steps, stand_in.budget) == \
        (0.2, 0.1, 0.5, 50, "time")
    assert stand_in.key == "esync"  # its rows keep the scenario's entry name
    plain = SSGDConfig(lr=0.1)
    assert without_queries(plain, budget="time") is plain  # a client that never queries runs as it is
    assert without_queries(stand_in) is stand_in


def test_a_querying_algorithm_without_a_stand_in_is_refused_by_name(monkeypatch):
    spec = algorithms.get("esync")
    monkeypatch.setitem(algorithms.registry._BY_NAME, "esync",
                        algorithms.AlgorithmSpec(spec.name, spec.config, spec.server, spec.client, spec.family))
    with pytest.raises(ValueError, match="esync: its client half queries the server mid-instruction"):
        without_queries(ESyncConfig())


@pytest.mark.parametrize("budget", ["steps", "time"])
def test_in_the_simulator_the_budget_runs_on_virtual_time(tmp_path, budget):
    """x1 and x4 clients, steps of 0.25 virtual s (exact in binary): after the first round (one step each,
    every capability unknown) the x1 client fills the x4 client's one step with four of its own."""
    scenario = load_scenario({
        "name": "budget", "seed": 1, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 1000},
        "clients": ["x1", "x4"],
        "algorithms": [{"name": "esync_budget", "lr": 0.05, "budget": budget}],
        "stop": {"time_budget_s": 60.0, "max_updates": 4, "target_acc": None},
        "eval": {"every_s": 5.0, "test_size": 100},
        "sim": {"base_step_s": 0.25, "server_time": "zero"},
    })
    run_scenario(scenario, tmp_path / "run", progress=False)
    rows = read_jsonl(tmp_path / "run" / "updates.jsonl")
    n_i = {(r["round"], r["client"]): r["n_i"] for r in rows}
    assert n_i[(0, 0)] == n_i[(0, 1)] == 1
    for rnd in (1, 2, 3):
        assert (n_i[(rnd, 0)], n_i[(rnd, 1)]) == (4, 1)
    c_i = {r["client"]: r["c_i"] for r in rows if r["round"] == 3}
    assert c_i == {0: 0.25, 1: 1.0}  # capabilities in virtual seconds per step
    metrics = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert metrics[-1]["time_s"] == 4.0  # four rounds of one x4 step each
