"""A local Flower lab: `edgesync flower-up` and `flower-down` (docs/flower.md)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer

from edgesync.cli.shared import err, load_scenario_or_exit, out


def flower_up(nodes: int = typer.Option(2, "--nodes", "-n", help="SuperNodes to start on 127.0.0.1"),
              profiles_: Optional[str] = typer.Option(None, "--profiles",
                                                      help="comma-separated profile per node, e.g. x1,x10 "
                                                           "(default: the scenario's)"),
              home: Path = typer.Option(Path("runs/.flower"), "--home", help="FLWR_HOME: config, logs, PIDs"),
              run_scenario: Optional[Path] = typer.Option(None, "--run", help="run this scenario with `flwr run`, "
                                                                             "then stop everything"),
              set_: Optional[List[str]] = typer.Option(None, "--set", help="with --run: KEY.PATH=VALUE"),
              out_dir: Optional[Path] = typer.Option(None, "--out", help="with --run: the run folder"),
              detach: bool = typer.Option(False, "--detach", help="leave the lab running; stop it with flower-down")):
    """Start a local Flower SuperLink and N SuperNodes (the repository is the Flower app); stop them by PID."""
    from edgesync.flower.lab import CONNECTION, FlowerLab, LabError
    names = [p.strip() for p in profiles_.split(",")] if profiles_ else []
    if names and len(names) != nodes:
        err.print(f"[red]--profiles names {len(names)} profiles for {nodes} nodes[/red]", highlight=False)
        raise typer.Exit(2)
    if run_scenario is not None:
        load_scenario_or_exit(run_scenario, set_ or [])  # a bad scenario fails here, before anything starts
    node_configs = [{"partition-id": i, **({"profile": names[i]} if names else {})} for i in range(nodes)]
    lab = FlowerLab(home, node_configs)
    try:
        lab.start()
        lab.wait_for_nodes()
    except LabError as exc:
        lab.stop()  # the SuperLink and SuperNodes are up when it is the nodes that did not register
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        lab.stop()
        err.print("Flower lab stopped", highlight=False)
        raise typer.Exit(130) from None
    err.print(f"SuperLink {lab.address} and {nodes} SuperNodes up (logs: {lab.home / 'logs'})", highlight=False)
    if detach:
        out.print(f"FLWR_HOME={lab.home} flwr run . {CONNECTION} --stream\n"
                  f"edgesync flower-down --home {home}", highlight=False)
        return
    try:
        if run_scenario is None:
            err.print(f"in another shell: FLWR_HOME={lab.home} flwr run . {CONNECTION} --stream   "
                      "(Ctrl-C here stops the lab)", highlight=False)
            while lab.alive():
                time.sleep(1.0)
            return
        config = {"scenario": str(run_scenario.resolve()), "set": "; ".join(set_ or [])}
        if out_dir is not None:
            config["out"] = str(out_dir.resolve())
        result = lab.run_app(Path.cwd(), config, stream=True)
        if result.returncode != 0:
            raise typer.Exit(result.returncode)
    except KeyboardInterrupt:
        pass
    finally:
        lab.stop()
        err.print("Flower lab stopped", highlight=False)


def flower_down(home: Path = typer.Option(Path("runs/.flower"), "--home", help="the lab's FLWR_HOME")):
    """Stop a lab started with `flower-up --detach`, by the PIDs it recorded."""
    from edgesync.flower.lab import LabError, stop_detached
    try:
        n = stop_detached(home)
    except LabError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(1) from None
    out.print(f"stopped {n} Flower processes", highlight=False)
