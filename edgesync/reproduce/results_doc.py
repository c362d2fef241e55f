"""docs/results.md's reproduced tables: the markers around each mode and runtime's table, the note on how its
runs were made (minutes, seeds, machine, base step times), and writing the table between its markers; and an
experiment's comparison table (baselines.py) as a block of its own, drawn from its record in docs/data/."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from edgesync.docs_block import replace_block
from edgesync.reproduce.suite import ROOT, read_manifest


def markers(key: str) -> tuple[str, str]:
    """docs/results.md's markers around the table of `key` ("quick-sim", "full-sim", "quick-live", …)."""
    return f"<!-- reproduce:{key}:begin -->", f"<!-- reproduce:{key}:end -->"



def docs_note(root: Path, key: str, experiments: list[str] | None = None) -> str:
    """What the docs block says of its runs (those of `experiments` only, if given): mode, folder, minutes,
    seeds, machine and base step times."""
    manifest = {k: e for k, e in read_manifest(root).items() if experiments is None or k in experiments}
    parts = [key, f"runs in `{root}`"]
    if manifest:
        total = sum(e["wall_s"] for e in manifest.values()) / 60
        starts = [e["started_at"] for e in manifest.values() if "started_at" in e]
        ends = [e["finished_at"] for e in manifest.values() if "finished_at" in e]
        jobs = max((e.get("jobs", 1) for e in manifest.values()), default=1)
        # the span from the first start to the last end means something only if they ran in one go (an
        # experiment added later, with --only, would stretch it over the days between)
        if jobs > 1 and len(starts) == len(ends) == len(manifest) and max(ends) - min(starts) < 60 * total:
            parts.append(f"{(max(ends) - min(starts)) / 60:.1f} min, {jobs} experiments at a time "
                         f"({total:.1f} min of runs)")
        else:
            parts.append(f"{total:.1f} min of runs" + (", experiments side by side" if jobs > 1 else ""))
        if resumed := [k for k, e in manifest.items() if e.get("resumed")]:  # their time before the stop is unknown
            parts.append(f"{', '.join(resumed)} resumed after a stop (timed from the resume)")
        commits = sorted({e["commit"] for e in manifest.values() if e.get("commit")})
        if commits:
            parts.append(f"commit {', '.join(commits)}")
        seeds = sorted({s for e in manifest.values() for s in e.get("seeds", [])})
        if seeds:
            parts.append(f"seeds {', '.join(map(str, seeds))}")
        machines = sorted({e["machine"] for e in manifest.values() if e.get("machine")})
        if machines:
            parts.append(f"machine: {'; '.join(machines)}")
    steps = base_steps(root, experiments)
    if steps:
        parts.append("base step " + _steps_text(steps))
    return ", ".join(parts)


def base_steps(root: Path, experiments: list[str] | None = None) -> list[float]:
    """The ×1 device step times (ms) the runs under `root` (of `experiments` only, if given) used: a live run's
    from its clients' rows (the shared base step each run measured), a simulated run's from its scenario.yaml."""
    found = set()
    for path in sorted(root.glob("*/scenario.yaml")):
        if experiments is not None and path.parent.name not in experiments:
            continue
        sc = yaml.safe_load(path.read_text()) or {}
        clients = path.parent / "clients.jsonl"
        if sc.get("runtime") == "live" and clients.exists():
            rows = [json.loads(line) for line in clients.read_text().splitlines() if line.strip()]
            found.update(round(1e3 * r["base_step_s"], 2) for r in rows if isinstance(r.get("base_step_s"), float))
            continue
        fixed = (sc.get("emulation") or {}).get("base_step_ms")
        sim = sc.get("sim") or {}
        if fixed:
            found.add(round(float(fixed), 2))
        elif sim.get("base_step_s"):
            found.add(round(1e3 * float(sim["base_step_s"]), 2))
        else:
            found.update(round(1e3 * float(v), 2) for v in (sim.get("measured_step_s") or {}).values())
    return sorted(found)


def _steps_text(steps: list[float]) -> str:
    """'12.02 ms', or '21.60–24.10 ms' for runs that each measured their own."""
    if len(steps) > 2:
        return f"{steps[0]:.2f}–{steps[-1]:.2f} ms over the runs"
    return ", ".join(f"{ms:.2f} ms" for ms in steps)


def write_docs(text: str, key: str, note: str, doc: Path = ROOT / "docs" / "results.md") -> None:
    """Replace the table between `key`'s markers in docs/results.md (a section is added if missing)."""
    begin, end = markers(key)
    replace_block(doc, begin, end, f"_Written by `edgesync reproduce` ({note})._\n\n{text}",
                  missing=f"### The papers' claims, reproduced ({key})")


def baselines_block(experiment: str, key: str) -> str:
    """The name of an experiment's comparison block for a mode and runtime: 'baselines:fl_baselines:full-sim'."""
    return f"baselines:{experiment}:{key}"


def write_baselines(data: dict, key: str, note: str, doc: Path = ROOT / "docs" / "results.md",
                    folder: Path | None = None) -> Path:
    """Keep a comparison's record (baselines.record) in docs/data/ and draw its block in `doc` from it
    (docs_data.write_block; a block not on the page yet is added at its end, under a heading). Returns the
    record's path."""
    from edgesync.docs_data import DATA_DIR, data_note, data_path, write_block
    block = baselines_block(data["experiment"], key)
    begin, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
    if begin not in doc.read_text():
        replace_block(doc, begin, end, "", missing=f"### {data['title']} ({key})")
    folder = folder or DATA_DIR
    write_block(doc, block, f"_Written by `edgesync reproduce` ({note}; {data_note(block)})._", data, folder)
    return data_path(block, folder)


STRAGGLERS_DOC = ROOT / "docs" / "stragglers.md"


def write_shootout(data: dict, key: str, note: str, doc: Path = STRAGGLERS_DOC, folder: Path | None = None) -> Path:
    """Keep the shoot-out's record (shootout.record) in docs/data/, draw its block in docs/stragglers.md from it and
    its Pareto plots into docs/img/. Returns the record's path."""
    from edgesync.docs_data import DATA_DIR, data_note, data_path, write_block
    from edgesync.reproduce.shootout import plot
    block = f"stragglers:{key}"
    begin, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
    if begin not in doc.read_text():
        replace_block(doc, begin, end, "", missing=f"## The shoot-out, measured ({key})")
    folder = folder or DATA_DIR
    if key != "quick-sim":  # each mode's own plots: the full run's must not replace the quick block's pictures
        data = {**data, "plot_prefix": f"stragglers-{key.removesuffix('-sim')}"}
    write_block(doc, block, f"_Written by `edgesync reproduce --only shootout` ({note}; {data_note(block)})._", data,
                folder)
    plot(data, doc.parent / "img")
    return data_path(block, folder)
