"""Emulation fidelity with clients sharing this machine: is a ×k client k times slower than the ×1 clients?

    .venv/bin/python benchmarks/throttle_fidelity.py [--repeats 3] [--budget 20] [--write-docs]

Method (fixed before the first result was seen): each client set runs as a real live run (`edgesync run`:
one process per client and the coordinator, on this machine's cores), ASGD so that every client steps
continuously, in three settings:
- shared:            `emulation.mode: shared` with the default isolation (a cgroup CPU quota as root here);
- shared, no isolation: the same base step, `emulation.isolation: none` (pacing by sleeping alone);
- undisturbed (old): each client throttled against its own undisturbed step, ×1 clients unthrottled —
  the behaviour before issue 18.
A client's achieved factor is the one clients.jsonl records: its median step time over the median step of
the fastest profile's clients in the same run (metrics/fidelity.py). Each setting runs `--repeats`
times; a client's figure is the median over the repeats, and a set's error the worst client's.
Target: within ±5% in the shared setting. `--write-docs` puts the table into docs/benchmarks.md and each
run's per-client figures into docs/data/throttle_fidelity.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402
from edgesync.runtime.runs import run_scenario  # noqa: E402
from edgesync.config import load_scenario  # noqa: E402

SETS = {
    "×1,×1,×1,×10": ["x1", "x1", "x1", "x10"],
    "×1,×1,×1,×100": ["x1", "x1", "x1", "x100"],
    "×1,×1,×3,×7,×30,×1": ["x1", "x1", "x3", "x7", "x30", "x1"],
}
SETTINGS = {
    "shared": {},
    "shared, no isolation": {"isolation": "none"},
    "undisturbed (old)": {"mode": "undisturbed", "isolation": "none"},
}
BLOCK = "throttle_fidelity"


def one_run(clients: list[str], emulation: dict, budget: float, folder: Path) -> list[dict]:
    scenario = load_scenario({
        "name": "throttle-fidelity", "runtime": "live", "clients": clients, "emulation": emulation,
        "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 32}],
        "stop": {"time_budget_s": budget}, "eval": {"every_s": 2.0, "test_size": 2000},
        "checkpoint": {"every_updates": 0, "every_s": 0},
    }, source="throttle_fidelity")
    run_scenario(scenario, folder, progress=False)
    return [json.loads(line) for line in (folder / "clients.jsonl").read_text().splitlines()]


def run_figures(rows: list[dict]) -> dict:
    """What the table needs of one run's clients.jsonl: each client's achieved and target factor, the base step."""
    return {"achieved": [row["achieved_factor"] for row in rows], "target": [row["target_factor"] for row in rows],
            "base_step_s": rows[0]["base_step_s"], "isolation": rows[0].get("isolation")}


def measure(repeats: int, budget: float, root: Path) -> list[dict]:
    """Each client set × setting with its runs' figures, in the table's order."""
    out = []
    for set_name, clients in SETS.items():
        for setting, emulation in SETTINGS.items():
            runs = []
            for i in range(repeats):
                folder = root / f"{len(out)}-{i}"
                runs.append(run_figures(one_run(clients, emulation, budget, folder)))
                print(f"  {set_name:<20} {setting:<22} run {i + 1}/{repeats}", file=sys.stderr, flush=True)
            out.append({"clients": set_name, "setting": setting, "runs": runs})
    return out


def summary(runs: list[dict]) -> dict:
    """A set's figures over its runs: each client's median achieved factor, and the worst client's error."""
    achieved = [statistics.median(run["achieved"][rank] for run in runs) for rank in range(len(runs[0]["achieved"]))]
    errors = [a / t - 1 for a, t in zip(achieved, runs[0]["target"])]
    worst = max(range(len(errors)), key=lambda rank: abs(errors[rank]))
    return {
        "achieved": achieved, "worst_error": errors[worst], "worst_client": worst,
        "base_ms": statistics.median(run["base_step_s"] or 0 for run in runs) * 1e3,
        "isolation": (runs[0]["isolation"] or "").split(" (")[0],
    }


def render(data: list[dict]) -> str:
    """The block's table from the runs' figures (as docs/data/throttle_fidelity.json keeps them)."""
    lines = ["| clients | setting | base step (ms) | achieved factors (median of runs) | worst error | isolation |",
             "|---|---|---:|---|---:|---|"]
    for entry in data:
        r = summary(entry["runs"])
        factors = ", ".join(f"{a:.2f}" for a in r["achieved"])
        base = f"{r['base_ms']:.1f}" if r["base_ms"] else "own"
        lines.append(f"| {entry['clients']} | {entry['setting']} | {base} | {factors} | {r['worst_error']:+.1%} "
                     f"(client {r['worst_client']}) | {r['isolation'] or '–'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of ASGD per run")
    ap.add_argument("--write-docs", action="store_true", help="put the table into docs/benchmarks.md")
    args = ap.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="throttle-fidelity-") as folder:
        data = measure(args.repeats, args.budget, Path(folder))
    print(render(data))
    worst = max(abs(summary(entry["runs"])["worst_error"]) for entry in data if entry["setting"] == "shared")
    print(f"shared setting: worst error {worst:.2%} ({'within' if worst <= 0.05 else 'OUTSIDE'} ±5%)")
    if args.write_docs:
        note = (f"_Written by `benchmarks/throttle_fidelity.py --write-docs` ({platform.node()}, {len(SETS)} client "
                f"sets × {len(SETTINGS)} settings × {args.repeats} runs of {args.budget:g} s ASGD, "
                f"{(time.time() - started) / 60:.0f} min); {data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
