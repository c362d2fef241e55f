"""A run from the command line, as `run` and `coordinator` both make one: its folder claimed, the run started,
its failure told as an exit code, its summary printed."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from edgesync.cli.shared import err, out


def claim_folder(sc, out_dir: Path | None, resume: Path | None, overwrite: bool) -> Path:
    """The run folder for this command, claimed before anything is written to it: one that holds a run
    only with --resume, or moved aside with --overwrite; exits 2 otherwise, every file left as it was."""
    from edgesync.runtime.runs import RunFolderExists, claim_run_folder, run_folder
    try:
        run_dir = resume or run_folder(sc, out_dir)
        if moved := claim_run_folder(run_dir, resume is not None, overwrite):
            err.print(f"--overwrite: the earlier run in {run_dir} was moved to {moved}", highlight=False)
    except RunFolderExists as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    return run_dir


def run_and_report(run_dir: Path, start) -> None:
    """`start()` runs an experiment and returns its summary, printed here; one that cannot start or go on
    exits saying why (2: fix the input, 1: the run itself failed)."""
    from edgesync.runtime.bookkeeping.checkpoint import CheckpointError
    from edgesync.runtime.bookkeeping.membership import RunAborted
    try:
        summary = start()
    except CheckpointError as exc:
        err.print(f"[red]cannot resume:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except RunAborted as exc:
        err.print(f"[red]run aborted:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    except FileNotFoundError as exc:  # the dataset is missing: the message says where we looked
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    print_summary(summary)
    out.print(f"report: {run_dir / 'report.md'}", highlight=False)


def export_to_mlflow(run_dir: Path, setting: bool | str) -> None:
    """`output.mlflow`: the finished run folder into MLflow (true: MLflow's default tracking URI). A
    failure is reported, not raised: the run folder is complete, and `edgesync export mlflow` tries again."""
    if setting is False or setting == "":
        return
    from edgesync.metrics.mlflow_export import export
    try:
        done = export(run_dir, None if setting is True else setting)
    except Exception as exc:  # noqa: BLE001 — MLflow's own errors (a server down, a store refused) are many
        err.print(f"[yellow]MLflow: not logged ({type(exc).__name__}: {exc}); the run folder is complete: "
                  f"edgesync export mlflow {run_dir} tries again[/yellow]", highlight=False)
        return
    out.print(f"MLflow ({done['uri']}): run {done['parent']}, {len(done['children'])} child runs", highlight=False)


def print_summary(summary: dict) -> None:
    """The summary as a table; with seeds, one row per entry: the mean over seeds ± the 95% half-width."""
    aggregates = {label: s for label, s in summary.items() if "seeds" in s}
    rows = aggregates or summary
    title = "summary (accuracy on the test set; target time in the runtime's seconds)"
    if aggregates:
        title += "; mean ± 95% t-interval over seeds, every seed in summary.json and report.md"
    t = Table(title=title)
    for col in ("entry", "final", "best", "to target", "updates", "samples/s", "MB up", "MB down"):
        t.add_column(col, justify="left" if col == "entry" else "right", no_wrap=True)

    def fig(s: dict, key: str, fmt: str, scale: float = 1.0) -> str:
        value, ci = s.get(key), s.get("stats", {}).get(key, {}).get("ci95")
        if value is None:
            return "–"
        text = format(value * scale, fmt)
        return f"{text} ± {format((ci[1] - value) * scale, fmt)}" if ci else text

    for label, s in rows.items():
        reached = s.get("stats", {}).get("time_to_target_s", {}).get("reached")
        ttt = fig(s, "time_to_target_s", ".1f")
        ttt = f"{ttt} s" if ttt != "–" else (f"{reached} reached" if reached else "not reached")
        t.add_row(label + (f" ({len(s['seeds'])} seeds)" if "seeds" in s else ""), fig(s, "final_acc", ".3f"),
                  fig(s, "best_acc", ".3f"), ttt, fig(s, "updates", ".0f"), fig(s, "samples_per_s", ".0f"),
                  fig(s, "bytes_up", ".1f", 1e-6), fig(s, "bytes_down", ".1f", 1e-6))
    out.print(t)
