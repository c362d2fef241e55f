"""`edgesync run`: a scenario on one machine, in the runtime it names, then its report."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from edgesync.cli.dashboard import DASHBOARD_HELP, check_bind, live_dashboard
from edgesync.cli.ray_option import on_ray
from edgesync.cli.running import claim_folder, export_to_mlflow, run_and_report
from edgesync.cli.shared import err, load_scenario_or_exit, parse_seeds


def run(scenario: Optional[Path] = typer.Argument(None, help="scenario YAML file (not with --resume)"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="go on with this run folder from its "
                                              "checkpoint (a live run that was killed)"),
        out_dir: Optional[Path] = typer.Option(None, "--out", help="run folder (default: output.dir/NAME-TIME); "
                                               "one that holds a run is refused without --overwrite"),
        overwrite: bool = typer.Option(False, "--overwrite", help="--out holds an earlier run: move it aside "
                                       "(to NAME.old-TIME, nothing deleted) and start afresh"),
        set_: Optional[List[str]] = typer.Option(None, "--set", help="override a scenario value: KEY.PATH=VALUE"),
        runtime: str = typer.Option("", "--runtime", help="live or sim (default: the scenario's runtime)"),
        seeds: Optional[str] = typer.Option(None, "--seeds", help="run every entry once per seed: 0-4, 0,2,5 or 3 "
                                            "(the scenario's `seeds`); summary.json adds mean and 95% interval"),
        curve: bool = typer.Option(False, "--curve", help="live: CURVE-encrypt the local links, with throw-away "
                                                          "keys for the coordinator and its client processes"),
        processes: Optional[int] = typer.Option(None, "--processes", metavar="N", help="live: host the clients in "
                                                "N processes, as slots (sets live.processes; default: one per "
                                                "client, or one per core when there are many)"),
        tensorboard: bool = typer.Option(False, "--tensorboard", help="also write TensorBoard event files into "
                                         "RUN_DIR/tensorboard as the run goes (sets output.tensorboard; allowed "
                                         "with --resume)"),
        mlflow: bool = typer.Option(False, "--mlflow", help="when the run ends, log it to MLflow at "
                                    "$MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here (sets output.mlflow; allowed with "
                                    "--resume)"),
        mlflow_uri: Optional[str] = typer.Option(None, "--mlflow-uri", metavar="URI", help="log it to this MLflow "
                                                 "tracking URI instead (a folder, sqlite:///FILE, http://HOST:PORT)"),
        ray: Optional[str] = typer.Option(None, "--ray", metavar="[ADDRESS]", help="simulator: run the clients' "
                                          "work on Ray workers (sets sim.backend=ray), on the cluster at ADDRESS "
                                          "(default: RAY_ADDRESS, else one started on this machine, else a new one)"),
        parallel: int = typer.Option(1, "--parallel", metavar="N", min=1, help="simulator: run N of the sweep's "
                                     "variants and seeds at a time, as Ray tasks (the same run folder as one "
                                     "at a time)"),
        dashboard: Optional[str] = typer.Option(None, "--dashboard", metavar="[HOST:]PORT", help=DASHBOARD_HELP),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress display"),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="log coordinator events")):
    """Run every algorithm of a scenario, then write the run folder's summary and report."""
    overrides = list(set_ or [])
    if runtime:
        overrides.append(f"runtime={runtime}")
    if seeds is not None:
        overrides.append(f"seeds={parse_seeds(seeds)}")
    if processes is not None:
        overrides.append(f"live.processes={processes}")
    on_ray(ray, overrides)
    check_bind(dashboard)
    if (scenario is None) == (resume is None):
        err.print("[red]give a scenario file, or --resume RUN_DIR (not both)[/red]", highlight=False)
        raise typer.Exit(2)
    if resume is not None and (overrides or out_dir or overwrite):
        err.print("[red]--resume replays the run folder's own scenario.yaml: no --set, --runtime, --out or "
                  "--overwrite[/red]", highlight=False)
        raise typer.Exit(2)
    if tensorboard:  # where results go, not what runs: a resumed run may turn it on too
        overrides.append("output.tensorboard=true")
    if mlflow or mlflow_uri:
        overrides.append(f"output.mlflow={mlflow_uri or 'true'}")
    sc = load_scenario_or_exit(resume / "scenario.yaml" if resume else scenario, overrides)
    if (ray is not None or parallel > 1) and sc.runtime != "sim":
        err.print(f"[red]{'--ray' if ray is not None else '--parallel'} is for the simulator; this scenario's "
                  "runtime is live (add --runtime sim)[/red]", highlight=False)
        raise typer.Exit(2)
    from edgesync.runtime.runs import log_to, run_scenario
    run_dir = claim_folder(sc, out_dir, resume, overwrite)
    log_to(run_dir, verbose)
    err.print(f"[bold]{sc.name}[/bold] ({sc.runtime}): {len(sc.clients)} clients "
              f"({', '.join(c.profile.label for c in sc.clients)}), algorithms "
              f"{', '.join(a.key for a in sc.algorithms)} → {run_dir}", highlight=False)
    if sc.output.tensorboard:
        err.print(f"TensorBoard: tensorboard --logdir {run_dir / 'tensorboard'}", highlight=False)
    with live_dashboard(run_dir, dashboard):
        run_and_report(run_dir, lambda: run_scenario(sc, run_dir, progress=not quiet, resume=resume is not None,
                                                      curve=curve, claimed=True, parallel=parallel))
    export_to_mlflow(run_dir, sc.output.mlflow)
