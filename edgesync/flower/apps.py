"""EdgeSync's Flower apps, importable from the installed package (no PYTHONPATH, no checkout):

    # a Flower app's pyproject.toml
    [tool.flwr.app.components]
    serverapp = "edgesync.flower.apps:serverapp"   # a scenario's algorithms over a SuperLink
    clientapp = "edgesync.flower.apps:clientapp"   # EdgeSync's client: its own messages and Flower's standard ones

`numpy_clientapp` is the legacy `NumPyClient` for the deprecated `flwr.server.strategy` API. The
repository's `server/` and `clients/` modules re-export these (the repository is a Flower app too).
A relative `scenario` in the run config is looked up in the app's folder (the FAB Flower installed,
which it puts on sys.path), then in the current directory.
"""
from __future__ import annotations

import sys
from pathlib import Path

from flwr.app import Context, Message
from flwr.client import ClientApp as LegacyClientApp
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

clientapp = ClientApp()
serverapp = ServerApp()


def _handle(message: Message, context: Context) -> Message:
    from edgesync.flower.node import FlowerNode  # torch is imported here, not when Flower checks the app

    return FlowerNode(context).handle(message)


@clientapp.train()
def train(message: Message, context: Context) -> Message:
    return _handle(message, context)


@clientapp.evaluate()
def evaluate(message: Message, context: Context) -> Message:
    return _handle(message, context)


@clientapp.query("hello")
def hello(message: Message, context: Context) -> Message:
    return _handle(message, context)


@clientapp.query("setup")
def setup(message: Message, context: Context) -> Message:
    return _handle(message, context)


@clientapp.query("calibrate")
def calibrate(message: Message, context: Context) -> Message:
    return _handle(message, context)


def _client_fn(context: Context):
    from edgesync.flower.numpy_client import client_fn  # torch is imported by the ClientApp process only

    return client_fn(context)


numpy_clientapp = LegacyClientApp(client_fn=_client_fn)


def app_dir() -> Path:
    """The folder of the Flower app being run: the first sys.path entry whose pyproject.toml declares
    `[tool.flwr.app]` (Flower puts the installed FAB there), else the current directory."""
    for entry in sys.path:
        toml = Path(entry or ".") / "pyproject.toml"
        try:
            if "[tool.flwr.app" in toml.read_text():
                return toml.parent.resolve()
        except OSError:
            continue
    return Path.cwd()


@serverapp.main()
def main(grid: Grid, context: Context) -> None:
    from edgesync.flower.coordinator import serve  # torch is imported by the app process only

    serve(grid, context, app_dir=app_dir())
