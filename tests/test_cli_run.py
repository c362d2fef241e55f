"""End to end, as a user runs it: `edgesync run` spawns real client processes on a small data slice."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import psutil
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}


def edgesync(*args: str, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgesync.cli", *args], cwd=REPO, env={**ENV, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


QUICK = ["--set", "dataset.train_size=4000", "--set", "stop.time_budget_s=5",
         "--set", "stop.stop_at_target=false", "--set", "eval.test_size=500", "--set", "eval.every_s=1"]
# The quickstart's clients as emulated devices of a fixed 100 ms x1 step on mini-batches of 8: each step
# computes for a few ms and sleeps the rest, so four client processes leave the suite's other tests the
# cores, and the x10 client still makes every SSGD round wait for it.
PACED_YAML = "emulation: {mode: fixed, base_step_ms: 100}\n"  # the same, in a scenario file
PACED = ["--set", "emulation.mode=fixed", "--set", "emulation.base_step_ms=100",
         "--set", "algorithms.0.batch_size=8", "--set", "algorithms.1.batch_size=8"]


@pytest.mark.slow
def test_run_quickstart_on_a_data_slice_writes_a_complete_run_folder(tmp_path):
    out = tmp_path / "run"
    result = edgesync("run", "scenarios/quickstart.yaml", "--out", str(out), "-q", *QUICK, *PACED,
                      env={"EDGESYNC_PLOTS": "1"})  # a user's run: with its plots (the suite's others skip them)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "report:" in result.stdout

    resolved = yaml.safe_load((out / "scenario.yaml").read_text())
    assert resolved["dataset"]["train_size"] == 4000  # the override is what was run, and recorded
    assert [c["profile"]["factor"] for c in resolved["clients"]] == [1, 1, 1, 10]

    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["ssgd", "asgd"]
    for entry in summary.values():
        for key in ("final_acc", "best_acc", "time_to_target_s", "updates", "samples_per_s", "bytes_up", "bytes_down"):
            assert key in entry
        assert entry["updates"] > 0 and entry["bytes_up"] > 0 and entry["bytes_down"] > 0
    # With a x10 straggler, ASGD applies many more updates than SSGD in the same time.
    assert summary["asgd"]["updates"] > 2 * summary["ssgd"]["updates"]

    clients = [json.loads(line) for line in (out / "clients.jsonl").read_text().splitlines()]
    assert len(clients) == 8
    ssgd_ratio = {c["client"]: c["compute_s"] / c["wall_s"] for c in clients if c["algorithm"] == "ssgd"}
    # Under SSGD the fast clients wait for the straggler: their compute-time ratio is far below its.
    assert max(ssgd_ratio[r] for r in (0, 1, 2)) < ssgd_ratio[3]

    report = (out / "report.md").read_text()
    assert "| `ssgd` |" in report and "| `asgd` |" in report
    for png in ("accuracy_vs_time", "compute_ratio"):
        data = (out / "plots" / f"{png}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert (out / "logs" / "client-3.log").exists()

    # The report re-renders from the folder alone.
    (out / "report.md").unlink()
    again = edgesync("report", str(out))
    assert again.returncode == 0, again.stderr
    assert (out / "report.md").read_text() == report


@pytest.mark.slow
def test_a_client_process_killed_mid_run_is_lost_and_the_run_goes_on(tmp_path, client_process):
    """SIGKILL one of four clients during SSGD: the barrier closes without it from then on, ASGD runs
    with the other three, and the run folder says which client was lost and why."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "edgesync.cli", "run", "scenarios/quickstart.yaml", "--out", str(out), "-q",
           "--set", "dataset.train_size=4000", "--set", "stop.time_budget_s=8", "--set", "stop.stop_at_target=false",
           "--set", "eval.test_size=200", "--set", "eval.every_s=1", *PACED]
    proc = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics = out / "metrics.jsonl"
        deadline = time.monotonic() + 90
        while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 3) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert metrics.exists(), "training never started"
        victim = client_process(psutil.Process(proc.pid), 1)
        victim.send_signal(signal.SIGKILL)
        killed_at = json.loads(metrics.read_text().splitlines()[-1])
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    ssgd = [r for r in rows if r["algorithm"] == "ssgd"]
    # rounds go on: the one under way when the client died closes without it, and the next runs without it (each waits
    # for the x10 client: a busy host runs few of them in the budget; two after the kill in the suite's parallel lanes)
    assert killed_at["algorithm"] == "ssgd" and ssgd[-1]["updates"] >= killed_at["updates"] + 2
    assert [r for r in rows if r["algorithm"] == "asgd"][-1]["updates"] > 20
    clients = {(c["algorithm"], c["client"]): c for c in map(json.loads, (out / "clients.jsonl").read_text().splitlines())}
    assert clients[("ssgd", 1)]["lost"] == 1 and "exited with code -9" in clients[("ssgd", 1)]["error"]
    assert clients[("asgd", 1)]["error"].startswith("lost:") and clients[("asgd", 1)]["steps"] is None
    assert all(clients[(a, c)]["steps"] > 0 for a in ("ssgd", "asgd") for c in (0, 2, 3))
    assert "client 1 lost: its process exited with code -9" in (out / "logs" / "coordinator.log").read_text()


def test_validate_reports_an_unknown_key_and_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nclients: 2\nalgorithms: [{name: ssgd}]\nstop: {time_budget: 5}\n")
    result = edgesync("validate", str(bad), timeout=60)
    assert result.returncode == 2
    assert f"{bad}: stop.time_budget: unknown key" in result.stderr


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_coordinator_and_clients_as_separate_commands(tmp_path):
    """What a lab runs on separate machines, here as separate processes on loopback."""
    port = free_port()
    out = tmp_path / "run"
    scenario = tmp_path / "two.yaml"
    scenario.write_text("name: two\nclients: [x1, x1]\ndataset: {train_size: 2000}\n"
                        "algorithms: [{name: asgd, batch_size: 8}]\n" + PACED_YAML + "stop: {time_budget_s: 3}\neval: {test_size: 300}\n")
    coord = subprocess.Popen([sys.executable, "server/coordinator.py", "--scenario", str(scenario), "--bind",
                              f"tcp://127.0.0.1:{port}", "--out", str(out), "-q"],
                             cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients = [subprocess.Popen([sys.executable, "clients/edge_client.py", "--connect", f"tcp://127.0.0.1:{port}",
                                 *extra], cwd=REPO, env={**ENV, "OMP_NUM_THREADS": "1"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for extra in ([], ["--profile", "x3"])]
    try:
        stdout, stderr = coord.communicate(timeout=120)
        logs = [c.communicate(timeout=30)[0] for c in clients]
    finally:
        for p in (coord, *clients):
            if p.poll() is None:
                p.kill()
    assert coord.returncode == 0, stderr[-2000:]
    assert all(c.returncode == 0 for c in clients), logs
    rows = [json.loads(line) for line in (out / "clients.jsonl").read_text().splitlines()]
    assert sorted(r["profile"] for r in rows) == ["x1", "x3"]  # one client asked for x3 itself
    assert json.loads((out / "summary.json").read_text())["asgd"]["updates"] > 0
    assert (out / "report.md").exists()


@pytest.mark.slow
def test_the_coordinator_command_runs_a_sweep_with_the_same_client_processes(tmp_path):
    """A sweep served by `edgesync coordinator`: each variant's coordinator binds the same address and
    the clients, told nothing between variants, say HELLO to the next one (they exit only at the end)."""
    port = free_port()
    out = tmp_path / "run"
    scenario = tmp_path / "sweep.yaml"
    scenario.write_text("name: sweep\nclients: [x1, x1]\ndataset: {train_size: 2000}\n"
                        "algorithms: [{name: asgd, batch_size: 8}]\n" + PACED_YAML + "stop: {time_budget_s: 2}\neval: {test_size: 200}\n"
                        "sweep: {algorithms.0.lr: [0.05, 0.1]}\n")
    coord = subprocess.Popen([sys.executable, "-m", "edgesync.cli", "coordinator", "--scenario", str(scenario),
                              "--bind", f"tcp://127.0.0.1:{port}", "--out", str(out), "-q"],
                             cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients = [subprocess.Popen([sys.executable, "-m", "edgesync.cli", "client", "--connect",
                                 f"tcp://127.0.0.1:{port}"], cwd=REPO, env={**ENV, "OMP_NUM_THREADS": "1"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    try:
        stdout, stderr = coord.communicate(timeout=150)
        logs = [c.communicate(timeout=60)[0] for c in clients]
    finally:
        for p in (coord, *clients):
            if p.poll() is None:
                p.kill()
    assert coord.returncode == 0, stderr[-2000:]
    assert all(c.returncode == 0 for c in clients), logs
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["asgd@lr=0.05", "asgd@lr=0.1"]
    assert all(s["updates"] > 0 for s in summary.values())
    rows = [json.loads(line) for line in (out / "clients.jsonl").read_text().splitlines()]
    assert sorted((r["algorithm"], r["client"]) for r in rows) == [
        ("asgd@lr=0.05", 0), ("asgd@lr=0.05", 1), ("asgd@lr=0.1", 0), ("asgd@lr=0.1", 1)]


def test_missing_dataset_fails_before_any_client_starts(tmp_path):
    env = {**ENV, "EDGESYNC_DATA": str(tmp_path / "nowhere")}
    result = subprocess.run([sys.executable, "-m", "edgesync.cli", "run", "scenarios/quickstart.yaml",
                             "--out", str(tmp_path / "run"), "-q"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "EDGESYNC_DATA" in result.stderr and "does not hold Fashion-MNIST" in result.stderr
    assert not (tmp_path / "run" / "logs" / "client-0.log").exists()


@pytest.mark.slow
def test_a_sweep_runs_live_with_new_client_processes_per_variant(tmp_path):
    """Sweeps work in the live runtime too: two client counts, one run folder, labelled entries."""
    scenario = tmp_path / "sweep.yaml"
    scenario.write_text("name: sweep\nclients: 2\ndataset: {train_size: 2000}\n"
                        "algorithms: [{name: asgd, batch_size: 8}]\n" + PACED_YAML + "stop: {time_budget_s: 2}\neval: {test_size: 200}\n"
                        "sweep: {clients: [2, 3]}\n")
    out = tmp_path / "run"
    result = edgesync("run", str(scenario), "--out", str(out), "-q")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["asgd@clients=2", "asgd@clients=3"]
    rows = [json.loads(line) for line in (out / "clients.jsonl").read_text().splitlines()]
    assert sorted((r["algorithm"], r["client"]) for r in rows) == [
        ("asgd@clients=2", 0), ("asgd@clients=2", 1),
        ("asgd@clients=3", 0), ("asgd@clients=3", 1), ("asgd@clients=3", 2)]


def _tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative path → SHA-256 of its bytes) and every folder (→ "dir")."""
    import hashlib
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}


def _earlier_run(folder: Path) -> dict[str, str]:
    """A run folder as a killed run leaves it; returns its `_tree`."""
    (folder / "logs").mkdir(parents=True)
    (folder / "scenario.yaml").write_text("name: earlier\n")
    (folder / "metrics.jsonl").write_text('{"algorithm": "ssgd", "time_s": 1.0, "updates": 3}\n')
    (folder / "checkpoint.pt").write_bytes(b"\x80\x04not really a checkpoint")
    (folder / "logs" / "coordinator.log").write_text("earlier run\n")
    return _tree(folder)


def test_out_on_an_existing_run_folder_is_refused_and_every_file_is_left_as_it_was(tmp_path, monkeypatch):
    """`edgesync run --out` and `edgesync coordinator --out` on a folder that holds a run: one line naming
    the folder, --resume and --overwrite, exit 2, and every file byte for byte (and no file more).
    In this process (the refusal comes before any client or socket; a subprocess per command only paid
    for importing torch three times)."""
    from typer.testing import CliRunner

    from edgesync.cli import app

    def edgesync_here(*args: str):
        result = CliRunner().invoke(app, list(args), terminal_width=400)
        assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
            "".join(traceback.format_exception(result.exception))  # an exception, not a refusal
        return result

    out = tmp_path / "run"
    before = _earlier_run(out)
    monkeypatch.chdir(REPO)  # scenarios/quickstart.yaml, as the subprocesses' cwd=REPO
    for cmd in (["run", "scenarios/quickstart.yaml", "--out", str(out), "-q", *QUICK],
                ["coordinator", "--scenario", "scenarios/quickstart.yaml", "--out", str(out),
                 "--bind", "tcp://127.0.0.1:0", "-q"]):
        result = edgesync_here(*cmd)
        assert result.exit_code == 2, (cmd, result.stderr[-3000:])
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert str(out) in lines[0] and "--resume" in lines[0] and "--overwrite" in lines[0], lines[0]
        assert _tree(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing moved aside or made beside it
    both = edgesync_here("run", "--resume", str(out), "--overwrite")
    assert both.exit_code == 2 and _tree(out) == before


@pytest.mark.slow
def test_overwrite_moves_the_earlier_run_folder_aside_and_starts_afresh(tmp_path):
    out = tmp_path / "run"
    before = _earlier_run(out)
    result = edgesync("run", "scenarios/quickstart.yaml", "--out", str(out), "--overwrite", "-q", "--runtime", "sim",
                      "--set", "clients=[x1, x2]", "--set", "algorithms=[{name: asgd, lr: 0.05}]",
                      "--set", "sim.base_step_s=0.01", "--set", "sim.server_time=zero", *QUICK,  # nothing to calibrate
                      "--set", "stop.time_budget_s=0.5")  # 100 virtual steps: a fresh run is all this checks
    assert result.returncode == 0, result.stderr[-3000:]
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("run.old-")]
    assert len(aside) == 1 and _tree(aside[0]) == before  # moved, every file intact
    assert str(aside[0]) in result.stderr  # and it said where
    assert (out / "summary.json").exists() and not (out / "checkpoint.pt").exists()  # a fresh sim run
    assert yaml.safe_load((out / "scenario.yaml").read_text())["name"] == "quickstart"
    assert all(r["algorithm"] == "asgd" for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()))


# -- every failure is one clear line, fast (issue 17) ----------------------------------------------

def _one_line_failure(result: subprocess.CompletedProcess, code: int) -> str:
    """The command failed with `code` and said why in its last stderr line, with no traceback."""
    assert result.returncode == code, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert lines, "no message"
    return lines[-1]


@pytest.mark.slow
@pytest.mark.timing  # how soon it gives up is the point
def test_a_client_with_nothing_to_connect_to_says_it_waits_then_gives_up(tmp_path):
    port = free_port()
    started = time.monotonic()
    result = edgesync("client", "--connect", f"127.0.0.1:{port}", "--connect-timeout", "4", timeout=30)
    took = time.monotonic() - started
    line = _one_line_failure(result, 1)
    assert line == (f"--connect tcp://127.0.0.1:{port}: gave up after 4 s (--connect-timeout 4): nothing answered "
                    "there: is the coordinator running, and are host and port right?")
    # It said it was waiting, with the address (HOST:PORT taken as tcp://) and the seconds so far.
    assert f"waiting for the coordinator at tcp://127.0.0.1:{port}: 3 s of 4 s" in result.stderr
    assert took < 10


@pytest.mark.timing  # how soon it gives up is the point
@pytest.mark.parametrize("args, expected", [
    (["client", "--connect", "127.0.0.1"],
     "--connect '127.0.0.1': no port (expected tcp://HOST:5555 or HOST:5555)"),
    (["client", "--connect", "http://127.0.0.1:5555"],
     "--connect 'http://127.0.0.1:5555': unsupported scheme 'http://'; edgesync speaks tcp:// "
     "(expected tcp://HOST:5555 or HOST:5555)"),
    (["client", "--connect", "127.0.0.1:5555", "--connect-timeout", "0"],
     "--connect-timeout 0: must be more than 0 seconds"),
    (["client", "--connect", "127.0.0.1:5555", "--profile", "x0"],
     "--profile x0: the factor 0 must be greater than or equal to 1: x1 runs as fast as the hardware, "
     "x2 takes twice as long, and nothing emulates a faster device"),
    (["client", "--connect", "127.0.0.1:5555", "--profile", "fast"],
     "--profile fast: unknown profile: expected xK with K >= 1 (e.g. x1, x2, x10, x100, x2.5), gamma-homo, "
     "gamma-hetero, or a mapping with kind"),
    (["client", "--connect", "127.0.0.1:5555", "--device", "gpu"],
     "--device gpu: device must be cpu, cuda:N or auto, got 'gpu'"),
    (["client", "--connect", "127.0.0.1:5555", "--slots", "0"], "--slots 0: must be 1 or more"),
    (["coordinator", "--scenario", "scenarios/quickstart.yaml", "--bind", "tcp://0.0.0.0:port"],
     "--bind 'tcp://0.0.0.0:port': port 'port' is not a number from 0 to 65535 "
     "(expected tcp://0.0.0.0:5555 or 0.0.0.0:5555)"),
])
def test_bad_options_are_one_line_naming_the_option(args, expected):
    started = time.monotonic()
    result = edgesync(*args, timeout=30)
    assert _one_line_failure(result, 2) == expected
    assert result.stderr.strip() == expected  # nothing else: no log lines, no usage box
    assert time.monotonic() - started < 10


def test_the_profiles_command_states_the_rule_the_parser_applies():
    result = edgesync("profiles", timeout=30)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Any xK with K >= 1 works" in text
    assert "a factor below 1 (x0.5, or a gamma mean below 1) is refused" in text
    assert "factors below 1 run at full speed" not in text


@pytest.mark.slow
@pytest.mark.timing  # how soon it gives up is the point
def test_a_coordinator_on_a_busy_address_says_so_and_leaves_no_run_folder(tmp_path):
    import socket
    scenario = tmp_path / "two.yaml"
    scenario.write_text("name: two\nclients: [x1, x1]\nalgorithms: [{name: asgd}]\n")
    out = tmp_path / "run"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = edgesync("coordinator", "--scenario", str(scenario), "--bind", f"127.0.0.1:{port}",
                          "--out", str(out), timeout=30)
    assert time.monotonic() - started < 10
    assert result.stderr.strip() == (f"--bind tcp://127.0.0.1:{port}: the address is in use: another program "
                                     f"(another coordinator?) listens on port {port}; stop it or choose another port")
    assert _one_line_failure(result, 1)
    assert not out.exists()


def test_a_client_that_cannot_use_its_device_joins_and_tells_the_coordinator():
    """--device naming a GPU this machine lacks: the client says HELLO, then a fatal ERROR naming the
    device (for the coordinator to abort on, naming the client), and exits 1 saying the same."""
    import torch
    import zmq

    from edgesync.transport import protocol
    from edgesync.transport.protocol import CLIENT_TYPES, Message, MessageType

    device = "cuda:63" if torch.cuda.is_available() else "cuda:0"
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-m", "edgesync.cli", "client", "--connect", f"127.0.0.1:{port}",
                             "--device", device, "--connect-timeout", "20"], cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        received = []
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        deadline = time.monotonic() + 20
        while len(received) < 2 and time.monotonic() < deadline:
            if poller.poll(200):
                frames = router.recv_multipart()
                msg = Message.from_frames(frames[1:], CLIENT_TYPES)
                received.append(msg)
                if msg.type == MessageType.HELLO:  # the coordinator admits it, as it would today
                    router.send_multipart([frames[0], *protocol.welcome(0, 2, "t", {}, 0, 30.0).to_frames()])
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        router.close(linger=0)
        ctx.term()
    assert [m.type for m in received] == [MessageType.HELLO, MessageType.ERROR]
    hello, error = received
    assert hello.meta["info"]["device"] == device
    reason = error.meta["reason"]
    assert error.meta == {"reason": reason, "fatal": True}
    assert reason.startswith(f"client cannot use device {device}: device '{device}' was asked for but this machine")
    line = _one_line_failure(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), 1)
    assert line == f"--device {device}: {reason} (the coordinator at tcp://127.0.0.1:{port} was told)"
