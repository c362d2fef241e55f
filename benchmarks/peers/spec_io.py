"""The torch-free part of every runner's helpers (issue 38): the spec's tested rounds, the result file, timing
and the command line. common.py re-exports them beside the data and the model."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def eval_rounds(spec: dict) -> set[int]:
    """The rounds after which the global model is tested: every `eval_every`-th and the last."""
    return set(range(spec["eval_every"], spec["rounds"] + 1, spec["eval_every"])) | {spec["rounds"]}


def result(peer: str, version: str, curve: list[dict], spec: dict, **extra) -> dict:
    """The runner's result: its curve (`round`, `acc`, `loss`, and `sim_time_s` on a virtual clock), the final
    accuracy, the virtual time to the spec's target accuracy (None: not reached or no virtual clock)."""
    final = curve[-1]["acc"] if curve else None
    reach = next((p.get("sim_time_s") for p in curve if p["acc"] >= spec["target_acc"]), None)
    return {"peer": peer, "version": version, "workload": spec["workload"], "seed": spec["seed"], "curve": curve,
            "final_acc": final, "sim_time_to_target_s": reach, **extra}


def write(out: str | Path, res: dict) -> None:
    Path(out).write_text(json.dumps(res, indent=1))


class Timer:
    """Wall time of the runner's own work (from after the imports), beside the harness's whole-process time."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.t0


def args(argv: list[str] | None = None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv if argv is not None else sys.argv[1:])
