"""The TensorBoard sink through RunRecorder: rows in, event files out, read back with TensorBoard's own reader."""
from __future__ import annotations

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from edgesync.metrics.recorder import RunRecorder
from edgesync.metrics.tensorboard_sink import run_name
from edgesync.runtime.bookkeeping.checkpoint import scenario_digest
from edgesync.config import load_scenario


def scalars(folder) -> dict[str, list[tuple[int, float, float]]]:
    """tag → [(step, wall_time, value)] of one TensorBoard run folder (every event file in it)."""
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    return {tag: [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def f32(value: float) -> float:
    """What a scalar event stores of `value` (a float32)."""
    return float(np.float32(value))


def _eval(label, time_s, updates, acc, bytes_up=100, bytes_down=200):
    return {"algorithm": label, "time_s": time_s, "updates": updates, "samples": 32 * updates,
            "bytes_up": bytes_up, "bytes_down": bytes_down, "test_acc": acc, "test_loss": 2.0 - acc}


def test_labels_stay_readable_and_never_share_a_folder():
    assert run_name("ssgd") == "ssgd"
    assert run_name("esync@seed=1") == "esync@seed=1"
    assert run_name("ssgd@clients=8,seed=2") == "ssgd@clients=8,seed=2"
    assert run_name("asgd@clients=4×x10,lr=0.05") == "asgd@clients=4×x10,lr=0.05"
    odd = ["asgd lr/2", "asgd_lr_2", "asgd lr:2", "..", 'ssgd@clients=[{"profile":"x2"}]', "x" * 300]
    names = [run_name(label) for label in odd]
    assert names[1] == "asgd_lr_2"  # already a safe name: kept as it is
    assert names[0].startswith("asgd_lr_2~") and names[2].startswith("asgd_lr_2~")  # readable, and told apart
    assert len(set(names)) == len(names)
    assert all("/" not in n and n not in (".", "..") and len(n.encode()) < 255 for n in names)


def test_rows_become_scalars_per_label_with_the_update_count_as_step(tmp_path):
    with RunRecorder(tmp_path, tensorboard=True) as rec:
        rec.log_eval(_eval("asgd@seed=1", 0.0, 0, 0.1, 0, 0))
        rec.log_updates([{"algorithm": "asgd@seed=1", "time_s": 0.25, "client": 1, "update": 0, "lag": 0,
                          "gap": 0.0, "gap_normalized": None},
                         {"algorithm": "asgd@seed=1", "time_s": 0.5, "client": 0, "update": 1, "lag": 3,
                          "gap": 0.125, "gap_normalized": 0.7, "density_up": 0.02}])
        rec.log_eval(_eval("asgd@seed=1", 1.0, 2, 0.4, 30_000_001, 5))
        rec.log_client({"algorithm": "asgd@seed=1", "client": 0, "compute_s": 0.75, "wall_s": 1.0})
        rec.log_client({"algorithm": "asgd@seed=1", "client": 1, "compute_s": 0.0, "wall_s": 0.0})  # no ratio
        rec.log_eval(_eval("ssgd@seed=1", 0.0, 0, 0.1))

    assert sorted(p.name for p in (tmp_path / "tensorboard").iterdir()) == ["asgd@seed=1", "ssgd@seed=1"]
    asgd = scalars(tmp_path / "tensorboard" / "asgd@seed=1")
    assert asgd["accuracy/test"] == [(0, 0.0, f32(0.1)), (2, 1.0, f32(0.4))]
    assert asgd["loss/test"] == [(0, 0.0, f32(1.9)), (2, 1.0, f32(1.6))]
    assert asgd["bytes/up"][-1] == (2, 1.0, f32(30_000_001))
    assert asgd["bytes/total"][-1] == (2, 1.0, f32(30_000_006))
    assert asgd["samples/trained"][-1] == (2, 1.0, 64.0)
    # An update's step is the count once it is applied; a field the row lacks (or has as null) is no point.
    assert asgd["staleness/lag"] == [(1, 0.25, 0.0), (2, 0.5, 3.0)]
    assert asgd["staleness/gap"] == [(1, 0.25, 0.0), (2, 0.5, 0.125)]
    assert asgd["staleness/gap_normalized"] == [(2, 0.5, f32(0.7))]
    assert asgd["density/up"] == [(2, 0.5, f32(0.02))]
    # The compute ratio is written at the entry's last step and time; a client with no wall time has none.
    assert asgd["compute_ratio/client_0"] == [(2, 1.0, 0.75)]
    assert "compute_ratio/client_1" not in asgd
    assert list(scalars(tmp_path / "tensorboard" / "ssgd@seed=1")["accuracy/test"]) == [(0, 0.0, f32(0.1))]


def test_an_evaluation_is_on_disk_before_the_recorder_closes(tmp_path):
    """A live view: what was evaluated is readable at once, the writer still open."""
    rec = RunRecorder(tmp_path, tensorboard=True)
    try:
        rec.log_updates([{"algorithm": "asgd", "time_s": 0.5, "client": 0, "update": 0, "lag": 0, "gap": 0.0}])
        rec.log_eval(_eval("asgd", 1.0, 1, 0.3))
        seen = scalars(tmp_path / "tensorboard" / "asgd")
        assert seen["accuracy/test"] == [(1, 1.0, f32(0.3))] and seen["staleness/lag"] == [(1, 0.5, 0.0)]
    finally:
        rec.close()
    rec.close()  # twice: nothing happens


def test_a_reopened_folder_adds_to_the_first_attempts_event_files(tmp_path):
    """A resumed run opens a new recorder on the folder: the earlier points stay, the new ones follow."""
    with RunRecorder(tmp_path, tensorboard=True) as rec:
        rec.log_eval(_eval("asgd", 0.0, 0, 0.1))
        rec.log_eval(_eval("asgd", 1.0, 10, 0.3))
    with RunRecorder(tmp_path, tensorboard=True) as rec:
        rec.log_eval(_eval("asgd", 2.0, 16, 0.5))
    folder = tmp_path / "tensorboard" / "asgd"
    assert len(list(folder.glob("events.out.tfevents.*"))) == 2
    assert scalars(folder)["accuracy/test"] == [(0, 0.0, f32(0.1)), (10, 1.0, f32(0.3)), (16, 2.0, f32(0.5))]


def test_off_by_default(tmp_path):
    with RunRecorder(tmp_path) as rec:
        rec.log_eval(_eval("asgd", 0.0, 0, 0.1))
        assert rec.tensorboard_dir is None
    assert not (tmp_path / "tensorboard").exists()
    scenario = load_scenario({"name": "s", "clients": ["x1"], "algorithms": [{"name": "ssgd"}]})
    assert scenario.output.tensorboard is False


def test_turning_tensorboard_on_leaves_a_checkpoint_resumable():
    """`edgesync run --resume RUN_DIR --tensorboard`: the output settings are not part of what the
    checkpoint says the run does."""
    data = {"name": "s", "clients": ["x1"], "algorithms": [{"name": "ssgd"}]}
    plain = load_scenario(data).resolved()
    on = load_scenario({**data, "output": {"tensorboard": True}}).resolved()
    other = load_scenario({**data, "seed": 5}).resolved()
    assert scenario_digest(plain) == scenario_digest(on)
    assert scenario_digest(plain) != scenario_digest(other)


@pytest.mark.parametrize("value", ["yes please", 2])
def test_the_key_takes_a_boolean(value):
    from edgesync.config import ScenarioError
    with pytest.raises(ScenarioError, match="output.tensorboard"):
        load_scenario({"name": "s", "clients": ["x1"], "algorithms": [{"name": "ssgd"}],
                            "output": {"tensorboard": value}})
