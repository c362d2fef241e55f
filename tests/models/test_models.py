"""Model registry: parameter counts, forward shapes and the unknown-name error."""

from __future__ import annotations

import pytest
import torch

from edgesync.models import FIXED_INPUT_SIDE, MODEL_NAMES, TOKEN_MODELS, build_model

IMAGE_MODELS = [name for name in MODEL_NAMES if name not in TOKEN_MODELS]  # tokens: tests/models/test_leaf_models.py


def _num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_cnn_parameter_count() -> None:
    n = _num_params(build_model("cnn"))
    # conv1 832 + conv2 51 264 + fc1 131 200 + fc2 1 290, counted by hand
    assert n == 184_586
    assert 150_000 <= n <= 250_000


def test_mlp_parameter_count() -> None:
    # FedAvg's 2NN: 784·200 + 200, 200·200 + 200, 200·10 + 10, counted by hand
    assert _num_params(build_model("mlp")) == 157_000 + 40_200 + 2_010 == 199_210


@pytest.mark.parametrize("name", IMAGE_MODELS)
def test_forward_shape(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, num_classes=10, in_channels=1).eval()
    with torch.no_grad():
        side = FIXED_INPUT_SIDE.get(name, 28)  # LEAF's CelebA CNN: 84×84
        out = model(torch.randn(2, 1, side, side))  # (N, C, H, W)
    assert out.shape == (2, 10)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", IMAGE_MODELS)
def test_other_classes_and_channels(name: str) -> None:
    model = build_model(name, num_classes=7, in_channels=3).eval()
    with torch.no_grad():
        side = FIXED_INPUT_SIDE.get(name, 28)
        assert model(torch.randn(2, 3, side, side)).shape == (2, 7)


def test_resnet_stem_adapted() -> None:
    model = build_model("resnet18")
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1) and model.conv1.in_channels == 1
    assert isinstance(model.maxpool, torch.nn.Identity)


def test_unknown_model_lists_names() -> None:
    with pytest.raises(ValueError, match="vgg") as info:
        build_model("vgg")
    assert all(n in str(info.value) for n in MODEL_NAMES)


def test_resnet18_for_cifar10_trains_on_3x32x32() -> None:
    torch.manual_seed(0)
    model = build_model("resnet18", num_classes=10, in_channels=3)
    # torchvision's resnet18 at 10 classes is 11 181 642; the 3×3 stem over 3 channels (1 728 weights)
    # replaces the 7×7 one (9 408): 11 173 962, the ≈11.2 M of the DGS paper's ResNet-18
    n = _num_params(model)
    assert n == 11_173_962 and 11.1e6 <= n <= 11.3e6
    assert model.conv1.in_channels == 3 and model.conv1.stride == (1, 1)
    model.train()
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([3, 7])
    out = model(x)
    assert out.shape == (2, 10)
    torch.nn.functional.cross_entropy(out, y).backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.conv1.weight.grad.abs().sum() > 0  # the gradient reaches the stem


def test_the_cnn_is_built_for_28x28_only() -> None:
    from edgesync.models import FIXED_INPUT_SIDE

    model = build_model("cnn", in_channels=3).eval()
    side = FIXED_INPUT_SIDE["cnn"]
    with torch.no_grad():
        assert model(torch.randn(1, 3, side, side)).shape == (1, 10)
        with pytest.raises(RuntimeError):  # why scenario validation refuses cnn on CIFAR-10
            model(torch.randn(1, 3, 32, 32))
