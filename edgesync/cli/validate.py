"""`edgesync validate`: check scenarios, print every problem and what this machine would make of them."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from edgesync.cli.shared import err, out


def validate(scenarios: List[Path] = typer.Argument(..., help="scenario YAML files"),
             set_: Optional[List[str]] = typer.Option(None, "--set", help="override: KEY.PATH=VALUE")):
    """Check scenario files; print every problem with its file and key, exit 2 if any."""
    from edgesync.emulation.device_model import local_notes
    from edgesync.config import ScenarioError, load_scenario
    from edgesync.transport.protocol import usable_cores
    bad = 0
    for path in scenarios:
        try:
            sc = load_scenario(path, list(set_ or []))
        except ScenarioError as exc:
            bad += 1
            err.print(str(exc), highlight=False)
            continue
        out.print(f"{path}: ok — {len(sc.clients)} clients, algorithms "
                  f"{', '.join(a.key for a in sc.algorithms)}", highlight=False)
        from edgesync.runtime.tuning import run_counts, tunes
        if tunes(sc):
            out.print(f"{path}: tune: {run_counts(sc)}, before the runs", highlight=False)
        if sc.runtime == "live":
            from edgesync.runtime.live.launcher import describe_layout, process_layout
            layout = process_layout(len(sc.clients), sc.live.processes, usable_cores())
            if len(layout) < len(sc.clients) and sc.links.backend != "netns":
                out.print(f"{path}: note: `edgesync run` here hosts {describe_layout(layout)} (live.processes; "
                          "docs/lab.md, many devices per machine)", highlight=False)
            for note in local_notes(len(sc.clients), usable_cores(), sc.emulation.resolved_mode,
                                    sc.emulation.isolation, processes=len(layout)):
                out.print(f"{path}: note: {note}", highlight=False)
    if bad:
        raise typer.Exit(2)
