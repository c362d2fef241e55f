"""The tiny task every check runs, and how it runs: 300 Fashion-MNIST training samples over two ×1 clients,
six global updates, in the simulator (a 10 ms base step, an idealised coordinator: deterministic and quick) or
live on loopback (a coordinator and two clients in threads of this process, over real TCP sockets on
127.0.0.1: outside code defined anywhere in this process runs there, a test module's included)."""
from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import nn

from edgesync.config import Scenario
from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.runtime.bookkeeping.checkpoint import Checkpointer
from edgesync.runtime.bookkeeping.progress import Progress

SEED = 3
CLIENTS = 2
MAX_UPDATES = 6
BASE_STEP_S = 0.01
TRAIN_SIZE = 300
TEST_SIZE = 100
EVAL_EVERY_S = 0.1
LIVE_BUDGET_S = 60.0     # wall seconds: the tiny task takes a few; a run that hangs ends here
CLIENT_EXIT_S = 10.0     # how long a finished run waits for its client threads
DEFAULT_ALGORITHM = {"name": "local_sgd", "lr": 0.05}
# A model for any image size and channel count (the built-in cnn takes 28×28 only): what a dataset's run trains.
ANY_SIZE_MODEL = "edgesync.testing.tiny_task:small_net"


def scenario(runtime: str, algorithm: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    """The tiny task as a scenario mapping; `sections` replace whole top-level sections (dataset, model, clients…)."""
    data: dict[str, Any] = {
        "name": "conformance", "seed": SEED, "runtime": runtime,
        "sim": {"base_step_s": BASE_STEP_S, "server_time": "zero"},
        "dataset": {"name": "fashion_mnist", "train_size": TRAIN_SIZE}, "clients": CLIENTS,
        "algorithms": [algorithm or DEFAULT_ALGORITHM],
        "stop": {"time_budget_s": LIVE_BUDGET_S, "max_updates": MAX_UPDATES},
        "eval": {"every_s": EVAL_EVERY_S, "test_size": TEST_SIZE},
        "checkpoint": {"every_updates": 0, "every_s": 0},
    }
    data.update(sections)
    return data


def small_net(num_classes: int, in_channels: int, width: int = 8) -> nn.Module:
    return nn.Sequential(nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                         nn.Flatten(), nn.Linear(width * 16, num_classes))


def run_simulated(sc: Scenario, run_dir: Path) -> None:
    from edgesync.runtime.sim.simulator import run_sim
    with RunRecorder(run_dir) as recorder:
        run_sim(sc, recorder, Progress(enabled=False))


def run_live(sc: Scenario, run_dir: Path, checkpoints: Checkpointer | None = None) -> None:
    """`sc` live on loopback: the coordinator in this thread, each client in a thread of its own. A client's
    failure is raised after the run unless the coordinator's own failure (raised first) explains it."""
    from edgesync.runtime.live.client import EdgeClient
    from edgesync.runtime.live.coordinator import Coordinator
    errors: list[tuple[int, BaseException]] = []

    def client(rank: int, address: str) -> None:
        try:
            EdgeClient(address, rank=rank).run()
        except BaseException as exc:  # noqa: BLE001 - reported by the run
            errors.append((rank, exc))

    with RunRecorder(run_dir) as recorder:
        coordinator = Coordinator(sc, recorder, bind="tcp://127.0.0.1:*")
        coordinator.checkpoints = checkpoints
        threads = [threading.Thread(target=client, args=(rank, coordinator.address), daemon=True)
                   for rank in range(len(sc.clients))]
        for thread in threads:
            thread.start()
        try:
            coordinator.run()
        finally:
            coordinator.close()
            for thread in threads:
                thread.join(CLIENT_EXIT_S)
    if errors:
        rank, exc = errors[0]
        raise RuntimeError(f"live client {rank} failed: {type(exc).__name__}: {exc}") from exc


_WALL_CLOCK = "wall_clock"  # the unix time a row was written: the one field no two runs share


def rows(run_dir: Path, file: str) -> list[dict[str, Any]]:
    """A run folder's rows of `file`, without the wall-clock field."""
    path = Path(run_dir) / file
    if not path.exists():
        return []
    return [{k: v for k, v in row.items() if k != _WALL_CLOCK} for row in read_jsonl(path)]


@contextlib.contextmanager
def run_folders(workdir: str | Path | None, label: str) -> Iterator[Path]:
    """A fresh folder for a check's runs: under `workdir`, kept (its name starts with `label`), else a
    temporary one, removed after."""
    prefix = re.sub(r"[^\w.-]", "_", label) + "-"
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(prefix=prefix, dir=workdir))
        return
    folder = Path(tempfile.mkdtemp(prefix=f"edgesync-conformance-{prefix}"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
