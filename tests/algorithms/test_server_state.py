"""Every server half survives a restart: state_dict → torch.save → a fresh half's load_state_dict, then
the same messages give the same instructions and the same global model, bit for bit.

The coordinator checkpoints exactly this (runtime/bookkeeping/checkpoint.py). Both worlds run the real client halves
(deep copies of one another at the checkpoint) under a deterministic clock, so ESync's State Server,
whose decisions depend on measured times, is compared too.
"""
import copy
import io
from collections import deque

import pytest
import torch

from edgesync import algorithms
from edgesync.algorithms.machinery.base import Instruction, ModelState, Update

from test_registry import SMOKE_SETTINGS, InProcessContext, _wire

BEFORE, AFTER = 7, 9  # updates before the checkpoint, then compared after it


class Clock:
    """A clock that advances 10 ms every time it is read: the same sequence in both worlds."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.01
        return self.t


class TickingContext(InProcessContext):
    def __init__(self, server, rank, clock):
        super().__init__(server, rank)
        self.clock = clock

    def now(self) -> float:
        return self.clock()


def _step(server, clients, queue) -> tuple[int, dict]:
    send = queue.popleft()
    ins = _wire("TRAIN", send.instruction.tensors, send.instruction.meta)
    update = clients[send.client].on_instruction(Instruction(ins.tensors, ins.meta))
    up = _wire("UPDATE", update.tensors, update.meta)
    sends = server.on_update(send.client, Update(up.tensors, up.meta))
    queue.extend(sends)
    return send.client, {s.client: s.instruction for s in sends}


def _attach(server, clients, clock):
    server.now = clock
    for rank, client in clients.items():
        client.ctx = TickingContext(server, rank, clock)


@pytest.mark.parametrize("name", algorithms.names())
def test_a_restored_server_half_goes_on_exactly_as_the_original(name, tiny_trainer):
    spec = algorithms.get(name)
    config = spec.config(lr=0.1, batch_size=4, **SMOKE_SETTINGS.get(name, {}))
    trainers = {rank: tiny_trainer(seed=rank) for rank in (0, 1)}
    initial = ModelState(trainers[0].get_params(), trainers[0].get_buffers())
    server = spec.server(config, initial, list(trainers))
    clients = {rank: spec.client(config, t) for rank, t in trainers.items()}
    clock = Clock()
    _attach(server, clients, clock)
    queue = deque(server.start())
    for _ in range(BEFORE):
        _step(server, clients, queue)

    # the checkpoint: the server half through bytes, as the coordinator writes it; clients and clock copied
    buf = io.BytesIO()
    torch.save(server.state_dict(), buf)
    buf.seek(0)
    restored = spec.server(config, initial, list(trainers))
    restored.load_state_dict(torch.load(buf, weights_only=False))
    clients_b, queue_b, clock_b = copy.deepcopy(clients), copy.deepcopy(queue), copy.deepcopy(clock)
    _attach(restored, clients_b, clock_b)

    for _ in range(AFTER):
        rank_a, sends_a = _step(server, clients, queue)
        rank_b, sends_b = _step(restored, clients_b, queue_b)
        assert rank_a == rank_b and sends_a.keys() == sends_b.keys()
        for k in sends_a:
            assert sends_a[k].meta == sends_b[k].meta
            assert sends_a[k].tensors.keys() == sends_b[k].tensors.keys()
            for key, t in sends_a[k].tensors.items():
                assert torch.equal(t, sends_b[k].tensors[key]), (k, key)
        assert torch.equal(server.global_params(), restored.global_params())
    assert restored.updates == server.updates > 0


def test_a_state_from_another_version_is_refused(tiny_trainer):
    spec = algorithms.get("asgd")
    t = tiny_trainer()
    server = spec.server(spec.config(), ModelState(t.get_params(), t.get_buffers()), [0])
    state = server.state_dict()
    del state["params"]
    with pytest.raises(ValueError, match=r"state lacks \['params'\]"):
        spec.server(spec.config(), ModelState(t.get_params(), t.get_buffers()), [0]).load_state_dict(state)
