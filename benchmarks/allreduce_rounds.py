"""Parameter server vs ring all-reduce (esync.txt §3's two forms of GLOBAL-SUM-UPDATES): round time and
bytes per client, SSGD and ESync, 4 clients.

    .venv/bin/python benchmarks/allreduce_rounds.py [--runtime sim|live] [--seeds 0-2] [--write-docs]

Method (fixed before the first result was seen): scenarios/allreduce_rounds.yaml as it is — SSGD
(momentum 0.9) and ESync, each with `aggregation: ps` and `aggregation: allreduce`, 4 ×1 clients, 20
rounds — under three link settings: none limited; every client's link at 40 Mbit/s each way; the
coordinator's own link at 40 Mbit/s each way (`coordinator_link`). Seeds 0–2, in the simulator and live
(real processes, gloo over 127.0.0.1, the links paced by the transport and the ring's time by the same
model the simulator charges). Round time is the run's duration over its rounds (summary.json); bytes
per client per round are the algorithm's bytes up (what clients sent: updates, ring traffic, reports)
and down (what the coordinator sent) over 4 clients and 20 rounds. The all-reduce ÷ parameter-server
ratio of round times is taken within a seed, then averaged with a 95% Student-t interval and judged by the
project's one verdict rule (edgesync/metrics/verdict.py): all-reduce is faster where the interval lies below
1, slower where above, "no difference" only where it lies within 1 ± 0.05, else inconclusive.
`--write-docs` writes the table into docs/results.md (block allreduce:rounds_RUNTIME) and each seed's figures
into docs/data/allreduce-rounds_RUNTIME.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/allreduce_rounds.yaml"
CLIENTS = 4
SETTINGS = {"no limit": [],
            "clients' links 40 Mbit/s": ["--set", "links.rate_mbps=40"],
            "coordinator's link 40 Mbit/s": ["--set", "coordinator_link.rate_mbps=40"]}
ALGORITHMS = ("ssgd", "esync")
SAME_WITHIN = 0.05  # "no difference": the round-time ratio's whole interval within 1 ± 0.05
FIGURES = ("duration_s", "updates", "bytes_up", "bytes_down", "final_acc")  # what docs/data keeps of each run


def run(setting: str, runtime: str, seeds: str, out: Path) -> float:
    from timed_run import timed_run  # not at the top: docs_data imports this file without benchmarks/ on sys.path
    return timed_run(setting, [SCENARIO, "--seeds", seeds, "--set", f"runtime={runtime}", *SETTINGS[setting],
                               "--out", str(out), "--overwrite", "-q"])


def figures_of(out: Path) -> dict[str, dict[str, dict]]:
    """Each seed's runs of one setting's folder (seed → label → FIGURES), as docs/data keeps them."""
    from edgesync.metrics.seeds import by_seed

    per_seed = by_seed(json.loads((out / "summary.json").read_text()))
    return {str(seed): {label: {k: row[k] for k in FIGURES} for label, row in runs.items()}
            for seed, runs in sorted(per_seed.items())}


def render(data: dict) -> str:
    """The block's table from its record: {"runtime", "clients", "settings": {links → seed → label → FIGURES}}."""
    rows = [row for setting, per_seed in data["settings"].items()
            for row in setting_rows(setting, per_seed, data["clients"])]
    return "\n".join(["| links | algorithm | aggregation | round time (s) | MB up / client / round | "
                      "MB down / client / round | final accuracy | all-reduce ÷ PS round time [95% CI] |",
                      "|---|---|---|---:|---:|---:|---:|---|", *rows])


def setting_rows(setting: str, per_seed: dict[str, dict], clients: int) -> list[str]:
    from edgesync.metrics.seeds import interval
    from edgesync.metrics.verdict import compare, shown

    seeds = sorted(per_seed, key=int)

    def iv(values: list[float], digits: int = 2) -> str:
        i = interval(values)
        return f"{i.mean:.{digits}f} ± {i.half_width:.{digits}f}" if i.half_width is not None else f"{i.mean:.{digits}f}"

    def per_round(row: dict, key: str) -> float:
        return row[key] / clients / row["updates"] / 1e6

    rows = []
    for algorithm in ALGORITHMS:
        runs = {form: [per_seed[s][f"{algorithm}-{form}"] for s in seeds] for form in ("ps", "allreduce")}
        decided = compare([r["duration_s"] / p["duration_s"] for p, r in zip(runs["ps"], runs["allreduce"])],
                          1.0, SAME_WITHIN, lower="all-reduce faster", higher="all-reduce slower")
        for form in ("ps", "allreduce"):
            r = runs[form]
            cells = [setting, algorithm, form, iv([x["duration_s"] / x["updates"] for x in r], 3),
                     iv([per_round(x, "bytes_up") for x in r]), iv([per_round(x, "bytes_down") for x in r], 3),
                     iv([x["final_acc"] for x in r], 3)]
            if form == "allreduce":
                cells.append(shown(decided))
            else:
                cells.append("")
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--runtime", choices=("sim", "live"), default="sim")
    ap.add_argument("--runs", default=None, help="parent of the run folders (default runs/allreduce-RUNTIME)")
    ap.add_argument("--from-runs", action="store_true", help="re-read finished run folders")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from edgesync.docs_data import data_note, write_block
    from edgesync.reproduce import machine

    parent = ROOT / (args.runs or f"runs/allreduce-{args.runtime}")
    parent.mkdir(parents=True, exist_ok=True)
    record = parent / "walls.json"
    walls = json.loads(record.read_text()) if record.exists() else {}
    settings = {}
    for i, setting in enumerate(SETTINGS):
        out = parent / f"setting-{i}"
        if not args.from_runs:
            walls[setting] = run(setting, args.runtime, args.seeds, out)
            record.write_text(json.dumps(walls))
        settings[setting] = figures_of(out)
    data = {"runtime": args.runtime, "clients": CLIENTS, "settings": settings}
    block = f"allreduce:rounds_{args.runtime}"
    minutes = sum(walls.get(s, 0.0) for s in SETTINGS) / 60
    clock = "virtual seconds" if args.runtime == "sim" else "seconds of wall clock"
    head = (f"_Written by `benchmarks/allreduce_rounds.py --runtime {args.runtime} --seeds {args.seeds} "
            f"--write-docs`, {minutes:.0f} min of runs, machine: {machine()}; round time in {clock}, MB per "
            f"client per round, mean ± half-width of the 95% t-interval over the seeds; {data_note(block)}._")
    print(head + "\n\n" + render(data))
    if args.write_docs:
        write_block(ROOT / "docs/results.md", block, head, data)


if __name__ == "__main__":
    main()
