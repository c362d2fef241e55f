"""Contract checks every asynchronous algorithm must pass, run through its real halves.

Three clients with a BatchNorm model; instructions delivered first in, first out. For every
registered asynchronous algorithm: each applied update logs the lag τ and the gap G, normalised by
the mean RMS of the raw gradients its client computed for it (one normaliser for every algorithm); no
tensor put in a Send or an Update is changed afterwards (zero-copy transport); updates carry the meta
the runtimes read and the BatchNorm statistics; the master keeps the latest statistics, unless it
declares otherwise (`latest_statistics = False`: FedAsync mixes them, FedBuff averages them at each
flush; their own tests check those rules). FedBuff logs one row per contribution and moves the model
once per `buffer_size` of them.
"""
from collections import deque

import pytest
import torch

from edgesync import algorithms
from edgesync.algorithms.machinery.base import ModelState
from edgesync.algorithms.machinery.staleness import rms

ASYNC = [s.name for s in algorithms.specs() if s.family == "asynchronous"]
UPDATES = 9
SETTINGS = {"fedbuff": {"buffer_size": 2}}  # a flush every second update: lags and gaps within 9 updates


_RUNS: dict = {}


def _run(name, tiny_trainer):
    """One run per algorithm, shared by this module's tests (they only read it)."""
    if name not in _RUNS:
        _RUNS[name] = _fresh_run(name, tiny_trainer)
    return _RUNS[name]


def _recording_raw_gradients(trainer, raw: list):
    """The real trainer, noting the RMS of every raw gradient it computes (before the client uses it)."""
    compute = trainer.gradient

    def gradient(*args, **kwargs):
        g, loss = compute(*args, **kwargs)
        raw.append(rms(g))
        return g, loss

    trainer.gradient = gradient
    return trainer


def _fresh_run(name, tiny_trainer):
    spec = algorithms.get(name)
    few_steps = {"local_steps": 2} if "local_steps" in spec.config.model_fields else {}  # EASGD: keep it quick
    config = spec.config(lr=0.1, batch_size=4, **few_steps, **SETTINGS.get(name, {}))
    raw: list[float] = []
    trainers = {rank: _recording_raw_gradients(tiny_trainer(seed=rank), raw) for rank in (0, 1, 2)}
    initial = ModelState(trainers[0].get_params(), trainers[0].get_buffers())
    server = spec.server(config, initial, list(trainers))
    clients = {rank: spec.client(config, t) for rank, t in trainers.items()}
    queue, sent, returned, updates, normalisers = deque(server.start()), [], [], [], []
    for _ in range(UPDATES):
        send = queue.popleft()
        sent += [(t, t.clone()) for t in send.instruction.tensors.values()]
        raw.clear()
        update = clients[send.client].on_instruction(send.instruction)
        normalisers.append(sum(raw) / len(raw))  # the mean over the update's local steps (EASGD: 2)
        returned += [(t, t.clone()) for t in update.tensors.values()]
        updates.append(update)
        queue.extend(server.on_update(send.client, update))
    for send in queue:
        sent += [(t, t.clone()) for t in send.instruction.tensors.values()]
    return server, sent, returned, updates, normalisers


@pytest.mark.parametrize("name", ASYNC)
def test_every_update_logs_lag_and_gap(name, tiny_trainer):
    server, *_ = _run(name, tiny_trainer)
    rows = server.update_log
    assert len(rows) == UPDATES  # one row per update accepted
    assert server.updates == UPDATES // SETTINGS.get(name, {}).get("buffer_size", 1)  # global updates
    for row in rows:
        assert isinstance(row["lag"], int) and row["lag"] >= 0
        assert row["gap"] >= 0 and "gap_normalized" in row
    assert any(row["lag"] > 0 for row in rows)  # three clients: someone is always behind


@pytest.mark.parametrize("name", ASYNC)
def test_the_gap_is_normalised_by_the_raw_gradients_rms(name, tiny_trainer):
    server, *_, normalisers = _run(name, tiny_trainer)
    rows = server.update_log
    assert any(row["gap"] > 0 for row in rows)
    for row, normaliser in zip(rows, normalisers, strict=True):
        assert row["gap_normalized"] == pytest.approx(row["gap"] / normaliser, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("name", ASYNC)
def test_no_sent_or_returned_tensor_is_changed_afterwards(name, tiny_trainer):
    _, sent, returned, *_ = _run(name, tiny_trainer)
    for tensor, snapshot in sent + returned:
        assert torch.equal(tensor, snapshot)


@pytest.mark.parametrize("name", ASYNC)
def test_updates_carry_meta_and_statistics(name, tiny_trainer):
    server, _, _, updates, _ = _run(name, tiny_trainer)
    for update in updates:
        assert {"steps", "samples", "version", "loss"} <= set(update.meta)
        # flat vectors: float values, or the int32 indices of a sparse payload (the DGS family)
        assert all(t.dim() == 1 for t in update.tensors.values())
        assert all(t.dtype in (torch.float32, torch.float16) or name.endswith(".idx") and t.dtype == torch.int32
                   for name, t in update.tensors.items())
        assert "buffers" in update.tensors
    if server.latest_statistics:
        assert torch.equal(server.global_buffers(), updates[-1].tensors["buffers"])
    else:  # mixed or averaged from the clients' statistics: they moved from θ₀'s, and stay finite
        assert torch.isfinite(server.global_buffers()).all()
        assert not torch.equal(server.global_buffers(), tiny_trainer(seed=0).get_buffers())


@pytest.mark.parametrize("name", [n for n in ASYNC if n != "asgd"])
def test_warmup_key_exists_and_defaults_off(name):
    assert algorithms.get(name).config(lr=0.1).warmup_epochs == 0.0
