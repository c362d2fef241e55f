"""`edgesync reproduce`: the seed papers' headline comparisons, run over seeds and checked claim by claim.

    edgesync reproduce --quick            # reduced runs (simulator), 3 seeds, two experiments at a time: ~11 min
    edgesync reproduce                    # the scenarios' own settings, 5 seeds
    edgesync reproduce --from runs/reproduce --write-docs   # re-read finished runs; table into docs/results.md

Each experiment is a scenario of scenarios/ run with a few `--set` overrides (fewer algorithms,
shorter runs in --quick) and `seeds` (0–2 quick, 0–4 full; `--seeds` to change). Each claim's figure is
computed per seed from the run folder's summary.json (paired: a ratio of two entries is taken within
one seed), then summarised as a mean with a 95% Student-t interval over the seeds (metrics/seeds.py).
The verdict is three-way: *holds* when the whole interval is on the claim's side of its threshold,
*does not hold* when the whole interval is on the other side, *inconclusive* otherwise (and always
with fewer than two seeds). A claim that holds by construction (a configured compression density
fixes bytes per update) is marked so and counted apart from the measured ones. Nothing in the table
is typed in. The output folder's reproduce.json records, per experiment, the mode, runtime,
overrides, seeds, wall time and machine; `--write-docs` puts the table into docs/results.md between
the markers of its mode and runtime, with the machine, base step times and seeds it was run with.
"""
from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Literal

import yaml

from edgesync.docs_block import replace_block
from edgesync.metrics.seeds import Interval, by_seed, interval
from edgesync.runtime.runs import run_scenario
from edgesync.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = "reproduce.json"
SEEDS = {"quick": [0, 1, 2], "full": [0, 1, 2, 3, 4]}  # the issue asks ≥ 3 quick, ≥ 5 full


def markers(key: str) -> tuple[str, str]:
    """docs/results.md's markers around the table of `key` ("quick-sim", "full-sim", "quick-live", …)."""
    return f"<!-- reproduce:{key}:begin -->", f"<!-- reproduce:{key}:end -->"

_ESYNC_ALGOS = "algorithms=[{name: ssgd, lr: 0.05}, {name: asgd, lr: 0.05}, {name: esync, lr: 0.05}]"
_DANA_ALGOS = ("algorithms=[{name: nag_asgd, lr: 0.01, momentum: 0.9, warmup_epochs: 0.5}, "
               "{name: dana_dc, lr: 0.01, momentum: 0.9, warmup_epochs: 0.5}]")
_DANA_SWEEP = ("sweep={clients: [{count: 1, profile: x1}, {count: 16, profile: gamma-homo}, "
               "{count: 16, profile: gamma-hetero}]}")
_DGS_TUNE = ("tune={{grid: {{lr: [0.015, 0.03, 0.05], momentum: [0.5, 0.7, 0.9]}}, metric: final_acc, "
             "validation_size: 2000, stop: {{max_updates: {updates}}}}}")
_HOMO, _HETERO, _ONE = "clients=16×gamma-homo", "clients=16×gamma-hetero", "nag_asgd@clients=1×x1"
_EQ3_SWEEP = "sweep={clients: [{count: 16, profile: gamma-homo}], sharding: [none, layer, memory]}"


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
    Experiment("shat_scale", "scenarios/shat_scale.yaml",  # lr 0.05 diverges at n = 16 (benchmarks/async_claims.py)
               quick=("sweep={clients: [16]}", "algorithms=[{name: asgd, lr: 0.025, label: asp}, "
                      "{name: shat, lr: 0.025}]", "eval.every_s=1"),
               full=("sweep={clients: [16]}", "algorithms=[{name: asgd, lr: 0.025, label: asp}, "
                     "{name: shat, lr: 0.025}]")),
    Experiment("shat_hetero", "scenarios/shat_hetero.yaml",
               quick=("sweep={clients.7.profile: [x100]}", "algorithms=[{name: asgd, lr: 0.05, label: asp}, "
                      "{name: shat, lr: 0.05}]", "eval.every_s=1"),
               full=("sweep={clients.7.profile: [x100]}", "algorithms=[{name: asgd, lr: 0.05, label: asp}, "
                     "{name: shat, lr: 0.05}]")),
    # DGS has momentum and ASGD a different lr in the scenario: both are chosen by the same grid on validation
    # data (tune:), so the baseline gets exactly the tuning DGS gets; the other experiments' entries share
    # their hyper-parameters
    Experiment("dgs", "scenarios/dgs_bandwidth.yaml",
               quick=("sweep={}", "clients=8", "algorithms=[{name: asgd, lr: 0.05}, {name: dgs, lr: 0.015, "
                      "momentum: 0.7, rate: 0.01, secondary_rate: 0.01}]", "stop.max_updates=2000",
                      "eval.every_s=4", "eval.test_size=1000", _DGS_TUNE.format(updates=500)),
               full=("sweep={}", "clients=8", _DGS_TUNE.format(updates=1000))),
    Experiment("dana", "scenarios/dana_scale.yaml",  # the paper's main setting is homogeneous (App. B.3)
               quick=(_DANA_SWEEP, _DANA_ALGOS, "eval.every_s=2", "eval.test_size=1000"),
               full=(_DANA_SWEEP, _DANA_ALGOS)),
    # EQ3 on the VGG-like model: throughput depends on the links and the fixed step time, not on accuracy
    Experiment("shat_sharding", "scenarios/shat_sharding.yaml", quick=(_EQ3_SWEEP, "stop.max_updates=150"),
               full=(_EQ3_SWEEP,)),
)


Rows = dict[str, dict]  # run label → its summary row


@dataclass(frozen=True)
class Claim:
    text: str
    paper: str
    paper_figure: str
    experiment: str
    measure: Callable[[Rows], float | None]  # one seed's rows → the figure; None: the runs cannot give it
    direction: Literal["≥", "≤"]
    threshold: float
    unit: str = "×"
    by_construction: str = ""  # why the figure follows from the configuration alone, if it does

    @property
    def target(self) -> str:
        return f"{self.direction} {_signed(self.threshold)}{self.unit}"


def _signed(value: float) -> str:
    return f"{value:g}".replace("-", "−")


def verdict(iv: Interval, direction: str, threshold: float) -> str:
    """'holds' when the whole 95% interval is on the claim's side of the threshold, 'does not hold' when it
    is wholly on the other side, else 'inconclusive' (also with fewer than two values: no interval)."""
    if iv.low is None or iv.high is None:
        return "inconclusive"
    if direction == "≥":
        return "holds" if iv.low >= threshold else "does not hold" if iv.high < threshold else "inconclusive"
    return "holds" if iv.high <= threshold else "does not hold" if iv.low > threshold else "inconclusive"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _acc(row: dict) -> float:
    return 0.1 if row.get("diverged") else row["final_acc"]  # a diverged run counts as chance


def _t(rows: Rows, label: str) -> float | None:
    return rows[label]["time_to_target_s"]


def _throughput(rows: Rows, sharding: str) -> float | None:
    return rows[f"shat@clients=16×gamma-homo,sharding={sharding}"]["updates_per_s"]


CLAIMS = (
    Claim("ESync time to 0.80 vs SSGD, one ×10 straggler", "esync.txt §5", "7× (ResNet-18)", "esync_iid",
          lambda r: _ratio(_t(r, "ssgd"), _t(r, "esync")), "≥", 5),
    Claim("ESync bytes/s ÷ ASGD bytes/s", "esync.txt §5", "1/15", "esync_iid",
          lambda r: _ratio(r["esync"]["bytes_per_s"], r["asgd"]["bytes_per_s"]), "≤", 0.2, ""),
    Claim("non-i.i.d.: ESync final acc − ASGD final acc", "esync.txt §5", "ASGD impaired, ESync not",
          "esync_noniid", lambda r: 100 * (_acc(r["esync"]) - _acc(r["asgd"])), "≥", 0, " pt"),
    Claim("SHAT final acc − ASP final acc, n = 16", "shat.txt Table 2", "SHAT above ASP", "shat_scale",
          lambda r: 100 * (_acc(r["shat@clients=16"]) - _acc(r["asp@clients=16"])), "≥", 0, " pt"),
    Claim("SHAT final acc − ASP final acc, one ×100 straggler (HE2)", "shat.txt Fig. 5", "SHAT above ASP",
          "shat_hetero", lambda r: 100 * (_acc(r["shat@profile=x100"]) - _acc(r["asp@profile=x100"])), "≥", 0, " pt"),
    Claim("DGS bytes per update ÷ ASGD's, up", "dgs.txt §5", "99% sparsity", "dgs",
          lambda r: _ratio(r["dgs"]["bytes_up"] / r["dgs"]["updates"],
                           r["asgd"]["bytes_up"] / r["asgd"]["updates"]), "≤", 0.03, "",
          by_construction="rate 0.01: each update carries 1% of the entries, as (index, value) pairs"),
    Claim("DGS time to 0.80 vs ASGD, 10 Mbit/s links", "dgs.txt §5", "5.7× (1 Gbps, ResNet-18)", "dgs",
          lambda r: _ratio(_t(r, "asgd"), _t(r, "dgs")), "≥", 5),
    Claim("DGS final acc − ASGD final acc, same updates", "dgs.txt §5", "no loss", "dgs",
          lambda r: 100 * (_acc(r["dgs"]) - _acc(r["asgd"])), "≥", -1, " pt"),
    Claim("NAG-ASGD mean gap ÷ DANA-DC mean gap, N = 16 homogeneous", "dana.txt Fig. 2(b)", "~10×", "dana",
          lambda r: _ratio(r[f"nag_asgd@{_HOMO}"]["mean_gap"], r[f"dana_dc@{_HOMO}"]["mean_gap"]), "≥", 5),
    Claim("DANA-DC final acc − one worker, N = 16 homogeneous", "dana.txt Table 1", "−0.46 pt", "dana",
          lambda r: 100 * (_acc(r[f"dana_dc@{_HOMO}"]) - _acc(r[_ONE])), "≥", -1.5, " pt"),
    Claim("NAG-ASGD final acc − one worker, N = 16 homogeneous", "dana.txt Table 1", "−72.8 pt", "dana",
          lambda r: 100 * (_acc(r[f"nag_asgd@{_HOMO}"]) - _acc(r[_ONE])), "≤", -5, " pt"),
    Claim("DANA-DC final acc − one worker, N = 16 heterogeneous", "dana.txt Table 5", "−0.35 pt", "dana",
          lambda r: 100 * (_acc(r[f"dana_dc@{_HETERO}"]) - _acc(r[_ONE])), "≥", -1.5, " pt"),
    Claim("SHAT throughput, memory-wise ÷ layer-wise sharding, 16 workers, VGG-like", "shat.txt Fig. 6(b)",
          "MPS best", "shat_sharding", lambda r: _ratio(_throughput(r, "memory"), _throughput(r, "layer")), "≥", 1.5),
    Claim("SHAT throughput, layer-wise sharding ÷ none, 16 workers, VGG-like", "shat.txt Fig. 6(b)",
          "LPS rarely helps", "shat_sharding", lambda r: _ratio(_throughput(r, "layer"), _throughput(r, "none")),
          "≤", 1.1),
)


def read_manifest(out: Path) -> dict:
    """What `run_suite` recorded in `out`: experiment → {mode, runtime, overrides, seeds, wall_s, machine}."""
    path = out / MANIFEST
    return json.loads(path.read_text()) if path.exists() else {}


def folder_key(out: Path) -> str | None:
    """"MODE-RUNTIME" ("quick-sim", "full-live", …) if every experiment recorded in `out` ran so, else None."""
    keys = {f"{e['mode']}-{e['runtime']}" for e in read_manifest(out).values()}
    return keys.pop() if len(keys) == 1 else None


def machine() -> str:
    """This machine in a few words: CPU model, cores this process may use, OS."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores, {platform.system()} {platform.release()}"


def run_suite(out: Path, quick: bool, runtime: str = "sim", only: list[str] | None = None,
              progress: bool = True, seeds: list[int] | None = None, jobs: int = 1, parallel: int = 1) -> None:
    """Run the experiments into `out/KEY`, each over `seeds` (default SEEDS of the mode); `jobs` > 1 runs
    that many simulator experiments at once in worker processes (live runs always one at a time: their
    client processes need the cores); `parallel` > 1 instead runs one experiment at a time, that many of
    its seeds and variants at once as Ray tasks (runtime/sim/parallel_variants.py)."""
    out.mkdir(parents=True, exist_ok=True)
    mode = "quick" if quick else "full"
    seeds = list(seeds or SEEDS[mode])
    todo = [exp for exp in EXPERIMENTS if not only or exp.key in only]
    plans = {exp.key: [*(exp.quick if quick else exp.full), f"runtime={runtime}", f"seeds={seeds}"] for exp in todo}
    for exp in todo:  # every scenario checked before anything runs
        load_scenario(ROOT / exp.scenario, plans[exp.key])
    manifest = read_manifest(out)
    where = machine()

    def record(exp: Experiment, wall_s: float) -> None:
        now = time.time()
        manifest[exp.key] = {"mode": mode, "runtime": runtime, "scenario": exp.scenario, "overrides": plans[exp.key],
                             "seeds": seeds, "wall_s": round(wall_s, 1), "machine": where, "jobs": workers,
                             "started_at": round(now - wall_s, 1), "finished_at": round(now, 1)}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")  # after each: a stopped suite keeps it

    workers = 1 if runtime == "live" or len(todo) <= 1 or parallel > 1 else max(1, jobs)
    if workers == 1:
        for exp in todo:
            record(exp, _run_one(exp.scenario, plans[exp.key], out / exp.key, progress, parallel))
        return
    if runtime == "sim":
        _measure_step_times([load_scenario(ROOT / e.scenario, plans[e.key]) for e in todo])
    started = time.perf_counter()
    _say(f"reproduce: {len(todo)} experiments × {len(seeds)} seeds, {workers} at a time")
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_run_one, exp.scenario, plans[exp.key], out / exp.key, False): exp for exp in todo}
        for done, future in enumerate(as_completed(futures), 1):
            exp = futures[future]
            wall_s = future.result()  # a failed experiment stops the suite with its error
            record(exp, wall_s)
            _say(f"reproduce: [{done}/{len(todo)}] {exp.key} finished in {wall_s / 60:.1f} min "
                 f"({(time.perf_counter() - started) / 60:.1f} min so far)")


def _run_one(scenario: str, overrides: list[str], folder: Path, progress: bool, parallel: int = 1) -> float:
    t0 = time.perf_counter()
    # a second run of the suite into the same folder moves the earlier run of an experiment aside
    run_scenario(load_scenario(ROOT / scenario, overrides), folder, progress=progress, overwrite=True,
                 parallel=parallel)
    return time.perf_counter() - t0


def _measure_step_times(scenarios: list) -> None:
    """Fill the simulator's per-machine caches — step times, and the coordinator's costs of each entry
    (runtime/sim/server_cost.py) — before experiments run side by side, so no experiment measures them while
    another one loads the cores (runtime/bookkeeping/step_time.py)."""
    from edgesync.runtime.sim.simulator import Simulator
    from edgesync.runtime.tuning import tuning_scenario
    seen = set()
    # a tuned experiment's grid points (momentum 0.5, 0.9, …) are entries of their own to calibrate
    for sc in [s for sc in scenarios for s in ([sc, tuning_scenario(sc)] if sc.tune else [sc])]:
        key = (sc.model.name, sc.dataset.model_dump_json(), tuple(sorted({a.batch_size for a in sc.algorithms})),
               sc.sim.server_time == "model" and tuple(a.model_dump_json(exclude={"label"}) for a in sc.algorithms))
        if key not in seen:
            seen.add(key)
            Simulator(sc, None, None).prepare()


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def evaluate(out: Path) -> list[dict]:
    """Every claim whose experiment has a finished run folder under `out`: its figure per seed, their mean
    and 95% interval, and the three-way verdict."""
    results = []
    for claim in CLAIMS:
        folder = out / claim.experiment
        summary = folder / "summary.json"
        if not summary.exists():
            continue
        groups = by_seed(json.loads(summary.read_text()))
        per_seed: dict[int | None, float | None] = {}
        whys = []
        for seed, rows in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            try:
                value = claim.measure(rows)
            except (KeyError, TypeError, ZeroDivisionError) as exc:
                value = None
                whys.append(f"missing in the run ({type(exc).__name__}: {exc})")
            else:
                if value is None:
                    whys.append("not reached")
                elif not math.isfinite(value):
                    value = None
                    whys.append("not finite")
            per_seed[seed] = value
        values = [v for v in per_seed.values() if v is not None]
        iv = interval(values)
        results.append({"claim": claim, "per_seed": per_seed, "interval": iv, "seeds": len(per_seed),
                        "why": "; ".join(dict.fromkeys(whys)), "folder": folder, "value": iv.mean,
                        "verdict": verdict(iv, claim.direction, claim.threshold) if values else "n/a"})
    return results


def _figure(r: dict) -> str:
    """'4.9× [4.2, 5.6] (3 seeds)': the mean, its 95% interval, and how many seeds gave the figure."""
    c, iv = r["claim"], r["interval"]
    if iv.mean is None:
        return r["why"] or "n/a"
    text = f"{_num(iv.mean)}{c.unit}"
    if iv.low is not None:
        text += f" [{_num(iv.low)}, {_num(iv.high)}]"
    n = f"{iv.n} of {r['seeds']} seeds" if iv.n < r["seeds"] else f"{iv.n} seed{'s' if iv.n != 1 else ''}"
    why = f"; {r['why']} in the others" if iv.n < r["seeds"] and r["why"] else ""
    return f"{text} ({n}{why})"


def _num(value: float) -> str:
    return f"{value:.3g}".replace("-", "−")


def table(results: list[dict]) -> str:
    """The claims as a Markdown table, measured claims first, then those that hold by construction, and a
    count of the verdicts of each kind."""
    lines = ["| claim | paper | paper's figure | target | ours: mean [95% CI] | verdict | run folder |",
             "|---|---|---|---|---|---|---|"]
    measured = [r for r in results if not r["claim"].by_construction]
    built = [r for r in results if r["claim"].by_construction]
    for r in measured + built:
        c = r["claim"]
        shown = f"{r['verdict']} (by construction: {c.by_construction})" if c.by_construction else r["verdict"]
        lines.append(f"| {c.text} | {c.paper} | {c.paper_figure} | {c.target} | {_figure(r)} | {shown} | "
                     f"`{r['folder']}` |")
    lines += ["", count_line(measured, built)]
    return "\n".join(lines)


def count_line(measured: list[dict], built: list[dict]) -> str:
    plural = {"holds": "hold", "does not hold": "do not hold", "inconclusive": "inconclusive", "n/a": "n/a"}
    counts = {v: sum(r["verdict"] == v for r in measured) for v in plural}
    parts = [f"{n} {v if n == 1 else plural[v]}" for v, n in counts.items() if n]
    return (f"Measured claims: {len(measured)} ({', '.join(parts) or 'none'}); by construction: {len(built)} "
            f"({sum(r['verdict'] == 'holds' for r in built)} hold). A claim holds when its whole 95% interval "
            f"over seeds is on the target's side, does not hold when it is wholly on the other side, and is "
            f"inconclusive otherwise.")


def docs_note(root: Path, key: str) -> str:
    """What the docs block says of its runs: mode, folder, minutes, seeds, machine and base step times."""
    manifest = read_manifest(root)
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
        seeds = sorted({s for e in manifest.values() for s in e.get("seeds", [])})
        if seeds:
            parts.append(f"seeds {', '.join(map(str, seeds))}")
        machines = sorted({e["machine"] for e in manifest.values() if e.get("machine")})
        if machines:
            parts.append(f"machine: {'; '.join(machines)}")
    steps = base_steps(root)
    if steps:
        parts.append("base step " + _steps_text(steps))
    return ", ".join(parts)


def base_steps(root: Path) -> list[float]:
    """The ×1 device step times (ms) the runs under `root` used: a live run's from its clients' rows (the
    shared base step each run measured), a simulated run's from its scenario.yaml."""
    found = set()
    for path in sorted(root.glob("*/scenario.yaml")):
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
