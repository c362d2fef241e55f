"""The simulator's 100-client scenario (scenarios/sim_100_clients.yaml) as `edgesync run` runs it, with its wall time.

    .venv/bin/python benchmarks/sim_100_clients.py [--set KEY=VALUE ...] [--write-docs]

One `edgesync run scenarios/sim_100_clients.yaml` in a fresh process (its base step measured on this machine, or
taken from the cache, as any run: the run folder's scenario.yaml records which), timed as a user waits for it,
with the peak RSS of that process. Per entry the table gives report.md's figures (final and best accuracy, time
to the target in virtual seconds, updates, MB sent up); under it, the wall time and peak RSS, the base step the
run used, SSGD's round (the ×10 client's time from step to step), how many times SSGD's updates per virtual
second ASGD applies, and each entry's compute ratio per device profile. `--write-docs` puts it into
docs/simulator.md (`sim_100_clients:table`, "A 100-client scenario") and the run's figures into
docs/data/sim_100_clients-table.json.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402

BLOCK = "sim_100_clients:table"
SCENARIO = "scenarios/sim_100_clients.yaml"
SUMMARY = ("final_acc", "best_acc", "time_to_target_s", "target_acc", "updates", "bytes_up", "duration_s")


def read(folder: Path) -> dict:
    """What the block reads of the run folder."""
    import yaml

    summary = json.loads((folder / "summary.json").read_text())
    clients = [json.loads(line) for line in (folder / "clients.jsonl").read_text().splitlines() if line.strip()]
    sim = yaml.safe_load((folder / "scenario.yaml").read_text())["sim"]
    entries = {}
    for label, s in summary.items():
        mine = [c for c in clients if c["algorithm"] == label]
        ratios: dict[str, list[float]] = {}
        for c in mine:
            if c.get("wall_s"):
                ratios.setdefault(c["profile"], []).append(c["compute_s"] / c["wall_s"])
        slow = [c for c in mine if c["profile"] == "x10" and c.get("steps")]
        entries[label] = {**{k: s.get(k) for k in SUMMARY},
                          "compute_ratio": {p: statistics.median(v) for p, v in ratios.items()},
                          "slow_step_s": statistics.median(c["wall_s"] / c["steps"] for c in slow) if slow else None}
    return {"entries": entries, "base_step_s": sorted({c["base_step_s"] for c in clients if c.get("base_step_s")}),
            "measured_step_s": sim.get("measured_step_s") or {}, "calibration": sim.get("calibration") or {}}


def _factor(profile: str) -> tuple[float, str]:
    """A profile's sort key: 'x10' after 'x2'; other names after every factor."""
    try:
        return float(profile.removeprefix("x")), profile
    except ValueError:
        return float("inf"), profile


def render(data: dict) -> str:
    """The table and the lines under it, from the run's figures (as docs/data/sim_100_clients-table.json keeps them)."""
    entries = data["run"]["entries"]
    target = next(iter(entries.values()))["target_acc"]
    lines = [f"| Entry | Final acc. | Best acc. | Time to {100 * target:g} % (virtual s) | Updates | MB up |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, e in entries.items():
        reached = "not reached" if e["time_to_target_s"] is None else f"{e['time_to_target_s']:.1f}"
        lines.append(f"| `{label}` | {100 * e['final_acc']:.1f} % | {100 * e['best_acc']:.1f} % | {reached} "
                     f"| {e['updates']:,} | {e['bytes_up'] / 1e6:,.0f} |")
    base = ", ".join(f"{1e3 * b:.2f}" for b in data["run"]["base_step_s"])
    notes = [f"Wall time {data['wall_s']:.0f} s, peak RSS {data['peak_rss_mb']:,.0f} MB; base step {base} ms."]
    ssgd = next((e for label, e in entries.items() if label.startswith("ssgd")), None)
    asgd = next((e for label, e in entries.items() if label.startswith("asgd")), None)
    if ssgd and ssgd["slow_step_s"]:
        notes.append(f"SSGD's round (a ×10 client's step to step): {ssgd['slow_step_s']:.3f} virtual s.")
    if ssgd and asgd and ssgd["updates"] and ssgd["duration_s"] and asgd["duration_s"]:
        ratio = (asgd["updates"] / asgd["duration_s"]) / (ssgd["updates"] / ssgd["duration_s"])
        notes.append(f"ASGD applies {ratio:.1f} times as many updates per virtual second as SSGD.")
    for label, e in entries.items():
        shares = ", ".join(f"{p} {r:.2f}" for p, r in sorted(e["compute_ratio"].items(), key=lambda kv: _factor(kv[0])))
        notes.append(f"`{label}`'s compute ratio (median per profile): {shares}.")
    return "\n".join(lines + [""] + [" ".join(notes)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override, as `edgesync run`")
    ap.add_argument("--write-docs", action="store_true", help="write the block into docs/simulator.md")
    args = ap.parse_args()
    from edgesync.reproduce import machine

    with tempfile.TemporaryDirectory(prefix="sim-100-clients-") as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "edgesync.cli", "run", SCENARIO, "--out", str(out), "-q",
               *[x for s in args.set for x in ("--set", s)]]
        print(" ".join(cmd[3:]), file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"the run failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6  # KiB on Linux; the run's process
        data = {"scenario": SCENARIO, "set": args.set, "wall_s": wall, "peak_rss_mb": peak, "run": read(out)}
    text = render(data)
    print(text)
    if args.write_docs:
        sets = "".join(f" --set {s}" for s in args.set)
        note = (f"_Written by `benchmarks/sim_100_clients.py{sets} --write-docs` on {time.strftime('%Y-%m-%d')} "
                f"({machine()}; one run of `edgesync run {SCENARIO}`; {wall / 60:.1f} min); {data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "simulator.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
