"""The Flower ServerApp: a scenario's algorithms over a SuperLink, writing the usual run folder.

    flower-superlink --insecure --disable-runtime-dependency-installation   # on the lab's server
    flwr run . lab -c 'scenario="scenarios/flower_fedavg.yaml" out="/abs/runs/fedavg"' --stream

Named in pyproject.toml ([tool.flwr.app.components] serverapp); its run config keys are listed in
`edgesync.flower.coordinator`, and docs/flower.md says how a lab uses it.
"""
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    from edgesync.flower.coordinator import serve  # torch is imported by the app process only

    serve(grid, context, app_dir=Path(__file__).resolve().parents[1])
