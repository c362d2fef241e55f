"""Models by name: `build_model("cnn" | "vgg_small" | "resnet18", num_classes, in_channels)`."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from edgesync.models.cnn import SmallCNN
from edgesync.models.resnet import resnet18_small
from edgesync.models.vgg import SmallVGG

_BUILDERS: dict[str, Callable[[int, int], nn.Module]] = {
    "cnn": lambda num_classes, in_channels: SmallCNN(num_classes=num_classes, in_channels=in_channels),
    "vgg_small": lambda num_classes, in_channels: SmallVGG(num_classes=num_classes, in_channels=in_channels),
    "resnet18": lambda num_classes, in_channels: resnet18_small(num_classes=num_classes, in_channels=in_channels),
}
MODEL_NAMES = tuple(_BUILDERS)
# The image side a model is built for, where it takes only one: SmallCNN's and SmallVGG's linear layers are
# sized for 28×28 inputs. ResNet-18 is not listed: its global average pool takes any size (28×28, CIFAR's 32×32).
FIXED_INPUT_SIDE = {"cnn": 28, "vgg_small": 28}


def build_model(name: str, num_classes: int = 10, in_channels: int = 1) -> nn.Module:
    """A freshly initialized model (seed torch beforehand for reproducible weights)."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; known names: {', '.join(MODEL_NAMES)}")
    return _BUILDERS[name](num_classes, in_channels)


__all__ = ["FIXED_INPUT_SIDE", "MODEL_NAMES", "SmallCNN", "SmallVGG", "build_model", "resnet18_small"]
