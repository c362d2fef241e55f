"""LEAF's Sent140 stacked LSTM and CelebA CNN (edgesync/models/leaf.py): built by name, shapes, parameter counts
worked by hand, one training step through the Trainer, and the index space shared with the Sent140 reader."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from edgesync.data.leaf_sent140 import MAX_WORDS, TOKEN_INDICES, UNKNOWN
from edgesync.models import (FIXED_INPUT_SIDE, MODEL_NAMES, TOKEN_MODELS, LeafCelebaCNN, LeafSent140LSTM,
                             build_model)
from edgesync.params import get_buffers
from edgesync.trainer import Trainer


def _num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _words(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, TOKEN_INDICES, (n, MAX_WORDS), generator=torch.Generator().manual_seed(seed))


def _sent140_lstm() -> nn.Module:
    torch.manual_seed(0)
    # a token dataset's input_shape is (25,): its sequence length arrives as in_channels and is not used
    return build_model("leaf_sent140_lstm", num_classes=2, in_channels=MAX_WORDS)


def _celeba_cnn() -> nn.Module:
    torch.manual_seed(0)
    return build_model("leaf_celeba_cnn", num_classes=2, in_channels=3)


def test_both_are_built_in_by_name():
    assert {"leaf_sent140_lstm", "leaf_celeba_cnn"} <= set(MODEL_NAMES)
    assert isinstance(_sent140_lstm(), LeafSent140LSTM) and isinstance(_celeba_cnn(), LeafCelebaCNN)
    assert TOKEN_MODELS == {"leaf_lstm", "leaf_sent140_lstm"}
    assert FIXED_INPUT_SIDE["leaf_celeba_cnn"] == 84 and "leaf_sent140_lstm" not in FIXED_INPUT_SIDE


def test_the_lstm_takes_every_index_of_the_readers_space_and_gives_two_logits():
    model = _sent140_lstm().eval()
    assert model.embedding.num_embeddings == TOKEN_INDICES == UNKNOWN + 1  # words, then unknown and padding
    x = _words(3)
    x[0] = UNKNOWN  # an all-padding tweet
    with torch.no_grad():
        out = model(x)
    assert out.shape == (3, 2) and torch.isfinite(out).all()
    with pytest.raises(IndexError):
        model(torch.full((1, MAX_WORDS), TOKEN_INDICES))


def test_the_cnn_maps_84_by_84_faces_to_two_logits():
    model = _celeba_cnn().eval()
    images = torch.randn(3, 3, 84, 84)
    with torch.no_grad():
        assert model.features(images).shape == (3, 32, 6, 6)  # 84 → 42 → 21 → 11 → 6: TensorFlow's "same" pool
        out = model(images)
    assert out.shape == (3, 2) and torch.isfinite(out).all()


def test_the_lstm_parameter_count():
    def lstm_layer(i: int, h: int) -> int:
        return 4 * (h * (i + h) + 2 * h)  # four gates, each W_ih, W_hh and PyTorch's two bias vectors

    embedding = 10_001 * 100             # 1,000,100: 10,000 words and the unknown/padding row, 100 wide
    layer1 = lstm_layer(100, 100)        # 4·(100·200 + 200) = 80,800
    layer2 = lstm_layer(100, 100)        # 80,800
    dense = 100 * 128 + 128              # 12,928
    output = 128 * 2 + 2                 # 258
    assert layer1 == layer2 == 80_800
    assert embedding + layer1 + layer2 + dense + output == 1_174_886 == _num_params(_sent140_lstm())


def test_the_cnn_parameter_count_and_its_batch_norm_buffers():
    conv1 = 3 * 3 * 3 * 32 + 32          # 896
    convs = 3 * (3 * 3 * 32 * 32 + 32)   # 3 · 9,248 = 27,744
    norms = 4 * (32 + 32)                # 256: each batch norm's scale and shift
    output = 32 * 6 * 6 * 2 + 2          # 2,306
    assert conv1 + convs + norms + output == 31_202 == _num_params(_celeba_cnn())
    # each batch norm's running mean and variance: the float buffers the runtimes send beside the weights
    assert get_buffers(_celeba_cnn()).numel() == 4 * (32 + 32)


@pytest.mark.parametrize("build, x", [
    (_sent140_lstm, _words(6)),
    (_celeba_cnn, torch.randn(6, 3, 84, 84)),
], ids=["sent140_words", "celeba_images"])
def test_one_trainer_step_changes_the_weights(build, x):
    # Prepare
    y = torch.randint(0, 2, (len(x),), generator=torch.Generator().manual_seed(1))
    trainer = Trainer(model=build(), x=x, y=y, batch_size=4, seed=0)
    before = trainer.get_params()
    # Execute
    loss, _ = trainer.sgd_steps(1, lr=0.1)
    # Assert
    after = trainer.get_params()
    assert math.isfinite(loss) and loss > 0
    assert not torch.equal(before, after) and torch.isfinite(after).all()
    assert trainer.stats.steps == 1 and trainer.stats.samples == 4
