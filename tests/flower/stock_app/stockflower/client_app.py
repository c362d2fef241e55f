"""The ClientApp, as Flower's quickstart-pytorch writes one (flwr 1.41 Message API)."""
from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from stockflower.task import load_data, load_model, test, train as train_fn

torch.set_num_threads(1)
app = ClientApp()


def _partition(context: Context) -> tuple[int, int]:
    return int(context.node_config.get("partition-id", 0)), int(context.node_config.get("num-partitions", 2))


@app.train()
def train(msg: Message, context: Context) -> Message:
    model = load_model()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = load_data(*_partition(context))
    config = msg.content["config"]
    loss = train_fn(model, x, y, int(config["local-steps"]), float(config["lr"]), int(config.get("batch-size", 32)))
    metrics = MetricRecord({"train_loss": loss, "num-examples": len(x)})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    model = load_model()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = load_data(*_partition(context))
    loss, acc = test(model, x, y)
    metrics = MetricRecord({"eval_loss": loss, "eval_acc": acc, "num-examples": len(x)})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
