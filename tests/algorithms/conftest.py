"""Shared factories for the algorithm tests: fake client updates, model states and tiny trainers.

Fixtures return plain functions (the usual pytest factory pattern), so a test reads
`update = make_update([1.0, 0.0], version=0)` with every field it does not care about defaulted.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from edgesync.algorithms.machinery.base import ModelState, Update
from edgesync.trainer import Trainer


def _vec(values) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float32).clone()


def _make_update(grad, *, buffers=None, version: int = 0, samples: int = 32, steps: int = 1,
                 loss: float = 1.0, **meta) -> Update:
    """A fake client update: gradient, optional BatchNorm buffers, the echoed model version, counts."""
    tensors = {"grad": _vec(grad)}
    if buffers is not None:
        tensors["buffers"] = _vec(buffers)
    return Update(tensors=tensors, meta={"version": version, "samples": samples, "steps": steps,
                                         "loss": loss, **meta})


def _model_state(params, buffers=()) -> ModelState:
    """A ModelState from plain lists; no buffers unless given (like a model without BatchNorm)."""
    return ModelState(params=_vec(params), buffers=_vec(list(buffers)))


def _tiny_trainer(seed: int = 0, n: int = 8, batch_size: int = 4, batchnorm: bool = True) -> Trainer:
    """A 2-feature, 2-class classifier on `n` separable random samples (optionally with BatchNorm)."""
    torch.manual_seed(seed)
    layers = [nn.Linear(2, 4)]
    if batchnorm:
        layers.append(nn.BatchNorm1d(4))
    layers += [nn.ReLU(), nn.Linear(4, 2)]
    model = nn.Sequential(*layers)
    gen = torch.Generator().manual_seed(1000 + seed)
    x = torch.randn(n, 2, generator=gen)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return Trainer(model=model, x=x, y=y, batch_size=batch_size, seed=seed)


@pytest.fixture
def make_update():
    return _make_update


@pytest.fixture
def model_state():
    return _model_state


@pytest.fixture
def tiny_trainer():
    return _tiny_trainer
