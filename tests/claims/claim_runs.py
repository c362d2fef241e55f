"""Run a seed paper's experiment as `edgesync run` does and read its claims as `edgesync reproduce` does.

The experiments (scenario files) and the claims (which entries, which figure, which direction) are
edgesync/reproduce/'s `EXPERIMENTS` and `CLAIMS`, and the figures come from its `evaluate`, which reads
the run folder's summary.json: the tests restate no claim, they only choose a smaller size. A scenario is
loaded with `--set`-style overrides and run by `run_scenario`, the path `edgesync run` takes.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from edgesync import reproduce
from edgesync.metrics.seeds import by_seed
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def experiment(key: str) -> reproduce.Experiment:
    return next(e for e in reproduce.EXPERIMENTS if e.key == key)


def entries(key: str, *labels: str) -> str:
    """An `algorithms=[…]` override keeping only the experiment scenario's entries with these labels,
    copied as written there: their hyper-parameters stay the scenario's defaults."""
    written = yaml.safe_load((ROOT / experiment(key).scenario).read_text())["algorithms"]
    kept = [entry for entry in written if entry.get("label", entry["name"]) in labels]
    missing = set(labels) - {entry.get("label", entry["name"]) for entry in kept}
    assert not missing, f"{experiment(key).scenario} has no entry labelled {sorted(missing)}"
    return f"algorithms={json.dumps(kept)}"


def run_experiment(root: Path, key: str, overrides: list[str]) -> Path:
    """Run experiment `key`'s scenario with `overrides` into root/KEY, where `reproduce.evaluate` looks."""
    folder = root / key
    run_scenario(load_scenario(ROOT / experiment(key).scenario, overrides), folder, progress=False)
    return folder


def claim_result(root: Path, text: str) -> dict:
    """`reproduce.evaluate`'s result for the claim with this text: per-seed figures, their mean, verdict."""
    results = {r["claim"].text: r for r in reproduce.evaluate(root)}
    assert text in results, f"no claim {text!r} among {sorted(results)}"
    return results[text]


def summary_by_seed(folder: Path) -> dict[int | None, dict[str, dict]]:
    """summary.json's rows grouped by seed, each keyed by its label without the seed."""
    return by_seed(json.loads((folder / "summary.json").read_text()))


def assert_direction(result: dict, bound: float) -> None:
    """The claim's figure (its mean over the seeds run) lies on the claim's side of `bound`, strictly:
    above it for a claim of the form "≥ target", below it for "≤ target". `bound` is where the claim's
    direction turns (1 for a ratio, 0 pt for a difference) or a stated tolerance, not the paper's target."""
    claim, mean = result["claim"], result["value"]
    detail = (f"{claim.text}: mean {mean} over seeds {result['per_seed']} ({result['why'] or 'all measured'}); "
              f"its direction needs {'>' if claim.direction == '≥' else '<'} {bound} "
              f"(reproduce's target: {claim.target}; run folder {result['folder']})")
    assert mean is not None and result["interval"].n == result["seeds"], detail
    assert (mean > bound) if claim.direction == "≥" else (mean < bound), detail
