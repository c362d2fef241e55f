"""FedAdam, FedYogi, FedAdagrad (Reddi et al. 2021, Alg. 2): the server's adaptive step, worked out by hand
(docs/algorithms.md, `fedadam`, `fedyogi`, `fedadagrad`). Flower's strategies are the independent oracle in
test_fed_adaptive_vs_flower.py; here every expected number is computed in the test from the rule itself.

x₀ = [0, 0], η = 1, τ = 1, β1 = 0.5, β2 = 0.75; client 0 has 1 training sample, client 1 has 3:
  round 1: Δ₀ = [0, −16], Δ₁ = [4, 0]:  Δ = ¼Δ₀ + ¾Δ₁ = [3, −4],  Δ² = [9, 16]
  round 2: Δ₀ = [4, 4],   Δ₁ = [0, 4]:  Δ = [1, 4],               Δ² = [1, 16]
  round 3: nothing moves:               Δ = [0, 0]
m = [1.5, −2], [1.25, 1], [0.625, 0.5] in every variant. v:
  Adagrad (v + Δ²):                      [9, 16],    [10, 32],        [10, 32]
  Yogi (v − ¼Δ²·sign(v − Δ²)):           [2.25, 4],  [2, 8],          [2, 8]      (round 2: v > Δ² in the first
                                                                                   coordinate: it shrinks by ¼Δ²)
  Adam (¾v + ¼Δ²):                       [2.25, 4],  [1.9375, 7],     [1.453125, 5.25]
and x ← x + η·s_t·m/(√v + τ), s_t = 1 without bias correction.
"""
from __future__ import annotations

import copy
import math

import pytest
import torch
from pydantic import ValidationError

from edgesync.algorithms.fed_adaptive import FedAdagradConfig, FedAdamConfig, FedOptServer, FedYogiConfig
from edgesync.algorithms.machinery.base import ModelState, Update

ROUNDS = [([0.0, -16.0], [4.0, 0.0]), ([4.0, 4.0], [0.0, 4.0]), ([0.0, 0.0], [0.0, 0.0])]
M = [[1.5, -2.0], [1.25, 1.0], [0.625, 0.5]]
V = {"fedadagrad": [[9.0, 16.0], [10.0, 32.0], [10.0, 32.0]],
     "fedyogi": [[2.25, 4.0], [2.0, 8.0], [2.0, 8.0]],
     "fedadam": [[2.25, 4.0], [1.9375, 7.0], [1.453125, 5.25]]}
CONFIGS = {"fedadagrad": FedAdagradConfig, "fedyogi": FedYogiConfig, "fedadam": FedAdamConfig}
HAND = {"global_lr": 1.0, "tau": 1.0, "beta1": 0.5}


def _config(name: str, **extra):
    keys = {**HAND, **({} if name == "fedadagrad" else {"beta2": 0.75}), **extra}
    return CONFIGS[name](**keys)


def _server(model_state, config) -> FedOptServer:
    server = FedOptServer(config, model_state([0.0, 0.0]), [0, 1])
    server.start()
    return server


def _round(server, version: int, deltas) -> None:
    for client, (delta, size) in enumerate(zip(deltas, (1, 3))):
        server.on_update(client, Update(tensors={"delta": torch.tensor(delta)},
                                        meta={"version": version, "data_size": size, "samples": 4, "steps": 1}))


def _expected_x(name: str, scales=(1.0, 1.0, 1.0)) -> list[list[float]]:
    """x after each round, from the m and v above: x ← x + s_t·m/(√v + 1)."""
    x, out = [0.0, 0.0], []
    for m, v, s in zip(M, V[name], scales):
        x = [xi + s * mi / (math.sqrt(vi) + 1.0) for xi, mi, vi in zip(x, m, v)]
        out.append(x)
    return out


@pytest.mark.parametrize("name", list(CONFIGS))
def test_three_rounds_with_unequal_weights_by_hand(model_state, name):
    # Prepare
    server = _server(model_state, _config(name))
    assert server.m.tolist() == [0.0, 0.0] and server.v.tolist() == [0.0, 0.0]  # m and v start at 0
    expected = _expected_x(name)
    # Execute / Assert: m, v exactly (dyadic), x to float32 precision
    for version, deltas in enumerate(ROUNDS):
        _round(server, version, deltas)
        assert server.m.tolist() == M[version]
        assert server.v.tolist() == V[name][version]
        assert server.global_params().tolist() == pytest.approx(expected[version], rel=1e-6)
    assert server.updates == server.t == 3
    # round 1 by hand for the record: Adagrad [1.5/4, −2/5]; Yogi and Adam [1.5/2.5, −2/3]
    first = {"fedadagrad": [0.375, -0.4], "fedyogi": [0.6, -2 / 3], "fedadam": [0.6, -2 / 3]}[name]
    assert expected[0] == pytest.approx(first)


def test_yogi_and_adam_agree_in_round_one_and_part_where_v_exceeds_delta_squared(model_state):
    # v = 0 < Δ²: Yogi adds (1 − β2)Δ², as Adam does; in round 2 the first coordinate's v (2.25) exceeds
    # Δ² (1): Yogi takes ¼ off (2), Adam mixes (1.9375); in the second (4 < 16) both add, by different rules
    yogi, adam = _server(model_state, _config("fedyogi")), _server(model_state, _config("fedadam"))
    _round(yogi, 0, ROUNDS[0])
    _round(adam, 0, ROUNDS[0])
    assert torch.equal(yogi.global_params(), adam.global_params()) and torch.equal(yogi.v, adam.v)
    _round(yogi, 1, ROUNDS[1])
    _round(adam, 1, ROUNDS[1])
    assert yogi.v.tolist() == [2.25 - 0.25 * 1, 4 + 0.25 * 16] and adam.v.tolist() == [1.9375, 7.0]


@pytest.mark.parametrize("mode,first_t", [("adam", 1), ("flower", 2)])
def test_fedadams_bias_correction_scales_eta_by_round(model_state, mode, first_t):
    # Prepare: s_t = √(1 − β2^t)/(1 − β1^t) with t = 1, 2, 3 (Kingma & Ba) or 2, 3, 4 (Flower's round + 1)
    server = _server(model_state, _config("fedadam", bias_correction=mode))
    scales = [math.sqrt(1 - 0.75 ** t) / (1 - 0.5 ** t) for t in range(first_t, first_t + 3)]
    # Execute
    for version, deltas in enumerate(ROUNDS):
        _round(server, version, deltas)
    # Assert: m and v as without correction; x with η scaled (s_1 = √¼/½ = 1, so Kingma & Ba's round 1 is the
    # uncorrected one here)
    assert server.v.tolist() == V["fedadam"][2]
    assert server.global_params().tolist() == pytest.approx(_expected_x("fedadam", scales)[2], rel=1e-6)
    assert scales[0] == (1.0 if mode == "adam" else pytest.approx(math.sqrt(1 - 0.5625) / 0.75))


@pytest.mark.parametrize("name,extra", [("fedadam", {"bias_correction": "flower"}), ("fedyogi", {}),
                                        ("fedadagrad", {})])
def test_m_v_and_t_survive_a_restart(model_state, name, extra):
    # Prepare: the state after round 1, through a deep copy as the checkpoint writes it
    config = _config(name, **extra)
    server = _server(model_state, config)
    _round(server, 0, ROUNDS[0])
    restored = FedOptServer(config, model_state([0.0, 0.0]), [0, 1])
    restored.load_state_dict(copy.deepcopy(server.state_dict()))
    # Execute: rounds 2 and 3 in both
    for version in (1, 2):
        _round(server, version, ROUNDS[version])
        _round(restored, version, ROUNDS[version])
    # Assert
    assert torch.equal(restored.global_params(), server.global_params()) and restored.t == 3


def test_an_all_reduce_replica_built_from_the_replica_state_steps_as_the_server(model_state):
    # a client whose replica is not current gets m, v and t with θ (rounds.py), then applies the mean itself
    server = _server(model_state, _config("fedadam", bias_correction="adam"))
    _round(server, 0, ROUNDS[0])
    replica = FedOptServer(server.config, ModelState(server.params.clone(), torch.zeros(0)), [])
    replica.load_replica_state({k: t.clone() for k, t in server.replica_state().items()})
    replica.apply(torch.tensor([1.0, 4.0]))  # round 2's mean
    _round(server, 1, ROUNDS[1])
    assert replica.t == 2 and torch.equal(replica.params, server.global_params())


def test_keys_are_validated_and_adagrad_has_no_beta2():
    with pytest.raises(ValidationError):
        FedAdamConfig(bias_correction="yes")
    with pytest.raises(ValidationError):
        FedYogiConfig(tau=0.0)
    with pytest.raises(ValidationError):
        FedAdagradConfig(beta2=0.9)  # Adagrad's v has no decay
    with pytest.raises(ValidationError):
        FedYogiConfig(bias_correction="flower")  # Flower's correction is FedAdam's alone
    defaults = FedAdamConfig()
    assert (defaults.global_lr, defaults.beta1, defaults.beta2, defaults.tau) == (0.01, 0.9, 0.99, 1e-3)
    assert defaults.bias_correction == "none" and defaults.weighted
