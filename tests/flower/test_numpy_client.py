"""The legacy NumPyClient through Flower's own client wrapper (`to_client()`: FitIns/EvaluateIns with
serialized Parameters), as an old strategy server would drive it: FedAvg by hand over two nodes."""
from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Context, RecordDict
from flwr.common import (Code, EvaluateIns, FitIns, GetParametersIns, ndarrays_to_parameters,
                         parameters_to_ndarrays)

from edgesync.flower.numpy_client import EdgeNumPyClient, client_fn


def _context(node_config):
    return Context(run_id=1, node_id=7, node_config=node_config, state=RecordDict(), run_config={})


@pytest.mark.slow
def test_fedavg_rounds_through_flowers_client_wrapper_improve_the_model():
    clients = [client_fn(_context({"partition-id": i, "num-partitions": 2, "seed": 3})) for i in range(2)]
    got = clients[0].get_parameters(GetParametersIns(config={}))
    assert got.status.code == Code.OK
    weights = parameters_to_ndarrays(got.parameters)
    model = EdgeNumPyClient(0, 2, seed=3).trainer.model
    assert [w.shape for w in weights] == [tuple(p.shape) for p in model.parameters()]  # one array per layer
    first = clients[0].evaluate(EvaluateIns(ndarrays_to_parameters(weights), {}))
    for _ in range(3):
        results = [c.fit(FitIns(ndarrays_to_parameters(weights), {"local-steps": 20, "lr": 0.05})) for c in clients]
        for r in results:
            assert r.status.code == Code.OK and r.num_examples == 30_000 and r.metrics["steps"] == 20
        total = sum(r.num_examples for r in results)
        weights = [sum(parameters_to_ndarrays(r.parameters)[i] * r.num_examples / total for r in results)
                   for i in range(len(weights))]
    last = clients[1].evaluate(EvaluateIns(ndarrays_to_parameters(weights), {}))
    assert last.num_examples == 10_000
    assert first.metrics["accuracy"] < 0.25 and last.metrics["accuracy"] > 0.45  # 3 FedAvg rounds vs θ₀ (~chance)
    assert last.loss < first.loss


def test_fit_is_the_local_sgd_client_half_step_for_step():
    """Same seed and split ⇒ the NumPyClient's model after H steps is θ₀ + the local-SGD Δ computed by hand."""
    a, b = (EdgeNumPyClient(0, 2, seed=5) for _ in range(2))
    theta0 = a.get_parameters({})
    new, n, metrics = a.fit(theta0, {"local-steps": 3, "lr": 0.1})
    flat0, _ = b._load(theta0)
    b.trainer.set_params(flat0)
    b.trainer.sgd_steps(3, lr=0.1)
    expected = b.get_parameters({})
    for x, y in zip(new, expected):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_bad_input_is_named():
    c = EdgeNumPyClient(0, 2, seed=0)
    params = c.get_parameters({})
    with pytest.raises(ValueError, match="sent 1 arrays"):
        c.fit(params[:1], {})
    with pytest.raises(ValueError, match="array 0 has shape"):
        c.fit([np.zeros(3, np.float32), *params[1:]], {})
    with pytest.raises(ValueError, match="partition-id 2 is outside"):
        EdgeNumPyClient(2, 2)
    with pytest.raises(ValueError, match="num-partitions"):
        client_fn(_context({"partition-id": 0}))
