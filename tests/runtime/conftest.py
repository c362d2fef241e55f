"""Loopback fixtures: a coordinator and clients in threads of this process, over real TCP sockets
(loopback_run.py)."""
from __future__ import annotations

import pytest

from loopback_run import LoopbackRun, small_scenario


@pytest.fixture
def loopback(tmp_path):
    runs: list[LoopbackRun] = []

    def make(keys=None, **overrides) -> LoopbackRun:
        run = LoopbackRun(small_scenario(**overrides), tmp_path / f"run{len(runs)}", keys=keys)
        runs.append(run)
        return run

    yield make
    for run in runs:
        if not run.recorder.closed:
            run.recorder.close()


@pytest.fixture
def local_ray():
    """A local Ray instance with two CPUs (the simulator's Ray backend and --parallel then use it, and leave
    it running between runs), started by the first test that asks and kept for the next ones: each start
    costs a raylet, a GCS and pre-started workers. The cluster test shuts it down first (its teardown's
    `ray stop` ends every Ray on the machine); Ray shuts it down when the test process exits."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray
