"""The Flower ClientApp each SuperNode runs: the trainer and client halves `edgesync client` runs.

    flower-supernode --insecure --superlink SERVER:8000 --node-config 'partition-id=0 profile="x10"'

Named in pyproject.toml ([tool.flwr.app.components] clientapp). Every message is handled by
`edgesync.flower.node.FlowerNode`, which keeps the client's state in `context.state` (a SuperNode
starts a new process per message); docs/flower.md lists the node config keys.
"""
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

app = ClientApp()


def _handle(message: Message, context: Context) -> Message:
    from edgesync.flower.node import FlowerNode  # torch is imported here, not when Flower checks the app

    return FlowerNode(context).handle(message)


@app.train()
def train(message: Message, context: Context) -> Message:
    return _handle(message, context)


@app.evaluate()
def evaluate(message: Message, context: Context) -> Message:
    return _handle(message, context)


@app.query("hello")
def hello(message: Message, context: Context) -> Message:
    return _handle(message, context)


@app.query("setup")
def setup(message: Message, context: Context) -> Message:
    return _handle(message, context)


@app.query("calibrate")
def calibrate(message: Message, context: Context) -> Message:
    return _handle(message, context)
