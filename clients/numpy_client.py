"""The legacy Flower ClientApp (a `NumPyClient`) for older Flower servers that drive clients with a strategy.

    flower-supernode --insecure --superlink SERVER:8000 --node-config 'partition-id=0 num-partitions=2'
    # and in a pyproject.toml of your own: clientapp = "clients.numpy_client:app"

Local SGD on this node's partition with EdgeSync's trainer; `edgesync.flower.numpy_client` lists the keys.
"""
from flwr.client import ClientApp

from edgesync.flower.numpy_client import client_fn

app = ClientApp(client_fn=client_fn)
