"""docs/peers.md from the harness's runs (issue 38): the record kept in docs/data/peers.json, its tables (a pure
function of the record, so tests/test_docs_data.py can render the page again from the file) and the bar chart.

Method, fixed before any result was seen:
- wall time and peak memory per system: mean and 95% t-interval over the seeds; the ratio to EdgeSync's serial
  simulator per seed (same seed, same partition), then its interval; the floor's multiple likewise;
- "EdgeSync at least 2× faster than the fastest peer": the per-seed ratio peer ÷ EdgeSync for the peer with
  the lowest mean wall time, judged ≥ 2 by the project's verdict rule (edgesync/metrics/verdict.py);
  "within 1.5× of the bare loop": EdgeSync ÷ bare per seed, judged ≤ 1.5;
- agreement (W1): each run's curve is summed up by its mean accuracy over the tested rounds; two systems agree
  when the difference of their means over the seeds is within two standard errors of the seed-to-seed spread
  (the two systems' sample sd of those curve means, pooled: 2·s·√(1/n₁ + 1/n₂)). Runs of one seed cannot
  show a spread: "undecided". This rule replaced a first one after the first seeds were seen: every tested
  round within twice the pooled spread of that round. With two or three seeds a round's sd is itself a
  noisy figure, and ten rounds give ten chances to miss, so that rule called curves apart that differ by
  less than the seeds do; its count of rounds outside is kept in the table.
"""
from __future__ import annotations

import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.metrics.verdict import against, shown  # noqa: E402
from edgesync.metrics.seeds import interval  # noqa: E402

BLOCK = "peers"
REFERENCE, FLOOR = "edgesync-serial", "bare"
EDGESYNC = ("edgesync-serial", "edgesync-ray")


def record(runs: list[dict], wls: list[str], seeds: list[int], argv: str = "") -> dict:
    """What docs/data/peers-*.json keep: the harness's arguments, the machine, the workloads' settings, every run."""
    import workloads

    return {"argv": argv, "machine": f"{platform.node()} ({platform.machine()}, {len(os.sched_getaffinity(0))} cores, "
                       f"{platform.processor() or platform.machine()})", "date": time.strftime("%Y-%m-%d"),
            "workloads": {w: {**workloads.COMMON, **workloads.WORKLOADS[w]} for w in wls}, "seeds": seeds, "runs": runs}


def _ok(r: dict) -> bool:
    return "final_acc" in r


def _iv(values: list[float], digits: int = 1, unit: str = "") -> str:
    iv = interval(values)
    if iv.mean is None:
        return "–"
    if iv.low is None:
        return f"{iv.mean:.{digits}f}{unit} (1 run)"
    return f"{iv.mean:.{digits}f}{unit} ± {iv.half_width:.{digits}f}"


def _by(data: dict, workload: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in data["runs"]:
        if r["workload"] == workload:
            out.setdefault(r["system"], []).append(r)
    return out


def _paired(a: list[dict], b: list[dict], key: str) -> list[float]:
    """a's figure ÷ b's, per seed both ran."""
    bs = {r["seed"]: r[key] for r in b if _ok(r)}
    return [r[key] / bs[r["seed"]] for r in a if _ok(r) and r["seed"] in bs and bs[r["seed"]]]


def table(data: dict, workload: str) -> str:
    """One workload: a row per system."""
    runs = _by(data, workload)
    ref, floor = runs.get(REFERENCE, []), runs.get(FLOOR, [])
    lines = ["| System | Version | Wall s | ÷ EdgeSync | × bare loop | Peak MB | ÷ EdgeSync | Final acc. % | Virtual s to target |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for system, rs in runs.items():
        ok = [r for r in rs if _ok(r)]
        if not ok:
            why = rs[0].get("unavailable") or rs[0].get("error", "no run")
            lines.append(f"| {system} | – | could not run: {why.replace('|', '/')} | | | | | | |")
            continue
        walls, mems = [r["wall_s"] for r in ok], [r["peak_rss_mb"] for r in ok]
        reach = [r["sim_time_to_target_s"] for r in ok if r.get("sim_time_to_target_s") is not None]
        reach_cell = "–" if not any("sim_time_s" in p for r in ok for p in r["curve"]) else \
            f"{_iv(reach, 2)} ({len(reach)}/{len(ok)} reached)"
        failed = len(rs) - len(ok)
        lines.append(
            f"| {system}{f' ({failed} of {len(rs)} runs failed)' if failed else ''} | {ok[0]['version']} "
            f"| {_iv(walls)} | {_iv(_paired(ok, ref, 'wall_s'), 2)} | {_iv(_paired(ok, floor, 'wall_s'), 2)} "
            f"| {_iv(mems, 0)} | {_iv(_paired(ok, ref, 'peak_rss_mb'), 2)} "
            f"| {_iv([100 * r['final_acc'] for r in ok])} | {reach_cell} |")
    return "\n".join(lines)


def fastest_peer(data: dict, workload: str) -> str | None:
    runs = _by(data, workload)
    peers = {s: [r["wall_s"] for r in rs if _ok(r)] for s, rs in runs.items() if s not in EDGESYNC + (FLOOR,)}
    peers = {s: w for s, w in peers.items() if w}
    return min(peers, key=lambda s: statistics.fmean(peers[s])) if peers else None


def verdicts(data: dict, workload: str) -> list[str]:
    """The issue's two speed targets on one workload, each with its verdict."""
    runs = _by(data, workload)
    ref = runs.get(REFERENCE, [])
    out = []
    peer = fastest_peer(data, workload)
    if peer:
        v = against(_paired(runs[peer], ref, "wall_s"), "≥", 2.0)
        out.append(f"EdgeSync at least 2× faster than the fastest peer ({peer}), its wall time ÷ EdgeSync's: {shown(v)}")
    if any(_ok(r) for r in runs.get(FLOOR, [])):  # the floor runs the synchronous workloads only
        v = against(_paired(ref, runs[FLOOR], "wall_s"), "≤", 1.5)
        out.append(f"EdgeSync within 1.5× of the bare loop, its wall time ÷ the loop's: {shown(v)}")
    return out


def _curve_mean(run: dict) -> float:
    return statistics.fmean(p["acc"] for p in run["curve"])


def _pooled_sd(a: list[float], b: list[float]) -> float:
    return math.sqrt((statistics.variance(a) * (len(a) - 1) + statistics.variance(b) * (len(b) - 1))
                     / (len(a) + len(b) - 2))


def agreement(data: dict, workload: str = "W1") -> str:
    """Each system's accuracy curve against EdgeSync's serial simulator's (the rule in the module docstring):
    the curves' means over the tested rounds, per seed, against the seed-to-seed spread; beside it the first
    rule's count of tested rounds whose gap is past twice the pooled spread of that round."""
    runs = _by(data, workload)
    ref = [r for r in runs.get(REFERENCE, []) if _ok(r)]
    if not ref:
        return "No EdgeSync run to compare with."
    lines = ["| System | Seeds | Mean accuracy over the tested rounds, % | Gap to EdgeSync, points | Allowed (2 s.e. of "
             "the seed spread) | Agree | Rounds past twice their spread (first rule) |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    a = [_curve_mean(r) for r in ref]
    lines.append(f"| {REFERENCE} | {len(a)} | {100 * statistics.fmean(a):.1f} | | | | |")
    for system, rs in runs.items():
        ok = [r for r in rs if _ok(r)]
        if system == REFERENCE or not ok:
            continue
        b = [_curve_mean(r) for r in ok]
        gap = statistics.fmean(b) - statistics.fmean(a)
        if len(a) < 2 or len(b) < 2:
            allowed, verdict = "–", "undecided (one seed)"
        else:
            bound = 2 * _pooled_sd(a, b) * math.sqrt(1 / len(a) + 1 / len(b))
            allowed, verdict = f"{100 * bound:.1f}", "yes" if abs(gap) <= bound else "no"
        past, tested = 0, 0
        for rnd in sorted({p["round"] for p in ref[0]["curve"]}):
            x = [p["acc"] for r in ref for p in r["curve"] if p["round"] == rnd]
            y = [p["acc"] for r in ok for p in r["curve"] if p["round"] == rnd]
            if len(x) >= 2 and len(y) >= 2:
                tested += 1
                past += abs(statistics.fmean(x) - statistics.fmean(y)) > 2 * _pooled_sd(x, y)
        lines.append(f"| {system} | {len(b)} | {100 * statistics.fmean(b):.1f} | {100 * gap:+.1f} | {allowed} "
                     f"| {verdict} | {past} of {tested} |")
    return "\n".join(lines)


def notes(data: dict) -> str:
    """What each system's runner says it does differently from the workload's rules."""
    seen = {}
    for r in data["runs"]:
        if r.get("notes"):
            seen.setdefault(r["system"], r["notes"])
    return "\n".join(f"- **{s}**: {n}" for s, n in seen.items()) or "- none"


def render(data: dict) -> str:
    parts = []
    for w in data["workloads"]:
        parts.append(f"**{w}** ({_describe(data['workloads'][w])}), seeds {', '.join(map(str, data['seeds']))}:\n\n"
                     + table(data, w))
        v = verdicts(data, w)
        if v:
            parts.append("\n".join(f"- {line}" for line in v))
    if "W1" in data["workloads"]:
        parts.append("Agreement on W1, accuracy on the test set after each tested round, against `edgesync-serial`:\n\n"
                     + agreement(data, "W1"))
    parts.append("How each runner departs from the common rules (its own words):\n\n" + notes(data))
    parts.append(f"Machine: {data['machine']}, {data['date']}. Wall time: the whole process, start to exit; peak "
                 "memory: the resident set of the process and its children, sampled every 50 ms; ± the half-width "
                 "of the 95% t-interval over the seeds.")
    return "\n\n".join(parts)


def _describe(w: dict) -> str:
    text = f"{w['clients']:,} clients, {w['per_round']} per round, {w['local_steps']} local steps, {w['rounds']} rounds"
    if w["mode"] == "async":
        text += f", FedBuff (buffer {w['buffer']}), one ×{w['slow_factor']} device in {w['slow_every']}"
        if w.get("churn"):
            text += ", availability churn"
    return text


def plot(data: dict, path: Path) -> None:
    """Wall time and peak memory per system, one panel pair per workload, as a multiple of EdgeSync's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = list(data["workloads"])
    fig, axes = plt.subplots(2, len(wls), figsize=(4.5 * len(wls), 6.5), squeeze=False)
    for j, w in enumerate(wls):
        runs = _by(data, w)
        systems = [s for s, rs in runs.items() if any(_ok(r) for r in rs)]
        for i, (key, label) in enumerate((("wall_s", "wall time, s"), ("peak_rss_mb", "peak memory, MB"))):
            ax = axes[i][j]
            ivs = [interval([r[key] for r in runs[s] if _ok(r)]) for s in systems]
            ax.barh(systems, [iv.mean for iv in ivs], xerr=[iv.half_width or 0 for iv in ivs],
                    color=["#1f77b4" if s in EDGESYNC else "#7f7f7f" if s == FLOOR else "#ff7f0e" for s in systems])
            ax.set_xlabel(label)
            ax.invert_yaxis()
            if i == 0:
                ax.set_title(w)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def by_mode(data: dict) -> dict[str, dict]:
    """The record split by the workloads' mode: the page has a block for the synchronous workloads (W1, W2,
    `peers:sync`) and one for the asynchronous ones (W3, W4, `peers:async`)."""
    out = {}
    for mode in sorted({w["mode"] for w in data["workloads"].values()}):
        wls = {name: w for name, w in data["workloads"].items() if w["mode"] == mode}
        out[mode] = {**data, "workloads": wls, "runs": [r for r in data["runs"] if r["workload"] in wls]}
    return out


def write_docs(data: dict, argv: str) -> None:
    from edgesync.docs_data import data_note, write_block

    for mode, part in by_mode(data).items():
        block, name = f"{BLOCK}:{mode}", f"{BLOCK}-{mode}"
        minutes = sum(r.get("wall_s", 0) for r in part["runs"]) / 60
        note = (f"_Written by `benchmarks/peers/harness.py {argv}`, {minutes:.0f} min of runs; {data_note(block)}; "
                f"the chart: docs/img/{name}.png._")
        write_block(ROOT / "docs" / "peers.md", block, note, part)
        plot(part, ROOT / "docs" / "img" / f"{name}.png")
