"""Our FedAvgM, FedAdam, FedYogi and FedAdagrad server halves against Flower's strategies (flwr 1.41,
`flwr.server.strategy`), an implementation written by others: the same initial model, the same client updates
over four rounds (three clients with unequal sample counts), the same parameters after every round.

Flower's clients send their new model y_i = x + Δ_i and its strategies average them weighted by
`num_examples`; ours get Δ_i itself and weight it by `data_size` (`weighted`). The model is a tiny MLP's
parameters, as Flower holds them (one array per tensor) and as our server does (one flat vector).

How Flower's keys map onto ours (read from flwr/server/strategy/fedopt.py, fedadam.py, fedyogi.py,
fedadagrad.py, fedavgm.py):
- FedOpt's eta → `global_lr`, beta_1 → `beta1`, beta_2 → `beta2`, tau → `tau`; eta_l is the client's
  learning rate, unused by the server's step. m and v start at 0 in all three.
- FedAdam scales eta by √(1 − β2^(r+1))/(1 − β1^(r+1)) in round r (counted from 1): `bias_correction: flower`.
- FedAdagrad fixes beta_1 = 0: `beta1: 0`.
- FedAvgM's server_learning_rate → `global_lr`, server_momentum → `server_momentum`; it keeps the negated
  difference (x − mean y) and steps x ← x − η·v, the same numbers as v ← β·v + Δ, x ← x + η·v.

Flower computes in float64 where a NumPy float64 scalar meets float32 arrays (FedAdam's bias factor), our
server in float32: the agreement asked is a relative difference of at most 1e-6 of each array's largest
magnitude, not bit for bit.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

flwr = pytest.importorskip("flwr", reason="flwr is not importable: the Flower oracle cannot run",
                          exc_type=ImportError)
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays  # noqa: E402
from flwr.server.strategy import FedAdagrad, FedAdam, FedAvgM, FedYogi  # noqa: E402

from edgesync.algorithms.fed_adaptive import FedAdagradConfig, FedAdamConfig, FedOptServer, FedYogiConfig  # noqa: E402
from edgesync.algorithms.fedavgm import FedAvgMConfig, FedAvgMServer  # noqa: E402
from edgesync.algorithms.machinery.base import ModelState, Update  # noqa: E402

ROUNDS = 4
SAMPLES = (10, 30, 60)  # each client's num_examples / data_size
REL = 1e-6


def _initial() -> list[np.ndarray]:
    """A tiny MLP's parameters, one float32 array per tensor, in model.parameters() order."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    return [p.detach().numpy().astype(np.float32).copy() for p in model.parameters()]


def _updates(shapes) -> list[list[list[np.ndarray]]]:
    """Per round, per client, its Δ_i as arrays of the model's shapes (float32, seeded)."""
    rng = np.random.default_rng(7)
    return [[[(0.05 * rng.standard_normal(s)).astype(np.float32) for s in shapes] for _ in SAMPLES]
            for _ in range(ROUNDS)]


def _flat(arrays) -> torch.Tensor:
    return torch.cat([torch.from_numpy(np.asarray(a, dtype=np.float32)).reshape(-1) for a in arrays])


def _split(flat: torch.Tensor, shapes) -> list[np.ndarray]:
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(flat[at:at + n].numpy().reshape(s))
        at += n
    return out


def _fit_res(arrays, num_examples: int) -> FitRes:
    return FitRes(status=Status(code=Code.OK, message=""), parameters=ndarrays_to_parameters(arrays),
                  num_examples=num_examples, metrics={})


def _run_both(strategy_cls, strategy_kwargs, server_cls, config):
    """Feed Flower's strategy and our server half the same rounds; returns (flower, ours) per round."""
    x0 = _initial()
    shapes = [a.shape for a in x0]
    strategy = strategy_cls(initial_parameters=ndarrays_to_parameters(x0), **strategy_kwargs)
    ours = server_cls(config, ModelState(_flat(x0), torch.zeros(0)), list(range(len(SAMPLES))))
    ours.start()
    flower_x = [a.copy() for a in x0]
    history = []
    for r, deltas in enumerate(_updates(shapes)):
        results = [(None, _fit_res([x + d for x, d in zip(flower_x, delta)], n))
                   for delta, n in zip(deltas, SAMPLES)]
        parameters, _ = strategy.aggregate_fit(r + 1, results, [])  # Flower counts rounds from 1
        flower_x = parameters_to_ndarrays(parameters)
        for client, (delta, n) in enumerate(zip(deltas, SAMPLES)):
            ours.on_update(client, Update(tensors={"delta": _flat(delta)},
                                          meta={"version": r, "data_size": n, "steps": 1, "samples": n}))
        assert ours.updates == r + 1
        history.append((flower_x, _split(ours.global_params(), shapes)))
    return x0, history


def _assert_agree(x0, history) -> None:
    for r, (flower_x, ours_x) in enumerate(history):
        for k, (theirs, mine) in enumerate(zip(flower_x, ours_x)):
            rel = np.max(np.abs(mine - theirs)) / np.max(np.abs(theirs))
            assert rel <= REL, f"round {r + 1}, array {k}: relative difference {rel:.2e}"
    # the rounds moved the model well beyond the tolerance: agreement is not the initial model twice
    final = history[-1][0]
    moved = max(np.max(np.abs(f - a)) / np.max(np.abs(a)) for f, a in zip(final, x0))
    assert moved > 1e-2


CASES = {
    "fedadam": (FedAdam, {"eta": 0.05, "eta_l": 0.1, "beta_1": 0.9, "beta_2": 0.99, "tau": 1e-3}, FedOptServer,
                FedAdamConfig(global_lr=0.05, beta1=0.9, beta2=0.99, tau=1e-3, bias_correction="flower")),
    "fedyogi": (FedYogi, {"eta": 0.05, "eta_l": 0.1, "beta_1": 0.9, "beta_2": 0.99, "tau": 1e-3}, FedOptServer,
                FedYogiConfig(global_lr=0.05, beta1=0.9, beta2=0.99, tau=1e-3)),
    "fedadagrad": (FedAdagrad, {"eta": 0.05, "eta_l": 0.1, "tau": 1e-3}, FedOptServer,
                   FedAdagradConfig(global_lr=0.05, beta1=0.0, tau=1e-3)),
    "fedavgm": (FedAvgM, {"server_learning_rate": 0.7, "server_momentum": 0.9}, FedAvgMServer,
                FedAvgMConfig(global_lr=0.7, server_momentum=0.9)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_our_server_step_matches_flowers_strategy_round_for_round(name):
    # Prepare
    strategy_cls, kwargs, server_cls, config = CASES[name]
    assert config.weighted  # Flower weights by num_examples; ours by data_size, the default here
    # Execute
    x0, history = _run_both(strategy_cls, kwargs, server_cls, config)
    # Assert
    _assert_agree(x0, history)


def test_fedadam_without_flowers_bias_correction_does_not_match_it():
    # Prepare: the paper's rule (the default) against Flower's FedAdam, which corrects the bias
    strategy_cls, kwargs, server_cls, config = CASES["fedadam"]
    paper = config.model_copy(update={"bias_correction": "none"})
    # Execute
    _, history = _run_both(strategy_cls, kwargs, server_cls, paper)
    # Assert: round 1 already differs (Flower's η is scaled by √(1 − 0.99²)/(1 − 0.9²) ≈ 0.74)
    flower_x, ours_x = history[0]
    assert max(np.max(np.abs(m - f)) for m, f in zip(ours_x, flower_x)) > 1e-3
