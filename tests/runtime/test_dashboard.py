"""The dashboard's parts without a browser: the coordinator's fleet view, the run-folder reader on a growing
folder, the web app's routes and token, the bind option, and the CLI's refusals. The page itself, in chromium
on a live run: test_dashboard_browser.py."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import yaml
from starlette.testclient import TestClient

from edgesync.config import load_scenario
from edgesync.dashboard.app import create_app
from edgesync.dashboard.feed import MAX_EVENTS, Bounded, RunFeed, finite, thinned
from edgesync.dashboard.serve import BindError, is_local, parse_bind, token_for
from edgesync.emulation.profiles import parse_profile
from edgesync.runtime.bookkeeping.liveness import Liveness
from edgesync.emulation.links import Link
from edgesync.runtime.live.fleet import FleetView, link_text

REPO = Path(__file__).resolve().parents[2]


# -- the coordinator's fleet view --------------------------------------------------------------------------
def fake_coordinator(profiles: list[str]):
    peers = {r: SimpleNamespace(identity=f"id{r}".encode(), info={"host": f"h{r}"}, profile=parse_profile(p))
             for r, p in enumerate(profiles)}
    sock = SimpleNamespace(bytes_in={p.identity: 1000 * (r + 1) for r, p in peers.items()},
                           bytes_out={p.identity: 500 for p in peers.values()})
    liveness = Liveness(5.0)
    for r in peers:
        liveness.seen(r)
    return SimpleNamespace(peers=peers, sock=sock, _bytes0=({}, {}), joining={},
                           members=SimpleNamespace(liveness=liveness),
                           availability=SimpleNamespace(is_offline=lambda rank, now: False))


def test_the_fleet_view_tells_states_and_each_clients_pace_end_to_end(tmp_path):
    sc = load_scenario({"name": "f", "clients": ["x1", "x1", "x10"], "algorithms": [{"name": "asgd"}]})
    coord = fake_coordinator(["x1", "x1", "x10"])
    fleet = FleetView(tmp_path, every_s=1.0)
    fleet.start("asgd", sc, coord.peers)
    for rank in range(3):
        fleet.instructed(rank, 0.5)  # on the downlink until 0.5 s
    assert [r["state"] for r in fleet.rows(coord, 0.2)] == ["sending"] * 3
    assert [r["state"] for r in fleet.rows(coord, 0.6)] == ["computing"] * 3
    # x1: 2 steps in 0.2 s (0.5 → 0.7); x10: 1 step in 1 s
    fleet.updated(0, {"steps": 2}, [{"client": 0, "lag": 3}], 0.7)
    fleet.updated(1, {"steps": 2}, [], 0.7)
    fleet.updated(2, {"steps": 1}, [{"client": 2, "lag": 7}], 1.5)
    rows = {r["client"]: r for r in fleet.rows(coord, 1.6)}
    assert rows[0]["state"] == "waiting" and rows[0]["lag"] == 3 and rows[1]["lag"] is None
    assert rows[0]["step_ms"] == pytest.approx(100) and rows[2]["step_ms"] == pytest.approx(1000)
    assert rows[0]["achieved"] == 1.0 and rows[2]["achieved"] == pytest.approx(10.0)
    assert rows[2]["factor"] == 10.0 and rows[2]["profile"] == "x10" and rows[2]["host"] == "h2"
    assert rows[1]["bytes_up"] == 2000 and rows[1]["downlink"] == "unlimited"
    # its next busy time counts from the later of its instruction's arrival and its last update
    fleet.instructed(0, 1.0)
    fleet.updated(0, {"steps": 1}, [], 1.2)
    assert fleet.tracks[0].busy_s == pytest.approx(0.4)
    # lost, joining, back; a lost client's outstanding instruction does not count as busy time
    coord.members.liveness.lose(1, "test")
    fleet.lost(1)
    assert {r["client"]: r["state"] for r in fleet.rows(coord, 2.0)}[1] == "lost"
    coord.joining[1] = "READY"
    assert {r["client"]: r["state"] for r in fleet.rows(coord, 2.0)}[1] == "joining"
    del coord.joining[1]
    coord.members.liveness.back(1)
    row1 = {r["client"]: r for r in fleet.rows(coord, 2.1)}[1]
    assert row1["back"] and row1["losses"] == 1 and row1["state"] == "idle"


def test_a_links_text_is_its_setting_in_force_then():
    assert link_text(Link()) == "unlimited"
    assert link_text(Link(rate_mbps=10, latency_s=0.05)) == "10 Mbit/s 50 ms"
    traced = Link(rate_mbps=20, latency_s=0.04, trace=((10.0, 2.0, 0.15), (20.0, 20.0, 0.04)))
    assert link_text(traced, 5.0) == "20 Mbit/s 40 ms (trace)"
    assert link_text(traced, 12.0) == "2 Mbit/s 150 ms (trace)"


def test_the_fleet_file_is_written_at_most_once_per_interval_and_keeps_finished_entries(tmp_path):
    sc = load_scenario({"name": "f", "clients": 2, "algorithms": [{"name": "asgd"}, {"name": "ssgd"}]})
    coord = fake_coordinator(["x1", "x1"])
    fleet = FleetView(tmp_path, every_s=1.0)
    fleet.start("asgd", sc, coord.peers)
    fleet.tick(coord, 0.0)
    first = (tmp_path / "fleet.json").stat().st_mtime_ns
    fleet.tick(coord, 0.5)  # too soon: not written
    assert (tmp_path / "fleet.json").stat().st_mtime_ns == first
    fleet.tick(coord, 0.6, final=True)
    fleet.start("ssgd", sc, coord.peers)
    fleet.tick(coord, 0.1)
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert data["current"] == "ssgd" and list(data["entries"]) == ["asgd", "ssgd"]
    # the next variant of a sweep (or seed) has a coordinator of its own: it adds to the file
    later = FleetView(tmp_path, every_s=1.0)
    later.start("asgd@seed=1", sc, coord.peers)
    later.tick(coord, 0.0)
    assert list(json.loads((tmp_path / "fleet.json").read_text())["entries"]) == ["asgd", "ssgd", "asgd@seed=1"]
    assert data["entries"]["asgd"]["final"] and {c["state"] for c in data["entries"]["asgd"]["clients"]} == {"done"}


# -- the run folder, read as it grows ------------------------------------------------------------------------
def append(path: Path, *rows: dict, raw: str = "") -> None:
    with open(path, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
        f.write(raw)


def test_the_feed_reads_only_whole_new_lines_and_only_what_a_viewer_has_not_seen(tmp_path):
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump({"name": "s", "runtime": "live", "clients": ["x1", "x2"],
                                                           "algorithms": [{"name": "asgd"}]}))
    feed = RunFeed(tmp_path)
    append(tmp_path / "metrics.jsonl", {"algorithm": "asgd@seed=0", "time_s": 0.0, "test_acc": 0.1, "samples": 0,
                                        "wall_clock": 100.0, "extra": 1},
           raw='{"algorithm": "asgd@seed=0", "time_s": 1.0, "test_a')  # a line being written
    append(tmp_path / "events.jsonl", {"wall_clock": 100.5, "level": "WARNING", "message": "client 1 lost: silent"},
           {"wall_clock": 101.0, "level": "INFO", "message": "client 1 is back"})
    append(tmp_path / "updates.jsonl", {"algorithm": "asgd@seed=0", "time_s": 0.4, "client": 0, "lag": 1},
           {"algorithm": "asgd@seed=0", "time_s": 2.0, "client": 1, "presence": "offline"})
    feed.poll()
    state, cursor = feed.since({"metrics": 0, "events": 0, "presence": 0, "fleet": -1})
    assert state["scenario"] == {"name": "s", "runtime": "live", "clients": 2, "algorithms": ["asgd"]}
    assert [r["time_s"] for r in state["metrics"]] == [0.0] and "extra" not in state["metrics"][0]
    assert state["labels"] == {"asgd@seed=0": {"group": "asgd", "seed": 0}}
    assert [e["kind"] for e in state["events"]] == ["lost", "back", "availability"]
    assert state["events"][2]["wall_clock"] == pytest.approx(102.0)  # the entry's wall clock at 0 s, plus 2 s
    assert state["presence"] == [{"label": "asgd@seed=0", "client": 1, "time_s": 2.0, "online": False}]
    assert feed.since(cursor)[0] is None  # nothing new for this viewer
    append(tmp_path / "metrics.jsonl", raw='cc": 0.5, "test_loss": NaN}\n')  # the line completed
    feed.poll()
    delta, cursor = feed.since(cursor)
    assert [r["time_s"] for r in delta["metrics"]] == [1.0] and delta["metrics"][0]["test_loss"] is None
    assert delta["events"] == [] and not delta["finished"]
    (tmp_path / "summary.json").write_text(json.dumps({"asgd@seed=0": {"final_acc": 0.5, "time_to_target_s": math.inf}},
                                                      allow_nan=True))
    feed.poll()
    delta, cursor = feed.since(cursor)
    assert delta["finished"] and delta["final"]["asgd@seed=0"]["time_to_target_s"] is None


def test_a_folder_without_fleet_json_shows_its_clients_rows(tmp_path):
    append(tmp_path / "clients.jsonl", {"algorithm": "ssgd", "client": 0, "profile": "x1", "target_factor": 1.0,
                                        "achieved_factor": 1.0, "steps": 10, "compute_s": 0.5, "rejoined": 1})
    feed = RunFeed(tmp_path)
    feed.poll()
    client = feed.state()["fleet"]["entries"]["ssgd"]["clients"][0]
    assert (client["client"], client["state"], client["step_ms"], client["back"], client["factor"]) == \
        (0, "done", 50.0, True, 1.0)


def test_what_the_feed_keeps_is_bounded():
    kept = Bounded(3)
    kept.extend([1, 2])
    kept.extend([3, 4, 5])
    assert kept.items == [3, 4, 5] and kept.since(0) == ([3, 4, 5], 5) and kept.since(4) == ([5], 5)
    assert MAX_EVENTS <= 5000
    assert finite({"a": [1.0, math.nan, -math.inf], "b": "x"}) == {"a": [1.0, None, None], "b": "x"}
    rows = [{"algorithm": "a", "i": i} for i in range(100)] + [{"algorithm": "b", "i": i} for i in range(5)]
    thin = thinned(rows, 10)
    a = [r["i"] for r in thin if r["algorithm"] == "a"]
    assert len(a) == 10 and a[0] == 0 and a[-1] == 99 and a == sorted(a)
    assert [r["i"] for r in thin if r["algorithm"] == "b"] == list(range(5))  # under the limit: every row


# -- the web app ------------------------------------------------------------------------------------------------
def finished_folder(tmp_path: Path) -> Path:
    append(tmp_path / "metrics.jsonl", {"algorithm": "asgd", "time_s": 0.0, "test_acc": 0.1, "wall_clock": 1.0})
    (tmp_path / "summary.json").write_text(json.dumps({"asgd": {"final_acc": 0.1}}))
    return tmp_path


def test_the_app_serves_the_page_plotly_and_the_state_and_streams_until_the_run_is_over(tmp_path):
    client = TestClient(create_app(finished_folder(tmp_path)))
    page = client.get("/")
    assert page.status_code == 200 and "plotly.min.js" in page.text and str(tmp_path) in page.text
    js = client.get("/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000 and b"Plotly" in js.content[:5000]
    assert client.get("/api/state").json()["metrics"][0]["test_acc"] == 0.1
    with client.stream("GET", "/api/stream") as stream:
        body = "".join(stream.iter_text())
    assert body.startswith("event: delta\n") and body.rstrip().endswith("event: done\ndata: {}")
    assert client.post("/api/state").status_code == 405  # read-only


def test_a_folder_name_cannot_end_the_pages_script(tmp_path):
    folder = tmp_path / "run<" / "script><script>alert(1)"  # the path reads …/run</script><script>alert(1)
    folder.mkdir(parents=True)
    page = TestClient(create_app(finished_folder(folder))).get("/").text
    assert "</script><script>alert(1)" not in page and "<\\/script><script>alert(1)" in page


def test_with_a_token_every_route_asks_for_it(tmp_path):
    client = TestClient(create_app(finished_folder(tmp_path), token="s3cret"))
    for route in ("/", "/plotly.min.js", "/api/state", "/api/stream"):
        assert client.get(route).status_code == 401, route
        assert client.get(route + "?token=wrong").status_code == 401, route
    assert client.get("/api/state?token=s3cret").status_code == 200
    page = client.get("/?token=s3cret").text  # the page loads plotly.js with the token too
    assert '<script src="plotly.min.js?token=s3cret">' in page
    assert client.get("/plotly.min.js?token=s3cret").status_code == 200
    assert client.get("/api/state", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_the_bind_option_and_the_token_rule():
    assert parse_bind("8050") == ("127.0.0.1", 8050)
    assert parse_bind("0.0.0.0:0") == ("0.0.0.0", 0)
    assert parse_bind("[::1]:9000") == ("::1", 9000)
    for bad in ("", "host", "host:", ":80", "80000", "1.2.3.4:x"):
        with pytest.raises(BindError, match="expected \\[HOST:\\]PORT"):
            parse_bind(bad)
    assert is_local("127.0.0.1") and is_local("localhost") and not is_local("0.0.0.0")
    assert token_for("127.0.0.1") is None and len(token_for("0.0.0.0") or "") >= 16
    assert token_for("10.0.0.5", "given") == "given"


def test_the_cli_refuses_a_bad_folder_and_a_bad_bind_before_running(tmp_path):
    run = [sys.executable, "-m", "edgesync.cli"]
    out = subprocess.run([*run, "dashboard", str(tmp_path / "nowhere")], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2 and "not a run folder" in out.stderr
    out = subprocess.run([*run, "run", "scenarios/quickstart.yaml", "--dashboard", "here", "--out",
                          str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2 and "--dashboard 'here'" in out.stderr and not (tmp_path / "run").exists()


def test_a_dashboard_whose_run_was_killed_outright_exits_by_itself(tmp_path):
    """SIGKILL gives a run no chance to stop the dashboard it started: the dashboard notices its parent gone."""
    finished_folder(tmp_path)
    starter = ("import subprocess, sys, os, time\n"
               "p = subprocess.Popen([sys.executable, '-m', 'edgesync.dashboard', sys.argv[1], '--bind', "
               "'127.0.0.1:0', '--parent', str(os.getpid())], stdout=subprocess.PIPE, text=True)\n"
               "print(p.pid, p.stdout.readline().strip(), flush=True)\n"
               "time.sleep(600)\n")
    run = subprocess.Popen([sys.executable, "-c", starter, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    pid, url = run.stdout.readline().split()
    assert url.startswith("http://127.0.0.1:")
    run.kill()
    run.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and psutil.pid_exists(int(pid)) and \
            psutil.Process(int(pid)).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.1)
    assert not psutil.pid_exists(int(pid)) or psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE
