"""The suite's lanes (`make test`, scripts/test.sh), all at once: the tests that do not measure time run in
parallel (pytest-xdist) at low priority, the `timing` ones one after another beside them at normal priority,
and the `ray` ones one after another at low priority.

In the parallel part xdist hands out whole modules in the collection's order (`--dist loadscope`: a module's
fixtures are set up once), and the long modules come first, so that they run while the other two lanes
load the machine and the last minutes are many short modules on every worker, not one long module on one
worker while the others idle: the modules in LONGEST_FIRST in that order, then every other module with a
`slow` test, then the rest.
"""
from __future__ import annotations

import os

import pytest


# The parallel lane's longest modules, longest first (wall time beside the other lanes, docs/testing.md). Only
# the order depends on it: a module missing here runs with the other `slow` ones.
LONGEST_FIRST = (
    "tests/claims/test_dana_claim.py",             # one simulation of 3 x 1,000 updates, ~140 s
    "tests/runtime/test_faults.py",                # ~250 s: killed and resumed coordinators and clients
    "tests/flower/test_flower_adapter.py",         # ~250 s: every algorithm over in-process Flower nodes
    "tests/test_cli_run.py",                       # ~210 s: live runs as a user starts them
    "tests/flower/test_flower_integration.py",     # ~175 s: a Flower lab, then `edgesync flower-up`
    "tests/runtime/test_dashboard_browser.py",     # ~65 s: a live run and a simulated one, in chromium
    "tests/runtime/test_resume.py",                # ~100 s
    "tests/flower/test_user_app.py",               # ~90 s: a Flower lab
    "tests/runtime/test_allreduce_live.py",        # ~65 s
    "tests/flower/test_stock_flower_integration.py",  # ~60 s: a Flower lab
    "tests/runtime/test_links_runtime.py",         # ~60 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Stable: within each group, the files' own order.
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        if path in LONGEST_FIRST:
            return LONGEST_FIRST.index(path)
        return len(LONGEST_FIRST) + (0 if item.get_closest_marker("slow") else 1)
    items.sort(key=rank)


@pytest.fixture(scope="session", autouse=True)
def shared_calibration_cache_and_own_ray(tmp_path_factory: pytest.TempPathFactory):
    """One `$EDGESYNC_CACHE` for the whole test run, shared by every xdist worker: the step times and the
    coordinator's costs are measured once per test run (under the cache's lock, step_time.py), not once per
    test, and never written to the user's ~/.cache. Tests about the cache itself, and the claims (which
    calibrate on a quiet machine, as a user's first run does), set a fresh one of their own."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-N/popen-gwK → pytest-N, the same folder for every worker
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EDGESYNC_CACHE", str(root / "edgesync-cache"))
        # Each test process starts a Ray instance of its own when it needs one (ray.init's "local"), never
        # joins another worker's, which that worker may shut down mid-run. A test that names a cluster
        # (`--ray ADDRESS`) still reaches it.
        mp.setenv("RAY_ADDRESS", "local")
        yield


def pytest_configure(config: pytest.Config) -> None:
    # Reports without their plots (metrics/report.py), unless the caller says otherwise: drawing them was a few
    # CPU-seconds at the end of every run, in a CPU-bound suite (scripts/suite_cpu.py); the tests of the plots
    # ask for them (`plots`). Set before the test modules are imported: several copy os.environ for the
    # commands they start.
    os.environ.setdefault("EDGESYNC_PLOTS", "0")


@pytest.fixture
def plots(monkeypatch):
    """Reports in this test draw their plots, as a user's do by default (the suite's other tests skip them)."""
    monkeypatch.setenv("EDGESYNC_PLOTS", "1")


@pytest.fixture
def client_process():
    """`client_process(parent, rank)`: the running `edgesync client … --rank RANK` process under `parent` (a
    psutil.Process), found by its command line; a client forked from the warm process
    (runtime/live/warm_start.py) is a grandchild and shows the command as its process title."""
    def find(parent, rank: int, slots: int | None = None):
        for proc in parent.children(recursive=True):
            words = " ".join(proc.cmdline()).split()
            if "client" not in words or "--rank" not in words or words[words.index("--rank") + 1] != str(rank):
                continue
            if slots is None or ("--slots" in words and words[words.index("--slots") + 1] == str(slots)):
                return proc
        raise AssertionError(f"no client process with --rank {rank} under PID {parent.pid}")
    return find


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """With $EDGESYNC_TEST_CPU set (scripts/suite_cpu.py), this process names the test it is running in a file
    of that folder, so that the poller can charge the CPU of this process and of everything it starts to it."""
    folder = os.environ.get("EDGESYNC_TEST_CPU")
    if not folder:
        yield
        return
    mark = os.path.join(folder, f"{os.getpid()}.test")
    with open(mark, "w", encoding="utf-8") as f:
        f.write(item.nodeid)
    try:
        yield
    finally:
        os.unlink(mark)
