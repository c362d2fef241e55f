"""LEAF's reference models (edgesync/models/leaf.py): shapes, parameter counts by hand, one training step through
the Trainer, evaluation of next-character accuracy on token inputs, and how the registry, the scenario check and
check_model treat a token model."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from edgesync.models import FIXED_INPUT_SIDE, MODEL_NAMES, TOKEN_MODELS, LeafCNN, LeafStackedLSTM, build_model
from edgesync.runtime.bookkeeping.evaluator import evaluate
from edgesync.trainer import Trainer, use_channels_last

FEMNIST_CLASSES = 62
VOCABULARY = 80  # LEAF's Shakespeare characters
SEQUENCE = 80  # LEAF's Shakespeare samples: 80 characters, then the one to predict


def _num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _tokens(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCABULARY, (n, SEQUENCE), generator=torch.Generator().manual_seed(seed))


def _femnist_cnn() -> nn.Module:
    torch.manual_seed(0)
    return build_model("leaf_cnn", num_classes=FEMNIST_CLASSES, in_channels=1)


def _shakespeare_lstm() -> nn.Module:
    torch.manual_seed(0)
    # a token dataset's input_shape is (80,): its first entry, the sequence length, arrives as in_channels
    return build_model("leaf_lstm", num_classes=VOCABULARY, in_channels=SEQUENCE)


# -- built by name --------------------------------------------------------------------------------------------

def test_both_are_built_in_by_name():
    assert {"leaf_cnn", "leaf_lstm"} <= set(MODEL_NAMES)
    assert isinstance(_femnist_cnn(), LeafCNN) and isinstance(_shakespeare_lstm(), LeafStackedLSTM)
    assert FIXED_INPUT_SIDE["leaf_cnn"] == 28 and "leaf_lstm" not in FIXED_INPUT_SIDE
    assert TOKEN_MODELS == {"leaf_lstm", "leaf_sent140_lstm"}


def test_the_lstm_ignores_in_channels():
    one, other = build_model("leaf_lstm", VOCABULARY, 1), build_model("leaf_lstm", VOCABULARY, 3)
    assert [p.shape for p in one.parameters()] == [p.shape for p in other.parameters()]


# -- shapes ---------------------------------------------------------------------------------------------------

def test_the_cnn_maps_femnist_images_to_62_logits():
    model = _femnist_cnn().eval()
    images = torch.randn(3, 1, 28, 28)
    with torch.no_grad():
        assert model.features(images).shape == (3, 64, 7, 7)  # "same" padding: only the poolings halve the side
        out = model(images)
    assert out.shape == (3, FEMNIST_CLASSES) and torch.isfinite(out).all()


def test_the_lstm_maps_character_sequences_to_80_logits():
    model = _shakespeare_lstm().eval()
    with torch.no_grad():
        out = model(_tokens(3))
        shorter = model(_tokens(2)[:, :5])  # any length: the last step's output is read
    assert out.shape == (3, VOCABULARY) and torch.isfinite(out).all()
    assert shorter.shape == (2, VOCABULARY)


# -- parameter counts, by hand --------------------------------------------------------------------------------

def test_the_cnn_parameter_count():
    conv1 = 5 * 5 * 1 * 32 + 32          # 832
    conv2 = 5 * 5 * 32 * 64 + 64         # 51,264
    dense = 64 * 7 * 7 * 2048 + 2048     # 6,424,576: two poolings leave 7×7 of 64 channels
    output = 2048 * 62 + 62              # 127,038
    assert conv1 + conv2 + dense + output == 6_603_710 == _num_params(_femnist_cnn())


def test_the_lstm_parameter_count():
    def lstm_layer(i: int, h: int) -> int:
        return 4 * (h * (i + h) + 2 * h)  # four gates, each W_ih, W_hh and PyTorch's two bias vectors

    embedding = 80 * 8                   # 640
    layer1 = lstm_layer(8, 256)          # 4·(256·264 + 512) = 272,384
    layer2 = lstm_layer(256, 256)        # 4·(256·512 + 512) = 526,336
    output = 256 * 80 + 80               # 20,560
    assert (layer1, layer2) == (272_384, 526_336)
    assert embedding + layer1 + layer2 + output == 819_920 == _num_params(_shakespeare_lstm())
    # LEAF's TensorFlow cell has one bias per gate: 2 layers · 4 gates · 256 fewer
    assert 819_920 - 2 * 4 * 256 == 817_872


# -- training and evaluation ----------------------------------------------------------------------------------

@pytest.mark.parametrize("build, x, classes", [
    (_femnist_cnn, torch.randn(6, 1, 28, 28), FEMNIST_CLASSES),
    (_shakespeare_lstm, _tokens(6), VOCABULARY),
], ids=["femnist_images", "shakespeare_tokens"])
def test_one_trainer_step_changes_the_weights(build, x, classes):
    # Prepare
    y = torch.randint(0, classes, (len(x),), generator=torch.Generator().manual_seed(1))
    trainer = Trainer(model=build(), x=x, y=y, batch_size=4, seed=0)
    before = trainer.get_params()
    # Execute
    loss, _ = trainer.sgd_steps(1, lr=0.1)
    # Assert
    after = trainer.get_params()
    assert math.isfinite(loss) and loss > 0
    assert not torch.equal(before, after) and torch.isfinite(after).all()
    assert trainer.stats.steps == 1 and trainer.stats.samples == 4


def test_token_inputs_never_go_channels_last():
    # a convolutional model with float images does (as before); int64 (N, L) indices never do, whatever the model
    assert use_channels_last(_femnist_cnn(), torch.randn(2, 1, 28, 28))
    assert not use_channels_last(_femnist_cnn(), _tokens(2))
    assert not use_channels_last(_shakespeare_lstm(), _tokens(2))


class _RepeatsTheLastCharacter(nn.Module):
    """Logits 1 for the sequence's last character, 0 for the 79 others: it predicts a repeat."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.one_hot(tokens[:, -1], VOCABULARY).float()


def test_evaluate_on_tokens_gives_next_character_accuracy():
    # Prepare: five sequences; the next character repeats the last one in three of them
    x = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 0, 0], [79, 78, 77]])
    y = torch.tensor([3, 6, 10, 0, 76])
    # Execute: chunks of two, the last one short
    accuracy, loss = evaluate(_RepeatsTheLastCharacter(), x, y, batch_size=2)
    # Assert: right ones cost -log(e / (e + 79)), wrong ones -log(1 / (e + 79))
    assert accuracy == 3 / 5
    assert loss == pytest.approx(math.log(math.e + 79) - 3 / 5)


def test_evaluate_on_tokens_is_argmax_accuracy_for_the_lstm():
    model, x = _shakespeare_lstm(), _tokens(7)
    y = torch.randint(0, VOCABULARY, (7,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits = model.eval()(x)
    y[:3] = logits[:3].argmax(1)  # three right at least, whatever the initial weights
    accuracy, loss = evaluate(model, x, y, batch_size=3)
    assert accuracy == pytest.approx((logits.argmax(1) == y).float().mean().item())
    assert loss == pytest.approx(F.cross_entropy(logits, y).item(), rel=1e-5)


# -- what refuses a token model on images ---------------------------------------------------------------------

def test_a_scenario_refuses_the_lstm_on_images_and_the_cnn_on_tokens(monkeypatch):
    from edgesync.config import ScenarioError, load_scenario
    from edgesync.data import datasets
    from edgesync.testing import tiny_task

    with pytest.raises(ScenarioError, match="leaf_lstm takes sequences of token indices, but dataset.name "
                                            "fashion_mnist holds images"):
        load_scenario(tiny_task.scenario("sim", model={"name": "leaf_lstm"}))
    monkeypatch.setitem(datasets.INPUT_SHAPES, "fashion_mnist", (SEQUENCE,))  # stands in for a token dataset
    with pytest.raises(ScenarioError, match="leaf_cnn takes images, .* use model.name leaf_lstm"):
        load_scenario(tiny_task.scenario("sim", model={"name": "leaf_cnn"}))
    assert load_scenario(tiny_task.scenario("sim", model={"name": "leaf_lstm"})).model.name == "leaf_lstm"


def test_check_model_says_a_token_model_cannot_be_checked_on_its_images():
    from edgesync.testing import ContractViolation, check_model

    with pytest.raises(ContractViolation, match="a token model cannot be checked here") as err:
        check_model("leaf_lstm")
    assert err.value.rule == "builds"
