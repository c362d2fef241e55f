"""ESync's claims, measured: run the ESync scenarios and print each figure beside its target.

    .venv/bin/python benchmarks/esync_claims.py [--runtime sim|live] [--out runs/esync-claims]
    .venv/bin/python benchmarks/esync_claims.py --from runs/esync-claims   # re-read finished runs

Runs scenarios/esync_fmnist_iid.yaml, esync_fmnist_noniid.yaml and stragglers.yaml (the ×100
straggler) in the chosen runtime and checks, from their run folders (issue 4's figures):
- i.i.d., one ×10 straggler: ESync's time to 0.80 ≤ SSGD's / 5, final accuracy ≥ SSGD's − 0.5 pt;
- one ×100 straggler: ESync's time to 0.80 ≤ SSGD's / 20;
- non-i.i.d.: ESync's final accuracy ≥ ASGD's;
- traffic: ESync's bytes per second ≤ ASGD's / 5;
- fast clients' compute-time ratio ≥ 0.8 under ESync, and the straggler's mean blocking time per
  round < one of its own steps; under SSGD the fast clients' ratio is low.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from edgesync.reproduce.claims import ESYNC_NONIID, ESYNC_SPEEDUP, ESYNC_TRAFFIC, Claim
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

SCENARIOS = {"iid": "scenarios/esync_fmnist_iid.yaml", "noniid": "scenarios/esync_fmnist_noniid.yaml",
             "stragglers": "scenarios/stragglers.yaml"}


def load(run: Path) -> tuple[dict, list[dict], list[dict]]:
    summary = json.loads((run / "summary.json").read_text())
    clients = [json.loads(x) for x in (run / "clients.jsonl").read_text().splitlines()]
    updates = [json.loads(x) for x in (run / "updates.jsonl").read_text().splitlines()] \
        if (run / "updates.jsonl").exists() else []
    return summary, clients, updates


def ratio(clients: list[dict], label: str, fast: bool) -> float:
    rows = [c for c in clients if c["algorithm"] == label and (c["profile"] == "x1") == fast and c["wall_s"]]
    return sum(c["compute_s"] / c["wall_s"] for c in rows) / len(rows)


def straggler_blocking(updates: list[dict], clients: list[dict], label: str) -> tuple[float, float]:
    """(mean blocking per round, mean step time) of the slowest-profile client under `label`."""
    rows = [c for c in clients if c["algorithm"] == label]
    slow = max(rows, key=lambda c: c["compute_s"] / max(1, c["steps"]))
    blocks = [u["blocking_s"] for u in updates if u["algorithm"] == label and u["client"] == slow["client"]]
    return sum(blocks) / len(blocks), slow["compute_s"] / slow["steps"]


def check(name: str, ours: float | None, target: str, meets: bool | None) -> str:
    """One run against a target: whether it meets it, not a verdict (one run decides nothing: `edgesync
    reproduce` decides the claims over seeds with the project's one verdict rule, edgesync/metrics/verdict.py)."""
    shown = "n/a" if ours is None else f"{ours:.3g}"
    side = "meets it" if meets else ("—" if meets is None else "MISSES IT")
    return f"| {name} | {target} | {shown} | {side} |"


def claim_check(claim: Claim, rows: dict, paper: bool = True) -> str:
    """A claim as edgesync/reproduce/claims.py defines it, measured on one run's entries (label → summary row)."""
    value = claim.measure(rows)
    target = claim.target + (f" (paper: {claim.paper_figure})" if paper else "")
    return check(claim.text, value, target, None if value is None else claim.holds(value))


def div(a, b):
    return None if a is None or b is None or b == 0 else a / b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="sim", choices=["sim", "live"])
    ap.add_argument("--out", type=Path, default=Path("runs/esync-claims"))
    ap.add_argument("--from", dest="reuse", type=Path, default=None, help="read finished runs from here")
    ap.add_argument("--only", default="iid,noniid,stragglers",
                    help="comma-separated subset to run (live, the x100 case alone takes ~20 min)")
    args = ap.parse_args()
    root = args.reuse or args.out
    if args.reuse is None:
        for key, path in SCENARIOS.items():
            if key not in args.only.split(","):
                continue
            overrides = [f"runtime={args.runtime}"]
            if key == "stragglers":
                overrides.append("sweep={clients.3.profile: [x100]}")
            run_scenario(load_scenario(path, overrides), root / key, progress=True)
    iid, iid_clients, iid_updates = load(root / "iid")
    noniid, _, _ = load(root / "noniid")
    strag = load(root / "stragglers")[0] if (root / "stragglers" / "summary.json").exists() else {}
    s100 = {k.split("@")[0]: v for k, v in strag.items() if k.endswith("profile=x100")}
    t = lambda s, a: s[a]["time_to_target_s"]
    sp100 = div(t(s100, "ssgd"), t(s100, "esync")) if "ssgd" in s100 and "esync" in s100 else None
    block, step = straggler_blocking(iid_updates, iid_clients, "esync")
    rows = [
        claim_check(ESYNC_SPEEDUP, iid),
        check("ESync speedup to 0.80 vs SSGD at its tuned lr, one x10 straggler",
              div(t(iid, "ssgd-tuned"), t(iid, "esync")) if "ssgd-tuned" in iid else None, "(reported)", None),
        check("ESync final acc − SSGD final acc (pt)", 100 * (iid["esync"]["final_acc"] - iid["ssgd"]["final_acc"]),
              "≥ −0.5", iid["esync"]["final_acc"] >= iid["ssgd"]["final_acc"] - 0.005),
        check("ESync speedup to 0.80 vs SSGD, one x100 straggler", sp100, "≥ 20",
              None if sp100 is None else sp100 >= 20),
        claim_check(ESYNC_NONIID, noniid, paper=False),
        claim_check(ESYNC_TRAFFIC, iid),
        check("fast clients' compute-time ratio, ESync", ratio(iid_clients, "esync", True), "≥ 0.8",
              ratio(iid_clients, "esync", True) >= 0.8),
        check("fast clients' compute-time ratio, SSGD", ratio(iid_clients, "ssgd", True), "low (paper Fig. 5)",
              ratio(iid_clients, "ssgd", True) < 0.5),
        check("straggler's blocking per round ÷ its step time, ESync", block / step, "< 1", block < step),
    ]
    print(f"\nESync claims, {args.runtime} runtime (run folders in {root})\n")
    print("| claim | target | ours | this run (one seed: not a verdict) |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
