"""The warm process local clients are forked from (runtime/live/warm_start.py): each child runs the
`edgesync client …` command it was given, shows it as its process title, writes to its own log, and its
exit status reaches the launcher as a Popen's would (a code, or minus the signal that ended it)."""
from __future__ import annotations

import time

import psutil

from edgesync.runtime.live.launcher import client_env
from edgesync.runtime.live.warm_start import warm_starter

NOWHERE = "tcp://127.0.0.1:9"  # nothing listens there: a client waits for its --connect-timeout, then gives up


def test_a_child_runs_its_command_under_its_title_and_exits_with_its_code(tmp_path):
    log = tmp_path / "client.log"
    child = warm_starter().start(["client", "--connect", NOWHERE, "--rank", "3", "--connect-timeout", "2"],
                                 log, client_env(), cwd=tmp_path)
    deadline = time.monotonic() + 20
    while (words := " ".join(psutil.Process(child.pid).cmdline()).split())[:2] != ["edgesync", "client"]:
        assert time.monotonic() < deadline, words  # a fresh child titles itself first thing
        time.sleep(0.01)
    assert words[words.index("--rank") + 1] == "3", words
    assert psutil.Process(child.pid).cwd() == str(tmp_path)
    assert child.poll() is None
    assert child.wait(60) == 1  # gave up: the command's own exit code
    assert "gave up after 2 s (--connect-timeout 2)" in log.read_text()


def test_a_bad_option_is_the_commands_one_line_and_exit_2(tmp_path):
    log = tmp_path / "client.log"
    child = warm_starter().start(["client", "--connect", NOWHERE, "--rank", "-1"], log, client_env())
    assert child.wait(60) == 2
    assert "--rank -1: must be 0 or more" in log.read_text()


def test_a_killed_child_reports_the_signal_and_the_next_child_is_told_apart(tmp_path):
    starter = warm_starter()
    args = ["client", "--connect", NOWHERE, "--connect-timeout", "60"]
    first = starter.start(args, tmp_path / "first.log", client_env())
    first.kill()
    assert first.wait(30) == -9
    second = starter.start(args, tmp_path / "second.log", client_env())
    assert second.serial != first.serial and second.poll() is None  # its own status, whatever its PID
    second.terminate()
    second.wait(30)  # reaped by the warm process: gone, not a zombie left behind
    deadline = time.monotonic() + 10
    while psutil.pid_exists(second.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not psutil.pid_exists(second.pid) or psutil.Process(second.pid).status() == psutil.STATUS_ZOMBIE


def test_a_killed_childs_code_is_known_before_the_warm_process_reaps_it(tmp_path):
    """On a busy host the warm process's report can come after the coordinator saw the client's connection
    close; the launcher reads the code from the kernel meanwhile, as Popen.poll would."""
    starter = warm_starter()
    child = starter.start(["client", "--connect", NOWHERE, "--connect-timeout", "60"], tmp_path / "c.log",
                          client_env())
    warm = psutil.Process(starter._proc.pid)
    warm.suspend()  # it cannot reap or report
    try:
        child.kill()
        deadline = time.monotonic() + 10
        while child.poll() is None:
            assert time.monotonic() < deadline, "the killed child's code was not seen before its report"
            time.sleep(0.01)
        assert child.returncode == -9 and psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
    finally:
        warm.resume()


def test_a_child_sees_the_pythonpath_it_was_given_not_only_the_warm_processs(tmp_path):
    """An extension on the run's PYTHONPATH (its imports and its entry points) reaches a client forked from a warm
    process that started before that PYTHONPATH was set, as it reaches a fresh `python`."""
    first = warm_starter().start(["plugins"], tmp_path / "first.log", client_env())  # the warm process starts here
    first.wait(60)
    (tmp_path / "lab_ext.py").write_text("from edgesync.api import API_VERSION\n")
    dist = tmp_path / "lab_ext-0.2.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lab-ext\nVersion: 0.2.0\n")
    (dist / "top_level.txt").write_text("lab_ext\n")
    (dist / "entry_points.txt").write_text("[edgesync.models]\nlabnet = lab_ext:API_VERSION\n")
    log = tmp_path / "plugins.log"
    child = warm_starter().start(["plugins"], log, {**client_env(), "PYTHONPATH": str(tmp_path), "COLUMNS": "200"})
    child.wait(60)
    assert "labnet" in log.read_text() and "lab-ext 0.2.0" in log.read_text(), log.read_text()
