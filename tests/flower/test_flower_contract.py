"""The Flower node checks the coordinator contract too (transport/contracts/coordinator.py): a ServerApp of
another EdgeSync version is answered, on its query.hello, with an ERROR naming both versions, through the
real ClientApp on an in-process SuperNode (fake_grid.py)."""
from __future__ import annotations

from flwr.app import Message as FlowerMessage

from edgesync.flower import records
from edgesync.transport import protocol
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.contracts.version import PROTOCOL_KEY, Contract
from edgesync.transport.protocol import MessageType as T

NEWER = Contract("coordinator", COORDINATOR.version + 1, server="coordinator", client="client")


def ask_hello(grid, meta: dict):
    node = next(iter(grid.get_node_ids()))
    hello = protocol.hello()
    content = records.to_records(protocol.Message(T.HELLO, {**hello.meta, **meta}))
    (reply,) = grid.send_and_receive([FlowerMessage(content, dst_node_id=node, message_type="query.hello")], timeout=60)
    return records.from_records(reply.content)[0]


def test_a_node_answers_a_serverapp_of_another_version_with_the_one_line(fake_grid):
    grid = fake_grid([{"partition-id": 0}])
    reply = ask_hello(grid, NEWER.offer())
    assert reply.type == T.ERROR
    assert reply.meta["reason"].endswith(
        f"ContractMismatch: coordinator speaks {NEWER.tag}, this client {COORDINATOR.tag}: "
        "use the same EdgeSync version on both")


def test_a_node_answers_a_serverapp_of_its_own_version_with_hello(fake_grid):
    grid = fake_grid([{"partition-id": 0}])
    reply = ask_hello(grid, {PROTOCOL_KEY: COORDINATOR.tag})
    assert reply.type == T.HELLO and reply.meta["rank"] == 0 and reply.meta[PROTOCOL_KEY] == COORDINATOR.tag
