"""Equal tuning: every algorithm entry tried on the same grid, chosen on validation data, then run.

    tune:
      grid: {lr: [0.01, 0.02, 0.05], momentum: [0.5, 0.7, 0.9]}
      metric: final_acc            # or best_acc, time_to_target: measured on the validation set
      validation_size: 2000        # or validation_fraction: 0.1 (the default)

A comparison is only fair when the baselines get the tuning the proposed method gets. With a `tune`
block, `edgesync run` (`run_scenario`) first runs every entry at every combination of the grid keys
its config has — the same values for every entry; a key an entry lacks is "not applicable" to it —
as one ordinary run folder, RUN_DIR/tuning/ (labels `asgd@lr=0.05`, `dgs@lr=0.05,momentum=0.7`),
then picks each entry's best point by `tune.metric`, writes RUN_DIR/tuning.json and runs the final
runs with those values (RUN_DIR/scenario.yaml records them; report.md gets a "Tuning" section).

The validation set is held out of the training data (`edgesync.runtime.bookkeeping.workload.validation_indices`:
stratified, fixed split seed). Clients train on the rest in the tuning runs and in the final runs
alike, so every entry's final run trains on exactly the data its tuning runs trained on, and nothing
the choice looked at is trained on afterwards. The tuning runs evaluate on the validation set
(`eval.on: validation`), the final runs on the test set: the test set never chooses anything.

The tuning runs use one seed (`tune.seed`, default 100: never an evaluation seed) and `tune.stop` over the
scenario's stop rules; the chosen values then hold for every seed of the final runs. Choosing (`choose`)
ranks an entry's points by, in turn: a diverged point (or one with no evaluation) last; the metric
(higher accuracy, or shorter time to target, a target never reached after every time); then the final
validation accuracy (for `final_acc`: the best one); then the point written first in the grid.

`--resume` of a live run folder reuses a finished tuning.json, resumes tuning runs that were cut
short from their checkpoint, and starts the final runs afresh when none had started. A new run
folder tunes again (the simulator is deterministic: the same choice).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from edgesync.metrics.formatting import num
from edgesync.metrics.recorder import METRICS_FILE, SCENARIO_FILE, TUNING_DIR, TUNING_FILE, to_plain, write_atomic
from edgesync.runtime.bookkeeping.checkpoint import CheckpointError, scenario_digest
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.config import Scenario, load_scenario
from edgesync.config.tune_grid import tune_points, tune_tag
from edgesync.runtime.tuning_edges import edges, extended_grid

METRIC_KEYS = {"final_acc": "final_acc", "best_acc": "best_acc", "time_to_target": "time_to_target_s"}

log = logging.getLogger("edgesync.tune")

# How the tuning runs are run: (tuning scenario, its run folder, whether to resume it) → its summary.
RunTuning = Callable[[Scenario, Path, bool], dict]


def tunes(scenario: Scenario) -> bool:
    """Whether running `scenario` tunes it first: it has `tune` and is not itself a tuning run (those
    evaluate on the validation set, and run their entries as written)."""
    return scenario.tune is not None and scenario.eval.on == "test"


@dataclass(frozen=True)
class EntryGrid:
    """One entry's share of the grid."""

    index: int                 # its place in `algorithms`
    label: str
    name: str
    keys: list[str]            # the grid keys its config has
    not_applicable: list[str]  # the grid keys it lacks
    points: list[dict]         # every combination of its keys' values, in grid order

    def run_label(self, point: dict) -> str:
        return f"{self.label}@{tune_tag(point)}"


def entry_grids(scenario: Scenario) -> list[EntryGrid]:
    grid = scenario.tune.grid
    out = []
    for i, entry in enumerate(scenario.algorithms):
        keys, points = tune_points(entry, grid)
        out.append(EntryGrid(i, entry.key, entry.name, keys, [k for k in grid if k not in keys], points))
    return out


def tuning_scenario(scenario: Scenario) -> Scenario:
    """The tuning runs as one scenario: each entry at each of its grid points (an entry with nothing to
    tune is left out), on the tuning seed, with `tune.stop`, evaluated on the validation set."""
    tune = scenario.tune
    data = scenario.resolved()
    data.pop("sweep", None)
    data.pop("seeds", None)  # tuning runs are one seed; the chosen values serve every seed
    data["name"] = f"{scenario.name}-tuning"
    data["seed"] = tune.tuning_seed
    data["eval"]["on"] = "validation"
    data["stop"].update(tune.stop.model_dump(exclude_none=True))
    entries = data["algorithms"]
    data["algorithms"] = [{**entries[g.index], **point, "label": g.run_label(point)}
                          for g in entry_grids(scenario) for point in g.points]
    return load_scenario(data, source=f"{scenario.name}: tuning runs")


def _rank(row: dict | None, metric: str, order: int) -> tuple:
    """A point's place among its entry's points; the smallest wins (the rule in the module docstring)."""
    row = row or {}
    final, best = num(row.get("final_acc")), num(row.get("best_acc"))
    unusable = bool(row.get("diverged")) or final is None
    if metric == "time_to_target":
        t = num(row.get("time_to_target_s"))
        primary: tuple = (t is None, t if t is not None else 0.0)
        second = final or 0.0
    else:
        value = num(row.get(METRIC_KEYS[metric]))
        primary = (value is None, -(value or 0.0))
        second = (best if metric == "final_acc" else final) or 0.0
    return (unusable, primary, -second, order)


def choose(rows: list[dict | None], metric: str) -> int:
    """The index of the winning point among an entry's points' summary rows (None: a point with no row)."""
    return min(range(len(rows)), key=lambda i: _rank(rows[i], metric, i))


def selection(scenario: Scenario, tuning: Scenario, summary: dict, split: dict, digest: str,
              base_grid: dict | None = None) -> dict:
    """tuning.json's content from the tuning runs' summary. With `base_grid` (the grid before an extension),
    an entry's points are those of the base grid and those of the extended one it ran (only the entries that
    chose an edge are extended)."""
    tune = scenario.tune
    key = METRIC_KEYS[tune.metric]
    entries = {}
    for g in entry_grids(scenario):
        base = scenario.algorithms[g.index]
        if base_grid is not None:  # an extended grid: the points this entry ran
            g.points[:] = [p for p in g.points
                           if g.run_label(p) in summary or all(v in base_grid[k] for k, v in p.items())]
        ran = {k: [v for v in tune.grid[k] if any(p[k] == v for p in g.points)] for k in g.keys}
        rows = [summary.get(g.run_label(p)) for p in g.points]
        points = [{"label": g.run_label(p), "values": p, "final_acc": (r or {}).get("final_acc"),
                   "best_acc": (r or {}).get("best_acc"), "time_to_target_s": (r or {}).get("time_to_target_s"),
                   "diverged": bool((r or {}).get("diverged")), "figure": (r or {}).get(key)}
                  for p, r in zip(g.points, rows)]
        won = choose(rows, tune.metric) if rows else None
        entries[g.label] = {
            "algorithm": g.name,
            "grid": ran,  # the values it ran
            "not_applicable": g.not_applicable,
            "untuned": {k: getattr(base, k) for k in g.keys},  # the entry's own values, which tuning replaced
            "points": points,
            "chosen": points[won]["values"] if won is not None else {},
            "chosen_label": points[won]["label"] if won is not None else None,
            "figure": points[won]["figure"] if won is not None else None,
            "all_diverged": bool(points) and all(p["diverged"] for p in points),
            "at_edge": edges(g.keys, points[won]["values"], ran, base) if won is not None else {},
        }
    return {"metric": tune.metric, "figure_key": key, "grid": tune.grid, "validation": split,
            "seed": tuning.seed, "stop": tuning.stop.model_dump(mode="json"), "runs": sum(len(e["points"]) for e in entries.values()),
            "folder": TUNING_DIR, "scenario_digest": digest, "entries": entries}


def apply_choice(scenario: Scenario, record: dict) -> Scenario:
    """The scenario with each entry's chosen values (tune block and all: its clients keep out the same
    validation set)."""
    data = scenario.resolved()
    for entry in data["algorithms"]:
        label = entry.get("label") or entry["name"]
        entry.update(record["entries"].get(label, {}).get("chosen", {}))
    for batch, step in record.get("measured_step_s", {}).items():
        data["sim"]["measured_step_s"].setdefault(str(batch), step)  # resolved() has the keys as text
    return load_scenario(data, source=f"{scenario.name}: with the tuned values")


def split_facts(tuning: Scenario) -> dict:
    """The validation set as tuning.json records it: size, training samples left, split seed, rule."""
    from edgesync.runtime.bookkeeping.workload import VALIDATION_SPLIT_SEED, scenario_dataset, validation_size
    n_train = len(scenario_dataset(tuning.dataset).train_y)
    size = validation_size(tuning, n_train)
    return {"size": size, "fraction": round(size / n_train, 6), "train_samples": n_train,
            "trained_on": n_train - size, "split_seed": VALIDATION_SPLIT_SEED, "stratified": True}


def run_counts(scenario: Scenario) -> str:
    """'24 tuning runs (asgd 3, gd_async 3, dgc_async 9, dgs 9)'."""
    grids = entry_grids(scenario)
    parts = ", ".join(f"{g.label} {len(g.points)}" + (f" (not applicable: {', '.join(g.not_applicable)})"
                                                      if g.not_applicable else "") for g in grids)
    return f"{sum(len(g.points) for g in grids)} tuning runs: {parts}"


def tune_entries(scenario: Scenario, run_dir: Path, run: RunTuning, progress: bool = True,
                 resume: bool = False) -> tuple[Scenario, bool]:
    """Tune `scenario`'s entries into the claimed `run_dir` (see the module docstring); returns the scenario
    with the chosen values, and whether its final runs resume (`resume` and they had started). A resumed
    tuning keeps the tuning runs that finished (`run` resumes their folders: a live run from its checkpoint, a
    simulated one entry by entry)."""
    run_dir = Path(run_dir)
    display = Progress(enabled=progress)
    tuning = tuning_scenario(scenario)
    digest = scenario_digest(tuning.resolved())
    path = run_dir / TUNING_FILE
    if resume and path.exists():
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("scenario_digest") != digest:
            raise CheckpointError(f"{path} was written for other tuning runs than {run_dir / SCENARIO_FILE} asks "
                                  "for: cannot resume with it")
        _say(display, f"tuning: finished before the resume, {path} reused")
    else:
        if not (run_dir / SCENARIO_FILE).exists():  # what --resume reads, should the tuning be cut short
            write_atomic(run_dir / SCENARIO_FILE, yaml.safe_dump(to_plain(scenario.resolved()), sort_keys=False,
                                                                 allow_unicode=True))
        split = split_facts(tuning)
        folder = run_dir / TUNING_DIR
        _say(display, f"tuning: {run_counts(scenario)}; trained on {split['trained_on']:,} samples, "
                      f"chosen by {scenario.tune.metric} on {split['size']:,} validation samples → {folder}")
        summary = run(tuning, folder, resume and (folder / METRICS_FILE).exists())
        record = selection(scenario, tuning, summary, split, digest)
        record = _extend(scenario, tuning, record, summary, split, digest, run, run_dir, display, resume)
        # the simulator's step times as the tuning runs measured them: the final runs' clock is the same
        ran = yaml.safe_load((folder / SCENARIO_FILE).read_text(encoding="utf-8"))
        record["measured_step_s"] = ran.get("sim", {}).get("measured_step_s", {})
        write_atomic(path, json.dumps(to_plain(record), indent=2) + "\n")
    for label, entry in record["entries"].items():
        edge = ", ".join(f"{k} at the grid's {side} value" for k, side in entry.get("at_edge", {}).items())
        _say(display, f"tuned {label}: {tune_tag(entry['chosen']) or 'nothing to tune'}"
                      f"{_figure(record['metric'], entry['figure'])}"
                      + (" — every point diverged" if entry["all_diverged"] else "")
                      + (f" — {edge}: the optimum may lie beyond it" if edge else ""))
    display.close()
    return apply_choice(scenario, record), resume and (run_dir / METRICS_FILE).exists()


def _extend(scenario: Scenario, tuning: Scenario, record: dict, summary: dict, split: dict, digest: str,
            run: RunTuning, run_dir: Path, display: Progress, resume: bool = False) -> dict:
    """`tune.extend` rounds past the edges the entries chose (tuning_edges.py), each into a run folder of its
    own (tuning-extended-K); the record then holds the extended grid, the rounds, and the edges left."""
    rounds, refused, base_grid = [], {}, scenario.tune.grid
    for round_ in range(1, scenario.tune.extend + 1):
        configs = {entry.key: entry for entry in scenario.algorithms}
        grid, refused, wanted = extended_grid(scenario.tune.grid, record["entries"], configs)
        if not wanted:
            break
        # not loaded again as a grid a user writes: the cap on its runs (config/limits.py) counts every entry at every
        # combination, and an extension runs only the points `wanted` names (each value checked by its entry's config
        # in extended_grid; the runs are checked as every tuning run is when they are loaded below)
        scenario = scenario.model_copy(update={"tune": scenario.tune.model_copy(update={"grid": grid})})
        narrowed = tuning_scenario(scenario).resolved()
        new = [a for a in narrowed["algorithms"] if a["label"] not in summary
               and any(a.get(key) == v for key, v in wanted.get(a["label"].partition("@")[0], {}).items())]
        if not new:
            break
        folder = run_dir / f"{TUNING_DIR}-extended-{round_}"
        _say(display, f"tuning: an optimum on the grid's edge, {len(new)} more runs → {folder}")
        narrowed["algorithms"] = new
        summary = {**summary, **run(load_scenario(narrowed, source=f"{scenario.name}: extended tuning runs"),
                                    folder, resume and (folder / METRICS_FILE).exists())}
        record = selection(scenario, tuning, summary, split, digest, base_grid)
        rounds.append({"folder": folder.name, "grid": grid, "added": wanted})
    record["extended"] = rounds
    record["edges_left"] = {label: e["at_edge"] for label, e in record["entries"].items() if e["at_edge"]}
    record["not_extended"] = refused
    return record


def _say(display: Progress, text: str) -> None:
    log.info("%s", text)
    display.status(text)


def _figure(metric: str, value: Any) -> str:
    if num(value) is None:
        return " (target not reached on validation)" if metric == "time_to_target" else ""
    return f" ({metric} {value:g} s on validation)" if metric == "time_to_target" else f" ({metric} {value:.3f} on validation)"
