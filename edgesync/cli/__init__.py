"""The `edgesync` command.

    edgesync run scenarios/quickstart.yaml            # coordinator + local clients, then a report
    edgesync run --resume runs/quickstart-…           # go on from a killed run's last checkpoint
    edgesync run scenarios/quickstart.yaml --curve    # the same over CURVE, with throw-away keys
    edgesync run scenarios/live_100_clients.yaml --processes 4   # 100 clients as slots of 4 processes
    edgesync run scenarios/quickstart.yaml --tensorboard   # also TensorBoard event files in RUN_DIR/tensorboard
    edgesync validate scenarios/quickstart.yaml       # check a scenario, print every problem
    edgesync coordinator --scenario FILE --bind tcp://0.0.0.0:5555   # on the lab's server
    edgesync client --connect tcp://HOST:5555 --profile x10          # on each lab machine
    edgesync client --connect tcp://HOST:5555 --rank 0 --slots 50    # clients 0-49 in one process
    edgesync keys keys/ --name coordinator --name client-0           # CURVE key pairs (docs/lab.md)
    edgesync coordinator --scenario FILE --curve-secret keys/coordinator.key_secret --allow keys/allow
    edgesync client --connect tcp://HOST:5555 --curve-secret keys/client-0.key_secret \
                    --server-key keys/coordinator.key
    edgesync profiles                                 # the device profiles
    edgesync report runs/quickstart-…                 # re-render a run folder's report
    edgesync flower-up --nodes 2 --run scenarios/flower_fedavg.yaml   # the same on a local Flower SuperLink
    edgesync reproduce --quick                        # the papers' claims, ours beside theirs

One module per command or group of commands (run.py, validate.py, live.py: coordinator/shard/client, keys.py,
profiles.py, report.py, reproduce.py, flower.py: flower-up/down), what they share in shared.py, running.py and
ray_option.py; app.py assembles the Typer app. `python -m edgesync.cli` runs it (__main__.py).
"""
from __future__ import annotations

from edgesync.cli.app import app, main
from edgesync.cli.ray_option import RAY_DEFAULT, ray_flag

__all__ = ["RAY_DEFAULT", "app", "main", "ray_flag"]
