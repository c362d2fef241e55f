"""The `edgesync` Typer app, assembled here from the command modules, in the order `edgesync --help` lists them."""
from __future__ import annotations

import sys

import typer

from edgesync.cli.calibrate import calibrate
from edgesync.cli.dashboard import dashboard
from edgesync.cli.export import export_app
from edgesync.cli.flower import flower_down, flower_up
from edgesync.cli.keys import keys_command
from edgesync.cli.live import client, coordinator, shard
from edgesync.cli.new import new
from edgesync.cli.plugins import plugins
from edgesync.cli.profiles import profiles
from edgesync.cli.ray_option import ray_flag
from edgesync.cli.report import report
from edgesync.cli.reproduce import reproduce
from edgesync.cli.run import run
from edgesync.cli.validate import validate

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="EdgeSync: distributed training on heterogeneous, slow and badly connected devices.")


@app.callback()
def _start() -> None:
    # Before any model-sized buffer exists: large messages then reuse memory (transport/allocator.py).
    from edgesync.transport.allocator import tune_allocator
    tune_allocator()


app.command()(run)
app.command()(validate)
app.command()(coordinator)
app.command()(shard)
app.command()(client)
app.command("keys")(keys_command)
app.command()(profiles)
app.command()(plugins)
app.command()(new)
app.command()(calibrate)
app.command()(report)
app.command()(dashboard)
app.add_typer(export_app, name="export")
app.command()(reproduce)
app.command("flower-up")(flower_up)
app.command("flower-down")(flower_down)


def main() -> None:
    sys.argv = ray_flag(sys.argv)
    app()
