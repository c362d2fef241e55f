"""The systems the peer harness runs (issue 38): how each is started, in which environment, on which workloads.

A peer runs with its own environment's python (benchmarks/peers/.venvs/NAME, made by `setup.sh NAME`);
EdgeSync and the bare loop with EdgeSync's. A system whose environment is missing, or that cannot run a
workload, still gets a row in docs/peers.md saying why (`unavailable`), never a silent gap.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"


@dataclass(frozen=True)
class System:
    name: str  # the row's name in docs/peers.md
    script: str  # run_*.py beside this file
    venv: str | None  # the peer's environment under .venvs/, None: EdgeSync's own
    workloads: tuple[str, ...]  # the workloads it can run at all
    args: tuple[str, ...] = ()
    why_not: dict[str, str] = field(default_factory=dict)  # workload → why this system cannot run it

    def python(self) -> Path:
        return Path(sys.executable) if self.venv is None else VENVS / self.venv / "bin" / "python"

    def unavailable(self, workload: str) -> str | None:
        """Why this system cannot run `workload` here, or None."""
        if workload not in self.workloads:
            return self.why_not.get(workload, f"{self.name} has no {workload} runner")
        if not (HERE / self.script).exists():
            return f"benchmarks/peers/{self.script} is not written"
        if self.venv is not None and not self.python().exists():
            return f"not installed: `bash benchmarks/peers/setup.sh {self.venv}`"
        return None


NO_ASYNC = "no asynchronous aggregation on a virtual clock"
FEDSCALE = ("fedscale 1.0 declares no dependencies and its environment is Python 3.7's; with them installed by hand "
            "its aggregator's import crashes (a segmentation fault in triton after TensorFlow loads) unless "
            "torchvision is imported first, and a run needs subclasses of its aggregator, executor and client "
            "(unweighted averaging, momentum 0.9 hard-coded, shards under 32 samples dropped): not run, "
            "benchmarks/peers/requirements-fedscale.txt has the errors")
SYSTEMS = {s.name: s for s in [
    System("edgesync-serial", "run_edgesync.py", None, ("W1", "W2", "W3", "W4"), ("--backend", "serial")),
    System("edgesync-ray", "run_edgesync.py", None, ("W1", "W2", "W3", "W4"), ("--backend", "ray")),
    System("bare", "run_bare.py", None, ("W1", "W2"),
           why_not={"W3": "the floor is a synchronous loop", "W4": "the floor is a synchronous loop"}),
    System("flower", "run_flower.py", "flower", ("W1", "W2"), why_not={"W3": NO_ASYNC, "W4": NO_ASYNC}),
    System("flgo", "run_flgo.py", "flgo", ("W1", "W2", "W3", "W4")),
    System("appfl", "run_appfl.py", "appfl", ("W1", "W2", "W3", "W4")),
    System("plato", "run_plato.py", "plato", ("W1", "W2", "W3"), why_not={"W4": "Plato has no availability model (a client process that disconnects ends the run)"}),
    System("fedscale", "run_fedscale.py", "fedscale", (), why_not={w: FEDSCALE for w in ("W1", "W2", "W3", "W4")}),
]}
REFERENCE = "edgesync-serial"  # every figure's ratio is to it
FLOOR = "bare"
