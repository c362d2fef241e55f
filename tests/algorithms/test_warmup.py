"""Learning-rate warm-up (η/N → η over E epochs) and momentum correction, by hand.

Setting used throughout: η = 0.1, N = 2 clients of 8 samples each (16 in all), 4 samples per update,
E = 1 epoch. Progress before update k is 4(k − 1)/16 epochs, so updates 1…6 get
η = 0.05, 0.0625, 0.075, 0.0875, 0.1, 0.1.
"""
import pytest
import torch

from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.dana import DanaSlimClient, DanaSlimConfig
from edgesync.algorithms.easgd import EASGDConfig, EASGDServer
from edgesync.algorithms.momentum_asgd import NAGASGDConfig, NAGASGDServer
from edgesync.algorithms.shat import SHATConfig, SHATServer
from edgesync.algorithms.machinery.warmup import Warmup, correct_momentum, instruction_lr, warmup_lr
from fake_quadratic import QuadraticTrainer, run_fifo, torch_sgd

SCHEDULE = [0.05, 0.0625, 0.075, 0.0875, 0.1, 0.1]


@pytest.mark.parametrize("epochs_done,expected", [(0.0, 0.05), (0.25, 0.0625), (0.5, 0.075), (1.0, 0.1),
                                                  (3.0, 0.1)])
def test_schedule_ramps_linearly_from_lr_over_n(epochs_done, expected):
    assert warmup_lr(0.1, 2, epochs_done, warmup_epochs=1.0) == pytest.approx(expected)


def test_no_warmup_is_the_constant_lr_exactly(model_state):
    assert warmup_lr(0.1, 8, 0.0, warmup_epochs=0.0) == 0.1
    assert NAGASGDServer(NAGASGDConfig(lr=0.1), model_state([1.0]), [0, 1]).lr == 0.1


def test_progress_counts_applied_samples_over_all_clients_data():
    # Prepare
    warmup = Warmup(0.1, warmup_epochs=1.0, clients=[0, 1])
    meta = {"samples": 4, "data_size": 8}
    # Execute: only client 0 reports; the total is estimated as N × 8 = 16 until client 1 does
    lrs = [warmup.observe(0, meta) for _ in range(6)]
    # Assert
    assert lrs == pytest.approx(SCHEDULE)
    assert warmup.epochs_done() == pytest.approx(24 / 16)


def test_progress_uses_every_reported_size():
    # client 0 holds 8 samples, client 1 holds 24: total 32; after 8 samples the progress is ¼ epoch
    warmup = Warmup(0.1, warmup_epochs=1.0, clients=[0, 1])
    warmup.observe(0, {"samples": 4, "data_size": 8})
    warmup.observe(1, {"samples": 4, "data_size": 24})
    assert warmup.epochs_done() == pytest.approx(0.25)
    assert warmup.lr() == pytest.approx(0.0625)


def test_momentum_correction_scales_by_the_lr_ratio():
    u = torch.tensor([2.0, 4.0])
    assert torch.equal(correct_momentum(u, 0.05, 0.1), torch.tensor([4.0, 8.0]))
    assert correct_momentum(u, 0.1, 0.1) is u


def test_nag_asgd_warmup_with_momentum_correction_by_hand(model_state, make_update):
    # Prepare: clients [0, 1], only client 0 pushes g = 1 (client 1 is a straggler); θ0 = 1, γ = 0.9
    server = NAGASGDServer(NAGASGDConfig(lr=0.1, momentum=0.9, warmup_epochs=1.0), model_state([1.0]), [0, 1])
    server.start()
    # Execute
    thetas = []
    for version in range(3):
        server.on_update(0, make_update([1.0], version=version, samples=4, data_size=8))
        thetas.append(server.global_params().item())
    # Assert
    # 1. η = 0.05:   u = 0.05·1 = 0.05                                   → θ = 0.95
    # 2. η = 0.0625: u = 0.9·(0.05·0.0625/0.05) + 0.0625 = 0.11875         → θ = 0.83125
    #    (without the correction u = 0.045 + 0.0625 = 0.1075 → 0.8425)
    # 3. η = 0.075:  u = 0.9·(0.11875·0.075/0.0625) + 0.075 = 0.20325     → θ = 0.628
    #    = the lr-free form: v = 2.71, θ = 0.83125 − 0.075·2.71
    assert thetas == pytest.approx([0.95, 0.83125, 0.628])
    assert [row["lr"] for row in server.update_log] == pytest.approx(SCHEDULE[:3])


def test_warmup_of_nag_asgd_equals_torch_sgd_with_the_same_schedule(model_state):
    # Prepare: the quadratic, one pushing client of two; η follows SCHEDULE
    config = NAGASGDConfig(lr=0.1, momentum=0.9, warmup_epochs=1.0)
    server = NAGASGDServer(config, model_state([1.0]), [0, 1])
    client = GradientClient(config, QuadraticTrainer(num_samples=8, batch_samples=4))
    # Execute
    sends = run_fifo(server, {0: client, 1: None}, updates=7, order=[0] * 7)
    # Assert
    got = [s.instruction.tensors["params"].item() for s in sends[1:]]
    assert got == pytest.approx(torch_sgd(nesterov=False, lrs=SCHEDULE), abs=1e-6)


def test_warmup_of_dana_slim_equals_torch_nesterov_with_the_same_schedule(model_state):
    # DANA-Slim's v is lr-free and η is applied at the master: the correction is built in
    config = DanaSlimConfig(lr=0.1, momentum=0.9, warmup_epochs=1.0)
    server = AsyncServer(config, model_state([1.0]), [0, 1])
    client = DanaSlimClient(config, QuadraticTrainer(num_samples=8, batch_samples=4))
    sends = run_fifo(server, {0: client, 1: None}, updates=7, order=[0] * 7)
    got = [s.instruction.tensors["params"].item() for s in sends[1:]]
    assert got == pytest.approx(torch_sgd(nesterov=True, lrs=SCHEDULE), abs=1e-6)


@pytest.mark.parametrize("server_cls,config", [(SHATServer, SHATConfig(lr=0.1, warmup_epochs=1.0)),
                                               (EASGDServer, EASGDConfig(lr=0.1, warmup_epochs=1.0))])
def test_clients_that_step_locally_are_sent_the_current_lr(server_cls, config, model_state, make_update):
    # Prepare
    server = server_cls(config, model_state([1.0]), [0, 1])
    # Execute
    start = server.start()
    key = "grad" if server_cls is SHATServer else "params"
    update = make_update([0.0], version=0, samples=4, data_size=8)
    update.tensors = {key: update.tensors["grad"]}
    reply = server.on_update(0, update)
    # Assert: 0.05 at the start, 0.0625 after one update of 4 of 16 samples
    assert [s.instruction.meta["lr"] for s in start] == [0.05, 0.05]
    assert reply[0].instruction.meta["lr"] == pytest.approx(0.0625)


def test_synchronous_rounds_follow_the_warmup_schedule(model_state, make_update):
    """SSGD under warm-up: round 1 uses η/N, then η grows with the samples applied."""
    from edgesync.algorithms.ssgd import SSGDConfig, SSGDServer
    # 2 clients, 100 samples each (200 in all), 50 samples per update, E = 1 epoch, η = 0.2:
    # round 1 at progress 0 → η/2 = 0.1; after it 100/200 = 0.5 epoch → η = 0.1 + 0.1·0.5 = 0.15
    server = SSGDServer(SSGDConfig(lr=0.2, warmup_epochs=1.0), model_state([1.0]), [0, 1])
    server.start()
    for c in (0, 1):
        server.on_update(c, make_update([1.0], version=0, samples=50, data_size=100))
    assert torch.allclose(server.params, torch.tensor([0.9]))          # 1 − 0.1·1
    for c in (0, 1):
        server.on_update(c, make_update([1.0], version=1, samples=50, data_size=100))
    assert torch.allclose(server.params, torch.tensor([0.75]))         # 0.9 − 0.15·1


def test_an_instructions_lr_is_the_masters():
    """The master's `lr` wins; a round master leaves it out only while its η is the config's constant."""
    assert instruction_lr({"lr": 0.0625}, 0.1, 1.0) == 0.0625
    assert instruction_lr({"lr": 0.0625}) == 0.0625
    assert instruction_lr({}, 0.1, 0.0) == 0.1  # local SGD without warm-up: the SETUP config's η
    with pytest.raises(ValueError, match="under warm-up .* carries no lr"):
        instruction_lr({}, 0.1, 1.0)
    with pytest.raises(ValueError, match="carries no lr"):
        instruction_lr({"version": 3})  # a master that always sends it (DGS, EASGD, SHAT, FedAsync)


def test_every_master_sends_the_lr_its_schedule_gives():
    """Under warm-up every instruction carries η from the master's schedule, the clients' only source."""
    from edgesync.algorithms import local_sgd
    config = local_sgd.LocalSGDConfig(lr=0.1, warmup_epochs=1.0, local_steps=1)
    server = local_sgd.DeltaServer.__new__(local_sgd.DeltaServer)
    server.config, server.round_lr = config, 0.05
    assert server.instruction_meta(0) == {"lr": 0.05}
    server.config = local_sgd.LocalSGDConfig(lr=0.1, local_steps=1)
    assert server.instruction_meta(0) == {}  # no warm-up: the wire carries no lr (SETUP has it)
