"""The simulator's cached step time is per input shape: ResNet-18 on CIFAR-10's 3×32×32 images is not timed
by a measurement on Fashion-MNIST's 1×28×28 ones, and the 28×28 keys cached before stay valid."""
from __future__ import annotations

import json

import torch
from torch import nn

from edgesync.runtime.bookkeeping.step_time import cached_step_s, machine_key
from edgesync.trainer import Trainer


def _trainer(shape: tuple[int, int, int]) -> Trainer:
    c, h, w = shape
    model = nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, 10))
    return Trainer(model=model, x=torch.randn(8, c, h, w), y=torch.randint(0, 10, (8,)), batch_size=4, seed=0)


def test_step_times_are_cached_per_input_shape(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGESYNC_CACHE", str(tmp_path))
    gray, colour = _trainer((1, 28, 28)), _trainer((3, 32, 32))
    cached_step_s(gray, "resnet18")
    cached_step_s(colour, "resnet18")
    keys = set(json.loads((tmp_path / "step_times.json").read_text()))
    base = machine_key("resnet18", 4, torch.device("cpu"))
    assert keys == {base, f"{base}|input=3x32x32"}  # the 28×28 key is the one cached before this change
