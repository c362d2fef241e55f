"""The Flower adapter in one process: records, the ClientApp on in-process SuperNodes, the coordinator on a Grid."""
from __future__ import annotations

import math

import pytest
import torch

from edgesync.flower import records
from edgesync.flower.coordinator import FlowerCoordinator
from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.runtime.runs import finish_run
from edgesync.config import load_scenario
from edgesync.transport.protocol import Message

from flower_scenario import small_scenario


def test_records_round_trip_meta_tensors_and_stats():
    meta = {"version": 3, "lr": 0.05, "label": "fedavg", "flag": True, "none": None, "nested": {"a": [1, 2]},
            "mixed": [1, "x"], "nan": math.nan}
    tensors = {"params": torch.arange(5, dtype=torch.float32), "indices": torch.tensor([4, 2], dtype=torch.int64)}
    content = records.to_records(Message("TRAIN", meta, tensors), stats={"samples": 64, "label": "fedavg"})
    msg, stats = records.from_records(content)
    assert msg.type == "TRAIN"
    assert {k: v for k, v in msg.meta.items() if k != "nan"} == {k: v for k, v in meta.items() if k != "nan"}
    assert math.isnan(msg.meta["nan"])
    assert content["meta"]["version"] == 3  # scalars are plain ConfigRecord entries
    for name, t in tensors.items():
        assert msg.tensors[name].dtype == t.dtype and torch.equal(msg.tensors[name], t)
    assert stats == {"samples": 64, "label": "fedavg"}
    assert content["metrics"]["num-examples"] == 64
    assert records.payload_bytes(content) >= 5 * 4 + 2 * 8


def test_records_refuse_a_foreign_message():
    from flwr.app import ConfigRecord, RecordDict
    from edgesync.transport.protocol import ProtocolError
    with pytest.raises(ProtocolError):
        records.from_records(RecordDict({"config": ConfigRecord({"lr": 0.1})}))


def run_on(grid, scenario: dict, run_dir, report: bool = True, **kwargs) -> dict | None:
    """Run `scenario` over `grid` into `run_dir`; then its summary and report (`report`: the smoke runs of every
    algorithm read metrics.jsonl alone, and drawing each one's report took a third of their CPU)."""
    sc = load_scenario(scenario)
    with RunRecorder(run_dir) as recorder:
        recorder.write_scenario(sc.resolved())
        coordinator = FlowerCoordinator(sc, recorder, grid, **kwargs)
        coordinator.run()
        coordinator.close()
    return finish_run(run_dir, sc) if report else None


def test_fedavg_two_rounds_on_in_process_nodes(fake_grid, tmp_path):
    grid = fake_grid([{"partition-id": 1}, {"partition-id": 0}])
    summary = run_on(grid, small_scenario(), tmp_path / "run", federated_eval=True)
    metrics = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    clients = read_jsonl(tmp_path / "run" / "clients.jsonl")
    assert metrics[-1]["updates"] == 2 and summary["fedavg"]["updates"] == 2
    assert [c["client"] for c in clients] == [0, 1]
    for c in clients:
        # two rounds of 4 local steps (the third, in flight at END, is not waited for)
        assert c["steps"] in (8, 12) and c["samples"] == c["steps"] * 32
        assert c["bytes_up"] > 2 * 4 * 184_586 and c["bytes_down"] > 2 * 4 * 184_586
    slow = clients[1]
    assert slow["profile"] == "x2" and slow["reference_step_s"] > 0 and slow["target_factor"] == 2.0
    # both nodes paced at one shared base step (the x1 node too), kept across their ClientApp messages;
    # each node's paced step (factor x base) is at least its undisturbed one (the x2 node's own undisturbed
    # step may exceed the base: emulation/device_model.py sizes the base by what each node keeps busy)
    assert clients[0]["base_step_s"] == slow["base_step_s"]
    for c in clients:
        assert (c["target_factor"] or 1.0) * c["base_step_s"] >= c["reference_step_s"]
    assert clients[0]["median_step_s"] >= clients[0]["base_step_s"]  # a paced step never beats its target
    assert slow["median_step_s"] >= 2 * slow["base_step_s"] and slow["achieved_factor"] is not None
    assert all(c["isolation"].startswith("none: Flower runs each message") for c in clients)
    evals = read_jsonl(tmp_path / "run" / "flower_eval.jsonl")
    assert sorted(e["client"] for e in evals) == [0, 1] and all(0 <= e["local_acc"] <= 1 for e in evals)
    assert (tmp_path / "run" / "report.md").exists()
    # each node measures its step once; the pace after the plan is answered by the Grid socket, and its base
    # step reaches the node with its first `train` (the base_step_s checks above: the paced steps used it)
    calibrates = [m for m in grid.pushed if m.metadata.message_type == "query.calibrate"]
    assert sorted(m.metadata.dst_node_id for m in calibrates) == sorted(grid.nodes)
    first_train = {}
    for m in grid.pushed:
        if m.metadata.message_type == "train":
            first_train.setdefault(m.metadata.dst_node_id, m)
    assert all(records.pace_of(m.content) == pytest.approx(clients[0]["base_step_s"], rel=1e-3)
               for m in first_train.values())


def run_on_zeromq(scenario: dict, run_dir) -> None:
    """The same scenario with the ZeroMQ coordinator and clients, in threads of this process."""
    import threading

    from edgesync.runtime.live.client import EdgeClient
    from edgesync.runtime.live.coordinator import Coordinator
    sc = load_scenario(scenario)
    with RunRecorder(run_dir) as recorder:
        coordinator = Coordinator(sc, recorder, bind="tcp://127.0.0.1:*")
        threads = [threading.Thread(target=EdgeClient(coordinator.address, rank=r).run, daemon=True)
                   for r in range(len(sc.clients))]
        for t in threads:
            t.start()
        coordinator.run()
        coordinator.close()
        for t in threads:
            t.join(10)


def test_fedavg_trains_the_same_model_as_the_zeromq_runtime(fake_grid, tmp_path):
    """Same splits, seeds and mini-batches (the sampler goes on across messages): the same model."""
    scenario = small_scenario(stop={"time_budget_s": 60, "max_updates": 3, "target_acc": 0.3})
    run_on(fake_grid([{}, {}]), scenario, tmp_path / "flower", report=False)
    run_on_zeromq(scenario, tmp_path / "zeromq")
    flower, zeromq = (read_jsonl(tmp_path / d / "metrics.jsonl")[-1] for d in ("flower", "zeromq"))
    assert flower["updates"] == zeromq["updates"] == 3
    assert flower["test_loss"] == pytest.approx(zeromq["test_loss"], abs=1e-5)
    assert flower["test_acc"] == zeromq["test_acc"]


def test_asgd_replies_to_each_node_alone(fake_grid, tmp_path):
    scenario = small_scenario(clients=["x1", "x20"], algorithms=[{"name": "asgd", "lr": 0.05}],
                              stop={"time_budget_s": 60, "max_updates": 10, "target_acc": 0.3})
    run_on(fake_grid([{"partition-id": 0}, {"partition-id": 1}]), scenario, tmp_path / "run", report=False)
    updates = read_jsonl(tmp_path / "run" / "updates.jsonl")
    clients = read_jsonl(tmp_path / "run" / "clients.jsonl")
    assert len(updates) == 10 and {"lag", "gap"} <= set(updates[0])
    # asynchronous: the x1 node does not wait for the x20 one, so it computes more of the updates
    fast, slow = (sum(u["client"] == c for u in updates) for c in (0, 1))
    assert fast > slow >= 1
    assert all(c["steps"] >= 1 for c in clients)
    # the coordinator's load: every update timed from when its node built the reply (metrics/coordinator_load.py)
    (load,) = read_jsonl(tmp_path / "run" / "coordinator.jsonl")
    assert load["updates"] >= 10 and load["delays"] == load["updates"] and 0.0 < load["utilisation"] <= 1.0
    assert 0.0 <= load["queue_delay_mean_s"] <= load["queue_delay_max_s"]


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.parametrize("budget", ["steps", "time"])
def test_esync_sends_each_node_a_budget_from_measured_capabilities(fake_grid, tmp_path, budget):
    # ×100, not ×10: c_i is one iteration's wall time (esync.txt), so a stall of the VM during the slow
    # node's step lengthens the next round's budget. At ×10 (≈ 0.1 s a step) that node once fit three
    # steps into round 3 in CI, which takes a stall of ≳ 0.2 s in its round-2 step; at ×100 it would
    # take a stall of about a second.
    scenario = small_scenario(clients=["x1", "x100"], algorithms=[{"name": "esync", "lr": 0.05}],
                              stop={"time_budget_s": 60, "max_updates": 4, "target_acc": 0.3})
    run_on(fake_grid([{"partition-id": 0}, {"partition-id": 1}]), scenario, tmp_path / "run", esync_budget=budget, report=False)
    rows = read_jsonl(tmp_path / "run" / "updates.jsonl")
    first = [r for r in rows if r["round"] == 0]
    assert [r["n_i"] for r in first] == [1, 1]  # capabilities unknown: one step each (RUN-BATCH-DATA-TEST)
    last = {r["client"]: r for r in rows if r["round"] == 3}
    assert last[1]["n_i"] == 1  # the x100 node is the slowest: one step
    assert last[0]["n_i"] >= 2  # the x1 node fills the slow node's step with several of its own
    key = "local_steps" if budget == "steps" else "time_budget_s"
    assert key in last[0] and key in last[1]


def _flower_algorithms() -> list[str]:
    from edgesync import algorithms
    return [s.name for s in algorithms.specs() if not s.client.uses_queries or s.name == "esync"]


@pytest.mark.slow
@pytest.mark.parametrize("name", _flower_algorithms())
def test_every_algorithm_runs_over_flower(fake_grid, tmp_path, name):
    """Smoke: each registered algorithm (ESync through its budgets) makes three updates over the Grid,
    its client half's state carried in context.state between messages."""
    # the budget only bounds a stuck run: the updates stop it (at 30 s, fedbuff's case once failed under load)
    scenario = small_scenario(algorithms=[{"name": name}], clients=["x1", "x1"],
                              stop={"time_budget_s": 120, "max_updates": 3, "target_acc": 0.3},
                              eval={"every_s": 5.0, "test_size": 100})
    run_on(fake_grid([{}, {}]), scenario, tmp_path / "run", report=False)
    final = read_jsonl(tmp_path / "run" / "metrics.jsonl")[-1]
    assert final["algorithm"] == name and final["updates"] >= 3 and math.isfinite(final["test_loss"])


@pytest.mark.slow
def test_a_node_without_updates_in_an_algorithm_reports_none_of_the_previous_ones_steps(fake_grid, tmp_path):
    """The x100 node's first step (about a second) is still running when the x1 node has made the
    three updates of `a`; its late UPDATE arrives while `b` sets up, and in `b` it again makes none."""
    scenario = small_scenario(clients=["x1", "x100"],
                              algorithms=[{"name": "asgd", "lr": 0.05, "label": "a"},
                                          {"name": "asgd", "lr": 0.05, "label": "b"}],
                              stop={"time_budget_s": 60, "max_updates": 3, "target_acc": 0.9})
    grid = fake_grid([{"partition-id": 0}, {"partition-id": 1}])
    run_on(grid, scenario, tmp_path / "run", report=False)
    # `b` asks no node to measure again: each node's READY carried the step it measured in `a`
    assert len([m for m in grid.pushed if m.metadata.message_type == "query.calibrate"]) == 2
    updates = read_jsonl(tmp_path / "run" / "updates.jsonl")
    for c in read_jsonl(tmp_path / "run" / "clients.jsonl"):
        made = sum(u["algorithm"] == c["algorithm"] and u["client"] == c["client"] for u in updates)
        if c["bytes_up"] == 0:  # nothing arrived from it during this algorithm
            assert made == 0 and not c["steps"], c


def served_until_b_fails(fake_grid, tmp_path, monkeypatch, scenario: dict):
    """Serve `scenario` (entries `a` and `b`) on the fake grid with a power cut after `b`'s final row (in the
    hook that runs before END); returns the run folder and a function that serves it again with resume=true."""
    import yaml
    from flwr.app import Context, RecordDict
    from edgesync.flower import coordinator as flower_coordinator
    from edgesync.flower.coordinator import serve

    path, out = tmp_path / "two.yaml", tmp_path / "run"
    path.write_text(yaml.safe_dump(scenario))

    def context(**extra) -> Context:
        return Context(run_id=7, node_id=0, node_config={}, state=RecordDict(),
                       run_config={"scenario": str(path), "out": str(out), **extra})

    def power_cut(self, config, end_s, final):
        if config.key == "b":
            raise RuntimeError("power cut")

    with monkeypatch.context() as m:
        m.setattr(flower_coordinator.FlowerCoordinator, "after_algorithm", power_cut)
        with pytest.raises(RuntimeError, match="power cut"):
            serve(fake_grid([{}, {}]), context(), tmp_path)
    return out, lambda: serve(fake_grid([{}, {}]), context(resume=True), tmp_path)


def test_a_killed_serverapp_resumes_its_run_folder(fake_grid, tmp_path, monkeypatch):
    """The ServerApp's run folder is set up like every command's (runtime/runs.py), checkpoint included:
    killed after `b` trained but before it finished, `resume=true` skips `a` and goes on with `b` from
    its checkpoint, its rows unique and its clock monotonic."""
    scenario = small_scenario(algorithms=[{"name": "asgd", "lr": 0.05, "label": "a"},
                                          {"name": "asgd", "lr": 0.05, "label": "b"}],
                              clients=["x1", "x1"], stop={"time_budget_s": 60, "max_updates": 6, "target_acc": 0.9},
                              checkpoint={"every_updates": 2})
    out, resume = served_until_b_fails(fake_grid, tmp_path, monkeypatch, scenario)
    before = read_jsonl(out / "metrics.jsonl")
    assert {r["algorithm"] for r in before} == {"a", "b"} and not (out / "summary.json").exists()

    resume()
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r for r in rows if r["algorithm"] == "a"] == [r for r in before if r["algorithm"] == "a"]  # skipped
    b = [r for r in rows if r["algorithm"] == "b"]
    assert all(x["time_s"] < y["time_s"] for x, y in zip(b, b[1:]))
    assert b[-1]["updates"] == 6
    assert set(read_jsonl(out / "clients.jsonl")[-1]) >= {"algorithm", "client", "steps"}
    summary = (out / "summary.json").read_text()
    assert '"a"' in summary and '"b"' in summary
