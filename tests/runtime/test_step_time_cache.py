"""The simulator's cached step time is per input shape: ResNet-18 on CIFAR-10's 3×32×32 images is not timed
by a measurement on Fashion-MNIST's 1×28×28 ones, and the 28×28 keys cached before stay valid. Processes
sharing one cache read the first measurement of a key and keep each other's keys."""
from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import torch
from torch import nn

from edgesync.runtime.bookkeeping.step_time import cached, cached_step_s, machine_key
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


def _measure_in_a_process(cache: str, key: str, out: str) -> None:
    """Another process on the same cache: its `measure` is slow and returns its own PID."""
    os.environ["EDGESYNC_CACHE"] = cache
    value = cached("step_times.json", key, lambda: (time.sleep(0.3), os.getpid())[1])
    Path(out).write_text(str(value))


def test_processes_sharing_a_cache_all_read_the_first_measurement_and_keep_each_others_keys(tmp_path):
    # Prepare: three processes measure one key at the same time, a fourth another key
    ctx = multiprocessing.get_context("fork")  # separate processes; nothing to import again
    jobs = [ctx.Process(target=_measure_in_a_process, args=(str(tmp_path), key, str(tmp_path / f"out{i}")))
            for i, key in enumerate(["a", "a", "a", "b"])]
    # Execute
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(60)
    # Assert: one measurement of "a", which every process read; "b" kept beside it
    values = [int((tmp_path / f"out{i}").read_text()) for i in range(4)]
    assert values[0] == values[1] == values[2]
    stored = json.loads((tmp_path / "step_times.json").read_text())
    assert stored == {"a": values[0], "b": values[3]}
