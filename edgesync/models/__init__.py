"""Models by name: `build_model("cnn" | "mlp" | "vgg_small" | "resnet18" | "leaf_cnn" | "leaf_lstm" |
"leaf_sent140_lstm" | "leaf_celeba_cnn", num_classes, in_channels)`, or from outside the package: a `package.module:builder` reference or an entry point in the group
`edgesync.models` (edgesync/extensions.py), called as `builder(num_classes=…, in_channels=…, **args)`
(`in_channels` only if it takes it, so a `torchvision.models` builder works as it is). A model with arguments
travels between processes as one string, its `model_id`: `name{"width": 32}`.

Every model but `leaf_lstm` and `leaf_sent140_lstm` takes float images (N, C, H, W); those two take int64 token
indices (N, L) (TOKEN_MODELS: Shakespeare's characters, Sent140's words) and ignore `in_channels`, which for a
token dataset is its sequence length. Each is sized for its dataset's token indices (TOKEN_INDICES, matched
with the dataset's by the scenario check): `leaf_lstm`'s range is its classes, LEAF's 80 characters;
`leaf_sent140_lstm`'s is the fixed index space of LEAF's Sent140 reader (10,000 words, then unknown/padding),
so neither needs the data to be built."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from edgesync.extensions import ExtensionError, find_outside

from edgesync.models.cnn import SmallCNN
from edgesync.models.leaf import (LEAF_VOCABULARY, SENT140_TOKENS, LeafCelebaCNN, LeafCNN, LeafSent140LSTM,
                                  LeafStackedLSTM, leaf_celeba_cnn, leaf_cnn, leaf_lstm, leaf_sent140_lstm)
from edgesync.models.mlp import TwoLayerMLP
from edgesync.models.resnet import resnet18_small
from edgesync.models.vgg import SmallVGG

_BUILDERS: dict[str, Callable[[int, int], nn.Module]] = {
    "cnn": lambda num_classes, in_channels: SmallCNN(num_classes=num_classes, in_channels=in_channels),
    "mlp": lambda num_classes, in_channels: TwoLayerMLP(num_classes=num_classes, in_channels=in_channels),
    "vgg_small": lambda num_classes, in_channels: SmallVGG(num_classes=num_classes, in_channels=in_channels),
    "resnet18": lambda num_classes, in_channels: resnet18_small(num_classes=num_classes, in_channels=in_channels),
    "leaf_cnn": leaf_cnn,
    "leaf_lstm": leaf_lstm,
    "leaf_sent140_lstm": leaf_sent140_lstm,
    "leaf_celeba_cnn": leaf_celeba_cnn,
}
MODEL_NAMES = tuple(_BUILDERS)
# The image side a model is built for, where it takes only one: SmallCNN's, SmallVGG's and LEAF's CNN's linear
# layers are sized for 28×28 inputs, as is the MLP's first layer; LEAF's CelebA CNN's for 84×84. ResNet-18 is not
# listed: its global average pool takes any size (28×28, CIFAR's 32×32).
FIXED_INPUT_SIDE = {"cnn": 28, "mlp": 28, "vgg_small": 28, "leaf_cnn": 28, "leaf_celeba_cnn": 84}
# The built-in models whose inputs are int64 token indices (N, L), not float images (N, C, H, W), and how many
# indices each takes (0..n-1): the dataset's must be the same (data.datasets.TOKEN_INDICES).
TOKEN_INDICES = {"leaf_lstm": LEAF_VOCABULARY, "leaf_sent140_lstm": SENT140_TOKENS}
TOKEN_MODELS = frozenset(TOKEN_INDICES)


def model_id(name: str, args: Mapping[str, Any] | None = None) -> str:
    """A model and its arguments as one string: `name`, or `name{…}` with the arguments as JSON, keys sorted."""
    return name + (json.dumps(dict(args), sort_keys=True, separators=(",", ":")) if args else "")


def parse_model_id(model: str) -> tuple[str, dict[str, Any]]:
    name, brace, rest = model.partition("{")
    return name, (json.loads(brace + rest) if brace else {})


def outside_builder(name: str) -> Callable[..., nn.Module] | None:
    """The builder an outside model name stands for (a reference or an entry point); None for neither."""
    if (outside := find_outside(name, "model")) is None:
        return None
    found = outside[0]
    if not callable(found):
        raise ExtensionError(f"model {name!r}: names a {type(found).__name__}, not a callable that builds a model")
    return found


def build_model(model: str, num_classes: int = 10, in_channels: int = 1) -> nn.Module:
    """A freshly initialized model (seed torch beforehand for reproducible weights); `model` is a name or a
    `model_id` with arguments."""
    name, args = parse_model_id(model)
    if name in _BUILDERS:
        if args:
            raise ValueError(f"model {name!r} is built in and takes no args (got {sorted(args)})")
        return _BUILDERS[name](num_classes, in_channels)
    builder = outside_builder(name)
    if builder is None:
        raise ValueError(f"unknown model {name!r}; known names: {', '.join(MODEL_NAMES)}, an installed entry point "
                         "of edgesync.models, or a 'package.module:builder' reference")
    # only a builder that names in_channels gets it: torchvision's pass **kwargs on to a model that does not take it
    channels = {"in_channels": in_channels} if "in_channels" in inspect.signature(builder).parameters else {}
    try:
        built = builder(num_classes=num_classes, **channels, **args)
    except TypeError as exc:
        raise ExtensionError(f"model {name!r}: {exc}") from None
    if not isinstance(built, nn.Module):
        raise ExtensionError(f"model {name!r}: its builder returned a {type(built).__name__}, not a torch.nn.Module")
    return built


__all__ = ["FIXED_INPUT_SIDE", "MODEL_NAMES", "TOKEN_INDICES", "TOKEN_MODELS", "LeafCNN", "LeafCelebaCNN",
           "LeafSent140LSTM", "LeafStackedLSTM", "SmallCNN", "SmallVGG", "TwoLayerMLP", "build_model", "model_id",
           "outside_builder", "parse_model_id", "resnet18_small"]
