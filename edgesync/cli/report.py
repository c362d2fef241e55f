"""`edgesync report`: re-render a run folder's report."""
from __future__ import annotations

from pathlib import Path

import typer

from edgesync.cli.shared import err, out


def report(run_dir: Path = typer.Argument(..., help="a run folder")):
    """Re-render report.md and the plots from a run folder (the plots always: also where $EDGESYNC_PLOTS=0 left
    them out of the run's own report)."""
    from edgesync.metrics.report import render_report
    if not (run_dir / "metrics.jsonl").exists():
        err.print(f"[red]{run_dir}: not a run folder (no metrics.jsonl)[/red]", highlight=False)
        raise typer.Exit(2)
    out.print(f"report: {render_report(run_dir, plots=True)}", highlight=False)
