"""The Flower ServerApp (pyproject.toml [tool.flwr.app.components] serverapp): a scenario's algorithms
over a SuperLink, writing the usual run folder; `edgesync.flower.apps:serverapp` in the installed package.

    flower-superlink --insecure --disable-runtime-dependency-installation   # on the lab's server
    flwr run . lab -c 'scenario="scenarios/flower_fedavg.yaml" out="/abs/runs/fedavg"' --stream

Its run config keys are listed in `edgesync.flower.coordinator`; docs/flower.md says how a lab uses it.
"""
from edgesync.flower.apps import serverapp as app

__all__ = ["app"]
