"""A client's undisturbed step time: measured on real batches, and cached per machine for the simulator.

Live clients measure it before training (the throttle's reference). The simulator needs one per
model and batch size; measuring it anew every run would make virtual time differ run to run, so
the first measurement on a machine is kept in `$EDGESYNC_CACHE/step_times.json` (default
`~/.cache/edgesync`) and reused, and the run folder's scenario.yaml records the value used. The
coordinator's costs (server_cost.py) are cached the same way (`cached`, `this_machine`).
"""
from __future__ import annotations

import fcntl
import json
import os
import platform
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from edgesync.constants import CALIBRATION_WARMUP_STEPS
from edgesync.runtime.bookkeeping import calibration
from edgesync.trainer import NoHook, Trainer, TrainerStats

STEP_CACHE = "step_times.json"


@contextmanager
def untraced(trainer: Trainer) -> Iterator[None]:
    """Steps that leave the trainer's counters and hook as they were: no throttle, nothing counted."""
    saved_stats, saved_hook = trainer.stats, trainer.hook
    trainer.stats, trainer.hook = TrainerStats(), NoHook()
    try:
        yield
    finally:
        trainer.stats, trainer.hook = saved_stats, saved_hook


def measure_step_s(trainer: Trainer) -> float:
    """Median wall time of real gradient steps with no throttling; the trainer's counters are kept."""
    with untraced(trainer):
        return calibration.round_medians(trainer.gradient, 1)[0]


def warm_up(trainer: Trainer, steps: int = CALIBRATION_WARMUP_STEPS) -> None:
    """A few untimed steps that leave no trace (counters, hook, mini-batch sampling and buffers as they were):
    a process's first steps pay for start-up — CUDA's and cuDNN's on a GPU (≈ 0.6 s on an H100), the
    allocator's and kernels' first use on a CPU (a fresh process's first CNN step: benchmarks/cold_step.py) —
    which would otherwise count as the algorithm's compute time or stretch an emulated device's step."""
    sampling, buffers = trainer.sampler_state(), trainer.get_buffers().clone()
    try:
        with untraced(trainer):
            for _ in range(steps):
                trainer.gradient()
    finally:
        trainer.load_sampler_state(sampling)
        trainer.set_buffers(buffers)


def cache_file(name: str = "step_times.json") -> Path:
    """`$EDGESYNC_CACHE/NAME` (default `~/.cache/edgesync/NAME`)."""
    root = os.environ.get("EDGESYNC_CACHE") or Path.home() / ".cache" / "edgesync"
    return Path(root) / name


def this_machine() -> str:
    """What tells machines apart in a cache key: torch threads and version, host name, processor."""
    return (f"threads={torch.get_num_threads()}|torch={torch.__version__}"
            f"|{platform.node()}|{platform.processor() or platform.machine()}")


def machine_key(model: str, batch_size: int, device: torch.device) -> str:
    return f"{model}|batch={batch_size}|{device}|{this_machine()}"


def cached(name: str, key: str, measure: Callable[[], Any]) -> Any:
    """The value stored under `key` in the cache file `name`; else `measure()`'s, stored there for next time."""
    return cached_entry(name, key, lambda old: (old, False) if old is not None else (measure(), True))


def cached_entry(name: str, key: str, decide: Callable[[Any], tuple[Any, bool]]) -> Any:
    """The cache file `name`'s entry for `key` as `decide(what it holds now, or None)` returns it, with whether
    to store it.

    The file is one JSON object, replaced atomically. Processes that share the cache (a sweep's variants run in
    parallel, two runs on one lab machine) take turns under an exclusive lock on NAME.lock: the first
    measurement of a key is the one every later run reads, never overwritten by a second measured meanwhile,
    and no process drops another's key by writing back what it read before. A cache that cannot be written
    only costs a new measurement next time."""
    path = cache_file(name)
    with _exclusive(path.with_suffix(".lock")):
        try:
            cache = json.loads(path.read_text())
        except (OSError, ValueError):
            cache = {}
        entry, changed = decide(cache.get(key))
        if changed:
            cache[key] = entry
            try:
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
                tmp.replace(path)
            except OSError:
                pass  # a read-only home still runs; it just measures again next time
        return entry


def forget(name: str, keys: list[str]) -> int:
    """Drop `keys` from the cache file `name` (under its lock); how many were there."""
    path = cache_file(name)
    with _exclusive(path.with_suffix(".lock")):
        try:
            cache = json.loads(path.read_text())
        except (OSError, ValueError):
            return 0
        gone = [k for k in keys if cache.pop(k, None) is not None]
        if gone:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
            tmp.replace(path)
        return len(gone)


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock` (created if missing); nothing to hold where it cannot be created."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def step_key(trainer: Trainer, model: str) -> str:
    """The cache key of (model, input, batch size, device) on this machine."""
    key = machine_key(model, trainer.batch_size, trainer.device)
    sample = tuple(trainer.x.shape[1:])
    if sample != (1, 28, 28):  # ResNet-18 on CIFAR's 3×32×32 steps slower than on 1×28×28; the 28×28 keys
        key += f"|input={'x'.join(map(str, sample))}"  # stay as they were, so their caches still hold
    return key


def cached_step(trainer: Trainer, model: str) -> dict:
    """The calibration of (model, input, batch size, device) on this machine: measured robustly once, then
    reused while it was measured on a quiet machine (calibration.py); `step_s` is the step time."""
    def undisturbed() -> dict:
        with untraced(trainer):
            return calibration.measure(trainer.gradient)
    return cached_entry(STEP_CACHE, step_key(trainer, model), lambda old: calibration.keep(old, undisturbed))


def cached_step_s(trainer: Trainer, model: str) -> float:
    """The step time measured once on this machine for (model, input, batch size, device), then reused."""
    return float(cached_step(trainer, model)["step_s"])
