"""A lab's warm process forks Flower's app commands (edgesync/flower/warm_apps.py): the stand-in on PATH
hands over its arguments, environment and standard streams, passes signals on and exits with the app's
code; without a warm process it runs the real command. Real processes and sockets; the lab tests
(test_flower_integration.py, test_user_app.py) run whole Flower runs through it."""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from edgesync.flower import warm_apps
from edgesync.flower.warm_apps_shim import SOCKET_ENV

pytestmark = pytest.mark.skipif(not warm_apps.supported(), reason="warm Flower apps need Linux")

NO_RUNTIME = ["--runtime-api-address", "127.0.0.1:1", "--token", "ab" * 16, "--insecure"]  # nobody listens there


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """(environment whose PATH starts with the stand-ins, the warm process)."""
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    proc = subprocess.Popen(warm_apps.prepare(tmp_path_factory.mktemp("home"), env), env=env)
    deadline = time.monotonic() + 120
    while not warm_apps.ready(env):
        assert proc.poll() is None and time.monotonic() < deadline, "the warm process did not start"
        time.sleep(0.1)
    yield env, psutil.Process(proc.pid)
    proc.terminate()
    proc.wait(timeout=10)


def test_an_app_is_forked_with_the_stand_ins_streams_and_exit_code(warm, tmp_path):
    env, _ = warm
    ok = subprocess.run(["flwr-clientapp", "--help"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "--runtime-api-address" in ok.stdout, ok.stderr
    bad = subprocess.run(["flwr-serverapp", "--no-such-flag"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "flwr-serverapp: error: one of the arguments --token" in bad.stderr, bad


def test_the_app_is_the_warm_process_child_and_gets_the_stand_ins_signals(warm, tmp_path):
    env, server = warm
    env = {**env, "EDGESYNC_PROBE": "42"}
    shim = subprocess.Popen(["flwr-clientapp", *NO_RUNTIME], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not (apps := [c for c in server.children() if "flwr-clientapp" in " ".join(c.cmdline())]):
        assert shim.poll() is None and time.monotonic() < deadline, "no app forked"
        time.sleep(0.1)
    app = apps[0]
    assert app.cwd() == str(tmp_path)
    assert " ".join(app.cmdline()).split() == ["flwr-clientapp", *NO_RUNTIME]  # its title: the command
    time.sleep(1)  # past its start: it is retrying the connection
    shim.terminate()
    out, _ = shim.communicate(timeout=60)
    assert not app.is_running() or app.status() == psutil.STATUS_ZOMBIE
    assert "Task stopped." in out, out  # Flower's own SIGTERM handler ran in the app, its log on our stdout
    assert shim.returncode == 0


def test_a_bad_request_is_refused_and_the_next_is_served(warm):
    env, _ = warm
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect("\0" + env[SOCKET_ENV])
        s.sendall(b'{"app": "flwr-clientapp", "argv": ["--help"]}\n')  # no streams handed over
        assert s.recv(100) == b""  # closed without forking
    ok = subprocess.run(["flwr-clientapp", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "--runtime-api-address" in ok.stdout


def test_without_a_warm_process_the_stand_in_runs_the_real_command(warm):
    env, _ = warm
    env = {**env, SOCKET_ENV: "edgesync-warm-apps-nobody"}
    ok = subprocess.run(["flwr-clientapp", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "--runtime-api-address" in ok.stdout, ok.stderr
