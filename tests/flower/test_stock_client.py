"""A stock Flower ClientApp (quickstart-style, tests/flower/stock_app) under EdgeSync's ServerApp, on the
in-process SuperNodes of fake_grid.py: the translation (weights out, update in), a refusal for an
algorithm that needs EdgeSync's client half, and a run whose every reply is an error failing."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from flwr.app import ArrayRecord, Context, Message as FlowerMessage, MetricRecord, RecordDict

from edgesync.flower.coordinator import ERROR_FILE, serve
from edgesync.flower.stock_node import ModelLayout, StockNode
from edgesync.metrics.recorder import read_jsonl
from edgesync.models import build_model
from edgesync.runtime.bookkeeping.membership import RunAborted
from edgesync.transport import protocol

from flower_scenario import small_scenario
from test_flower_adapter import run_on

STOCK_APP = Path(__file__).resolve().parent / "stock_app"
if str(STOCK_APP) not in sys.path:
    sys.path.insert(0, str(STOCK_APP))


@pytest.fixture
def stock_grid():
    from fake_grid import FakeGrid
    from stockflower.client_app import app
    grids = []

    def make(app_=app, nodes=2):
        grid = FakeGrid(app_, [{"partition-id": i} for i in range(nodes)])
        grids.append(grid)
        return grid

    yield make
    for grid in grids:
        grid.close()


def test_weights_go_out_by_state_dict_names_and_the_update_is_new_minus_old():
    from flwr.supercore.task_identity import TaskIdentity
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 7, 1, 1  # as in a ServerApp process
    model = build_model("cnn")
    layout = ModelLayout(build_model("cnn"))
    node = StockNode(1001, "test", layout)
    setup = protocol.setup({"label": "fedavg", "algorithm": {"name": "local_sgd", "lr": 0.1, "batch_size": 16,
                                                             "local_steps": 3}}, torch.zeros(1))
    assert node.answer_here(setup).type == "READY"
    theta = torch.randn(sum(p.numel() for p in model.parameters()))
    kind, content = node.request(protocol.train({"version": 2}, {"params": theta}))
    assert kind == "train" and set(content) == {"arrays", "config"}
    assert dict(content["config"]) == {"server-round": 3, "lr": 0.1, "batch-size": 16, "local-steps": 3}
    state = content["arrays"].to_torch_state_dict()
    model.load_state_dict(state)  # a user's own model of the same architecture loads them as they are
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    reply = FlowerMessage(RecordDict({"arrays": ArrayRecord(model.state_dict()),
                                      "metrics": MetricRecord({"num-examples": 500, "train_loss": 0.5})}),
                          dst_node_id=0, message_type="train")
    update = node.reply(reply)
    assert update.type == "UPDATE"
    assert torch.allclose(update.tensors["delta"], torch.ones_like(theta))
    assert update.meta["version"] == 2 and update.meta["steps"] == 3 and update.meta["samples"] == 48
    assert update.meta["data_size"] == 500 and update.meta["loss"] == 0.5
    assert node.totals()["steps"] == 3 and node.totals()["label"] == "fedavg"


@pytest.mark.parametrize("name", ["local_sgd", "esync_budget"])
def test_fedavg_and_esync_budget_drive_stock_clientapps(stock_grid, tmp_path, name):
    grid = stock_grid()
    scenario = small_scenario(clients=["x1", "x1"],
                              algorithms=[{"name": name, "label": name, "lr": 0.05, "local_steps": 4}]
                              if name == "local_sgd" else [{"name": name, "lr": 0.05}])
    summary = run_on(grid, scenario, tmp_path / "run", federated_eval=True)
    trains = [m for m in grid.pushed if m.metadata.message_type == "train"]
    assert trains and all(set(m.content) == {"arrays", "config"} for m in trains)
    assert set(trains[0].content["arrays"]) == set(build_model("cnn").state_dict())
    assert trains[0].content["config"]["server-round"] == 1
    assert trains[0].content["config"]["local-steps"] == (4 if name == "local_sgd" else 1)  # ESync: round 0, one step
    assert summary[name]["updates"] == 2
    clients = read_jsonl(tmp_path / "run" / "clients.jsonl")
    assert [c["client"] for c in clients] == [0, 1]
    for c in clients:
        assert "error" not in c and c["steps"] >= 2 and c["samples"] == 32 * c["steps"]
        assert c["bytes_up"] > 2 * 4 * 184_586 and c["bytes_down"] > 2 * 4 * 184_586 and c["wall_s"] > 0
    assert (tmp_path / "run" / "report.md").exists()
    evals = read_jsonl(tmp_path / "run" / "flower_eval.jsonl")
    assert sorted(e["client"] for e in evals) == [0, 1] and all(0 <= e["local_acc"] <= 1 for e in evals)
    if name == "esync_budget":
        rows = read_jsonl(tmp_path / "run" / "updates.jsonl")
        assert rows and all(r["c_i"] > 0 and r["n_i"] >= 1 for r in rows if "c_i" in r)


def _serve(grid, scenario: dict, tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run_dir = tmp_path / "run"
    context = Context(run_id=7, node_id=0, node_config={}, state=RecordDict(),
                      run_config={"scenario": str(path), "out": str(run_dir)})
    serve(grid, context, app_dir=tmp_path)
    return run_dir


def test_asgd_is_refused_at_once_naming_the_algorithm_and_the_node(stock_grid, tmp_path):
    grid = stock_grid()
    t0 = time.monotonic()
    with pytest.raises(RunAborted, match=r"algorithm asgd needs EdgeSync's client half, but Flower node 100[12]"):
        _serve(grid, small_scenario(algorithms=[{"name": "asgd", "lr": 0.05}]), tmp_path)
    assert time.monotonic() - t0 < 10
    why = (tmp_path / "run" / ERROR_FILE).read_text()
    assert "asgd" in why and "Flower node" in why
    assert "algorithm asgd needs" in (tmp_path / "run" / "logs" / "coordinator.log").read_text()


def test_a_run_whose_every_reply_is_an_error_fails(stock_grid, tmp_path):
    from flwr.clientapp import ClientApp
    broken = ClientApp()

    @broken.train()
    def train(msg, context):
        raise RuntimeError("out of memory on purpose")

    grid = stock_grid(broken)
    t0 = time.monotonic()
    with pytest.raises(RunAborted, match="every node's reply is an error.*out of memory on purpose"):
        _serve(grid, small_scenario(clients=["x1", "x1"]), tmp_path)
    assert time.monotonic() - t0 < 30
    assert "out of memory on purpose" in (tmp_path / "run" / ERROR_FILE).read_text()
