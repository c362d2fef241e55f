"""DGS, GD-async and DGC-async end to end in the simulator on real Fashion-MNIST (3 clients).

Each algorithm trains the CNN (184,586 parameters) for 2 virtual seconds next to ASGD, on mini-batches of 8:
accuracy rises well above chance (0.46-0.58 here) while the bytes up per update are about 2% of ASGD's (1% of
the entries, 8 bytes each, plus the message header).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """One run for the module (its logs are checked, not its report: not drawn)."""
    out = tmp_path_factory.mktemp("dgs_family") / "run"
    mp = pytest.MonkeyPatch()
    mp.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
    try:
        run_scenario(load_scenario({
            "name": "dgs-family", "seed": 1, "runtime": "sim",
            "dataset": {"name": "fashion_mnist", "train_size": 1000},
            "clients": ["x1", "x1", "x1"],
            "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 8},
                           {"name": "dgs", "lr": 0.02, "momentum": 0.7, "rate": 0.01, "batch_size": 8},
                           {"name": "gd_async", "lr": 0.05, "rate": 0.01, "batch_size": 8},
                           {"name": "dgc_async", "lr": 0.02, "momentum": 0.7, "rate": 0.01, "batch_size": 8}],
            "stop": {"time_budget_s": 2.0, "target_acc": None},
            "eval": {"every_s": 2.0, "test_size": 500},  # at the start and the end: the final accuracy is checked
            "sim": {"base_step_s": 0.05, "server_time": "zero"},
        }), out, progress=False)
    finally:
        mp.undo()
    return out


def final(run_dir: Path, label: str) -> dict:
    return [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["algorithm"] == label][-1]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dgs", "gd_async", "dgc_async"])
def test_accuracy_rises_and_bytes_up_are_a_few_percent_of_asgds(run_dir, name):
    ours, asgd = final(run_dir, name), final(run_dir, "asgd")
    assert ours["updates"] == asgd["updates"] > 50  # the same virtual time, the same steps
    assert ours["test_acc"] > 0.3  # chance: 0.1
    assert ours["bytes_up"] / ours["updates"] < 0.03 * asgd["bytes_up"] / asgd["updates"]
    assert ours["bytes_down"] < 0.2 * asgd["bytes_down"]
    rows = [r for r in read_jsonl(run_dir / "updates.jsonl") if r["algorithm"] == name]
    assert len(rows) == ours["updates"]
    # per layer (the default topk_scope): Σ max(1, ⌊0.01·numel⌋) over the CNN's 8 tensors = 1,846 entries
    assert all(r["bytes_up"] == 1846 * 8 and r["density_up"] == round(1846 / 184_586, 6) for r in rows)
    assert all(r["lag"] >= 0 and r["v_bytes"] == 3 * 184_586 * 4 for r in rows)
