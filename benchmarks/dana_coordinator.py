"""DANA-DC with a coordinator that keeps up and with one that does not (issue 32's question), in the simulator.

    .venv/bin/python benchmarks/dana_coordinator.py [--seeds 0-2] [--write-docs]
    .venv/bin/python benchmarks/dana_coordinator.py --live-check [--write-docs]

Method (fixed before its first result): scenarios/dana_scale.yaml's DANA-DC entry (lr 0.01, momentum 0.9,
warm-up 0.5 epoch, 2,500 updates, evaluation every 0.5 virtual s on 2,000 test images) in four cases —
16 `gamma-homo` workers (the paper's Table 1), and 8, 16 and 24 `gamma-hetero` workers (Table 5; 24 is where
the issue saw DANA-DC diverge) — each under `sim.server_time: zero` (a coordinator that costs nothing: the
paper's simulated cluster, App. B.3) and `model` (the coordinator's measured work on this machine charged in
virtual time, the simulator's default), over seeds 0–2. Per case and mode: the final accuracy (mean and 95%
t-interval), how many seeds ended below 0.5 (diverged or collapsed), the lag (mean, 95th percentile over
every update of every seed, from updates.jsonl), and the coordinator's utilisation, mean queueing delay and
updates served per second (summary.json). The effect of the coordinator is the per-seed difference of final
accuracy, model − zero, with its 95% interval: "lowers" when the interval lies wholly below 0, "raises"
when wholly above, else "no clear effect". `--write-docs` puts the table into docs/results.md (block
dana_coordinator) and each seed's figures, its lags as counts per lag, into docs/data/dana_coordinator.json.

Live check (`--live-check`, fixed with the method above): is the simulator's queue the live coordinator's?
scenarios/dana_saturated.yaml runs live (24 ×1 clients at batch 4 as slots of two processes, so that they
offer more updates than the coordinator serves on 2 cores), then in the simulator with the live run's
measured base step (clients.jsonl's base_step_s) and the coordinator's service time per update the live run
showed (utilisation ÷ updates served per second, charged as `apply`). Compared: updates, final accuracy, the
lag's distribution (mean, median, 95th percentile, max over the updates after the first 200), utilisation,
mean queueing delay and updates served per second. One run each: a check of the queue's shape, not a
figure with an interval. `--write-docs` puts the table into docs/results.md (block dana_coordinator:live) and
both runs' figures into docs/data/dana_coordinator-live.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/dana_scale.yaml"
ENTRY = "algorithms=[{name: dana_dc, lr: 0.01, momentum: 0.9, warmup_epochs: 0.5}]"
# The live check's lags leave out the first updates: the queue is still filling (every client's first update
# comes with lag 0 to a few), and the question is the saturated queue's shape.
WARM_UP_UPDATES = 200
CASES = ((16, "gamma-homo"), (8, "gamma-hetero"), (16, "gamma-hetero"), (24, "gamma-hetero"))
MODES = ("zero", "model")
COLLAPSED = 0.5  # a final accuracy below this is a diverged or collapsed run (the one-worker run ends ≈ 0.87)


def sweep() -> str:
    return "sweep={clients: [" + ", ".join(f"{{count: {n}, profile: {p}}}" for n, p in CASES) + "]}"


def run(mode: str, seeds: str, out: Path) -> float:
    from timed_run import timed_run  # not at the top: docs_data imports this file without benchmarks/ on sys.path
    return timed_run(f"server_time={mode}", [SCENARIO, "--set", sweep(), "--set", ENTRY, "--set",
                                             f"sim.server_time={mode}", "--seeds", seeds, "--out", str(out),
                                             "--overwrite", "-q"])


def case_of(label: str) -> tuple[int, str]:
    """'dana_dc@clients=16×gamma-homo,seed=0' → (16, 'gamma-homo')."""
    parts = dict(p.split("=", 1) for p in label.split("@", 1)[1].split(","))
    count, profile = parts["clients"].split("×")
    return int(count), profile


def lag_counts(out: Path) -> dict[tuple[tuple[int, str], int | None], Counter]:
    """How many applied updates had each lag, per case and seed."""
    from edgesync.metrics.seeds import split_seed

    found: dict[tuple[tuple[int, str], int | None], Counter] = {}
    with open(out / "updates.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if "lag" in row and "@" in row["algorithm"]:
                key = (case_of(row["algorithm"]), split_seed(row["algorithm"])[1])
                found.setdefault(key, Counter())[row["lag"]] += 1
    return found


def counted(lags: Counter) -> dict[str, int]:
    """Lag → count as JSON keeps it, in lag order."""
    return {str(lag): n for lag, n in sorted(lags.items())}


def every_lag(counts: list[dict[str, int]]) -> list[int]:
    """The lags behind stored counts, one per update, in lag order."""
    pooled = Counter()
    for c in counts:
        pooled.update({int(lag): n for lag, n in c.items()})
    return sorted(pooled.elements())


def p95(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]  # nearest rank


def case_runs(outs: dict[str, Path]) -> list[dict]:
    """The record of the two run folders (mode → folder): per case, per mode, per seed its summary figures
    and its lags' counts."""
    from edgesync.metrics.seeds import by_seed

    per: dict[tuple[str, tuple[int, str]], dict[str, dict]] = {}  # (mode, case) → {seed: figures}
    for mode, out in outs.items():
        lags = lag_counts(out)
        for seed, rows in sorted(by_seed(json.loads((out / "summary.json").read_text())).items()):
            for label, row in rows.items():
                case = case_of(label)
                per.setdefault((mode, case), {})[str(seed)] = {
                    "final_acc": row["final_acc"],
                    "coordinator_utilisation": row.get("coordinator_utilisation", 0.0),
                    "queue_delay_mean_s": row.get("queue_delay_mean_s", 0.0),
                    "updates_served_per_s": row.get("updates_served_per_s", row["updates_per_s"]),
                    "lags": counted(lags.get((case, seed), Counter()))}
    return [{"workers": n, "profile": profile, **{mode: per[(mode, (n, profile))] for mode in MODES}}
            for n, profile in CASES]


def render(data: dict) -> str:
    """The block's table from its record: {"cases": [{"workers", "profile", MODE: {seed: {"final_acc",
    "coordinator_utilisation", "queue_delay_mean_s", "updates_served_per_s", "lags": {lag: count}}}}]}."""
    from edgesync.metrics.seeds import interval

    def iv(values: list[float], digits: int = 3) -> str:
        i = interval(values)
        return f"{i.mean:.{digits}f} ± {i.half_width:.{digits}f}" if i.half_width is not None else f"{i.mean:.{digits}f}"

    lines = ["| workers | server_time | final acc, seed by seed (mean ± 95% CI) | below 0.5 | lag mean / p95 | coordinator busy | queueing delay "
             "| updates served/s | model − zero, final acc [95% CI] |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for case in data["cases"]:
        zero, model = case["zero"], case["model"]
        seeds = sorted(set(zero) & set(model), key=int)
        diff = interval([model[s]["final_acc"] - zero[s]["final_acc"] for s in seeds])
        effect = ("lowers" if diff.high is not None and diff.high < 0 else
                  "raises" if diff.low is not None and diff.low > 0 else "no clear effect")
        for mode in MODES:
            rows = [case[mode][s] for s in seeds]
            acc = [r["final_acc"] for r in rows]
            ls = every_lag([r["lags"] for r in case[mode].values()]) or [0]  # over every seed's updates
            busy = iv([r["coordinator_utilisation"] for r in rows], 2)
            delay = iv([1e3 * r["queue_delay_mean_s"] for r in rows], 1) + " ms"
            served = iv([r["updates_served_per_s"] for r in rows], 0)
            last = (f"{diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]: {effect}"
                    if mode == "model" and diff.low is not None else "")
            each = ", ".join(f"{a:.3f}" for a in acc)
            lines.append(f"| {case['workers']} {case['profile']} | {mode} | {each} ({iv(acc)}) | "
                         f"{sum(a < COLLAPSED for a in acc)} of {len(acc)} | {sum(ls) / len(ls):.1f} / {p95(ls)} | "
                         f"{busy} | {delay} | {served} | {last} |")
    return "\n".join(lines)


def live_check() -> dict:
    """The saturated scenario live, then simulated at the offered load the live run measured: their record."""
    from timed_run import timed_run

    live, sim = ROOT / "runs/dana-saturated/live", ROOT / "runs/dana-saturated/sim"
    timed_run("live", ["scenarios/dana_saturated.yaml", "--out", str(live), "--overwrite", "-q"])
    measured = json.loads((live / "summary.json").read_text())["dana_dc"]
    service = measured["coordinator_utilisation"] / measured["updates_served_per_s"]
    with open(live / "clients.jsonl") as f:
        base = json.loads(f.readline())["base_step_s"]
    costs = f"{{dana_dc: {{decode_update: 0, collect: {service:.6f}, apply: {service:.6f}, encode_send: 0, query: 0}}}}"
    timed_run("sim", ["scenarios/dana_saturated.yaml", "--runtime", "sim", "--set", f"sim.base_step_s={base:.6f}",
                      "--set", f"sim.measured_server_s={costs}", "--out", str(sim), "--overwrite", "-q"])
    return {"base_step_s": base, "service_s": service, "runs": {"live": saturated_run(live), "sim": saturated_run(sim)}}


def saturated_run(out: Path) -> dict:
    """One run of the live check as docs/data keeps it: its summary figures and its lags' counts."""
    row = json.loads((out / "summary.json").read_text())["dana_dc"]
    with open(out / "updates.jsonl") as f:  # in the order the updates were applied
        lags = [r["lag"] for r in map(json.loads, f) if "lag" in r]
    return {**{k: row[k] for k in ("updates", "final_acc", "coordinator_utilisation", "queue_delay_mean_s",
                                   "updates_served_per_s")}, "lags": counted(Counter(lags[WARM_UP_UPDATES:]))}


def render_live(data: dict) -> str:
    """The live check's block from its record: {"base_step_s", "service_s", "runs": {"live" | "sim": {"updates",
    "final_acc", "coordinator_utilisation", "queue_delay_mean_s", "updates_served_per_s", "lags": {lag: count}}}} (the lags of
    the updates after the first WARM_UP_UPDATES)."""
    lines = [f"Offered load: 24 clients at a base step of {1e3 * data['base_step_s']:.1f} ms; the coordinator's "
             f"service time per update, measured live: {1e3 * data['service_s']:.2f} ms.", "",
             "| runtime | updates | final acc | lag mean / median / p95 / max | coordinator busy | queueing delay "
             "| updates served/s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, row in data["runs"].items():
        ls = every_lag([row["lags"]])  # the updates after the first WARM_UP_UPDATES (saturated_run)
        lines.append(f"| {name} | {row['updates']} | {row['final_acc']:.3f} | {sum(ls) / len(ls):.1f} / "
                     f"{ls[len(ls) // 2]} / {p95(ls)} / {ls[-1]} | {row['coordinator_utilisation']:.2f} | "
                     f"{1e3 * row['queue_delay_mean_s']:.0f} ms | {row['updates_served_per_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--runs", default="runs/dana-coordinator", help="parent of the two run folders")
    ap.add_argument("--from-runs", action="store_true", help="re-read finished run folders")
    ap.add_argument("--live-check", action="store_true", help="the live coordinator against the simulator's queue")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from edgesync.docs_data import data_note, write_block
    from edgesync.reproduce import machine

    if args.live_check:
        data, block = live_check(), "dana_coordinator:live"
        head = (f"_Written by `benchmarks/dana_coordinator.py --live-check --write-docs`, machine: {machine()}; "
                f"one run each; {data_note(block)}._")
        print(head + "\n\n" + render_live(data))
        if args.write_docs:
            write_block(ROOT / "docs/results.md", block, head, data)
        return

    outs = {mode: ROOT / args.runs / mode for mode in MODES}
    record = ROOT / args.runs / "walls.json"
    walls = json.loads(record.read_text()) if record.exists() else {}
    for mode, out in outs.items():
        if not args.from_runs:
            walls[mode] = run(mode, args.seeds, out)
            record.write_text(json.dumps(walls))
    data, block = {"cases": case_runs(outs)}, "dana_coordinator"
    head = (f"_Written by `benchmarks/dana_coordinator.py --seeds {args.seeds} --write-docs`, "
            f"{sum(walls.values()) / 60:.0f} min of runs, machine: {machine()}; DANA-DC, 2,500 updates, seeds "
            f"{args.seeds}; mean ± half-width of the 95% t-interval over the seeds; the coordinator's costs "
            f"(`model`) as measured on this machine and recorded in each run's scenario.yaml; {data_note(block)}._")
    print(head + "\n\n" + render(data))
    if args.write_docs:
        write_block(ROOT / "docs/results.md", block, head, data)


if __name__ == "__main__":
    main()
