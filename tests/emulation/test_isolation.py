"""Per-client CPU isolation: cgroup quotas, core pinning, and the clean fallback without root.

The real tests act on child processes: a busy child capped by the kernel's CFS quota (root and a writable
cgroup v1 cpu hierarchy, else skipped), and a sleeping child pinned to a core. The cgroup v2 detection and
the file writes run against a fake tree in tmp_path, with root faked through os.geteuid; there the "kernel"
is plain files, so nothing moves. About 3 s in all.
"""
import os
import subprocess
import sys

import pytest

from edgesync.emulation import isolation
from edgesync.emulation.isolation import isolate, release

# spins for 1.5 s once told to, prints its CPU time / wall time, then waits to be killed
SPIN = """
import sys, time
sys.stdin.readline()
cpu, wall = time.process_time(), time.perf_counter()
while time.perf_counter() - wall < 1.5:
    pass
print((time.process_time() - cpu) / (time.perf_counter() - wall), flush=True)
time.sleep(30)
"""


@pytest.fixture
def sleeper():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    yield child
    child.kill()
    child.wait()


def _fake_tree(tmp_path, mount_line: str) -> dict:
    """isolate()'s keywords pointing at tmp_path, with a mounts file holding mount_line."""
    (tmp_path / "mounts").write_text(mount_line + "\n")
    return {"sysfs": str(tmp_path), "mounts": str(tmp_path / "mounts")}


def _fake_v1(tmp_path) -> tuple[dict, object]:
    mount = tmp_path / "cpu,cpuacct"
    mount.mkdir()
    return _fake_tree(tmp_path, f"cgroup {mount} cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0"), mount


def test_cgroups_fall_back_without_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = isolate(cpu_share=0.5)
    assert result.mechanism == "none" and result.path is None
    assert "root" in result.detail and "sleeping" in result.detail


def test_arguments():
    assert isolate().mechanism == "none"
    assert isolate(cpu_share=0.5, core=0, prefer="none").detail.startswith("none: isolation off")
    for bad in ({"cpu_share": 0}, {"cpu_share": float("nan")}, {"prefer": "affinity"}, {"prefer": "cgroup"},
                {"core": 0, "prefer": "fast"}):
        with pytest.raises(ValueError):
            isolate(**bad)


def _real_v1_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    _, v1 = isolation._cgroup_mounts("/sys/fs/cgroup", "/proc/self/mounts")
    if v1 is None or not os.access(v1, os.W_OK):
        return "no writable cgroup v1 cpu hierarchy"
    return None


REAL_V1_MISSING = _real_v1_missing()


@pytest.mark.timing
@pytest.mark.skipif(REAL_V1_MISSING is not None, reason=str(REAL_V1_MISSING))
def test_real_cgroup_v1_quota_caps_a_busy_child():
    _, v1 = isolation._cgroup_mounts("/sys/fs/cgroup", "/proc/self/mounts")
    stale = os.path.join(v1, "edgesync", "client-99999999")  # above any pid_max: a killed client's leftover
    os.makedirs(stale, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    result = None
    try:
        result = isolate(cpu_share=0.25, pid=child.pid)
        assert result.mechanism == "cgroup-v1", result.detail
        assert result.path == os.path.join(v1, "edgesync", f"client-{child.pid}")
        assert "0.25 CPU" in result.detail and result.path in result.detail
        assert not os.path.exists(stale)
        with open(f"/proc/{child.pid}/cgroup") as f:
            assert f":/edgesync/client-{child.pid}\n" in f.read()
        child.stdin.write("go\n")
        child.stdin.flush()
        ratio = float(child.stdout.readline())
        assert 0.15 <= ratio <= 0.35, ratio
        release(result, pid=child.pid)
        assert not os.path.exists(result.path)
        assert isolation._group_of(child.pid, v1, v2=False) == result.previous
    finally:
        child.kill()
        child.wait()
        if result is not None:
            release(result, pid=child.pid)


def test_affinity_pins_a_child_and_release_restores(sleeper):
    allowed = os.sched_getaffinity(sleeper.pid)
    result = isolate(core=0, pid=sleeper.pid)
    assert result.mechanism == "affinity" and result.path is None
    assert os.sched_getaffinity(sleeper.pid) == {sorted(allowed)[0]}
    assert f"core {sorted(allowed)[0]}" in result.detail
    out_of_range = isolate(core=1, prefer="affinity", pid=sleeper.pid)  # only one CPU is allowed now
    assert out_of_range.mechanism == "none" and "out of range" in out_of_range.detail
    assert isolate(core=-1, pid=sleeper.pid).mechanism == "none"
    release(result, pid=sleeper.pid)
    assert os.sched_getaffinity(sleeper.pid) >= allowed


def test_fake_v2_tree_gets_cpu_max(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    tree = _fake_tree(tmp_path, f"cgroup2 {root} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0")
    result = isolate(cpu_share=0.5, **tree)
    leaf = root / "edgesync" / f"client-{os.getpid()}"
    assert result.mechanism == "cgroup-v2", result.detail
    assert result.path == str(leaf) and str(leaf) in result.detail
    assert (leaf / "cpu.max").read_text() == "50000 100000"
    assert (leaf / "cgroup.procs").read_text() == str(os.getpid())
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"
    assert (root / "edgesync" / "cgroup.subtree_control").read_text() == "+cpu"
    release(result)  # moves this pid back: in the fake tree, a write to the root's cgroup.procs
    assert (root / "cgroup.procs").read_text() == str(os.getpid())


def test_fake_v2_tree_without_cpu_controller(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("memory pids\n")
    result = isolate(cpu_share=0.5, **_fake_tree(tmp_path, f"cgroup2 {root} cgroup2 rw 0 0"))
    assert result.mechanism == "none" and "cpu controller" in result.detail
    assert not (root / "edgesync").exists()
    # mounts outside sysfs do not count, so a fake sysfs never reaches the real hierarchy
    outside = isolate(cpu_share=0.5, **_fake_tree(tmp_path, "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0"))
    assert outside.mechanism == "none" and "no cgroup v1 cpu controller" in outside.detail


def test_fake_v1_reisolating_rewrites_the_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    tree, mount = _fake_v1(tmp_path)
    first = isolate(cpu_share=0.5, **tree)
    assert first.mechanism == "cgroup-v1", first.detail
    folder = mount / "edgesync" / f"client-{os.getpid()}"
    assert first.path == str(folder)
    assert (folder / "cpu.cfs_period_us").read_text() == "100000"
    assert (folder / "cpu.cfs_quota_us").read_text() == "50000"
    second = isolate(cpu_share=0.25, **tree)
    assert second.path == first.path and (folder / "cpu.cfs_quota_us").read_text() == "25000"
    tiny = isolate(cpu_share=0.001, **tree)  # the kernel's minimum quota is 1 ms
    assert (folder / "cpu.cfs_quota_us").read_text() == "1000" and "0.01 CPU" in tiny.detail
    isolate(cpu_share=1000.0, **tree)  # more than the host has: capped
    assert (folder / "cpu.cfs_quota_us").read_text() == str(os.cpu_count() * 100000)
    assert os.listdir(mount / "edgesync") == [folder.name]


def test_fake_v1_stale_siblings_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    tree, mount = _fake_v1(tmp_path)
    group = mount / "edgesync"
    for name in ("client-99999999", "client-99999998", f"client-{os.getppid()}", "other"):
        (group / name).mkdir(parents=True)
    (group / "client-99999998" / "cgroup.procs").write_text("")  # refuses rmdir, as a busy group does
    result = isolate(cpu_share=0.5, **tree)
    assert result.mechanism == "cgroup-v1", result.detail
    assert sorted(os.listdir(group)) == sorted(
        ["client-99999998", f"client-{os.getppid()}", "other", f"client-{os.getpid()}"])
