"""SSP: lock-step at s = 0, a bounded lead at s = 1, ASGD at a large s, and release on a lost client."""
import torch

from edgesync.algorithms.asgd import ASGDConfig, ASGDServer
from edgesync.algorithms.ssp import SSPConfig, SSPServer
from fake_quadratic import random_script, replay


def _server(model_state, s, clients=(0, 1, 2)):
    return SSPServer(SSPConfig(lr=0.1, staleness=s), model_state([1.0]), list(clients))


def _push(server, client, make_update, version=0):
    return sorted(send.client for send in server.on_update(client, make_update([1.0], version=version)))


def test_s_0_is_lock_step(model_state, make_update):
    # Prepare
    server = _server(model_state, s=0)
    server.start()
    # Execute / Assert: nobody gets a reply until the round's last push; then everyone does
    assert _push(server, 0, make_update) == []
    assert _push(server, 2, make_update) == []
    assert _push(server, 1, make_update) == [0, 1, 2]
    assert _push(server, 1, make_update, version=3) == []
    assert _push(server, 0, make_update, version=3) == []
    assert _push(server, 2, make_update, version=3) == [0, 1, 2]
    # θ = 1 − 6·0.1 = 0.4: each round applies −η·Σ g; the released replies carry version 6
    assert torch.allclose(server.global_params(), torch.tensor([0.4]))
    assert [row["held"] for row in server.update_log] == [True, True, False, True, True, False]


def test_s_1_lets_the_fast_client_run_exactly_one_push_ahead(model_state, make_update):
    # Prepare: client 0 is fast, client 1 slow
    server = _server(model_state, s=1, clients=(0, 1))
    server.start()
    # Execute / Assert
    assert _push(server, 0, make_update) == [0]       # t = (1, 0): one ahead, allowed
    assert _push(server, 0, make_update) == []        # t = (2, 0): two ahead, held
    assert _push(server, 1, make_update) == [0, 1]    # t = (2, 1): client 0 released with client 1
    assert _push(server, 0, make_update) == []        # t = (3, 1): held again
    assert _push(server, 1, make_update) == [0, 1]    # t = (3, 2)
    assert server.clock == {0: 3, 1: 2}


def test_a_lost_client_releases_those_waiting_on_it(model_state, make_update):
    # Prepare: s = 0; clients 0 and 1 have pushed and wait for client 2
    server = _server(model_state, s=0)
    server.start()
    _push(server, 0, make_update)
    _push(server, 1, make_update)
    # Execute
    released = sorted(send.client for send in server.on_client_lost(2))
    # Assert: the round closes without client 2; its late update is ignored
    assert released == [0, 1]
    assert _push(server, 2, make_update) == []
    assert server.updates == 2


def test_a_large_bound_is_asgd(model_state, make_update):
    # Prepare: the same random interleaving under ASGD and under SSP with s = 1000
    script = random_script(seed=3, clients=[0, 1, 2], steps=30, dim=4)
    ssp = SSPServer(SSPConfig(lr=0.05, staleness=1000), model_state([0.5] * 4), [0, 1, 2])
    asgd = ASGDServer(ASGDConfig(lr=0.05), model_state([0.5] * 4), [0, 1, 2])
    # Execute / Assert: every reply and global model, bit for bit
    a, b = replay(ssp, script, make_update), replay(asgd, script, make_update)
    assert len(a) == len(b) == 60
    assert all(torch.equal(x, y) for x, y in zip(a, b))
