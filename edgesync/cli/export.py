"""`edgesync export mlflow RUN_DIR`: a finished run folder (or a folder of them) into an MLflow tracking store."""
from __future__ import annotations

from pathlib import Path

import typer

from edgesync.cli.shared import err, out

export_app = typer.Typer(no_args_is_help=True, help="Put a finished run folder into another tool.")


@export_app.command("mlflow")
def mlflow_command(
        run_dir: Path = typer.Argument(..., help="a run folder, or a folder of run folders (a reproduce's)"),
        uri: str = typer.Option(None, "--uri", help="MLflow tracking URI (a folder, sqlite:///FILE, "
                                "http://HOST:PORT); default: MLflow's, $MLFLOW_TRACKING_URI, else "
                                "sqlite:///mlflow.db here"),
        experiment: str = typer.Option(None, "--experiment", help="MLflow experiment; default: the scenario's "
                                       "name (a folder of run folders: the folder's)")):
    """Log a run folder to MLflow: one run, a child run per entry, seed and sweep point.

    The scenario as parameters, each entry's settings, metric histories (accuracy, loss, bytes, lag, gap), the
    report and the plots as artifacts."""
    from edgesync.metrics.mlflow_export import export
    try:
        done = export(run_dir, uri, experiment)
    except (ValueError, RuntimeError) as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    out.print(f"MLflow ({done['uri']}): run {done['parent']} with {len(done['children'])} child runs, "
              f"experiment {done['experiment_id']}", highlight=False)
