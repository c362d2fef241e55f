"""EdgeSync's ClientApp under stock Flower strategies (Flower's standard Message API), on in-process nodes.

Stock strategies of `flwr.serverapp.strategy` (FedAvg; FedAdam, FedAdagrad, FedYogi, FedProx, FedAvgM)
call `start()` on a FakeGrid whose nodes run the real ClientApp (`edgesync.flower.apps:clientapp`):
FedAvg on a ×1 and a ×10 node for 3 rounds, the others on one node for 2.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict

from edgesync.flower.apps import clientapp
from edgesync.models import build_model

# One ×1 step for both nodes (base-s): in-process nodes share the GIL, so steps each node measured for
# itself would differ; the measured path runs in test_user_app.py, one process per message.
NODES = [{"partition-id": 0, "num-partitions": 2, "profile": "x1", "test-size": 500, "base-s": 0.05},
         {"partition-id": 1, "num-partitions": 2, "profile": "x10", "test-size": 500, "base-s": 0.05}]


def _norms(arrays: ArrayRecord) -> float:
    return float(sum(np.abs(a).sum() for a in arrays.to_numpy_ndarrays()))


def _start(strategy, grid, rounds=3, **config):
    torch.manual_seed(0)
    seen: list[float] = []

    def watch(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        seen.append(_norms(arrays))  # the global model the strategy holds after each round (0: initial)
        return MetricRecord({})

    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(build_model("cnn").state_dict()),
                            num_rounds=rounds, train_config=ConfigRecord({"lr": 0.05, "local-steps": 6, **config}),
                            evaluate_fn=watch, timeout=300)
    return result, seen


def _train_metrics(grid) -> dict[int, list[dict]]:
    """node id → the MetricRecords of its train replies."""
    out: dict[int, list[dict]] = {}
    for reply in grid.answered:
        assert not reply.has_error(), reply.error
        if "arrays" in reply.content:
            out.setdefault(reply.metadata.src_node_id, []).append(dict(reply.content["metrics"]))
    return out


@pytest.mark.slow
@pytest.mark.timing
def test_stock_fedavg_drives_an_x1_and_an_x10_device(fake_grid):
    from flwr.serverapp.strategy import FedAvg

    grid = fake_grid(NODES)
    result, seen = _start(FedAvg(fraction_train=1.0, fraction_evaluate=1.0), grid)
    assert len(seen) == 4 and all(a != b for a, b in zip(seen, seen[1:])), seen  # the weights move every round
    metrics = _train_metrics(grid)
    fast, slow = (metrics[n] for n in grid.nodes)
    assert len(fast) == len(slow) == 3
    for m in fast + slow:
        assert m["num-examples"] == 30_000 and m["steps"] == 6 and np.isfinite(m["train_loss"])
        assert {"compute_s", "comm_s", "wait_s", "factor"} <= set(m)
    ratio = sum(m["compute_s"] for m in slow) / sum(m["compute_s"] for m in fast)
    assert 9.0 < ratio < 10.5, ratio  # the ×10 node's steps last ten of the other's
    assert all(m["base_s"] == 0.05 for m in fast + slow)
    assert all(m["factor"] == 10.0 for m in slow) and all(m["factor"] == 1.0 for m in fast)
    acc = [result.evaluate_metrics_clientapp[r]["eval_acc"] for r in (1, 2, 3)]
    assert acc[2] > acc[0] and acc[2] > 0.3, acc


STRATEGY_OPTIONS = {"FedAdam": {"eta": 0.01}, "FedAdagrad": {"eta": 0.01}, "FedYogi": {"eta": 0.01},
                    "FedProx": {"proximal_mu": 0.1}, "FedAvgM": {"server_momentum": 0.9}}


@pytest.mark.parametrize("name", list(STRATEGY_OPTIONS))
def test_other_stock_strategies_run_unchanged(fake_grid, name):
    import flwr.serverapp.strategy as strategies

    strategy = getattr(strategies, name)(fraction_train=1.0, fraction_evaluate=0.0, min_available_nodes=1,
                                         min_train_nodes=1, **STRATEGY_OPTIONS[name])
    grid = fake_grid(NODES[:1])
    _, seen = _start(strategy, grid, rounds=2)
    assert len(seen) == 3 and seen[0] != seen[1] != seen[2]
    assert len(_train_metrics(grid)[next(iter(grid.nodes))]) == 2


def _context(**node_config) -> Context:
    return Context(run_id=1, node_id=5, node_config={**NODES[0], **node_config}, state=RecordDict(), run_config={})


def _message(content: RecordDict, kind="train") -> Message:
    msg = Message(content, 5, kind)
    msg.metadata.__dict__["_message_id"] = msg.object_id
    return msg


def test_a_list_of_arrays_comes_back_as_a_list_and_a_foreign_model_is_named():
    model = build_model("cnn")
    as_list = ArrayRecord([v.numpy() for v in model.state_dict().values()])
    reply = clientapp(_message(RecordDict({"arrays": as_list, "config": ConfigRecord({"local-steps": 1})})),
                      _context())
    assert list(reply.content["arrays"].keys()) == [str(i) for i in range(len(model.state_dict()))]
    assert reply.content["metrics"]["steps"] == 1

    foreign = ArrayRecord(torch.nn.Linear(4, 2).state_dict())
    with pytest.raises(ValueError, match=r"the ArrayRecord has 2 arrays \(weight, bias, …\); this node's SmallCNN"):
        clientapp(_message(RecordDict({"arrays": foreign, "config": ConfigRecord({})})), _context())


def test_fedprox_pulls_the_local_model_towards_the_global_one():
    """The same steps with μ = 0 and a large μ: the proximal term keeps θ nearer θ0."""
    model = build_model("cnn")
    start = ArrayRecord(model.state_dict())
    drift = {}
    for mu in (0.0, 5.0):
        reply = clientapp(_message(RecordDict({"arrays": start, "config": ConfigRecord(
            {"local-steps": 8, "lr": 0.1, "proximal-mu": mu})})), _context())
        new = reply.content["arrays"].to_torch_state_dict()
        drift[mu] = sum(float((new[k] - v).norm()) for k, v in model.state_dict().items() if v.is_floating_point())
    assert drift[5.0] < 0.8 * drift[0.0], drift


@pytest.mark.timing
def test_a_link_is_waited_out_both_ways():
    """10 Mbit/s and 50 ms: the CNN's ~0.4 MB of weights take ≈ 0.33 s each way plus the latency."""
    model = build_model("cnn")
    arrays = ArrayRecord(model.state_dict())
    reply = clientapp(_message(RecordDict({"arrays": arrays, "config": ConfigRecord({"local-steps": 1})})),
                      _context(**{"rate-mbps": 10.0, "latency-ms": 50.0}))
    expected = 2 * (arrays.count_bytes() * 8 / 10e6 + 0.05)
    assert reply.content["metrics"]["comm_s"] == pytest.approx(expected, rel=0.05)
