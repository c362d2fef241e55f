"""`edgesync dashboard RUN_DIR`: the live page of a run, replayed from its folder (or following one still
running), and the `--dashboard [HOST:]PORT` option `run` and `coordinator` share."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer

from edgesync.cli.shared import err, out

DASHBOARD_HELP = ("serve a live page of the run at [HOST:]PORT (default host 127.0.0.1; port 0: any free one); "
                  "a bind beyond loopback is given a token, printed with the address")


def dashboard(run_dir: Path = typer.Argument(..., help="a run folder (finished, or still running)"),
              bind: str = typer.Option("127.0.0.1:8050", "--bind", metavar="[HOST:]PORT",
                                       help="where to serve it (port 0: any free one; beyond loopback: a token "
                                            "is made and printed with the address)")):
    """Serve a run folder's dashboard: fleet, curves, availability and events, as the live page showed them."""
    from edgesync.dashboard.serve import BindError, parse_bind, serve
    from edgesync.metrics.recorder import METRICS_FILE, SCENARIO_FILE
    if not run_dir.is_dir() or not ((run_dir / SCENARIO_FILE).exists() or (run_dir / METRICS_FILE).exists()):
        err.print(f"[red]{run_dir}: not a run folder (no {SCENARIO_FILE} or {METRICS_FILE} in it)[/red]",
                  highlight=False)
        raise typer.Exit(2)
    try:
        host, port = parse_bind(bind, "--bind")
        serve(run_dir, host, port, announce=lambda url: out.print(f"dashboard of {run_dir}: {url} (Ctrl-C stops it)",
                                                                  highlight=False))
    except BindError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None


def check_bind(bind: Optional[str]) -> None:
    """A malformed --dashboard exits 2 before anything starts."""
    if bind is None:
        return
    from edgesync.dashboard.serve import BindError, parse_bind
    try:
        parse_bind(bind)
    except BindError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None


@contextmanager
def live_dashboard(run_dir: Path, bind: Optional[str]) -> Iterator[None]:
    """With `bind`: the dashboard in a process of its own while the block runs (the run), stopped after it."""
    if not bind:
        yield
        return
    from edgesync.dashboard.serve import BindError, DashboardProcess
    try:
        process = DashboardProcess(run_dir, bind)
    except BindError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    err.print(f"dashboard: {process.url}", highlight=False)
    try:
        yield
    finally:
        process.stop()
        err.print(f"dashboard stopped; the same page from the folder: edgesync dashboard {run_dir}", highlight=False)
