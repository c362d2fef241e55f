"""Many devices per process (runtime/live/slots.py): slots sharing one model and one compute turn, in threads of
this process and as a real `edgesync client --slots K` process, over real sockets and real data."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from edgesync.emulation.compute_turn import ComputeTurn
from edgesync.runtime.live.slots import SlotHost, SlotTrainer
from edgesync.runtime.bookkeeping.workload import dataset
from edgesync.trainer import Trainer

from loopback_run import LoopbackRun, small_scenario

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "clients.jsonl").read_text().splitlines()]


def tiny_bn_model() -> nn.Module:
    """Small, and with BatchNorm buffers: what a shared model must not mix up between slots."""
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                         nn.Linear(64, 10))


def fashion(rows_: slice):
    data = dataset("fashion_mnist", None, 1000)
    from edgesync.data.datasets import to_tensor
    return (to_tensor(data.train_x[rows_], data.mean, data.std),
            torch.as_tensor(data.train_y[rows_], dtype=torch.int64))


class Sleepy:
    """A hook that sleeps after each step, as a throttle does (outside the turn): the other slot computes."""

    def after_step(self, started, interrupt=None):
        time.sleep(0.01)
        return time.perf_counter() - started


def test_slots_sharing_one_model_compute_what_separate_models_compute():
    torch.manual_seed(0)
    shared, turn = tiny_bn_model(), ComputeTurn()
    data = [fashion(slice(0, 200)), fashion(slice(200, 400))]
    slots = [SlotTrainer(model=shared, x=x, y=y, batch_size=16, seed=s, hook=Sleepy(), turn=turn)
             for s, (x, y) in enumerate(data)]
    alone = [Trainer(model=tiny_bn_model(), x=x, y=y, batch_size=16, seed=s) for s, (x, y) in enumerate(data)]
    thetas = [[torch.randn(slots[0].num_params) * 0.1 for _ in range(4)] for _ in slots]
    buffers0 = [alone[i].get_buffers() for i in range(2)]
    got: list[list] = [[], []]

    def run(i: int) -> None:  # both slots at once, interleaving through the turn and their sleeps
        slots[i].set_buffers(buffers0[i])
        for theta in thetas[i]:
            slots[i].set_params(theta)
            got[i].append((*slots[i].gradient(weight_decay=0.01), slots[i].get_buffers()))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i in range(2):
        for theta, (g, loss, buffers) in zip(thetas[i], got[i]):
            alone[i].set_params(theta)
            g_alone, loss_alone = alone[i].gradient(weight_decay=0.01)
            assert torch.allclose(g, g_alone, atol=1e-6) and loss == pytest.approx(loss_alone, abs=1e-6)
            assert torch.allclose(buffers, alone[i].get_buffers(), atol=1e-6)  # its own running statistics
    assert turn.grants == 8 and slots[0].stats.steps == 4
    with pytest.raises(ValueError, match="parameters: flat vector has 3 values"):
        slots[0].set_params(torch.zeros(3))


def test_a_slots_step_starts_when_it_asks_for_the_turn():
    x, y = fashion(slice(0, 64))
    turn = ComputeTurn()
    slot = SlotTrainer(model=tiny_bn_model(), x=x, y=y, batch_size=16, seed=0, turn=turn)
    turn.acquire()  # another slot computing for 0.3 s
    t = threading.Thread(target=slot.gradient)
    t.start()
    time.sleep(0.3)
    turn.release()
    t.join(10)
    assert slot.stats.last_step_s >= 0.3  # the emulated device's step includes its wait for the core


@pytest.mark.slow
@pytest.mark.timing
def test_a_x4_slot_keeps_its_factor_beside_a_x1_slot_of_its_process(tmp_path):
    run = LoopbackRun(small_scenario(clients=["x1", "x4"], algorithms=[{"name": "asgd", "lr": 0.05}],
                                     stop={"time_budget_s": 6, "target_acc": 0.3}), tmp_path / "run")
    run.start(clients=0)
    host = SlotHost(run.coordinator.address, 2, first_rank=0)
    hosting = threading.Thread(target=host.run, daemon=True)
    hosting.start()
    run.join(120)
    hosting.join(30)
    assert run.error is None and not hosting.is_alive() and host.failures == []
    fast, slow = rows(run.run_dir)
    assert fast["base_step_s"] == slow["base_step_s"] and fast["reference_step_s"] == slow["reference_step_s"]
    # one turn: the ×1 slot may find the ×4 slot computing, so the base leaves room for both steps
    assert fast["base_step_s"] >= 2 * fast["reference_step_s"]
    # within the scenario's emulation.tolerance (5%): two runs here gave ×3.996 and ×3.997
    assert slow["target_factor"] == 4.0 and abs(slow["fidelity_error"]) <= 0.05
    assert fast["steps"] >= 3 * slow["steps"]
    assert fast["isolation"] == "none: these slots run in threads of a larger process"


@pytest.mark.slow
def test_six_clients_in_two_slot_processes_run_to_the_end_and_a_failing_slot_stops_nobody(tmp_path, caplog):
    """Two real `edgesync client --slots` processes; the second asks for one rank too many: that slot is
    refused, the other six clients train both algorithms to the end, and its process exits 1 saying why."""
    run = LoopbackRun(small_scenario(clients=6, stop={"time_budget_s": 20, "max_updates": 18, "target_acc": 0.3}),
                      tmp_path / "run")
    coordinating = threading.Thread(target=run.coordinator.run, daemon=True)
    caplog.set_level(logging.INFO, logger="edgesync")
    coordinating.start()
    procs = []
    for first, count in ((0, 3), (3, 4)):
        cmd = [sys.executable, "-m", "edgesync.cli", "client", "--connect", run.coordinator.address,
               "--rank", str(first), "--slots", str(count)]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    try:
        coordinating.join(180)
        assert not coordinating.is_alive(), "the coordinator did not finish"
        outputs = [p.communicate(timeout=30)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        run.recorder.close()
        run.coordinator.close()
    assert procs[0].returncode == 0, outputs[0]
    assert procs[1].returncode == 1, outputs[1]
    # refused at the join ("taken or outside") or, if its HELLO comes once the run is under way, as a rank
    # the run does not have: either way by name, fatally
    assert "slot 3 (client 6)" in outputs[1]
    assert ("rank 6 is taken or outside 0..5" in outputs[1]
            or "rank 6 is not one of this run's (0..5)" in outputs[1]), outputs[1][-2000:]
    assert "1 of 4 slots failed" in outputs[1]
    got = rows(run.run_dir)
    for label in ("ssgd", "asgd"):
        mine = [r for r in got if r["algorithm"] == label]
        assert sorted(r["client"] for r in mine) == list(range(6))
        assert all(r["steps"] > 0 and r.get("error") is None for r in mine), mine
        # three clients per process: the clients of each share their process's measured step
        assert len({r["reference_step_s"] for r in mine[:3]}) == 1 and len({r["reference_step_s"] for r in mine[3:]}) == 1
        # two processes on 2 cores: each pinned, as a whole, to a core of its own (no root needed)
        for rank, row in enumerate(mine):
            process, slots = (0, 3) if rank < 3 else (1, 4)
            assert row["isolation"].startswith("pinned to core") and f"(index {process} of" in row["isolation"]
            assert f"whose {slots} slots take turns on its one torch thread" in row["isolation"]
    assert "6 clients in 2 processes" in caplog.text  # the device model counts two compute turns


def test_edgesync_run_spreads_many_clients_over_processes_of_slots():
    from edgesync.runtime.live.launcher import LOCAL_PROCESSES_PER_CORE, describe_layout, process_layout
    few = process_layout(4, None, cores=2)  # the quick start: one process per client, as always
    assert [list(g) for g in few] == [[0], [1], [2], [3]]
    many = process_layout(LOCAL_PROCESSES_PER_CORE * 2 + 1, None, cores=2)  # one per core past the limit
    assert len(many) == 2 and describe_layout(many) == "9 clients in 2 processes of 5 or 4 slots"
    assert describe_layout(process_layout(200, 4, cores=2)) == "200 clients in 4 processes of 50 slots"
    assert [list(g) for g in process_layout(3, 5, cores=2)] == [[0], [1], [2]]  # never more than a client each


@pytest.mark.slow
def test_a_killed_process_of_slots_loses_its_clients_and_the_others_go_on(tmp_path, client_process):
    """`edgesync run` with live.processes 2: five clients in two `--slots` processes; the second process is
    killed mid-run: its two clients are lost, the three of the first train on to the end."""
    import psutil

    from edgesync.runtime.runs import run_scenario
    from edgesync.config import load_scenario
    sc = load_scenario(small_scenario(clients=5, algorithms=[{"name": "asgd", "lr": 0.05}], live={"processes": 2},
                                           stop={"time_budget_s": 8, "target_acc": 0.3}))
    errors: list[BaseException] = []
    running = threading.Thread(target=lambda: _catch(errors, lambda: run_scenario(sc, tmp_path / "run",
                                                                                   progress=False)), daemon=True)
    running.start()
    deadline = time.monotonic() + 120
    metrics = tmp_path / "run" / "metrics.jsonl"
    while not (metrics.exists() and metrics.read_text().strip()):  # training has started
        assert time.monotonic() < deadline and running.is_alive(), errors
        time.sleep(0.2)
    client_process(psutil.Process(), 3, slots=2).kill()
    running.join(120)
    assert not running.is_alive() and errors == []
    got = rows(tmp_path / "run")
    assert [r["client"] for r in got] == [0, 1, 2, 3, 4]
    assert all(r["steps"] > 0 and r.get("error") is None for r in got[:3]), got
    assert all("lost: its process exited" in r["error"] for r in got[3:]), got
    assert (tmp_path / "run" / "logs" / "clients-0-2.log").exists()


def _catch(errors: list, fn) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        errors.append(exc)
