"""GradientClient: the gradient it returns is the mean cross-entropy gradient at the θ it was sent.

Model: nn.Linear(2, 2) (flat θ = [W00, W01, W10, W11, b0, b1]); data: three hand-made samples,
batch = all of them, so every step sees the same batch whatever the sampler's order.
"""
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from edgesync.algorithms.machinery.base import Instruction
from edgesync.algorithms.machinery.gradient_client import GradientClient, model_instruction
from edgesync.algorithms.ssgd import SSGDConfig
from edgesync.trainer import Trainer

X = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
Y = torch.tensor([0, 1, 1])


def _client(weight_decay=0.0, batch_size=32, model=None):
    model = model if model is not None else nn.Linear(2, 2)
    trainer = Trainer(model=model, x=X.clone(), y=Y.clone(), batch_size=3, seed=0)
    return GradientClient(SSGDConfig(lr=0.1, batch_size=batch_size, weight_decay=weight_decay), trainer)


def _autograd_reference(theta: torch.Tensor) -> torch.Tensor:
    """∇θ of mean cross-entropy for logits = x Wᵀ + b, computed independently of the Trainer."""
    w = theta[:4].clone().view(2, 2).requires_grad_(True)
    b = theta[4:].clone().requires_grad_(True)
    loss = F.cross_entropy(X @ w.T + b, Y)
    gw, gb = torch.autograd.grad(loss, [w, b])
    return torch.cat([gw.reshape(-1), gb])


def test_gradient_at_zero_by_hand():
    # Prepare: θ = 0 ⇒ logits 0, softmax [½, ½]; p − onehot = [−½, ½], [½, −½], [½, −½]
    client = _client()
    # Execute
    update = client.on_instruction(model_instruction(torch.zeros(6), torch.zeros(0), version=0))
    # Assert
    # ∂W = mean_i (p − onehot)_i ⊗ x_i = [[0, (0 + ½·2 + ½·1)/3], [0, −1.5/3]] = [[0, ½], [0, −½]]
    # ∂b = mean_i (p − onehot)_i = [(−½ + ½ + ½)/3, −that] = [1/6, −1/6]
    expected = torch.tensor([0.0, 0.5, 0.0, -0.5, 1 / 6, -1 / 6])
    assert torch.allclose(update.tensors["grad"], expected, atol=1e-6)
    assert update.meta["loss"] == pytest.approx(math.log(2), rel=1e-6)


def test_gradient_matches_autograd_at_the_sent_theta():
    # Prepare
    theta = torch.tensor([0.3, -0.2, 0.5, 0.1, 0.05, -0.4])
    client = _client()
    # Execute
    update = client.on_instruction(model_instruction(theta, torch.zeros(0), version=0))
    # Assert
    assert torch.allclose(update.tensors["grad"], _autograd_reference(theta), atol=1e-6)


def test_weight_decay_is_added_to_the_gradient():
    # Prepare
    theta = torch.tensor([0.3, -0.2, 0.5, 0.1, 0.05, -0.4])
    client = _client(weight_decay=0.01)
    # Execute
    update = client.on_instruction(model_instruction(theta, torch.zeros(0), version=0))
    # Assert: g + wd·θ
    assert torch.allclose(update.tensors["grad"], _autograd_reference(theta) + 0.01 * theta, atol=1e-6)


def test_meta_echoes_version_and_counts_one_step():
    # Prepare: config batch 32 is larger than the 3 samples this client holds
    client = _client(batch_size=32)
    # Execute
    update = client.on_instruction(model_instruction(torch.zeros(6), torch.zeros(0), version=17, round=4))
    # Assert
    assert update.meta["version"] == 17
    assert update.meta["steps"] == 1
    assert update.meta["samples"] == 3
    assert "buffers" not in update.tensors  # nn.Linear has no BatchNorm statistics
    assert client.trainer.stats.steps == 1 and client.trainer.stats.samples == 3


def test_missing_version_is_echoed_as_0():
    # Prepare
    client = _client()
    # Execute
    update = client.on_instruction(Instruction(tensors={"params": torch.zeros(6)}))
    # Assert
    assert update.meta["version"] == 0


def test_sent_theta_is_not_written_to():
    # Prepare
    theta = torch.tensor([0.3, -0.2, 0.5, 0.1, 0.05, -0.4])
    client = _client(weight_decay=0.1)
    # Execute
    client.on_instruction(model_instruction(theta, torch.zeros(0), version=0))
    # Assert
    assert torch.equal(theta, torch.tensor([0.3, -0.2, 0.5, 0.1, 0.05, -0.4]))


def test_batchnorm_statistics_are_loaded_and_returned():
    # Prepare: BatchNorm1d(2) then Linear(2, 2); sent running mean [0, 0], running var [1, 1]
    model = nn.Sequential(nn.BatchNorm1d(2), nn.Linear(2, 2))
    client = _client(model=model)
    theta = torch.cat([torch.ones(2), torch.zeros(2), torch.zeros(6)])  # BN γ=1, β=0; Linear all 0
    buffers = torch.tensor([0.0, 0.0, 1.0, 1.0])
    # Execute
    update = client.on_instruction(model_instruction(theta, buffers, version=0))
    # Assert
    # batch mean [2/3, 1]; unbiased var: col 0 (1/9 + 4/9 + 1/9)/2 = 1/3, col 1 (1 + 1 + 0)/2 = 1
    # running = 0.9·sent + 0.1·batch: mean [1/15, 0.1], var [0.9 + 1/30, 1.0]
    expected = torch.tensor([1 / 15, 0.1, 0.9 + 1 / 30, 1.0])
    assert torch.allclose(update.tensors["buffers"], expected, atol=1e-6)
    assert torch.equal(buffers, torch.tensor([0.0, 0.0, 1.0, 1.0]))
