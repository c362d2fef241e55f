"""The Flower runtime: the same coordinator, algorithms and client halves over a Flower SuperLink.

The repository root is a Flower app (`[tool.flwr.app]` in pyproject.toml): `server/flower_server.py`
and `clients/flower_client.py` re-export the apps of `apps.py`. The adapter is here,
one job per file:

| file | job |
|---|---|
| `apps.py` | the ServerApp and ClientApps, importable from the installed package (`edgesync.flower.apps:clientapp`) |
| `records.py` | an EdgeSync protocol message ↔ Flower records (ArrayRecord, ConfigRecord, MetricRecord) |
| `grid_socket.py` | the coordinator's socket API over a Flower `Grid` (push/pull), one message in flight per node |
| `coordinator.py` | the live coordinator on that socket through its public hooks; `serve()` is the ServerApp |
| `stock_node.py` | a stock Flower ClientApp (only `train`/`evaluate`, standard Message API) driven from the server: weights out by `state_dict` names, Δ back, for `local_sgd` and `esync_budget`; other algorithms refused |
| `node.py` | the ClientApp side: one SuperNode's trainer and client half, rebuilt from `context.state` |
| `numpy_client.py` | a legacy `NumPyClient` (local SGD) for older Flower servers |
| `lab.py` | a local SuperLink and N SuperNodes on 127.0.0.1, started and stopped by PID |
| `warm_apps.py` | the lab's ServerApp and ClientApp processes forked from a warm interpreter (`warm_apps_shim.py`: the stand-in on its PATH) |

ESync runs here as its registered stand-in `esync_budget` (edgesync/algorithms/esync_budget.py): a
ClientApp cannot be asked anything mid-message. docs/flower.md says how a lab uses it and what differs from the ZeroMQ runtime.
"""
