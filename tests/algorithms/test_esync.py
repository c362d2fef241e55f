"""ESync: QUERY-STATE's branches as a table, the State Server's records, and the known answers of
docs/algorithms.md (n_i = 1 ⇒ SSGD; one client ⇒ local SGD; θ_{t+1} = θ_t + ε·mean(Δ) for any n_i)."""
from __future__ import annotations

import pytest
import torch

from edgesync.algorithms.machinery.base import ModelState, Update
from edgesync.algorithms.esync import ESyncClient, ESyncConfig, ESyncServer, Record, query_state
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig
from edgesync.algorithms.ssgd import SSGDConfig, SSGDServer
from edgesync.algorithms.machinery.gradient_client import GradientClient


def rec(k=1, c=0.1, t_e=0.0, ready=False, round=0) -> Record:
    return Record(k=k, c=c, t_e=t_e, ready=ready, round=round)


# Two clients: 0 is the caller (fast, c = 0.01), 1 is the slowest (c = 1.0, last iteration ended at t_e).
# rest = c_slowest − (now − t_e,slowest) = 1.0 − (now − 0) = 1.0 − now.
QUERY_STATE_TABLE = [
    # (caller record, slowest record, now, slack, expected, why)
    (rec(k=0, c=0.01), rec(c=1.0), 0.99, 0.0, False, "k = 0: every client does at least one step"),
    (rec(c=0.01), rec(c=1.0, round=-1), 0.99, 0.0, False, "the slowest has not pulled this round's model"),
    (rec(c=0.01), rec(c=None, round=-1), 0.99, 0.0, False, "a capability is unknown: it might be the slowest"),
    (rec(c=0.01), rec(c=1.0, ready=True), 0.0, 0.0, True, "the slowest is already ready"),
    (rec(c=0.01), rec(c=1.0), 0.995, 0.0, True, "c + ε = 0.01 > rest = 0.005: no time for another step"),
    (rec(c=0.01), rec(c=1.0), 0.5, 0.0, False, "rest = 0.5: room for more steps"),
    (rec(c=0.01), rec(c=1.0), 0.5, 0.6, True, "with ε = 0.6 s, 0.61 > rest = 0.5"),
]


@pytest.mark.parametrize("caller,slowest,now,slack,expected,why", QUERY_STATE_TABLE,
                         ids=[row[-1] for row in QUERY_STATE_TABLE])
def test_query_state_branches(caller, slowest, now, slack, expected, why):
    records = {0: caller, 1: slowest}
    assert query_state(records, 0, current_round=0, now=now, slack_s=slack) is expected, why
    assert records[0].ready is expected  # a READY answer marks the caller ready


def test_the_slowest_itself_is_ready_after_one_step():
    records = {0: rec(c=0.01), 1: rec(c=1.0, t_e=5.0)}
    assert query_state(records, 1, current_round=0, now=5.0, slack_s=0.0) is True


def test_slowest_ties_go_to_the_lowest_rank():
    # 0 and 1 both c = 1.0: 0 is "the slowest"; 1 asks at once after 0's iteration: rest = 1.0 > 1.0? no
    records = {0: rec(c=1.0, t_e=0.0), 1: rec(c=1.0)}
    assert query_state(records, 1, current_round=0, now=0.0, slack_s=0.0) is False
    assert query_state(records, 0, current_round=0, now=0.0, slack_s=0.0) is True


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_server_records_and_nonblocking_silence(model_state):
    server = ESyncServer(ESyncConfig(mode="nonblocking"), model_state([0.0, 0.0]), [0, 1])
    clock = FakeClock()
    server.now = clock
    server.start()
    clock.t = 0.2
    assert server.on_query(1, {"round": 0, "k": 1, "c": 0.2}) is None  # 0's capability unknown: no READY
    assert (server.records[1].k, server.records[1].c, server.records[1].t_e, server.records[1].round) == (1, 0.2, 0.2, 0)
    clock.t = 0.25
    assert server.on_query(0, {"round": 0, "k": 5, "c": 0.01}) is None  # rest = 0.2 − 0.05 = 0.15 > 0.01
    clock.t = 0.395  # rest = 0.2 − (0.395 − 0.2) = 0.005 < c = 0.01
    assert server.on_query(0, {"round": 0, "k": 19, "c": 0.01}) == {"ready": True, "round": 0, "k": 19}
    # A query about a round that is over is told to finish at once.
    assert server.on_query(0, {"round": -1, "k": 3, "c": 0.01})["ready"] is True


def test_blocking_server_answers_every_query(model_state):
    server = ESyncServer(ESyncConfig(), model_state([0.0]), [0])
    server.now = FakeClock()
    server.start()
    assert server.on_query(0, {"round": 0, "k": 0, "c": None}) == {"ready": False, "round": 0, "k": 0}
    assert server.on_query(0, {"round": 0, "k": 1, "c": 0.1})["ready"] is True  # alone: it is the slowest


def test_round_log_has_n_i_and_blocking_time(model_state):
    server = ESyncServer(ESyncConfig(), model_state([1.0]), [0, 1])
    clock = FakeClock()
    server.now = clock
    server.start()
    def delta(d: float, steps: int) -> Update:
        return Update({"delta": torch.tensor([d])}, {"version": 0, "steps": steps, "samples": steps})

    clock.t = 1.0
    server.on_update(0, delta(0.5, 9))
    clock.t = 1.25
    server.on_update(1, delta(-0.1, 1))
    # θ1 = 1 + mean(0.5, −0.1) = 1.2
    assert torch.allclose(server.params, torch.tensor([1.2]))
    log = {r["client"]: r for r in server.drain_update_log()}
    assert (log[0]["n_i"], log[0]["blocking_s"]) == (9, 0.25)  # waited from 1.0 to the close at 1.25
    assert (log[1]["n_i"], log[1]["blocking_s"]) == (1, 0.0)


class ReadyAfter:
    """A context whose State Server says READY once the client has done `n` iterations."""

    def __init__(self, n: int):
        self.n = n

    def now(self) -> float:
        return 0.0

    def query(self, meta: dict) -> dict:
        return {"ready": meta["k"] >= self.n, "round": meta["round"]}


def _run_rounds(server, clients, rounds: int) -> None:
    sends = server.start()
    for _ in range(rounds):
        out = []
        for send in sends:
            out += server.on_update(send.client, clients[send.client].on_instruction(send.instruction))
        sends = out


def test_n_i_equal_to_one_is_ssgd(tiny_trainer):
    """All n_i = 1: θ + mean(−η·g_i) = θ − η·mean(g_i), SSGD's step, round after round."""
    esync_trainers = {r: tiny_trainer(seed=r, batchnorm=False) for r in (0, 1)}
    ssgd_trainers = {r: tiny_trainer(seed=r, batchnorm=False) for r in (0, 1)}
    initial = ModelState(esync_trainers[0].get_params(), torch.zeros(0))
    esync_cfg = ESyncConfig(lr=0.1, batch_size=4)
    esync = ESyncServer(esync_cfg, initial, [0, 1])
    esync_clients = {r: ESyncClient(esync_cfg, t) for r, t in esync_trainers.items()}
    for c in esync_clients.values():
        c.ctx = ReadyAfter(1)
    ssgd_cfg = SSGDConfig(lr=0.1, batch_size=4)
    ssgd = SSGDServer(ssgd_cfg, initial, [0, 1])
    ssgd_clients = {r: GradientClient(ssgd_cfg, t) for r, t in ssgd_trainers.items()}
    _run_rounds(esync, esync_clients, 4)
    _run_rounds(ssgd, ssgd_clients, 4)
    assert esync.updates == ssgd.updates == 4
    assert torch.allclose(esync.params, ssgd.params, atol=1e-6)


def test_one_client_is_plain_local_sgd(tiny_trainer):
    """One client told READY after 5 iterations each round = local SGD with H = 5."""
    a, b = tiny_trainer(seed=3, batchnorm=False), tiny_trainer(seed=3, batchnorm=False)
    initial = ModelState(a.get_params(), torch.zeros(0))
    esync_cfg = ESyncConfig(lr=0.1, batch_size=4, momentum=0.5)
    esync = ESyncServer(esync_cfg, initial, [0])
    client = ESyncClient(esync_cfg, a)
    client.ctx = ReadyAfter(5)
    local_cfg = LocalSGDConfig(lr=0.1, batch_size=4, momentum=0.5, local_steps=5)
    local = DeltaServer(local_cfg, initial, [0])
    _run_rounds(esync, {0: client}, 3)
    _run_rounds(local, {0: LocalSGDClient(local_cfg, b)}, 3)
    assert torch.allclose(esync.params, local.params, atol=1e-6)


def test_aggregation_identity_for_unequal_n_i(tiny_trainer):
    """θ_{t+1} = θ_t + ε·mean(Δ_i) whatever each client's n_i (here 1 and 4, ε = 0.5)."""
    trainers = {r: tiny_trainer(seed=r, batchnorm=False) for r in (0, 1)}
    initial = ModelState(trainers[0].get_params(), torch.zeros(0))
    cfg = ESyncConfig(lr=0.1, batch_size=4, global_lr=0.5)
    server = ESyncServer(cfg, initial, [0, 1])
    clients = {r: ESyncClient(cfg, t) for r, t in trainers.items()}
    clients[0].ctx, clients[1].ctx = ReadyAfter(1), ReadyAfter(4)
    sends = server.start()
    updates = {s.client: clients[s.client].on_instruction(s.instruction) for s in sends}
    assert (updates[0].meta["steps"], updates[1].meta["steps"]) == (1, 4)
    for r, u in updates.items():
        server.on_update(r, u)
    expected = initial.params + 0.5 * (updates[0].tensors["delta"] + updates[1].tensors["delta"]) / 2
    assert torch.allclose(server.params, expected)
