"""The conformance kit (edgesync/testing/): it passes built-in and outside extensions that keep the contract, and
fails each broken one below with the message of the rule it breaks. The broken extensions are written here, as an
author would write them, each with one plausible mistake; the kit finds them by reference
(`test_conformance_kit:NAME`: this module, as pytest imported it)."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pytest
import torch
from pydantic import Field
from torch import nn

from edgesync.api import (API_VERSION, AlgorithmSpec, ArrayDataset, ClientAlgorithm, DeltaConfig, DeltaServer,
                          DeviceProfile, Instruction, LocalRound, Update)
from edgesync.testing import ContractViolation, check_algorithm, check_dataset, check_model, check_profile

FIXTURE = Path(__file__).parent / "fixture_ext"
MODULE = __name__  # the name pytest imported this module by: what references to its contents start with


@pytest.fixture
def fixture_package(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURE))


def broken(rule: str):
    """Expects a ContractViolation of `rule`, its message starting with the rule's name."""
    return pytest.raises(ContractViolation, match=rf"^{rule}: ")


# -- algorithms ------------------------------------------------------------------------------------------------

class PlainConfig(DeltaConfig):
    name: Literal["plain"] = "plain"


class JitteryClient(ClientAlgorithm):
    """Its local learning rate jitters, drawn from Python's global generator: no run seeds it."""

    def on_instruction(self, instruction: Instruction) -> Update:
        lr = self.config.lr * random.uniform(0.5, 1.5)
        local = LocalRound(self, Instruction(instruction.tensors, {**instruction.meta, "lr": lr}))
        local.step()
        return local.finish()


class OneStepClient(ClientAlgorithm):
    def on_instruction(self, instruction: Instruction) -> Update:
        local = LocalRound(self, instruction)
        local.step()
        return local.finish()


class ForgetfulServer(DeltaServer):
    """Restores nothing from a checkpoint: a resumed run starts from θ₀ and round 0."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class UnforgivingServer(DeltaServer):
    """Never takes back a client that was lost."""

    def on_client_joined(self, client: int) -> list:
        return []


class TogetherServer(DeltaServer):
    """Logs `together` only when an update arrives at the same instant as the one before: a key of some rows,
    in the simulator (two ×1 clients report at one virtual instant), never live."""

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.last_arrival_s: float | None = None

    def on_update(self, client: int, update: Update) -> list:
        if self.now() == self.last_arrival_s:
            self.log_update(client, together=True)
        self.last_arrival_s = self.now()
        return super().on_update(client, update)


class GradClient(OneStepClient):
    """Sends its Δ under the key "grad": the server half, which averages "delta", finds none."""

    def on_instruction(self, instruction: Instruction) -> Update:
        update = super().on_instruction(instruction)
        return Update({"grad": update.tensors["delta"]}, update.meta)


def spec(name: str, server=DeltaServer, client=OneStepClient) -> AlgorithmSpec:
    """FedAvg of one local step, with the given halves (a referenced spec's config takes its reference as name)."""
    return AlgorithmSpec(name=name, config=PlainConfig, server=server, client=client, family="synchronous",
                         api_version=API_VERSION)


JITTERY = spec("jittery", client=JitteryClient)
FORGETFUL = spec("forgetful", server=ForgetfulServer)
UNFORGIVING = spec("unforgiving", server=UnforgivingServer)
TOGETHER = spec("together", server=TogetherServer)
GRAD_KEY = spec("grad_key", client=GradClient)


@pytest.mark.slow  # FedAvg's ten local steps a round: 10–20 s on two busy cores
def test_a_built_in_algorithm_keeps_every_rule():
    report = check_algorithm("local_sgd", config={"lr": 0.05})
    assert report["checked"] == ["loads", "replay determinism", "rows across runtimes", "a lost client returns",
                                 "resume from a checkpoint"]
    assert report["skipped"] == {} and report["family"] == "synchronous"


def test_an_outside_algorithm_keeps_every_rule_and_its_run_folders_stay_in_workdir(fixture_package, tmp_path):
    report = check_algorithm("ext_fixture:HALFSTEP", config={"lr": 0.1, "local_steps": 2}, workdir=tmp_path)
    assert report["key"] == "halfstep" and len(report["checked"]) == 5
    kept = Path(report["workdir"])
    assert kept.parent == tmp_path and {p.name for p in kept.iterdir()} == {"sim-1", "sim-2", "live", "lost-client",
                                                                           "resume"}


def test_an_algorithm_that_draws_from_an_unseeded_generator_breaks_replay_determinism():
    with broken("replay determinism") as err:
        check_algorithm(JITTERY, runtimes=("sim",))
    assert "two simulator runs with seed 3 differ at metrics.jsonl row 1, column" in str(err.value)


def test_a_server_half_that_restores_nothing_cannot_resume_from_a_checkpoint():
    with broken("resume from a checkpoint") as err:
        check_algorithm(FORGETFUL, runtimes=("live",))
    assert "given the state it saved at 2 updates, holds another state[" in str(err.value)
    assert "does not come back whole through checkpoint.pt and its load_state_dict" in str(err.value)


def test_a_server_half_that_never_takes_a_client_back_breaks_the_lost_client_rule():
    with broken("a lost client returns") as err:
        check_algorithm(UNFORGIVING, runtimes=("sim",))
    assert "client 0 offline from 0.005 s to" in str(err.value) and "trained no step after its return" in str(err.value)


def test_a_key_only_some_rows_carry_breaks_the_rows_across_runtimes():
    with broken("rows across runtimes") as err:
        check_algorithm(TOGETHER)
    assert "updates.jsonl" in str(err.value) and "'together'" in str(err.value)


def test_an_algorithm_whose_halves_disagree_does_not_run_to_its_stop_rule():
    with broken("runs to its stop rule") as err:
        check_algorithm(GRAD_KEY, runtimes=("sim",))
    assert "the simulator run of 'grad_key' failed: KeyError: 'delta'" in str(err.value)


def test_what_the_kit_cannot_run_is_refused_in_one_line():
    local = spec("local")  # a spec no module holds under a name: no other process could find it
    with pytest.raises(ValueError, match="no module holds it under a name"):
        check_algorithm(local)
    with pytest.raises(ValueError, match=r"runtimes \('ray',\): expected one or both of \('sim', 'live'\)"):
        check_algorithm("local_sgd", runtimes=("ray",))
    with broken("loads") as err:
        check_algorithm("local_sgd", config={"local_step": 2})
    assert "did you mean 'local_steps'" in str(err.value)


# -- models ----------------------------------------------------------------------------------------------------

def five_classes(num_classes: int, in_channels: int) -> nn.Module:
    """Ignores num_classes."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 28 * 28, 5))


def numpy_initialised(num_classes: int, in_channels: int) -> nn.Module:
    model = nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 28 * 28, num_classes))
    with torch.no_grad():
        model[1].weight.copy_(torch.from_numpy(np.random.randn(num_classes, in_channels * 28 * 28)))
    return model


def frozen(num_classes: int, in_channels: int) -> nn.Module:
    """Its weights are frozen (a pretrained backbone whose head was meant to stay trainable)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 28 * 28, num_classes)).requires_grad_(False)


class Scaled(nn.Module):
    """Keeps a scale as a plain tensor attribute: neither a parameter nor a buffer, so no state carries it."""

    def __init__(self, num_classes: int, in_channels: int):
        super().__init__()
        self.linear = nn.Linear(in_channels * 28 * 28, num_classes)
        self.scale = torch.rand(1) + 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1)) * self.scale


def test_built_in_and_outside_models_keep_every_rule(fixture_package):
    check_model("cnn")
    check_model("ext_fixture:tiny_net", args={"width": 4})


@pytest.mark.parametrize("builder, rule, says", [
    ("five_classes", "output shape", "gives [8, 5] for a batch of shape [8, 1, 28, 28], expected logits [8, 10]"),
    ("numpy_initialised", "seeded initial weights", "two builds of model 'test_conformance_kit:numpy_initialised' "
                                                    "with seed 3 differ in parameter '1.weight'"),
    ("frozen", "trains a step", "one SGD step of model"),
    ("Scaled", "state round trip", "loaded through its state_dict into a model built with another seed"),
])
def test_a_broken_model_fails_with_the_rule_it_breaks(builder, rule, says):
    with broken(rule) as err:
        check_model(f"{MODULE}:{builder}")
    assert says.replace("test_conformance_kit", MODULE) in str(err.value)


def test_a_model_with_unknown_args_does_not_build():
    with broken("builds") as err:
        check_model("cnn", args={"width": 4})
    assert "cnn is built in and takes none" in str(err.value)


# -- datasets --------------------------------------------------------------------------------------------------

def bars(root: str | None = None, n: int = 400, seed: int = 0, labels_to: int = 4, floats: bool = False,
         shuffled_test: bool = False, unseeded: bool = False) -> ArrayDataset:
    """16×16 images with a bright row at 4 × label; the keyword arguments break it in one way each."""
    rng = np.random.default_rng() if unseeded else np.random.default_rng(seed)

    def make(count: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, labels_to, count)
        x = rng.integers(0, 40, (count, 16, 16)).astype(np.uint8)
        x[np.arange(count), 4 * (y % 4)] = 255
        return (x.astype(np.float32) if floats else x), y.astype(np.int64)

    (train_x, train_y), (test_x, test_y) = make(n), make(n // 4)
    if shuffled_test:
        test_y = rng.permutation(test_y)
    return ArrayDataset(train_x, train_y, test_x, test_y, num_classes=4, mean=0.2, std=0.3, name="bars")


def test_built_in_and_outside_datasets_keep_every_rule(fixture_package):
    check_dataset("fashion_mnist")
    check_dataset("ext_fixture:stripes", args={"n": 400})
    check_dataset(f"{MODULE}:bars")


@pytest.mark.parametrize("args, rule, says", [
    ({"labels_to": 5}, "arrays", "train_y holds labels 0 to 4, outside [0, 4) of its num_classes 4"),
    ({"floats": True}, "arrays", "train_x is float32 (400, 16, 16), expected uint8 images"),
    ({"unseeded": True}, "deterministic load", "differ in train_x"),
    ({"shuffled_test": True}, "trains", "did not lower the test loss"),
])
def test_a_broken_dataset_fails_with_the_rule_it_breaks(args, rule, says):
    with broken(rule) as err:
        check_dataset(f"{MODULE}:bars", args=args)
    assert says in str(err.value)


# -- device profiles -------------------------------------------------------------------------------------------

class Outside(DeviceProfile):
    api_version: ClassVar[str] = API_VERSION
    factor: float = Field(2.0, gt=0)

    def step_factor(self, t: float, rng: np.random.Generator, machine: Any) -> float:
        return self.factor

    def mean_factor(self, machine: Any) -> float:
        return self.factor


class Turbo(Outside):
    """Lets a factor below 1 through: a device faster than the hardware."""

    kind: Literal["turbo"] = "turbo"


class GlobalDraws(Outside):
    """Draws its steps from numpy's global generator, not the sampler's."""

    kind: Literal["global_draws"] = "global_draws"

    def step_factor(self, t: float, rng: np.random.Generator, machine: Any) -> float:
        return self.factor * float(np.random.uniform(1.0, 1.5))


class MeanOfOne(Outside):
    """Draws twice its factor every other step but says its mean is the factor."""

    kind: Literal["mean_of_one"] = "mean_of_one"

    def machine(self, seed: int, rng: np.random.Generator) -> list[int]:
        return [0]

    def step_factor(self, t: float, rng: np.random.Generator, machine: list[int]) -> float:
        machine[0] += 1
        return self.factor * (2 if machine[0] % 2 else 1)


class Cooling(Outside):
    """Starts slow and speeds up (×(3 − t/10) of its factor, down to ×1 at 20 s) but keeps the default
    look-ahead: a draw at t = 0, the slowest."""

    kind: Literal["cooling"] = "cooling"

    @property
    def varies_in_time(self) -> bool:
        return True

    def step_factor(self, t: float, rng: np.random.Generator, machine: Any) -> float:
        return self.factor * max(1.0, 3 - t / 10)


class Secretive(Outside):
    """Leaves its factor out of its dump: a live client parses another profile."""

    kind: Literal["secretive"] = "secretive"
    factor: float = Field(2.0, gt=0, exclude=True)


@pytest.mark.parametrize("profile", ["x1", "x10", "x2.5", "gamma-hetero", "gamma-homo",
                                     {"kind": "gamma", "machines": "homogeneous", "mean": 2.0},
                                     {"kind": "trace", "steps": [[0, 1], [30, 4]]}], ids=str)
def test_built_in_profiles_keep_every_rule(profile):
    check_profile(profile)


@pytest.mark.parametrize("kind, args, rule, says", [
    ("Turbo", {"factor": 0.5}, "factors", "mean_factor averages 0.5, below 1"),
    ("GlobalDraws", {}, "reproducible draws", "two samplers of client 0 with seed 3 differ at draw 0"),
    ("MeanOfOne", {}, "mean factor", "client 0's 1000 draws average 3, its mean_factor says 2.0"),
    ("Cooling", {}, "least next factor", "least_next() said 6.0 before client 0's draw 1"),
    ("Secretive", {"factor": 3.0}, "travels", "dumped to JSON for a live client and parsed is another profile"),
])
def test_a_broken_profile_kind_fails_with_the_rule_it_breaks(kind, args, rule, says):
    with broken(rule) as err:
        check_profile({"kind": f"{MODULE}:{kind}", **args})
    assert says in str(err.value)


def test_a_profile_faster_than_the_hardware_does_not_parse():
    with broken("parses") as err:
        check_profile("x0.5")
    assert "nothing emulates a faster device" in str(err.value)
