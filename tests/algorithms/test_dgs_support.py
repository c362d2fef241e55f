"""The DGS master's two ways to G = M − v_k (dgs.DGSServer): from D = M − v_k taken before the update (its
nonzeros and the update's coordinates, G's values read from M and v_k there), or from M − v_k after it, searched
for nonzeros. They must send the same bits and log the same gap, whatever the order of clients, dense payloads,
resyncs and lost clients."""
import pytest
import torch

from edgesync.algorithms.dgs import DGSConfig, DGSServer
from edgesync.algorithms.machinery.base import Update


class SearchingDGSServer(DGSServer):
    """Always M − v_k after the update, searched for nonzeros (the way R₂ and float16 take)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.whole = False


def update(rng: torch.Generator, numel: int, version: int, dense: bool) -> Update:
    meta = {"version": version, "samples": 4, "steps": 1, "loss": 1.0, "data_size": 8, "grad_rms": 1.0}
    if dense:
        return Update(tensors={"delta": torch.randn(numel, generator=rng)}, meta=meta)
    idx = torch.randperm(numel, generator=rng)[:3].sort().values.to(torch.int32)
    return Update(tensors={"delta.idx": idx, "delta.val": torch.randn(3, generator=rng)}, meta=meta)


@pytest.mark.parametrize("resync_every", [None, 5])
def test_both_ways_send_the_same_replies_and_log_the_same_gaps(model_state, resync_every):
    numel, clients = 40, [0, 1, 2, 3]
    theta0 = [0.1 * i for i in range(numel)]
    config = DGSConfig(lr=0.1, resync_every=resync_every)
    fast = DGSServer(config, model_state(theta0), list(clients))
    searching = SearchingDGSServer(config, model_state(theta0), list(clients))
    fast.start(), searching.start()
    rng, versions = torch.Generator().manual_seed(0), {c: 0 for c in clients}
    for step in range(60):
        client = clients[int(torch.randint(len(clients), (1,), generator=rng))]
        if step == 30:  # a client leaves and comes back: its v_k starts afresh
            for server in (fast, searching):
                server.on_client_lost(3), server.on_client_joined(3)
            versions[3] = fast.updates
        u = update(rng, numel, versions[client], dense=step % 17 == 16)
        a, b = fast.on_update(client, u), searching.on_update(client, u)
        ta, tb = a[0].instruction.tensors, b[0].instruction.tensors
        assert sorted(ta) == sorted(tb), step
        assert all(torch.equal(ta[k], tb[k]) and ta[k].dtype == tb[k].dtype for k in ta), step
        versions[client] = a[0].instruction.meta["version"]
    assert torch.equal(fast.global_params(), searching.global_params())
    assert all(torch.equal(fast.v[c], searching.v[c]) for c in clients)
    assert fast.update_log == searching.update_log


def test_theta_is_built_when_read_and_follows_m(model_state):
    server = DGSServer(DGSConfig(lr=0.1), model_state([1.0, 2.0, 3.0]), [0])
    server.start()
    server.on_update(0, Update(tensors={"delta.idx": torch.tensor([1], dtype=torch.int32),
                                        "delta.val": torch.tensor([0.5])}, meta={"version": 0}))
    assert server._params is None  # not built by the update
    assert server.global_params().tolist() == [1.0, 1.5, 3.0]
    assert server.params is server.params  # built once until M changes
