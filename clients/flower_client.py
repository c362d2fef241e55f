"""The Flower ClientApp each SuperNode runs (pyproject.toml [tool.flwr.app.components] clientapp):
EdgeSync's client, defined in the installed package as `edgesync.flower.apps:clientapp`.

    flower-supernode --insecure --superlink SERVER:8000 --node-config 'partition-id=0 profile="x10"'

docs/flower.md lists the node config keys.
"""
from edgesync.flower.apps import clientapp as app

__all__ = ["app"]
