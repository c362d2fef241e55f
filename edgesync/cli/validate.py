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
        if (missing := _missing_data(sc)) is not None:
            out.print(f"{path}: note: {missing}", highlight=False)
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


def _missing_data(sc) -> str | None:
    """What `edgesync run` here would not find: a built-in dataset's files absent from where it looks (the
    message says where it looked and how to get them), or None. A note, not an error: the scenario may be meant
    for lab machines that hold the data."""
    from edgesync.data.__main__ import DATASETS
    from edgesync.data.arrays import DataNotFoundError
    entry = DATASETS.get(sc.dataset.name)
    if entry is None:
        return None
    try:
        entry.find(sc.dataset.root, "dataset.root")
    except DataNotFoundError as exc:
        how = "" if entry.download is not None or entry.how_to_get() in str(exc) else f" {entry.how_to_get()}."
        return (f"dataset {sc.dataset.name} is not on this machine, so `edgesync run` here stops at set-up "
                f"(every machine that loads it needs the files): {exc}{how}")
    return None
