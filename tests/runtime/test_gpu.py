"""Client devices: `cpu`, `cuda:N` and `auto`, from the scenario or the client's own `--device`; mixed
CPU and GPU clients in one run, each client's device in clients.jsonl and the report.

What needs a real GPU is skipped with "needs a CUDA GPU" on machines without one; the rest (device
names, CUDA pretended away, the CPU half of a mixed run) runs everywhere. Live runs are loopback runs
(conftest.py): a coordinator and EdgeClients in threads, a 1,000-sample slice, about 5 s each.
"""
from __future__ import annotations

import json

import pytest
import torch

from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.metrics.report import render_report
from edgesync.models import build_model
from edgesync.runtime.live.coordinator import RunAborted
from edgesync.runtime.runs import finish_run
from edgesync.runtime.bookkeeping.workload import resolve_device
from edgesync.trainer import Trainer

CUDA = torch.cuda.is_available()
GPU_NAME = torch.cuda.get_device_name(0) if CUDA else None
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")


# -- device names --------------------------------------------------------------------------------

def test_auto_is_cuda0_with_a_gpu_and_cpu_without(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


def test_auto_on_this_machine():
    assert resolve_device("auto") == torch.device("cuda:0" if CUDA else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("name", ["cuda", "cuda:0", "cuda:1"])
def test_a_gpu_on_a_machine_without_cuda_is_a_clear_error(monkeypatch, name):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=f"device '{name}' was asked for but this machine has no usable CUDA GPU"):
        resolve_device(name)


def test_a_gpu_index_the_machine_lacks_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(RuntimeError, match=r"'cuda:2' was asked for but this machine has 2 usable CUDA GPUs "
                                           r"\(cuda:0 to cuda:1\)"):
        resolve_device("cuda:2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(RuntimeError, match=r"'cuda:1' was asked for but this machine has 1 usable CUDA GPU \(cuda:0\)"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("name", ["gpu", "GPU", "CUDA:0", "cuda:", "cuda:-1", "cuda:0 ", "mps", "", None, 0])
def test_malformed_device_names_are_refused(name):
    with pytest.raises(ValueError, match="device must be cpu, cuda:N or auto, got"):
        resolve_device(name)


@needs_cuda
def test_cuda0_on_this_machine_holds_tensors():
    dev = resolve_device("cuda:0")
    assert dev == torch.device("cuda", 0)
    assert (torch.ones(3, device=dev) * 2).sum().item() == 6.0


# -- timing a GPU step ---------------------------------------------------------------------------

def small_trainer(device: torch.device) -> Trainer:
    x, y = torch.randn(8, 1, 28, 28, device=device), torch.randint(0, 10, (8,), device=device)
    return Trainer(model=build_model("cnn", num_classes=10, in_channels=1), x=x, y=y, batch_size=4, seed=0,
                   device=device)


class RecordingHook:
    def __init__(self, events: list):
        self.events = events

    def after_step(self, started: float, interrupt=None) -> float:
        self.events.append("timed")
        return 0.01


def test_a_gpu_step_is_timed_when_the_gpu_is_done_not_when_its_kernels_are_launched(monkeypatch):
    trainer = small_trainer(torch.device("cpu"))
    trainer.device = torch.device("cuda", 0)  # as if on a GPU: what matters is the order of the calls
    events: list = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append(("synchronize", device)))
    trainer.hook = RecordingHook(events)
    trainer.gradient()
    assert events == [("synchronize", torch.device("cuda", 0)), "timed"]


def test_a_cpu_step_does_not_touch_cuda(monkeypatch):
    trainer = small_trainer(torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: pytest.fail("synchronize on a CPU trainer"))
    trainer.gradient()
    assert trainer.stats.steps == 1


@needs_cuda
def test_a_trainer_on_the_gpu_computes_there():
    trainer = small_trainer(resolve_device("cuda:0"))
    g, loss = trainer.gradient()
    cuda0 = torch.device("cuda", 0)
    assert next(trainer.model.parameters()).device == cuda0 and trainer.x.device == cuda0
    # the gradient comes back as the flat CPU vector every algorithm works on (params.py): they never see devices
    assert g.device == torch.device("cpu") and torch.isfinite(g).all() and loss > 0
    assert trainer.stats.steps == 1 and trainer.stats.compute_s > 0


# -- the report ----------------------------------------------------------------------------------

def test_the_report_shows_each_clients_host_and_device_per_algorithm(tmp_path):
    """A fabricated mixed run: rows as the coordinator writes them, one naming its GPU."""
    with RunRecorder(tmp_path) as rec:
        rec.write_scenario({"name": "mixed", "runtime": "live", "clients": ["x1", "x1"],
                            "algorithms": [{"name": "ssgd"}, {"name": "asgd"}]})
        for label in ("ssgd", "asgd"):
            rec.log_eval({"algorithm": label, "time_s": 1.0, "updates": 4, "samples": 128, "test_acc": 0.5,
                          "test_loss": 1.0, "bytes_up": 1, "bytes_down": 1})
            rec.log_client({"algorithm": label, "client": 0, "profile": "x1", "host": "gpu-box",
                            "device": "cuda:0", "gpu": "NVIDIA H100 80GB HBM3", "compute_s": 1.0, "wait_s": 0.0,
                            "wall_s": 1.0, "steps": 10, "samples": 320})
            rec.log_client({"algorithm": label, "client": 1, "profile": "x1", "host": "laptop", "device": "cpu",
                            "compute_s": 1.0, "wait_s": 0.0, "wall_s": 1.0, "steps": 3, "samples": 96})
    text = render_report(tmp_path).read_text()
    assert "2 clients (2 × x1) on 2 hosts, devices 1 × cuda:0 (NVIDIA H100 80GB HBM3), 1 × cpu" in text
    lines = text.splitlines()
    for label in ("ssgd", "asgd"):
        assert f"| `{label}` | 0 | x1 | gpu-box | cuda:0 (NVIDIA H100 80GB HBM3) | 1.0 | 0.0 | 1.00 | 10 | 320 |" in lines
        assert f"| `{label}` | 1 | x1 | laptop | cpu | 1.0 | 0.0 | 1.00 | 3 | 96 |" in lines


# -- live runs -----------------------------------------------------------------------------------

def run_with_devices(loopback, scenario_devices: list[str], client_devices: list[str | None]):
    """A loopback run whose scenario puts client i on scenario_devices[i] and whose client i is started
    with device=client_devices[i] (what `edgesync client --device` passes; None = the scenario's)."""
    run = loopback(clients=[{"profile": "x1", "device": d} for d in scenario_devices])
    run.start(clients=0)
    for rank, device in enumerate(client_devices):
        run.add_client(rank=rank, device=device)
    run.join(90)
    assert run.error is None, run.error
    assert not run.client_errors, run.client_errors
    finish_run(run.run_dir, run.scenario)
    rows = read_jsonl(run.run_dir / "clients.jsonl")
    devices = {(r["algorithm"], r["client"]): r["device"] for r in rows}
    gpus = {(r["algorithm"], r["client"]): r.get("gpu") for r in rows}
    return devices, gpus, (run.run_dir / "report.md").read_text()


def test_the_clients_device_overrides_the_scenarios_and_shows_in_the_report(loopback):
    """The CPU half of a mixed run, on any machine: the scenario puts client 0 on cuda:0, but the client
    says cpu (it would fail without a GPU otherwise); client 1 says auto."""
    auto = "cuda:0" if CUDA else "cpu"
    shown = f"cuda:0 ({GPU_NAME})" if CUDA else "cpu"  # the report names a client's GPU
    devices, gpus, report = run_with_devices(loopback, ["cuda:0", "cpu"], ["cpu", "auto"])
    assert devices == {(label, rank): dev for label in ("ssgd", "asgd") for rank, dev in ((0, "cpu"), (1, auto))}
    assert gpus == {(label, rank): gpu for label in ("ssgd", "asgd") for rank, gpu in ((0, None), (1, GPU_NAME))}
    for label in ("ssgd", "asgd"):
        assert any(line.startswith(f"| `{label}` | 0 | x1 |") and "| cpu |" in line for line in report.splitlines())
        assert any(line.startswith(f"| `{label}` | 1 | x1 |") and f"| {shown} |" in line for line in report.splitlines())


@needs_cuda
def test_mixed_cpu_and_gpu_clients_in_one_run(loopback):
    """Client 0 on the GPU from the scenario, client 1 on the CPU from its own device option."""
    devices, gpus, report = run_with_devices(loopback, ["cuda:0", "cuda:0"], [None, "cpu"])
    assert devices == {(label, rank): dev for label in ("ssgd", "asgd") for rank, dev in ((0, "cuda:0"), (1, "cpu"))}
    # client 0's GPU came from the scenario, not its --device: its HELLO said cpu, its STATS name the GPU
    assert gpus == {(label, rank): gpu for label in ("ssgd", "asgd") for rank, gpu in ((0, GPU_NAME), (1, None))}
    assert f"devices 1 × cuda:0 ({GPU_NAME}), 1 × cpu" in report
    for label in ("ssgd", "asgd"):
        assert any(line.startswith(f"| `{label}` | 0 | x1 |") and f"| cuda:0 ({GPU_NAME}) |" in line
                   for line in report.splitlines())


def test_a_client_put_on_a_gpu_the_machine_lacks_stops_the_run_saying_why(loopback, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # every machine is GPU-less here
    run = loopback(clients=[{"profile": "x1", "device": "cuda:0"}, "x1"], algorithms=[{"name": "asgd", "lr": 0.05}])
    run.start()
    run.join(90)
    assert isinstance(run.error, RunAborted)
    assert ("client 0 failed while waiting for READY: setup failed: device 'cuda:0' was asked for but this "
            "machine has no usable CUDA GPU") in str(run.error)


# -- the GPU's name when the scenario, not --device, puts a client on it (runs on any machine) -------

def test_stats_name_the_gpu_of_the_device_the_session_trained_on(monkeypatch):
    """HELLO goes before SETUP, so only STATS know a GPU the scenario chose."""
    from types import SimpleNamespace
    from edgesync.runtime.bookkeeping.accounting import ClientClock
    from edgesync.runtime.live.client import EdgeClient
    from edgesync.trainer import TrainerStats
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    client = EdgeClient("tcp://127.0.0.1:1")
    client.session = SimpleNamespace(label="asgd", trainer=SimpleNamespace(stats=TrainerStats(steps=1, samples=32)),
                                     clock=ClientClock(), throttle=None)
    client._model_key = None
    client.device = torch.device("cuda", 0)
    stats = client._stats()
    assert stats["device"] == "cuda:0" and stats["gpu"] == "Fake GPU"
    client.device = torch.device("cpu")
    assert client._stats()["gpu"] is None


def test_clients_jsonl_takes_the_gpu_from_stats_not_hello(loopback):
    """A client whose HELLO said cpu (no --device) but whose STATS name a GPU: the row names that GPU."""
    from edgesync.runtime.live.client import EdgeClient

    class SaysGpu(EdgeClient):
        def _stats(self):
            return {**super()._stats(), "device": "cuda:0", "gpu": "Fake GPU"}

    run = loopback(algorithms=[{"name": "asgd", "lr": 0.05}])
    run.start(clients=0)
    run.add_client(SaysGpu, rank=0)
    run.add_client(rank=1)
    run.join(90)
    assert run.error is None, run.error
    rows = {r["client"]: r for r in read_jsonl(run.run_dir / "clients.jsonl")}
    assert (rows[0]["device"], rows[0]["gpu"]) == ("cuda:0", "Fake GPU")
    assert (rows[1]["device"], rows[1]["gpu"]) == ("cpu", None)


def test_a_warm_up_keeps_the_trainers_counters_hook_and_batches():
    """A GPU client warms up before READY (runtime/live/client.py), a Flower ClientApp before each instruction
    (flower/node.py); what it ran is not the algorithm's: the next steps see the batches they would have."""
    from edgesync.runtime.bookkeeping.step_time import warm_up
    trainer, twin = (torch.manual_seed(0) and small_trainer(torch.device("cpu")) for _ in range(2))  # the same
    trainer.gradient(), twin.gradient()
    before, hook = dict(trainer.stats.__dict__), trainer.hook
    warm_up(trainer)
    assert trainer.stats.__dict__ == before and trainer.hook is hook
    for _ in range(3):
        assert torch.equal(trainer.gradient()[0], twin.gradient()[0])


@needs_cuda
def test_clients_sharing_one_gpu_keep_their_relative_speed(loopback):
    """Two clients on cuda:0 are one compute pool (emulation/device_model.py): one base step paces both, each
    step timed after the GPU is done (Trainer.gradient synchronizes), so a ×4 client is ×4 relative to the ×1."""
    run = loopback(clients=[{"profile": "x1", "device": "cuda:0"}, {"profile": "x4", "device": "cuda:0"}],
                   algorithms=[{"name": "asgd", "lr": 0.05}], stop={"time_budget_s": 4})
    run.start()
    run.join(120)
    assert run.error is None, run.error
    rows = [json.loads(line) for line in (run.run_dir / "clients.jsonl").read_text().splitlines()]
    assert {r["device"] for r in rows} == {"cuda:0"} and len({r["base_step_s"] for r in rows}) == 1
    assert rows[1]["target_factor"] == 4.0
    assert rows[1]["achieved_factor"] == pytest.approx(4.0, rel=0.10)
