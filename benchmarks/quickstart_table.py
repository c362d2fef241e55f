"""The README's quick-start table, from real runs of `make quickstart`'s scenario on this machine.

    .venv/bin/python benchmarks/quickstart_table.py [--runs 2] [--write-docs]

Each run is `edgesync run scenarios/quickstart.yaml` as the quick start runs it (live, four client processes,
the budget in base steps). Per entry the table gives the range over the runs of the time to 0.80, the samples
per second, the fast clients' compute-time ratio, and the ×10 client's achieved factor; the note under it
names the machine and the shared base step each run measured. `--write-docs` puts it into README.md between
`<!-- quickstart:begin -->` and `<!-- quickstart:end -->`, and the runs' figures into docs/data/quickstart.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402

BLOCK = "quickstart"
# What the table reads of each run: per entry of summary.json, and per client of clients.jsonl.
ENTRY_FIGURES = ("time_to_target_s", "samples_per_s")
CLIENT_FIGURES = ("algorithm", "profile", "target_factor", "compute_s", "wall_s", "achieved_factor", "base_step_s")


def span(values: list[float], fmt: str) -> str:
    """'42–52' or '47' (one value, or all equal), each formatted with `fmt`."""
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low}–{high}"


def read(run: Path) -> dict:
    """What the table reads of one run folder: docs/data/quickstart.json keeps one of these per run."""
    clients = [json.loads(line) for line in (run / "clients.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((run / "summary.json").read_text())
    return {"summary": {label: {k: entry[k] for k in ENTRY_FIGURES} for label, entry in summary.items()},
            "clients": [{k: c.get(k) for k in CLIENT_FIGURES} for c in clients]}


def base_steps(runs: list[dict]) -> list[float]:
    """The shared base steps the runs measured, in ms."""
    return sorted({round(1e3 * c["base_step_s"], 2) for run in runs for c in run["clients"]
                   if isinstance(c.get("base_step_s"), float)})


def render(runs: list[dict]) -> str:
    """The table from the runs' figures (as read() gives them and docs/data/quickstart.json keeps them)."""
    per_run = [(run["summary"], run["clients"]) for run in runs]
    labels = list(per_run[0][0])
    lines = ["| | time to 0.80 | samples/s | compute-time ratio, fast clients | ×10 client, achieved × |",
             "|---|---:|---:|---:|---:|"]
    for label in labels:
        times = [s[label]["time_to_target_s"] for s, _ in per_run]
        reached = [t for t in times if t is not None]
        time_text = (span(reached, ".0f") + " s") if len(reached) == len(times) else \
            f"reached in {len(reached)}/{len(times)} runs" + (f" ({span(reached, '.0f')} s)" if reached else "")
        fast = [c["compute_s"] / c["wall_s"] for _, clients in per_run for c in clients
                if c["algorithm"] == label and c.get("target_factor") == 1.0 and c.get("wall_s")]
        slow = [c["achieved_factor"] for _, clients in per_run for c in clients
                if c["algorithm"] == label and c.get("profile") == "x10" and c.get("achieved_factor")]
        lines.append(f"| {label.upper()} | {time_text} | {span([s[label]['samples_per_s'] for s, _ in per_run], ',.0f')} "
                     f"| {span([statistics.median(fast)], '.2f') if fast else 'n/a'} | {span(slow, '.2f') if slow else 'n/a'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--from", dest="reuse", type=Path, default=None, help="re-read the run folders run-0, run-1, … "
                    "of an earlier call (its temporary folder, printed at the end)")
    args = ap.parse_args()
    from edgesync.reproduce import machine
    from timed_run import timed_run  # benchmarks/ is on sys.path only when this file runs as a script
    root = args.reuse or Path(tempfile.mkdtemp(prefix="quickstart-table-"))
    runs = []
    for i in range(args.runs):
        out = root / f"run-{i}"
        if args.reuse is None:
            timed_run(f"quick start {i + 1}/{args.runs}", ["scenarios/quickstart.yaml", "--out", str(out), "-q"])
        runs.append(out)
    print(f"run folders: {root}", file=sys.stderr)
    data = [read(run) for run in runs]
    note = (f"_Written by `benchmarks/quickstart_table.py --runs {args.runs} --write-docs` on {time.strftime('%Y-%m-%d')}"
            f": {args.runs} runs of `make quickstart`'s scenario; machine: {machine()}; shared base step "
            f"{', '.join(f'{b:.2f}' for b in base_steps(data))} ms. Ranges over the runs; the budget is 4,000 base steps; "
            f"{data_note(BLOCK)}._")
    print(note + "\n\n" + render(data))
    if args.write_docs:
        write_block(ROOT / "README.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
