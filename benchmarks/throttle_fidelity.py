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
Target: within ±5% in the shared setting. `--write-docs` puts the table into docs/benchmarks.md.
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

from edgesync.docs_block import replace_block  # noqa: E402
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
BEGIN, END = "<!-- throttle_fidelity:begin -->", "<!-- throttle_fidelity:end -->"


def one_run(clients: list[str], emulation: dict, budget: float, folder: Path) -> list[dict]:
    scenario = load_scenario({
        "name": "throttle-fidelity", "runtime": "live", "clients": clients, "emulation": emulation,
        "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 32}],
        "stop": {"time_budget_s": budget}, "eval": {"every_s": 2.0, "test_size": 2000},
        "checkpoint": {"every_updates": 0, "every_s": 0},
    }, "throttle_fidelity")
    run_scenario(scenario, folder, progress=False)
    return [json.loads(line) for line in (folder / "clients.jsonl").read_text().splitlines()]


def measure(repeats: int, budget: float, root: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for set_name, clients in SETS.items():
        for setting, emulation in SETTINGS.items():
            runs = []
            for i in range(repeats):
                folder = root / f"{len(out)}-{i}"
                runs.append(one_run(clients, emulation, budget, folder))
                print(f"  {set_name:<20} {setting:<22} run {i + 1}/{repeats}", file=sys.stderr, flush=True)
            achieved = [statistics.median(run[rank]["achieved_factor"] for run in runs) for rank in range(len(clients))]
            target = [runs[0][rank]["target_factor"] for rank in range(len(clients))]
            errors = [a / t - 1 for a, t in zip(achieved, target)]
            worst = max(range(len(clients)), key=lambda rank: abs(errors[rank]))
            out[(set_name, setting)] = {
                "achieved": achieved, "target": target, "worst_error": errors[worst], "worst_client": worst,
                "base_ms": statistics.median(run[0]["base_step_s"] or 0 for run in runs) * 1e3,
                "isolation": (runs[0][0].get("isolation") or "").split(" (")[0],
            }
    return out


def table(results: dict[tuple[str, str], dict]) -> str:
    lines = ["| clients | setting | base step (ms) | achieved factors (median of runs) | worst error | isolation |",
             "|---|---|---:|---|---:|---|"]
    for (set_name, setting), r in results.items():
        factors = ", ".join(f"{a:.2f}" for a in r["achieved"])
        base = f"{r['base_ms']:.1f}" if r["base_ms"] else "own"
        lines.append(f"| {set_name} | {setting} | {base} | {factors} | {r['worst_error']:+.1%} "
                     f"(client {r['worst_client']}) | {r['isolation'] or '–'} |")
    return "\n".join(lines)


def write_docs(text: str, note: str) -> None:
    replace_block(ROOT / "docs" / "benchmarks.md", BEGIN, END,
                  f"_Written by `benchmarks/throttle_fidelity.py --write-docs` ({note})._\n\n{text}")

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of ASGD per run")
    ap.add_argument("--write-docs", action="store_true", help="put the table into docs/benchmarks.md")
    args = ap.parse_args()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="throttle-fidelity-") as folder:
        results = measure(args.repeats, args.budget, Path(folder))
    text = table(results)
    print(text)
    shared = [r for (_, setting), r in results.items() if setting == "shared"]
    worst = max(abs(r["worst_error"]) for r in shared)
    print(f"shared setting: worst error {worst:.2%} ({'within' if worst <= 0.05 else 'OUTSIDE'} ±5%)")
    if args.write_docs:
        note = (f"{platform.node()}, {len(SETS)} client sets × {len(SETTINGS)} settings × {args.repeats} runs of "
                f"{args.budget:g} s ASGD, {(time.time() - started) / 60:.0f} min")
        write_docs(text, note)


if __name__ == "__main__":
    main()
