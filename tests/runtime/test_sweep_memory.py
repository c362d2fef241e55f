"""A simulated sweep gives each variant's heap back before the next variant: without it a sweep of large models
grew by what the allocator kept of each variant (a ResNet-18 EQ3 sweep, nine runs in one process, went from
3 GB to 24 GB and was killed; with it the nine runs peak where one does)."""
from __future__ import annotations

from edgesync.config import load_scenario
from edgesync.runtime import runs


def test_the_heap_is_released_after_every_simulated_variant(tmp_path, monkeypatch):
    released = []
    monkeypatch.setattr(runs, "release_free_memory", lambda: released.append(len(released)))
    scenario = load_scenario({
        "name": "sweep-memory", "runtime": "sim", "clients": 2, "dataset": {"train_size": 200},
        "sim": {"base_step_s": 0.01}, "eval": {"every_s": 0.1, "test_size": 100},
        "algorithms": [{"name": "asgd"}], "stop": {"time_budget_s": 0.2, "target_acc": None},
        "sweep": {"clients": [2, 3]}, "seeds": [0, 1]})
    runs.run_scenario(scenario, tmp_path / "run", progress=False)
    assert len(released) == 4  # two variants × two seeds, each released after it ran
