"""`check_model`: a model builder on the tiny task's data (Fashion-MNIST, 1×28×28, 10 classes), built as a
run builds θ₀ (runtime/bookkeeping/workload.py) and trained as a client trains it (trainer.py):

- builds: the scenario's `model: {name, args}` validates and its builder returns an nn.Module;
- output shape: a batch of B images gives finite logits of shape [B, num_classes];
- seeded initial weights: every process of a run builds θ₀ from the run's seed alone, so two builds agree;
- trains a step: one SGD step on a mini-batch changes the weights and leaves them finite;
- state round trip: its state_dict, and the flat parameter and buffer vectors the runtimes send, loaded into
  a model built with another seed, give the same outputs.

A token model (a built-in one of TOKEN_MODELS: leaf_lstm, leaf_sent140_lstm) takes token indices, not images, so
it cannot be checked here: check_model says so (rule `builds`) rather than report a broken model; tests/models/
test_leaf_models.py and test_leaf_sent140_celeba_models.py check the built-in ones on token tensors.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from edgesync.config import Scenario, ScenarioError, load_scenario
from edgesync.models import TOKEN_MODELS, build_model
from edgesync.params import get_buffers, get_params, set_buffers, set_params
from edgesync.runtime.bookkeeping.workload import initial_model, make_trainer, scenario_dataset, trainer_seed
from edgesync.testing import tiny_task
from edgesync.testing.rules import (BUILDS, OUTPUT_SHAPE, ROUND_TRIP, SEEDED_INIT, TRAINS_A_STEP,
                                    ContractViolation)
from edgesync.trainer import NoHook

BATCH = 8
STEP_LR = 0.1


def check_model(name: str, *, args: dict[str, Any] | None = None) -> None:
    """Check a model builder against the contract; ContractViolation names the first rule it breaks. `name` and
    `args` as a scenario's `model:` section gives them (a `package.module:builder` reference, an entry point's
    or a built-in name)."""
    if name in TOKEN_MODELS:
        raise ContractViolation(BUILDS, f"model {name!r} takes sequences of token indices, and check_model "
                                        "checks a model on the tiny task's 1×28×28 images: a token model cannot "
                                        "be checked here")
    sc = _loaded(name, args)
    data = scenario_dataset(sc.dataset)
    what = f"model {sc.model.id!r}"
    state = _built(lambda: initial_model(sc, data), what)
    trainer = _built(lambda: make_trainer(data, sc.model.id, np.arange(len(data.train_y)), BATCH,
                                          trainer_seed(sc.seed, 0), torch.device("cpu"), NoHook()), what)
    model, images = trainer.model, trainer.x[:BATCH]
    trainer.set_params(state.params)
    trainer.set_buffers(state.buffers)
    _check_output(model, images, data.num_classes, what)
    _check_seeded(sc, data, state, model, what)
    _check_round_trip(sc, model, images, data.num_classes, data.input_shape[0], what)
    _check_step(trainer, what)


def _loaded(name: str, args: dict[str, Any] | None) -> Scenario:
    section = {"name": name, **({"args": args} if args else {})}
    try:
        return load_scenario(tiny_task.scenario("sim", model=section))
    except ScenarioError as exc:
        raise ContractViolation(BUILDS, f"the tiny task's scenario refuses model {section}: {exc}") from None


def _built(build, what: str):
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - the builder's failure, whatever it is, is the finding
        raise ContractViolation(BUILDS, f"{what} cannot be built for 1×28×28 images and 10 classes: "
                                        f"{type(exc).__name__}: {exc}") from exc


def _outputs(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    model.eval()
    try:
        with torch.no_grad():
            return model(images)
    finally:
        model.train()


def _check_output(model: nn.Module, images: torch.Tensor, num_classes: int, what: str) -> None:
    try:
        out = _outputs(model, images)
    except Exception as exc:  # noqa: BLE001
        raise ContractViolation(OUTPUT_SHAPE, f"{what} fails on a batch of shape {list(images.shape)}: "
                                              f"{type(exc).__name__}: {exc}") from exc
    expected = [len(images), num_classes]
    if not isinstance(out, torch.Tensor) or list(out.shape) != expected:
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ContractViolation(OUTPUT_SHAPE, f"{what} gives {shape} for a batch of shape {list(images.shape)}, "
                                              f"expected logits {expected} (batch, num_classes)")
    if not torch.isfinite(out).all():
        raise ContractViolation(OUTPUT_SHAPE, f"{what} gives non-finite logits at its initial weights")


def _check_seeded(sc: Scenario, data, state, model: nn.Module, what: str) -> None:
    again = initial_model(sc, data)
    for label, a, b in (("parameter", state.params, again.params), ("buffer", state.buffers, again.buffers)):
        if a.shape != b.shape or not torch.equal(a, b):
            where = _first_differing_parameter(model, a, b) if label == "parameter" else "its float buffers"
            raise ContractViolation(SEEDED_INIT, f"two builds of {what} with seed {sc.seed} differ in {label} "
                                                 f"{where}: initialise from torch's generator (the run seeds it), "
                                                 "never from an unseeded one (numpy's, Python's, the clock)")


def _first_differing_parameter(model: nn.Module, a: torch.Tensor, b: torch.Tensor) -> str:
    start = 0
    for name, p in model.named_parameters():
        end = start + p.numel()
        if not torch.equal(a[start:end], b[start:end]):
            return repr(name)
        start = end
    return "(their counts differ)"


def _check_round_trip(sc: Scenario, model: nn.Module, images: torch.Tensor, num_classes: int, in_channels: int,
                      what: str) -> None:
    expected = _outputs(model, images)
    for route in ("state_dict", "flat parameters and buffers"):
        torch.manual_seed(sc.seed + 1)  # other weights, for the copy to overwrite
        copy = build_model(sc.model.id, num_classes=num_classes, in_channels=in_channels)
        if route == "state_dict":
            copy.load_state_dict(model.state_dict())
        else:
            set_params(copy, get_params(model))
            set_buffers(copy, get_buffers(model))
        # close, not equal: weights laid out otherwise in memory sum in another order
        if not torch.allclose(_outputs(copy, images), expected, rtol=1e-4, atol=1e-5):
            raise ContractViolation(ROUND_TRIP, f"{what} loaded through its {route} into a model built with "
                                                "another seed gives other outputs: some state is outside its "
                                                "parameters and buffers (register it as a buffer)")


def _check_step(trainer, what: str) -> None:
    before = trainer.get_params()
    if before.numel() == 0:
        raise ContractViolation(TRAINS_A_STEP, f"{what} has no parameters to train")
    try:
        trainer.sgd_steps(1, lr=STEP_LR)
    except Exception as exc:  # noqa: BLE001
        raise ContractViolation(TRAINS_A_STEP, f"one SGD step of {what} fails: {type(exc).__name__}: {exc}") from exc
    after = trainer.get_params()
    if torch.equal(before, after):
        raise ContractViolation(TRAINS_A_STEP, f"one SGD step (lr {STEP_LR}) left every weight of {what} as it was: "
                                               "no gradient reaches its parameters")
    if not torch.isfinite(after).all():
        raise ContractViolation(TRAINS_A_STEP, f"one SGD step (lr {STEP_LR}) made weights of {what} non-finite")
