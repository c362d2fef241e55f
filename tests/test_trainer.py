"""Trainer (local SGD and the data sampler) and the flat-vector helpers in `edgesync.params`."""
import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from edgesync import params as flat
from edgesync.trainer import Trainer


def _data(n=6):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=gen)
    y = torch.tensor([0, 1, 2, 1, 0, 2][:n])
    return x, y


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3))


def _torch_sgd(model, x, y, steps, lr, momentum, weight_decay):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return flat.get_params(model)


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.01)])
def test_sgd_steps_reproduce_torch_sgd(momentum, weight_decay):
    # Prepare: batch = the whole dataset, so both sides see identical batches
    x, y = _data()
    model = _model()
    reference = copy.deepcopy(model)
    trainer = Trainer(model=model, x=x, y=y, batch_size=len(x), seed=0)
    # Execute
    loss, velocity = trainer.sgd_steps(5, lr=0.1, momentum=momentum, weight_decay=weight_decay)
    expected = _torch_sgd(reference, x, y, 5, 0.1, momentum, weight_decay)
    # Assert
    assert torch.allclose(trainer.get_params(), expected, atol=1e-6)
    assert (velocity is None) == (momentum == 0.0)
    assert trainer.stats.steps == 5 and trainer.stats.samples == 5 * len(x)
    assert loss > 0


def test_sgd_steps_carry_momentum_across_calls():
    # Prepare
    x, y = _data()
    model = _model()
    reference = copy.deepcopy(model)
    trainer = Trainer(model=model, x=x, y=y, batch_size=len(x), seed=0)
    # Execute: 3 + 2 steps with the velocity handed back equal 5 uninterrupted torch steps
    _, velocity = trainer.sgd_steps(3, lr=0.1, momentum=0.9)
    _, velocity = trainer.sgd_steps(2, lr=0.1, momentum=0.9, velocity=velocity)
    expected = _torch_sgd(reference, x, y, 5, 0.1, 0.9, 0.0)
    # Assert
    assert torch.allclose(trainer.get_params(), expected, atol=1e-6)


def test_sgd_steps_by_hand_on_a_linear_model():
    # Prepare: Linear(1, 2, bias=False), θ = [0, 0], one sample x = 2, label 0.
    # At θ = 0: softmax [½, ½], ∂θ = (p − onehot)·x = [−½, ½]·2 = [−1, 1]; step η = 0.5 ⇒ θ = [0.5, −0.5]
    model = nn.Linear(1, 2, bias=False)
    trainer = Trainer(model=model, x=torch.tensor([[2.0]]), y=torch.tensor([0]), batch_size=1, seed=0)
    trainer.set_params(torch.zeros(2))
    # Execute
    trainer.sgd_steps(1, lr=0.5)
    # Assert
    assert torch.allclose(trainer.get_params(), torch.tensor([0.5, -0.5]))


class _Recorder(nn.Module):
    """A classifier that records which samples (ids in feature 0) each forward pass saw."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1, 2)
        self.seen: list[list[int]] = []

    def forward(self, x):
        self.seen.append([int(v) for v in x[:, 0]])
        return self.linear(x[:, 1:])


def _recording_trainer(n, batch_size, seed=0):
    ids = torch.arange(n, dtype=torch.float32)
    x = torch.stack([ids, torch.ones(n)], dim=1)
    return Trainer(model=_Recorder(), x=x, y=torch.zeros(n, dtype=torch.long), batch_size=batch_size, seed=seed)


def test_sampler_visits_every_sample_once_per_epoch():
    # Prepare: 12 samples, batches of 3 ⇒ 4 batches an epoch
    trainer = _recording_trainer(12, 3)
    # Execute: three epochs
    for _ in range(12):
        trainer.gradient()
    # Assert
    seen = trainer.model.seen
    assert all(len(batch) == 3 for batch in seen)
    epochs = [sum(seen[i:i + 4], []) for i in (0, 4, 8)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(12))
    assert epochs[0] != epochs[1] or epochs[1] != epochs[2]  # reshuffled every epoch


def test_sampler_never_repeats_within_an_epoch_when_batches_do_not_divide():
    # Prepare: 10 samples, batches of 3 ⇒ 3 full batches, the 10th sample waits for a later epoch
    trainer = _recording_trainer(10, 3)
    # Execute
    for _ in range(6):
        trainer.gradient()
    # Assert
    seen = trainer.model.seen
    assert all(len(batch) == 3 for batch in seen)
    for start in (0, 3):
        epoch = sum(seen[start:start + 3], [])
        assert len(set(epoch)) == 9


def test_sampler_batch_larger_than_the_data_is_the_whole_data():
    # Prepare
    trainer = _recording_trainer(4, 32)
    # Execute
    trainer.gradient()
    trainer.gradient()
    # Assert
    assert [sorted(b) for b in trainer.model.seen] == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert trainer.stats.samples == 8


def test_sampler_is_reproducible_per_seed():
    # Prepare
    a, b, c = _recording_trainer(12, 3, seed=5), _recording_trainer(12, 3, seed=5), _recording_trainer(12, 3, seed=6)
    # Execute
    for t in (a, b, c):
        for _ in range(4):
            t.gradient()
    # Assert
    assert a.model.seen == b.model.seen
    assert a.model.seen != c.model.seen


def test_trainer_without_samples_is_refused():
    with pytest.raises(ValueError, match="no training samples"):
        Trainer(model=nn.Linear(2, 2), x=torch.zeros(0, 2), y=torch.zeros(0, dtype=torch.long), batch_size=4, seed=0)


# -- edgesync.params ------------------------------------------------------------------------------

def _bn_model():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(2, 2))


def test_params_round_trip_between_models():
    # Prepare: conv 2·1·3·3 + 2, BN 2 + 2, linear 2·2 + 2 = 18 + 2 + 4 + 6 = 30 parameters
    source, target = _bn_model(), _bn_model()
    theta = torch.arange(30, dtype=torch.float32) / 10
    # Execute
    flat.set_params(source, theta)
    flat.set_params(target, flat.get_params(source))
    # Assert
    assert flat.num_params(source) == 30
    assert torch.equal(flat.get_params(target), theta)
    assert torch.equal(target[0].weight.reshape(-1), theta[:18])  # order = model.parameters()
    assert torch.equal(target[3].bias, theta[28:])


def test_buffers_round_trip_skips_integer_counters():
    # Prepare: BatchNorm2d(2) holds running_mean (2), running_var (2) and an int64 counter
    model = _bn_model()
    stats = torch.tensor([0.5, -0.5, 2.0, 3.0])
    # Execute
    flat.set_buffers(model, stats)
    got = flat.get_buffers(model)
    # Assert
    assert torch.equal(got, stats)
    assert torch.equal(model[1].running_var, torch.tensor([2.0, 3.0]))
    assert flat.get_buffers(nn.Linear(2, 2)).numel() == 0


def test_get_params_is_a_copy():
    # Prepare
    model = nn.Linear(2, 1, bias=False)
    flat.set_params(model, torch.tensor([1.0, 2.0]))
    # Execute
    theta = flat.get_params(model)
    theta.add_(10.0)
    # Assert
    assert torch.equal(flat.get_params(model), torch.tensor([1.0, 2.0]))


def test_channels_last_models_use_logical_order():
    # Prepare
    plain, channels_last = _bn_model(), _bn_model().to(memory_format=torch.channels_last)
    theta = torch.randn(30, generator=torch.Generator().manual_seed(1))
    # Execute
    flat.set_params(plain, theta)
    flat.set_params(channels_last, theta)
    # Assert
    assert torch.equal(flat.get_params(channels_last), theta)
    assert torch.equal(channels_last[0].weight, plain[0].weight)


@pytest.mark.parametrize("size", [29, 31, 0])
def test_wrong_size_vector_is_refused(size):
    # Prepare
    model = _bn_model()
    before = flat.get_params(model)
    # Execute
    with pytest.raises(ValueError, match=f"flat vector has {size} values, the model expects 30"):
        flat.set_params(model, torch.zeros(size))
    # Assert: nothing was half-written
    assert torch.equal(flat.get_params(model), before)


def test_wrong_size_buffers_are_refused():
    with pytest.raises(ValueError, match="buffers: flat vector has 3 values, the model expects 4"):
        flat.set_buffers(_bn_model(), torch.zeros(3))
