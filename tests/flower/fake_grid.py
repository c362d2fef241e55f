"""A Flower SuperLink and SuperNodes inside the test process, for fast tests of the adapter.

`FakeGrid` implements Flower's `Grid` (push/pull by message id). Each node handles its messages in
order on its own thread through the real ClientApp, with a fresh `Context` per message whose state
is a copy of what the last message left (a SuperNode starts a new process per message: nothing else
survives). Nodes can join late (`add_node`) and replies can be held back to make a node slow. A stock Flower
strategy drives it with `send_and_receive`. A ClientApp that raises is answered with Flower's error reply,
as a SuperNode does (flwr/supernode/runtime/run_clientapp.py).
"""
from __future__ import annotations

import copy
import itertools
import queue
import threading
import time
from typing import Iterable

from flwr.app import Context, Error, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity


class FakeGrid(Grid):
    def __init__(self, app, node_configs: list[dict] = (), run_config: dict | None = None):
        self.app = app
        self.run_config = dict(run_config or {})
        self._run = Run.create_empty(run_id=7)
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 7, 1, 1  # as in a ServerApp process
        self._ids = itertools.count(1001)
        self.nodes: dict[int, dict] = {}
        self.replies: dict[str, Message] = {}
        self.lock = threading.Lock()
        self.pushed: list[Message] = []
        self.answered: list[Message] = []  # every reply, in the order the nodes gave them
        for cfg in node_configs:
            self.add_node(cfg)

    def add_node(self, node_config: dict) -> int:
        node_id = next(self._ids)
        node = {"config": dict(node_config), "state": RecordDict(), "queue": queue.Queue()}
        node["thread"] = threading.Thread(target=self._serve, args=(node_id, node), daemon=True)
        self.nodes[node_id] = node
        node["thread"].start()
        return node_id

    def _serve(self, node_id: int, node: dict) -> None:
        while True:
            message = node["queue"].get()
            if message is None:
                return
            context = Context(run_id=self._run.run_id, node_id=node_id, node_config=node["config"],
                              state=copy.deepcopy(node["state"]), run_config=self.run_config)
            try:
                reply = self.app(message, context)
                node["state"] = context.state
            except Exception as ex:  # noqa: BLE001 - as the SuperNode: the run sees an error reply
                reason = str(type(ex)) + ":<'" + str(ex) + "'>"
                reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason), reply_to=message)
            with self.lock:
                self.answered.append(reply)
                self.replies[message.metadata.message_id] = reply

    def close(self) -> None:
        for node in self.nodes.values():
            node["queue"].put(None)

    # -- Grid --------------------------------------------------------------------------------------
    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = msg.object_id
            self.pushed.append(msg)
            self.nodes[msg.metadata.dst_node_id]["queue"].put(msg)
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        with self.lock:
            return [self.replies.pop(i) for i in list(message_ids) if i in self.replies]

    def send_and_receive(self, messages, *, timeout=None):
        """What a stock Flower strategy calls: push, then pull until every reply is in (or the timeout)."""
        ids, replies = list(self.push_messages(messages)), []
        deadline = time.monotonic() + (timeout if timeout is not None else 600)
        while len(replies) < len(ids) and time.monotonic() < deadline:
            replies += self.pull_messages(ids)
            time.sleep(0.01)
        return replies
