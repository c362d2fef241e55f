"""The lead ↔ follower shard contract and the all-reduce ring's set-up, over real sockets: a peer of another
version is refused with one line naming both, and the refused side stops cleanly (the Ray worker channel's
test is in test_sim_channel.py, the coordinator's in tests/transport/test_contracts.py)."""
from __future__ import annotations

import threading

import pytest
import torch

from edgesync.config import load_scenario
from edgesync.models.shard_plan import plan
from edgesync.runtime.allreduce.client import ring_half
from edgesync.runtime.sharding import lead as lead_module
from edgesync.runtime.sharding.lead import ShardFailed, ShardLead
from edgesync.runtime.sharding.server import ShardServer
from edgesync.transport import protocol
from edgesync.transport.contracts.version import Contract, ContractMismatch
from edgesync.transport.protocol import MessageType as T
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket

ADVICE = "use the same EdgeSync version on both"


def sharded_scenario():
    return load_scenario({"name": "s", "runtime": "sim", "clients": 1, "sharding": "memory", "shards": 2,
                          "algorithms": [{"name": "asgd", "lr": 0.5}]})


def test_a_follower_refuses_a_lead_of_another_version_and_serves_the_next_lead(tmp_path, monkeypatch):
    follower = ShardServer("tcp://127.0.0.1:*", state_dir=tmp_path)
    thread = threading.Thread(target=follower.serve, daemon=True)
    thread.start()
    sc = sharded_scenario()
    try:
        monkeypatch.setattr(lead_module, "SHARD", Contract("shard", 2, server="shard", client="lead"))
        with pytest.raises(ShardFailed) as refused:
            ShardLead(sc, plan([10], 2, "memory"), [follower.address])
        assert str(refused.value) == (f"shard at {follower.address}: shard speaks edgesync.shard/1, "
                                      f"this lead edgesync.shard/2: {ADVICE}")
        monkeypatch.undo()
        lead = ShardLead(sc, plan([10], 2, "memory"), [follower.address])  # the follower still serves
        assert follower.index == 1
        lead.close()
        thread.join(10)
        assert not thread.is_alive(), "the follower did not end at the lead's shutdown"
    finally:
        follower.sock.close()


def test_a_lead_refuses_a_follower_whose_answer_names_another_version(tmp_path, monkeypatch):
    """The other direction: the lead checks the follower's answer to its first contact (a newer follower that
    did not refuse the lead itself)."""
    from edgesync.runtime.sharding import server as server_module

    newer = Contract("shard", 2, server="shard", client="lead")
    follower = ShardServer("tcp://127.0.0.1:*", state_dir=tmp_path)
    monkeypatch.setattr(server_module, "SHARD", _Lenient(newer))
    thread = threading.Thread(target=follower.serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(ShardFailed) as refused:
            ShardLead(sharded_scenario(), plan([10], 2, "memory"), [follower.address])
        assert str(refused.value) == (f"shard at {follower.address}: shard speaks edgesync.shard/2, "
                                      f"this lead edgesync.shard/1: {ADVICE}")
    finally:
        closer = ClientSocket(follower.address)  # the follower waits for a lead: a new lead's shutdown ends it
        closer.send(protocol.Message(T.SHARD, {"op": "hello", "index": 1, "link": None}))
        closer.send(protocol.Message(T.SHARD, {"op": "shutdown"}))
        thread.join(10)
        closer.close(linger_ms=0)
    assert not thread.is_alive(), "the follower did not end"


class _Lenient:
    """A follower of version 2 that does not refuse older leads itself (an EdgeSync that only answers)."""

    def __init__(self, contract: Contract):
        self.contract = contract

    def refusal(self, meta, here):
        return None

    def offer(self):
        return self.contract.offer()


def test_a_client_refuses_a_ring_of_another_version_before_it_sets_anything_up():
    """SETUP's ring section names the ring's contract (runtime/allreduce/host.py); a client of another
    version fails its set-up with the one line (the coordinator then ends the run with it)."""
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*")
    client = ClientSocket(coordinator.address)
    try:
        client.send(protocol.hello(0))
        identity = None
        while identity is None:
            got = coordinator.recv(5.0)
            assert got is not None, "no HELLO"
            identity = got[0]
        ring = {"port": 1, "prefix": "run/asgd", "timeout_s": 1.0, "backend": "gloo", "protocol": "edgesync.ring/2"}
        coordinator.send(identity, protocol.setup({"ring": ring, "algorithm": {"name": "ssgd"}}, torch.arange(3)))
        setup = client.recv(5.0)
        assert setup is not None and setup.type == T.SETUP
        with pytest.raises(ContractMismatch) as refused:
            ring_half(None, setup.meta, coordinator.address, 0)
        assert str(refused.value) == (f"coordinator speaks edgesync.ring/2, this ring member edgesync.ring/1: "
                                      f"{ADVICE}")
    finally:
        client.close(linger_ms=0)
        coordinator.close()


def test_the_coordinator_names_the_rings_contract_in_setup():
    from edgesync.runtime.allreduce.host import RingHost
    from edgesync.transport.contracts.ring import RING

    host = RingHost("tcp://127.0.0.1:0", load_scenario({"name": "s", "runtime": "sim", "clients": 2,
                                                          "algorithms": [{"name": "ssgd"}]}))
    config = load_scenario({"name": "s", "runtime": "sim", "clients": 2,
                            "algorithms": [{"name": "ssgd", "aggregation": "allreduce"}]}).algorithms[0]
    try:
        assert host.setup_meta(config)["protocol"] == RING.tag == "edgesync.ring/1"
    finally:
        host.close()
