"""`edgesync reproduce`: the seed papers' claims over seeds (edgesync/reproduce/)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from edgesync.cli.running import export_to_mlflow
from edgesync.cli.shared import err, out, parse_seeds


def reproduce(quick: bool = typer.Option(False, "--quick", help="reduced runs, 3 seeds, every baseline tuned: 16 minutes on 2 cores here (docs/results.md)"),
              runtime: str = typer.Option("sim", "--runtime", help="sim (default) or live"),
              seeds: Optional[str] = typer.Option(None, "--seeds", help="seeds for every experiment, e.g. 0-4 "
                                                  "(default 0-2 with --quick, else 0-4)"),
              jobs: int = typer.Option(min(2, os.cpu_count() or 1), "--jobs", "-j", help="simulator experiments "
                                       "run at once, one process each (live runs: always one)"),
              parallel: int = typer.Option(1, "--parallel", metavar="N", min=1, help="simulator: one experiment at "
                                           "a time, N of its seeds at once as Ray tasks (instead of --jobs; "
                                           "a cluster: RAY_ADDRESS)"),
              out_dir: Path = typer.Option(Path("runs/reproduce"), "--out", help="folder for the runs"),
              reuse: Optional[Path] = typer.Option(None, "--from", help="read finished runs from this folder"),
              only: Optional[str] = typer.Option(None, "--only", help="comma-separated experiments to run "
                                                 "(fl_baselines and the straggler shoot-out, `shootout`, run with --quick only when named here)"),
              fresh: bool = typer.Option(False, "--fresh", help="run every experiment again, moving earlier runs "
                                         "aside (without it a folder's experiments that finished with the same "
                                         "settings are kept, and one cut short goes on)"),
              write_docs: bool = typer.Option(False, "--write-docs", help="put the table into docs/results.md"),
              mlflow: bool = typer.Option(False, "--mlflow", help="then log every experiment's runs to MLflow as "
                                          "children of one parent run (MLflow's default tracking URI)"),
              mlflow_uri: Optional[str] = typer.Option(None, "--mlflow-uri", metavar="URI", help="the same, to "
                                                       "this tracking URI"),
              quiet: bool = typer.Option(False, "--quiet", "-q")):
    """Run the seed papers' headline comparisons and print, claim by claim, the paper's figure beside ours (and
    the FL baselines' table beside FedAvg and the straggler shoot-out, run in the full mode or named with --only:
    fl_baselines, shootout)."""
    from edgesync import reproduce as rp
    from edgesync.reproduce.audit import earlier_figures, write_data
    if runtime not in ("sim", "live"):
        err.print(f"[red]--runtime must be sim or live, not {runtime!r}[/red]", highlight=False)
        raise typer.Exit(2)
    keys = [e.key for e in rp.EXPERIMENTS]
    chosen = [k.strip() for k in only.split(",")] if only else None
    if chosen:  # a group's name stands for its experiments (shootout: every mix × split)
        chosen = list(dict.fromkeys(x for k in chosen for x in rp.GROUPS.get(k, (k,))))
    if chosen and set(chosen) - set(keys):
        err.print(f"[red]--only: unknown {sorted(set(chosen) - set(keys))}; experiments are {keys}, or the group "
                  f"{', '.join(rp.GROUPS)}[/red]", highlight=False)
        raise typer.Exit(2)
    root = reuse or out_dir
    if reuse is None:
        chosen_seeds = parse_seeds(seeds) if seeds is not None else None
        if chosen_seeds is not None and len(chosen_seeds) < 2:
            err.print("[yellow]--seeds: with one seed no claim gets an interval; every verdict will be "
                      "inconclusive[/yellow]", highlight=False)
        rp.run_suite(out_dir, quick, runtime, chosen, progress=not quiet, seeds=chosen_seeds, jobs=jobs,
                     parallel=parallel, fresh=fresh)
    results = rp.evaluate(root)
    compared = [data for c in rp.COMPARISONS if (data := rp.baselines.record(root, c)) is not None]
    shootout = rp.shootout.record(root)
    if not results and not compared and shootout is None:
        err.print(f"[red]no finished experiment in {root}[/red]", highlight=False)
        raise typer.Exit(1)
    # The folder's record says how its runs were made; runs without one are taken as the options say.
    key = rp.folder_key(root) or f"{'quick' if quick else 'full'}-{runtime}"
    earlier = earlier_figures(key) if write_docs and results else None  # the docs' table this one replaces
    sections = ([rp.table(results, earlier)] if results else []) + [rp.baselines.render(d) for d in compared]
    sections += [rp.shootout.render(shootout)] if shootout is not None else []
    text = "\n\n".join(sections)
    (root / "claims.md").write_text(text + "\n")
    out.print(text, highlight=False)
    if mlflow or mlflow_uri:
        export_to_mlflow(root, mlflow_uri or True)
    if not write_docs:
        return
    if results:
        note = rp.docs_note(root, key, rp.CLAIMED)
        data = write_data(results, key, note, earlier=earlier)  # what the table was computed from, to recompute it
        rp.write_docs(rp.table(results, earlier), key, f"{note}; per-run figures: docs/data/{data.name}")
        out.print(f"table written to docs/results.md ({key}), its per-run figures to {data}", highlight=False)
    for data in compared:
        path = rp.write_baselines(data, key, rp.docs_note(root, key, [data["experiment"]]))
        out.print(f"{data['experiment']}'s table written to docs/results.md ({key}), its per-run figures to {path}",
                  highlight=False)
    if shootout is not None:
        path = rp.write_shootout(shootout, key, rp.docs_note(root, key, list(shootout["experiments"])))
        out.print(f"the straggler shoot-out written to docs/stragglers.md ({key}) with its Pareto plots, its "
                  f"per-run figures to {path}", highlight=False)
