"""The legacy Flower ClientApp (a `NumPyClient`) for the deprecated `flwr.server.strategy` API:
`edgesync.flower.apps:numpy_clientapp` in the installed package, which your own app should name.

    flower-supernode --insecure --superlink SERVER:8000 --node-config 'partition-id=0 num-partitions=2'

Local SGD on this node's partition with EdgeSync's trainer; `edgesync.flower.numpy_client` lists the keys.
"""
from edgesync.flower.apps import numpy_clientapp as app

__all__ = ["app"]
