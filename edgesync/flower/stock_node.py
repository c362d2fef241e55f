"""A stock Flower ClientApp under EdgeSync's ServerApp: the client half's translation, kept on the server.

A node whose ClientApp does not speak EdgeSync's protocol (its reply to `query.hello` is a Flower error
reply, e.g. "Invalid message type: query.hello", or has no "edgesync" ConfigRecord) is a *stock* node:
a quickstart-style ClientApp with only `@app.train()` / `@app.evaluate()` on Flower's standard Message
API. `GridSocket` then talks to it through a `StockNode`, which plays the EdgeSync client's part here:

    coordinator sends   to the stock node                                 coordinator receives
    HELLO (join)        —  (answered here: rank free, Flower node id in info)   HELLO
    SETUP, CALIBRATE    —  (answered here: it trains on its own data)         READY, CALIBRATED
    TRAIN               train {"arrays": ArrayRecord (the model's          →  UPDATE {"delta": new − old,
                               state_dict names), "config": ConfigRecord        buffers}, steps, samples,
                               {"lr", "local-steps", "batch-size",              data_size = num-examples,
                               "server-round", ["time-budget-s"]}}              loss = train_loss
    EVALUATE            evaluate {"arrays", "config"}                      →  EVALUATED (eval_acc, eval_loss)
    END                 —  STATS: its steps, samples and times as this side measured them

Only algorithms whose client half is "train from these weights, return new weights" can run on a stock
node (`STOCK_ALGORITHMS`): FedAvg (`local_sgd`) and ESync's per-round stand-in (`esync_budget`; its
budget travels as "local-steps", or "time-budget-s" with "local-steps" the cap). Every other algorithm
needs EdgeSync's client half (`edgesync.flower.apps:clientapp`): `refusal` says so, naming the node.
Times are the server's: compute is from the push of a message to its reply (the ClientApp process's
start-up included), wait from a reply to the next push. No step time is measured (the node is not
calibrated or paced), so clients.jsonl has no median step or fidelity figures for a stock node.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message as FlowerMessage, MetricRecord, RecordDict
from torch import nn

from edgesync import params as flat
from edgesync.algorithms.machinery.base import DEFAULT_LR
from edgesync.algorithms.machinery.warmup import instruction_lr
from edgesync.runtime.bookkeeping.accounting import ClientClock, client_totals
from edgesync.trainer import TrainerStats
from edgesync.transport import protocol
from edgesync.transport.protocol import Message, MessageType as T

STOCK_ALGORITHMS = ("local_sgd", "esync_budget")
ISOLATION = "none: a stock Flower ClientApp"
# What a ClientApp without EdgeSync's query handlers answers `query.hello` with (flwr.clientapp.ClientApp).
NOT_EDGESYNC = ("Invalid message type", "No query function registered")


def stock_reason(reply: FlowerMessage) -> str | None:
    """Why `reply` (to query.hello) says its node runs a stock ClientApp, or None if it does not."""
    if reply.has_error():
        reason = str(reply.error.reason)
        return reason if any(s in reason for s in NOT_EDGESYNC) else None
    header = reply.content.get("edgesync")
    if not isinstance(header, ConfigRecord) or header.get("proto") is None:
        return "its reply to query.hello has no 'edgesync' ConfigRecord"
    return None


def refusal(algorithm_names: list[str], node_id: int, why: str) -> str | None:
    """The one line refusing a stock node for the first algorithm it cannot run, or None if it can run them all."""
    for name in algorithm_names:
        if name not in STOCK_ALGORITHMS:
            return (f"algorithm {name} needs EdgeSync's client half, but Flower node {node_id} runs a stock Flower "
                    f"ClientApp ({why}): run edgesync.flower.apps:clientapp on it, or use "
                    f"{' or '.join(STOCK_ALGORITHMS)} with stock clients")
    return None


class ModelLayout:
    """The global model's flat vectors (params, float buffers) ↔ its `state_dict`, by the model's own names."""

    def __init__(self, model: nn.Module):
        self.model = model.cpu()

    def state_dict(self, params: torch.Tensor, buffers: torch.Tensor | None) -> dict[str, torch.Tensor]:
        flat.set_params(self.model, params)
        if buffers is not None and buffers.numel():
            flat.set_buffers(self.model, buffers)
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def flat(self, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(params, buffers) of a state_dict; ValueError if it is not this model's (names, shapes)."""
        mine = self.model.state_dict()
        if set(state) != set(mine):
            missing, extra = sorted(set(mine) - set(state)), sorted(set(state) - set(mine))
            raise ValueError(f"the reply's arrays are not the model's state_dict (missing {missing[:3]}, "
                             f"unexpected {extra[:3]})")
        for name, t in state.items():
            if tuple(t.shape) != tuple(mine[name].shape):
                raise ValueError(f"array {name!r} has shape {tuple(t.shape)}, the model's {tuple(mine[name].shape)}")
        self.model.load_state_dict({k: v.to(mine[k].dtype) for k, v in state.items()})
        return flat.get_params(self.model), flat.get_buffers(self.model)


class StockNode:
    def __init__(self, node_id: int, why: str, layout: ModelLayout):
        self.node_id, self.why, self.layout = node_id, why, layout
        self.setup: dict[str, Any] = {}
        self.sent: tuple[Message, float] | None = None  # the TRAIN or EVALUATE in flight, and when it went
        self._reset()

    def hello(self) -> Message:
        return protocol.hello(None, None, {"flower_node_id": self.node_id, "client": "stock Flower ClientApp",
                                           "device": None, "host": f"Flower node {self.node_id}"})

    def _reset(self) -> None:
        self.clock, self.stats = ClientClock(), TrainerStats()

    # -- coordinator → node ------------------------------------------------------------------------
    def answer_here(self, message: Message) -> Message | None:
        """The reply to a message the stock node is not sent (SETUP, CALIBRATE), or None."""
        if message.type == T.SETUP:
            self.setup = dict(message.meta)
            self._reset()
            return protocol.ready(str(message.meta.get("label")))
        if message.type == T.CALIBRATE:
            return protocol.calibrated(None, None, ISOLATION)
        return None

    def request(self, message: Message) -> tuple[str, RecordDict]:
        """(Flower message type, content) for TRAIN or EVALUATE, in Flower's standard layout."""
        now = time.time()
        self.sent = (message, now)
        meta, tensors = message.meta, message.tensors
        state = self.layout.state_dict(tensors["params"], tensors.get("buffers"))
        config: dict[str, Any] = {"server-round": int(meta.get("version", 0)) + 1}
        if message.type == T.TRAIN:
            self.clock.instruction_started(now)
            algo = self.setup.get("algorithm") or {}
            config["lr"] = instruction_lr(meta, algo.get("lr", DEFAULT_LR), algo.get("warmup_epochs", 0.0))
            config["batch-size"] = int(algo.get("batch_size", 32))
            steps = meta.get("local_steps", algo.get("local_steps"))
            if meta.get("time_budget_s") is not None:
                config["time-budget-s"] = float(meta["time_budget_s"])
                steps = algo.get("max_local_steps", steps)
            if steps is not None:
                config["local-steps"] = int(steps)
        return ("train" if message.type == T.TRAIN else "evaluate",
                RecordDict({"arrays": ArrayRecord(state), "config": ConfigRecord(config)}))

    # -- node → coordinator ------------------------------------------------------------------------
    def reply(self, reply: FlowerMessage) -> Message:
        """The UPDATE or EVALUATED a reply stands for; ERROR for a Flower error reply or an unusable one."""
        sent, pushed = self.sent or (None, time.time())
        self.sent = None
        now = time.time()
        if reply.has_error():
            return protocol.error(f"stock ClientApp: Flower error {reply.error.code}: "
                                  f"{reply.error.reason}")
        try:
            metrics = _metrics(reply.content)
            if sent is not None and sent.type == T.EVALUATE:
                return protocol.evaluated(str(sent.meta.get("label")), float(metrics.get("eval_acc", float("nan"))),
                                          float(metrics.get("eval_loss", float("nan"))),
                                          int(metrics.get("num-examples", 0)))
            return self._update(sent, reply.content, metrics, now - pushed, now)
        except (KeyError, TypeError, ValueError) as exc:
            return protocol.error(f"stock ClientApp on Flower node {self.node_id}: unusable reply: {exc}")

    def _update(self, sent: Message | None, content: RecordDict, metrics: dict[str, Any], elapsed: float,
                now: float) -> Message:
        if sent is None or sent.type != T.TRAIN:
            raise ValueError("a train reply without a train message in flight")
        arrays = [r for r in content.values() if isinstance(r, ArrayRecord)]
        if not arrays:
            raise ValueError("no ArrayRecord (the new weights) in the reply")
        new_params, new_buffers = self.layout.flat(dict(arrays[0].to_torch_state_dict()))
        algo = self.setup.get("algorithm") or {}
        steps = int(metrics.get("local-steps") or sent.meta.get("local_steps") or algo.get("local_steps") or 1)
        examples = int(metrics.get("num-examples") or 0)
        samples = int(metrics.get("num-samples") or steps * int(algo.get("batch_size", 32)))
        tensors = {"delta": new_params - sent.tensors["params"]}
        if "buffers" in sent.tensors:
            tensors["buffers"] = new_buffers
        meta: dict[str, Any] = {"steps": steps, "samples": samples, "version": int(sent.meta.get("version", 0)),
                                "step_s": elapsed / steps}
        if examples > 0:
            meta["data_size"] = examples
        if "train_loss" in metrics:
            meta["loss"] = float(metrics["train_loss"])
        self.stats.steps += steps
        self.stats.samples += samples
        self.stats.compute_s += elapsed
        self.clock.update_sent(now)
        return protocol.update(meta, tensors)

    def totals(self) -> dict[str, Any]:
        """Its STATS: steps, samples, compute/wait/wall seconds as this side saw them."""
        out = client_totals(self.stats, self.clock, time.time(), "unknown (stock Flower ClientApp)", None,
                            isolation=ISOLATION)
        return {"label": self.setup.get("label"), **out}


def _metrics(content: RecordDict) -> dict[str, Any]:
    """Every MetricRecord's values of a reply, merged ("metrics" first)."""
    out: dict[str, Any] = {}
    for record in content.values():
        if isinstance(record, MetricRecord):
            for k, v in record.items():
                out.setdefault(k, v)
    return out
