"""`edgesync run` as a benchmark's step: printed, timed, and fatal with the run's last words if it fails."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed_run(name: str, args: list[str]) -> float:
    """Run `edgesync run ARGS` from the repository root; its wall time in seconds."""
    cmd = [sys.executable, "-m", "edgesync.cli", "run", *args]
    print(f"  {name}: {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{name} failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
    wall = time.perf_counter() - t0
    print(f"    {wall / 60:.1f} min", file=sys.stderr, flush=True)
    return wall
