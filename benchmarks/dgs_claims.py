"""DGS's claims on slow links, measured: run scenarios/dgs_bandwidth.yaml and print each figure.

    .venv/bin/python benchmarks/dgs_claims.py [--runtime sim|live] [--out runs/dgs-claims]
    .venv/bin/python benchmarks/dgs_claims.py --from runs/dgs-claims      # re-read a finished run

8 (and 16) clients on 10 Mbit/s, 50 ms links; ASGD vs GD-async vs DGC-async vs DGS at 99% sparsity,
each for the same number of updates. Claims (issue 6):
- bytes per update, up and down, ≤ 3% of dense ASGD's (for every sparsified algorithm);
- DGS final accuracy within 1 pt of ASGD's;
- DGS time to 0.80 ≥ 5× faster than ASGD's on those links (the paper: 5.7× on 1 Gbps, ResNet-18);
- at 16 clients: the accuracy ordering DGS ≥ DGC-async ≥ GD-async ≥ ASGD (reported as measured).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from edgesync.runtime.runs import run_scenario
from edgesync.scenario import load_scenario

SPARSE = ("gd_async", "dgc_async", "dgs")


def row(claim: str, target: str, ours, holds) -> str:
    shown = "n/a" if ours is None else (ours if isinstance(ours, str) else f"{ours:.3g}")
    verdict = "holds" if holds else ("—" if holds is None else "DOES NOT HOLD")
    return f"| {claim} | {target} | {shown} | {verdict} |"


def per_update(s: dict, key: str) -> float:
    return s[key] / max(1, s["updates"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="sim", choices=["sim", "live"])
    ap.add_argument("--out", type=Path, default=Path("runs/dgs-claims"))
    ap.add_argument("--from", dest="reuse", type=Path, default=None, help="read a finished run folder")
    args = ap.parse_args()
    root = args.reuse or args.out
    if args.reuse is None:
        run_scenario(load_scenario("scenarios/dgs_bandwidth.yaml", [f"runtime={args.runtime}"]), root, progress=True)
    summary = json.loads((root / "summary.json").read_text())
    at = lambda n: {k.split("@")[0]: v for k, v in summary.items() if k.endswith(f"@clients={n}")}
    s8, s16 = at(8), at(16)
    asgd = s8["asgd"]
    rows = []
    for name in SPARSE:
        up = per_update(s8[name], "bytes_up") / per_update(asgd, "bytes_up")
        down = per_update(s8[name], "bytes_down") / per_update(asgd, "bytes_down")
        rows.append(row(f"{name} bytes per update ÷ ASGD's, up", "≤ 0.03", up, up <= 0.03))
        rows.append(row(f"{name} bytes per update ÷ ASGD's, down", "≤ 0.03", down, down <= 0.03))
    d = 100 * (s8["dgs"]["final_acc"] - asgd["final_acc"])
    rows.append(row("DGS final acc − ASGD final acc (pt), same updates", "≥ −1", d, d >= -1))
    t_asgd, t_dgs = asgd["time_to_target_s"], s8["dgs"]["time_to_target_s"]
    speedup = t_asgd / t_dgs if t_asgd and t_dgs else None
    rows.append(row("DGS speedup to 0.80 vs ASGD", "≥ 5 (paper: 5.7x)", speedup,
                    None if speedup is None else speedup >= 5))
    if s16:
        order = sorted(["dgs", "dgc_async", "gd_async", "asgd"], key=lambda a: -s16[a]["final_acc"])
        shown = " > ".join(f"{a} {s16[a]['final_acc']:.3f}" for a in order)
        rows.append(row("16 clients: final-accuracy ordering", "DGS ≥ DGC ≥ GD ≥ ASGD (paper)", shown,
                        order == ["dgs", "dgc_async", "gd_async", "asgd"]))
    print(f"\nDGS claims, {args.runtime} runtime (run folder {root})\n")
    print("| claim | target | ours | verdict |\n|---|---|---|---|")
    print("\n".join(rows))
    print("\n| run | final acc | time to 0.80 (s) | updates | KB up / update | KB down / update |\n|---|---|---|---|---|---|")
    for label, s in summary.items():
        t = "—" if s["time_to_target_s"] is None else f"{s['time_to_target_s']:.1f}"
        print(f"| {label} | {s['final_acc']:.3f} | {t} | {s['updates']} | {per_update(s, 'bytes_up') / 1e3:.1f} | "
              f"{per_update(s, 'bytes_down') / 1e3:.1f} |")


if __name__ == "__main__":
    main()
