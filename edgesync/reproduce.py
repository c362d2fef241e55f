"""`edgesync reproduce`: the seed papers' headline comparisons, run and checked claim by claim.

    edgesync reproduce --quick            # reduced runs (simulator), about 7 minutes on 2 cores
    edgesync reproduce                    # the scenarios' own settings, about 25 minutes
    edgesync reproduce --from runs/reproduce --write-docs   # re-read finished runs; table into docs/results.md

Each experiment is a scenario of scenarios/ run with a few `--set` overrides (fewer algorithms,
shorter runs in --quick); each claim reads its figure from the run folders' summary.json — the
paper's figure beside ours, the target the issue set, whether it holds, and the run folder. Nothing
in the table is typed in. The output folder's reproduce.json records, per experiment, the mode, the
runtime, the overrides and the wall time. `--write-docs` puts the table into docs/results.md between
the markers of its mode and runtime (quick, full and live tables are kept side by side).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from edgesync.docs_block import replace_block
from edgesync.runtime.runs import run_scenario
from edgesync.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = "reproduce.json"


def markers(key: str) -> tuple[str, str]:
    """docs/results.md's markers around the table of `key` ("quick-sim", "full-sim", "quick-live", …)."""
    return f"<!-- reproduce:{key}:begin -->", f"<!-- reproduce:{key}:end -->"

_ESYNC_ALGOS = "algorithms=[{name: ssgd, lr: 0.05}, {name: asgd, lr: 0.05}, {name: esync, lr: 0.05}]"
_DANA_ALGOS = ("algorithms=[{name: nag_asgd, lr: 0.01, momentum: 0.9, warmup_epochs: 0.5}, "
               "{name: dana_dc, lr: 0.01, momentum: 0.9, warmup_epochs: 0.5}]")
_DANA_SWEEP = ("sweep={clients: [{count: 1, profile: x1}, {count: 16, profile: gamma-homo}, "
               "{count: 16, profile: gamma-hetero}]}")
_HOMO, _HETERO, _ONE = "clients=16×gamma-homo", "clients=16×gamma-hetero", "nag_asgd@clients=1×x1"


@dataclass(frozen=True)
class Experiment:
    key: str
    scenario: str
    quick: tuple[str, ...]
    full: tuple[str, ...] = ()


EXPERIMENTS = (
    Experiment("esync_iid", "scenarios/esync_fmnist_iid.yaml",
               # 200 s: live, the ×1 device is the shared base step (≈ 2.9 × the undisturbed step on 2 cores),
               # and SSGD takes 60–80 s to 0.80; each entry stops at the target, so the budget costs nothing
               quick=(_ESYNC_ALGOS, "stop.stop_at_target=true", "stop.time_budget_s=200", "eval.test_size=1000"),
               full=(_ESYNC_ALGOS,)),
    Experiment("esync_noniid", "scenarios/esync_fmnist_noniid.yaml",
               quick=("algorithms=[{name: asgd, lr: 0.05}, {name: esync, lr: 0.05}]", "stop.time_budget_s=15",
                      "eval.test_size=1000"),
               full=("algorithms=[{name: asgd, lr: 0.05}, {name: esync, lr: 0.05}]",)),
    Experiment("shat_scale", "scenarios/shat_scale.yaml",  # lr 0.05 diverges at n = 16 (docs/results.md)
               quick=("sweep={clients: [16]}", "algorithms=[{name: asgd, lr: 0.025, label: asp}, "
                      "{name: shat, lr: 0.025}]", "eval.every_s=1"),
               full=("sweep={clients: [16]}", "algorithms=[{name: asgd, lr: 0.025, label: asp}, "
                     "{name: shat, lr: 0.025}]")),
    Experiment("shat_hetero", "scenarios/shat_hetero.yaml",
               quick=("sweep={clients.7.profile: [x100]}", "algorithms=[{name: asgd, lr: 0.05, label: asp}, "
                      "{name: shat, lr: 0.05}]", "eval.every_s=1"),
               full=("sweep={clients.7.profile: [x100]}", "algorithms=[{name: asgd, lr: 0.05, label: asp}, "
                     "{name: shat, lr: 0.05}]")),
    Experiment("dgs", "scenarios/dgs_bandwidth.yaml",
               quick=("sweep={clients: [8]}", "algorithms=[{name: asgd, lr: 0.05}, {name: dgs, lr: 0.015, "
                      "momentum: 0.7, rate: 0.01, secondary_rate: 0.01}]", "stop.max_updates=2000",
                      "eval.every_s=4", "eval.test_size=1000"),
               full=("sweep={clients: [8]}",)),
    Experiment("dana", "scenarios/dana_scale.yaml",  # the paper's main setting is homogeneous (App. B.3)
               quick=(_DANA_SWEEP, _DANA_ALGOS, "eval.every_s=2", "eval.test_size=1000"),
               full=(_DANA_SWEEP, _DANA_ALGOS)),
)


Rows = dict[str, dict]  # run label → its summary row


@dataclass(frozen=True)
class Claim:
    text: str
    paper: str
    paper_figure: str
    target: str
    experiment: str
    measure: Callable[[Rows], float | None]  # None: a figure the runs cannot give (e.g. target never reached)
    holds: Callable[[float], bool]
    unit: str = "×"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _acc(row: dict) -> float:
    return 0.1 if row.get("diverged") else row["final_acc"]  # a diverged run counts as chance


def _t(rows: Rows, label: str) -> float | None:
    return rows[label]["time_to_target_s"]


CLAIMS = (
    Claim("ESync time to 0.80 vs SSGD, one ×10 straggler", "esync.txt §5", "7× (ResNet-18)", "≥ 5×", "esync_iid",
          lambda r: _ratio(_t(r, "ssgd"), _t(r, "esync")), lambda v: v >= 5),
    Claim("ESync bytes/s ÷ ASGD bytes/s", "esync.txt §5", "1/15", "≤ 0.2", "esync_iid",
          lambda r: _ratio(r["esync"]["bytes_per_s"], r["asgd"]["bytes_per_s"]), lambda v: v <= 0.2, ""),
    Claim("non-i.i.d.: ESync final acc − ASGD final acc", "esync.txt §5", "ASGD impaired, ESync not", "≥ 0 pt",
          "esync_noniid", lambda r: 100 * (_acc(r["esync"]) - _acc(r["asgd"])), lambda v: v >= 0, " pt"),
    Claim("SHAT final acc − ASP final acc, n = 16", "shat.txt Table 2", "SHAT above ASP", "≥ 0 pt", "shat_scale",
          lambda r: 100 * (_acc(r["shat@clients=16"]) - _acc(r["asp@clients=16"])), lambda v: v >= 0, " pt"),
    Claim("SHAT final acc − ASP final acc, one ×100 straggler (HE2)", "shat.txt Fig. 5", "SHAT above ASP", "≥ 0 pt",
          "shat_hetero", lambda r: 100 * (_acc(r["shat@profile=x100"]) - _acc(r["asp@profile=x100"])),
          lambda v: v >= 0, " pt"),
    Claim("DGS bytes per update ÷ ASGD's, up", "dgs.txt §5", "99% sparsity", "≤ 0.03", "dgs",
          lambda r: _ratio(r["dgs@clients=8"]["bytes_up"] / r["dgs@clients=8"]["updates"],
                           r["asgd@clients=8"]["bytes_up"] / r["asgd@clients=8"]["updates"]), lambda v: v <= 0.03, ""),
    Claim("DGS time to 0.80 vs ASGD, 10 Mbit/s links", "dgs.txt §5", "5.7× (1 Gbps, ResNet-18)", "≥ 5×", "dgs",
          lambda r: _ratio(_t(r, "asgd@clients=8"), _t(r, "dgs@clients=8")), lambda v: v >= 5),
    Claim("DGS final acc − ASGD final acc, same updates", "dgs.txt §5", "no loss", "≥ −1 pt", "dgs",
          lambda r: 100 * (_acc(r["dgs@clients=8"]) - _acc(r["asgd@clients=8"])), lambda v: v >= -1, " pt"),
    Claim("NAG-ASGD mean gap ÷ DANA-DC mean gap, N = 16 homogeneous", "dana.txt Fig. 2(b)", "~10×", "≥ 5×",
          "dana", lambda r: _ratio(r[f"nag_asgd@{_HOMO}"]["mean_gap"], r[f"dana_dc@{_HOMO}"]["mean_gap"]),
          lambda v: v >= 5),
    Claim("DANA-DC final acc − one worker, N = 16 homogeneous", "dana.txt Table 1", "−0.46 pt", "≥ −1.5 pt", "dana",
          lambda r: 100 * (_acc(r[f"dana_dc@{_HOMO}"]) - _acc(r[_ONE])), lambda v: v >= -1.5, " pt"),
    Claim("NAG-ASGD final acc − one worker, N = 16 homogeneous", "dana.txt Table 1", "−72.8 pt", "≤ −5 pt", "dana",
          lambda r: 100 * (_acc(r[f"nag_asgd@{_HOMO}"]) - _acc(r[_ONE])), lambda v: v <= -5, " pt"),
    Claim("DANA-DC final acc − one worker, N = 16 heterogeneous", "dana.txt Table 5", "−0.35 pt", "≥ −1.5 pt",
          "dana", lambda r: 100 * (_acc(r[f"dana_dc@{_HETERO}"]) - _acc(r[_ONE])), lambda v: v >= -1.5, " pt"),
)


def read_manifest(out: Path) -> dict:
    """What `run_suite` recorded in `out`: experiment → {mode, runtime, overrides, wall_s}."""
    path = out / MANIFEST
    return json.loads(path.read_text()) if path.exists() else {}


def folder_key(out: Path) -> str | None:
    """"MODE-RUNTIME" ("quick-sim", "full-live", …) if every experiment recorded in `out` ran so, else None."""
    keys = {f"{e['mode']}-{e['runtime']}" for e in read_manifest(out).values()}
    return keys.pop() if len(keys) == 1 else None


def run_suite(out: Path, quick: bool, runtime: str = "sim", only: list[str] | None = None,
              progress: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(out)
    for exp in EXPERIMENTS:
        if only and exp.key not in only:
            continue
        overrides = [*(exp.quick if quick else exp.full), f"runtime={runtime}"]
        t0 = time.perf_counter()
        # a second run of the suite into the same folder moves the earlier run of an experiment aside
        run_scenario(load_scenario(ROOT / exp.scenario, overrides), out / exp.key, progress=progress, overwrite=True)
        manifest[exp.key] = {"mode": "quick" if quick else "full", "runtime": runtime, "scenario": exp.scenario,
                             "overrides": overrides, "wall_s": round(time.perf_counter() - t0, 1)}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")  # after each: a stopped suite keeps it


def evaluate(out: Path) -> list[dict]:
    """Every claim whose experiment has a finished run folder under `out`, with its figure."""
    results = []
    for claim in CLAIMS:
        folder = out / claim.experiment
        summary = folder / "summary.json"
        if not summary.exists():
            continue
        rows = json.loads(summary.read_text())
        try:
            value = claim.measure(rows)
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            value, why = None, f"missing in the run ({type(exc).__name__}: {exc})"
        else:
            why = "not reached" if value is None else ""
        if value is not None and not math.isfinite(value):
            value, why = None, "not finite"
        results.append({"claim": claim, "value": value, "why": why, "folder": folder,
                        "holds": None if value is None else bool(claim.holds(value))})
    return results


def table(results: list[dict]) -> str:
    lines = ["| claim | paper | paper's figure | target | ours | verdict | run folder |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        c = r["claim"]
        ours = (r["why"] or "n/a") if r["value"] is None else f"{r['value']:.3g}{c.unit}"
        verdict = "—" if r["holds"] is None else ("holds" if r["holds"] else "does not hold")
        lines.append(f"| {c.text} | {c.paper} | {c.paper_figure} | {c.target} | {ours} | {verdict} | "
                     f"`{r['folder']}` |")
    return "\n".join(lines)


def write_docs(text: str, key: str, note: str, doc: Path = ROOT / "docs" / "results.md") -> None:
    """Replace the table between `key`'s markers in docs/results.md (a section is added if missing)."""
    begin, end = markers(key)
    replace_block(doc, begin, end, f"_Written by `edgesync reproduce` ({note})._\n\n{text}",
                  missing=f"### The papers' claims, reproduced ({key})")
