"""The extension contract: everything outside code needs to add an algorithm, a model, a dataset or a device
profile to EdgeSync, and nothing else. An extension imports from here only; what it finds here keeps its
meaning within one major `API_VERSION` (docs/extending.md is the tutorial and the reference).

Algorithms (docs/algorithms.md, "The contract"): a typed config, a server half that turns arriving updates into
instructions, a client half that turns an instruction into an update through a `Trainer`, and the spec that
names them — with `api_version=API_VERSION`, the version it was written for:

    FEDFOO = AlgorithmSpec(name="fedfoo", config=FedFooConfig, server=FedFooServer, client=FedFooClient,
                           family="synchronous", api_version=API_VERSION)

and a scenario names it `mylab.algos:FEDFOO`, or a package's entry point in the group `edgesync.algorithms`.
The barrier round (`RoundServer`, `RoundConfig`), FedAvg's local round (`LocalRound`, `DeltaServer`,
`DeltaConfig`) and the asynchronous server (`AsyncServer`) are the built-in algorithms' own building blocks.

Models: a callable `builder(num_classes, in_channels, **args) -> torch.nn.Module` (`in_channels` only if it
takes it: a `torchvision.models` builder works as it is). Datasets: a callable
`loader(root, **args) -> ArrayDataset` (uint8 images, int64 labels, a train and a test split). Device
profiles: a `DeviceProfile` subclass with a `kind` of its own and `api_version: ClassVar[str] = API_VERSION`,
named by a client's `profile: {kind: "mylab.devices:Burst", ...}` or an entry point in `edgesync.profiles`.
`edgesync.testing` checks each kind against this contract (check_algorithm, check_model, check_dataset,
check_profile).
"""
from __future__ import annotations

from collections.abc import Callable

from torch import nn

from edgesync.algorithms.local_sgd import DeltaConfig, DeltaServer, LocalRound
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import (
    DEFAULT_LR, AlgorithmConfig, AlgorithmSpec, ClientAlgorithm, ClientContext, Instruction, ModelState, Population,
    Send, ServerAlgorithm, Update, UpdateFormat,
)
from edgesync.algorithms.machinery.rounds import RoundConfig, RoundServer
from edgesync.data.arrays import ArrayDataset
from edgesync.emulation.profiles import DeviceProfile
from edgesync.extensions import API_VERSION, ExtensionError
from edgesync.trainer import Trainer

ModelBuilder = Callable[..., nn.Module]      # builder(num_classes, in_channels, **args)
DatasetLoader = Callable[..., ArrayDataset]  # loader(root, **args)

__all__ = [
    "API_VERSION", "DEFAULT_LR", "AlgorithmConfig", "AlgorithmSpec", "ArrayDataset", "AsyncServer", "ClientAlgorithm",
    "ClientContext", "DatasetLoader", "DeltaConfig", "DeltaServer", "DeviceProfile", "ExtensionError", "Instruction",
    "LocalRound", "ModelBuilder", "ModelState", "Population", "RoundConfig", "RoundServer", "Send",
    "ServerAlgorithm", "Trainer", "Update", "UpdateFormat",
]
