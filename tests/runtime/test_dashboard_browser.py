"""The dashboard in a real headless browser (Debian's chromium through Selenium): a live loopback run of four
client processes, one of them ×10, watched while a client is killed and started again; then the finished
folder replayed with `edgesync dashboard`, which must show the same final figures.

EDGESYNC_DOCS_SCREENSHOTS=1 saves the screenshots docs/dashboard.md shows into docs/img/ (else into the
test's temporary folder)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from test_faults import ENV, LONG_TIMEOUT_S, REPO, lab_for, metrics, scenario  # noqa: F401 - lab_for: the fixture

pytestmark = pytest.mark.slow

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
URL = re.compile(r"(http://\S+)\s")  # a whole address: the line may still be being written


@pytest.fixture
def browser():
    if not (CHROMIUM and DRIVER):
        pytest.skip("no chromium and chromedriver here: scripts/setup_browser.sh installs Debian's (make test runs it)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1400"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))  # Debian's driver: nothing downloaded
    yield driver
    driver.quit()


def until(what, timeout_s: float, why: str, lab=None):
    """`what()`'s first true value within `timeout_s`; a page caught mid-redraw (an element gone, a table not
    drawn yet) is asked again, and the last such error is reported if the time runs out."""
    from selenium.common.exceptions import WebDriverException
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        try:
            got = what()
        except (WebDriverException, IndexError, KeyError, TypeError) as exc:
            got, last = None, exc
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {why}" + (f" (last error: {last!r})" if last else "")
                + (f":\n{lab.output()}" if lab else ""))


def texts(driver, selector: str) -> list[list[str]]:
    """The cells' text of each row `selector` finds, read at one moment (the page redraws its tables whole)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(r => [...r.children].map(c => c.innerText))",
        selector)


def row(driver, client: int) -> dict[str, str]:
    """The fleet table's row of `client`, cell by column header (what a person reads, not the page's data)."""
    headers = texts(driver, "#fleet thead tr")[0]
    cells = texts(driver, f'#fleet tbody tr[data-client="{client}"]')
    return dict(zip(headers, cells[0])) if cells else {}


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def results(driver) -> list[list[str]]:
    return texts(driver, "#results tbody tr")


def screenshot(driver, tmp_path: Path, name: str) -> None:
    folder = REPO / "docs" / "img" if os.environ.get("EDGESYNC_DOCS_SCREENSHOTS") == "1" else tmp_path
    driver.save_screenshot(str(folder / name))


def test_the_dashboard_follows_a_live_run_and_replays_it(lab_for, browser, tmp_path):  # noqa: F811
    # ASGD: every client's pace shows (no barrier evens it out). x1 steps take 100 ms, the x10 client's a second.
    lab = lab_for(scenario({"name": "asgd", "lr": 0.05}, ["x1", "x1", "x1", "x10"], updates=100_000, budget_s=40,
                           timeout_s=LONG_TIMEOUT_S))  # lost by its closed connection, not by silence
    lab.start_coordinator("--scenario", str(lab.scenario), "--out", str(lab.run_dir), "--dashboard", "127.0.0.1:0")
    coordinator_out = sorted(lab.tmp.glob("coordinator-*.out"))[0]
    url = until(lambda: (m := URL.search(coordinator_out.read_text())) and m.group(1), 60, "the dashboard's address",
                lab)
    for rank in range(4):
        lab.start_client(rank)
    browser.get(url)

    # The x10 client computes slower: its achieved factor, end to end, is several times the others'.
    until(lambda: (number(row(browser, 3).get("achieved", "")) or 0) >= 5, 90, "the x10 client's factor", lab)
    fast = [number(row(browser, r)["achieved"]) for r in range(3)]
    assert all(f is not None and f < 2 for f in fast), fast
    assert row(browser, 3)["profile"] == "x10" and row(browser, 3)["factor"] == "10.00"
    points = browser.execute_script("return window.edgesync.curvePoints('asgd')")

    # A client killed mid-run turns lost, then back when its process is started again.
    lab.clients[1].kill()
    until(lambda: "lost" in row(browser, 1).get("state", ""), 30, "client 1 shown lost", lab)
    until(lambda: any(r[1] == "lost" for r in texts(browser, "#events tbody tr")), 10, "the loss in the event log")
    lab.start_client(1)
    until(lambda: "back" in row(browser, 1).get("state", ""), 60, "client 1 shown back", lab)
    assert "lost" not in row(browser, 1)["state"]
    screenshot(browser, tmp_path, "dashboard-live.png")

    # The accuracy curve grows while the run goes on: more evaluations, drawn in the chart too.
    until(lambda: browser.execute_script("return window.edgesync.curvePoints('asgd')") > points + 3, 30,
          "the accuracy curve to grow")
    drawn = browser.execute_script("return document.getElementById('acc').data[0].x.length")
    assert drawn > points

    lab.finish()
    until(lambda: browser.execute_script("return window.edgesync.state.finished"), 10, "the page to hear the end")
    until(lambda: "final evaluation" in browser.find_element("css selector", "#results-note").text, 5, "a redraw")
    live = results(browser)
    final_row = metrics(lab)[-1]
    assert live[0][0] == "asgd" and live[0][1] == f"{final_row['test_acc']:.4f}", (live, final_row)
    live_fleet = {r: row(browser, r) for r in range(4)}
    assert {f["state"] for f in live_fleet.values()} <= {"done", "done · back"}, live_fleet

    # The finished folder, replayed: the same final figures and the same fleet as the live page ended with.
    replay = subprocess.Popen([sys.executable, "-m", "edgesync.cli", "dashboard", str(lab.run_dir), "--bind",
                               "127.0.0.1:0"], cwd=REPO, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        line = replay.stdout.readline()
        browser.get(URL.search(line).group(1))
        until(lambda: browser.execute_script("return window.edgesync.state.finished") and results(browser), 30,
              "the replay to load")
        until(lambda: "final evaluation" in browser.find_element("css selector", "#results-note").text, 5, "a redraw")
        assert results(browser) == live
        assert {r: row(browser, r) for r in range(4)} == live_fleet
        assert "replay" in browser.find_element("id", "status").text
        screenshot(browser, tmp_path, "dashboard-replay.png")
    finally:
        replay.terminate()
        replay.wait(10)


def test_a_simulated_run_with_seeds_and_churn_replays_with_bands_and_offline_spans(browser, tmp_path):
    """Three seeds of FedAvg on four devices that come and go, in the simulator: the page draws the seeds as one
    mean line inside a band, each device's offline spans, the round draws and availability changes as events,
    and the fleet from clients.jsonl (a simulator run has no fleet.json)."""
    sc = {"name": "seeds-churn", "runtime": "sim", "seed": 0, "seeds": [0, 1, 2],
          "dataset": {"name": "fashion_mnist", "train_size": 1000},
          "clients": {"count": 4, "profile": "x1", "availability": {"kind": "exponential", "mean_on_s": 6,
                                                                      "mean_off_s": 3}},
          "sim": {"base_step_s": 0.05},
          "algorithms": [{"name": "local_sgd", "label": "fedavg", "clients_per_round": 2, "local_steps": 5,
                          "lr": 0.05}],
          "stop": {"time_budget_s": 10, "target_acc": None}, "eval": {"every_s": 2, "test_size": 200}}
    (tmp_path / "sc.yaml").write_text(yaml.safe_dump(sc))
    run_dir = tmp_path / "run"
    cli = [sys.executable, "-m", "edgesync.cli"]
    done = subprocess.run([*cli, "run", str(tmp_path / "sc.yaml"), "--out", str(run_dir), "-q"], cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    replay = subprocess.Popen([*cli, "dashboard", str(run_dir), "--bind", "127.0.0.1:0"], cwd=REPO, env=ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        browser.get(URL.search(replay.stdout.readline()).group(1))
        until(lambda: browser.execute_script("return window.edgesync.state.finished") and results(browser), 30,
              "the replay to load")
        until(lambda: len(texts(browser, "#fleet tbody tr")) == 4, 5, "the fleet table")
        traces = browser.execute_script("return document.getElementById('acc').data.map("
                                        "t => ({name: t.name, fill: t.fill, y: t.y}))")
        low, high, mean = traces
        assert mean["name"] == "fedavg (3 seeds)" and high["fill"] == "tonexty" and len(mean["y"]) >= 5
        assert all(lo - 1e-9 <= m <= hi + 1e-9 for lo, m, hi in zip(low["y"], mean["y"], high["y"]))
        assert any(hi - lo > 1e-6 for lo, hi in zip(low["y"], high["y"]))  # the seeds differ: a band, not a line
        offline = browser.execute_script("return document.getElementById('avail').data[1].x.length")
        assert offline > 0
        kinds = {r[1] for r in texts(browser, "#events tbody tr")}
        assert {"availability", "round"} <= kinds, kinds
        assert {r["state"].split(" ")[0] for r in (row(browser, c) for c in range(4))} == {"done"}
        screenshot(browser, tmp_path, "dashboard-seeds.png")
    finally:
        replay.terminate()
        replay.wait(10)
