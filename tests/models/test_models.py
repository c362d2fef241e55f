"""Model registry: parameter counts, forward shapes and the unknown-name error."""

from __future__ import annotations

import pytest
import torch

from edgesync.models import MODEL_NAMES, build_model


def _num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_cnn_parameter_count() -> None:
    n = _num_params(build_model("cnn"))
    # conv1 832 + conv2 51 264 + fc1 131 200 + fc2 1 290, counted by hand
    assert n == 184_586
    assert 150_000 <= n <= 250_000


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_forward_shape(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, num_classes=10, in_channels=1).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 1, 28, 28))  # (N, C, H, W)
    assert out.shape == (2, 10)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_other_classes_and_channels(name: str) -> None:
    model = build_model(name, num_classes=7, in_channels=3).eval()
    with torch.no_grad():
        assert model(torch.randn(2, 3, 28, 28)).shape == (2, 7)


def test_resnet_stem_adapted() -> None:
    model = build_model("resnet18")
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1) and model.conv1.in_channels == 1
    assert isinstance(model.maxpool, torch.nn.Identity)


def test_unknown_model_lists_names() -> None:
    with pytest.raises(ValueError, match="vgg") as info:
        build_model("vgg")
    assert all(n in str(info.value) for n in MODEL_NAMES)
