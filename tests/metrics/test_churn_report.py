"""The report's Participation, Availability and Traces sections and plots, on run folders written here
row by row (and one real simulator run, at the end)."""
from __future__ import annotations

import json
import struct

import pytest
import yaml

from edgesync.metrics.churn import ChurnRecords, device_traces, link_traces
from edgesync.metrics.recorder import read_jsonl, to_plain
from edgesync.metrics.report import load_run, render_report
from edgesync.config import load_scenario

pytestmark = pytest.mark.usefixtures("plots")  # these tests read the plots (conftest.py)

NEW_PLOTS = ["rounds_per_client.png", "availability.png", "traces.png"]


def _write(run_dir, scenario: dict, metrics=(), clients=(), updates=()):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    for name, rows in (("metrics", metrics), ("clients", clients), ("updates", updates)):
        (run_dir / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def _evals(labels, end, every):
    return [{"algorithm": label, "time_s": t, "updates": int(t), "samples": 32 * int(t), "test_acc": 0.1 + t / 100,
             "test_loss": 1.0, "bytes_up": 1000 * t, "bytes_down": 1000 * t}
            for label in labels for t in [i * every for i in range(int(end / every) + 1)]]


def _client(label, rank, **extra):
    return {"algorithm": label, "client": rank, "profile": "x1", "host": "sim", "device": "virtual",
            "compute_s": 1.0, "wait_s": 1.0, "wall_s": 2.0, "steps": 10, "samples": 320, "lost": 0, "rejoined": 0,
            **extra}


def _assert_png(path, min_bytes=8_000):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert len(data) > min_bytes, f"{path} is only {len(data)} bytes"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 600 and height >= 300


def _table(lines, header_start):
    """The rows of the table whose header begins with `header_start` (header and rule included)."""
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


# ------------------------------------------------------------------------------------------- few clients

def presence(label):
    """Client 2 offline 0–4 s and from 7.6 s, client 3 from 6 s; clients 0 and 1 always online."""
    return [{"algorithm": label, "time_s": t, "client": c, "presence": p}
            for t, c, p in [(0.0, 2, "offline"), (4.0, 2, "online"), (6.0, 3, "offline"), (7.6, 2, "offline")]]


def few_clients_folder(run_dir):
    """local_sgd with 2 clients per round among 4, and asgd, over 10 s with the same availability."""
    rounds = [  # (time, row): draws and closes; round 2's participants both leave, so it is drawn again
        (0.0, {"round": 0, "participants": [0, 1], "online": 3}), (2.0, {"round": 0, "contributors": [0, 1]}),
        (2.0, {"round": 1, "participants": [1, 3], "online": 3}), (5.0, {"round": 1, "contributors": [1, 3]}),
        (5.0, {"round": 2, "participants": [2, 3], "online": 4}), (7.6, {"round": 2, "participants": [0, 1],
                                                                         "online": 2}),
        (9.0, {"round": 2, "contributors": [0, 1]}), (9.0, {"round": 3, "participants": [0, 1], "online": 2}),
    ]
    updates = sorted([*presence("local_sgd"), *({"algorithm": "local_sgd", "time_s": t, "client": -1, **r}
                                               for t, r in rounds)], key=lambda r: r["time_s"])
    updates += presence("asgd") + [{"algorithm": "asgd", "time_s": 0.5 * i, "client": i % 2, "update": i, "lag": 1}
                                   for i in range(1, 20)]
    offline = {0: 0.0, 1: 0.0, 2: 6.4, 3: 4.0}
    rounds_in = {0: 2, 1: 3, 3: 1}  # client 2 reported in none: the simulator leaves the key out
    clients = [_client("local_sgd", c, offline_s=offline[c], lost=int(c >= 2), rejoined=int(c == 2),
                       **({"rounds": rounds_in[c]} if c in rounds_in else {})) for c in range(4)]
    clients += [_client("asgd", c, offline_s=offline[c], lost=int(c >= 2), rejoined=int(c == 2)) for c in range(4)]
    scenario = {"name": "churn-few", "runtime": "sim", "stop": {"time_budget_s": 10.0, "target_acc": None},
                "clients": [{"profile": {"kind": "constant", "factor": 1.0}} for _ in range(4)],
                "algorithms": [{"name": "local_sgd", "clients_per_round": 2}, {"name": "asgd"}]}
    return _write(run_dir, scenario, _evals(["local_sgd", "asgd"], 10.0, 2.0), clients, updates)


def test_participation_section_tabulates_rounds_offline_time_and_each_client(tmp_path):
    run_dir = few_clients_folder(tmp_path)

    lines = render_report(run_dir).read_text().splitlines()

    assert "## Participation" in lines
    assert _table(lines, "| Entry | Rounds drawn") == [
        "| Entry | Rounds drawn | Drawn per round | Online at draw | Reported per round | Rounds per client "
        "| Never took part |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| `local_sgd` | 4 (+1 redrawn) | 2 | 2.8 (2–4) | 2 | 1.5 (0–3) | 1 of 4 |",  # asgd draws no rounds
    ]
    assert _table(lines, "| Entry | Clients ever offline") == [
        "| Entry | Clients ever offline | Mean offline (s) | Max offline (s) | Mean share of the run | Max share |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        "| `local_sgd` | 2 of 4 | 2.6 | 6.4 | 26.0 % | 64.0 % |",
        "| `asgd` | 2 of 4 | 2.6 | 6.4 | 26.0 % | 64.0 % |",
    ]
    per_client = _table(lines, "| Entry | Client | Rounds")
    assert len(per_client) == 2 + 8
    assert "| `local_sgd` | 2 | 0 | 6.4 | 64.0 % | 1 | 1 |" in per_client
    assert "| `local_sgd` | 1 | 3 | 0.0 | 0.0 % | 0 | 0 |" in per_client
    assert "| `asgd` | 3 | — | 4.0 | 40.0 % | 1 | 0 |" in per_client
    assert not (run_dir / "plots" / "rounds_per_client.png").exists()  # few clients: the table says it all


def test_availability_is_rebuilt_from_presence_rows_and_drawn_once_for_entries_that_share_it(tmp_path):
    churn = ChurnRecords(load_run(few_clients_folder(tmp_path)))

    assert churn.online_intervals("local_sgd", 10.0) == {0: [(0.0, 10.0)], 1: [(0.0, 10.0)], 2: [(4.0, 7.6)],
                                                         3: [(0.0, 6.0)]}
    [schedule] = churn.schedules
    assert schedule.labels == ["local_sgd", "asgd"]
    text = render_report(tmp_path).read_text()
    assert "Every entry faced the same schedule (checked: their presence rows agree)" in text
    assert "![Client availability: online stretches](plots/availability.png)" in text
    _assert_png(tmp_path / "plots" / "availability.png")


def test_entries_with_other_seeds_get_a_panel_each_and_a_shorter_entry_joins_a_longer_one(tmp_path):
    # Prepare: @seed=0 and a run of it that stopped at 6 s (same periods, cut short); @seed=1 other periods
    updates = presence("a@seed=0") + presence("early@seed=0") + [
        {"algorithm": "a@seed=1", "time_s": 1.0, "client": 0, "presence": "offline"}]
    metrics = _evals(["a@seed=0", "a@seed=1"], 10.0, 5.0) + _evals(["early@seed=0"], 6.0, 3.0)
    scenario = {"name": "seeds", "clients": [{} for _ in range(4)]}
    run_dir = _write(tmp_path, scenario, metrics, updates=updates)
    # Execute
    schedules = ChurnRecords(load_run(run_dir)).schedules
    text = render_report(run_dir).read_text()
    # Assert
    assert [(s.labels, s.drawn_from, s.end) for s in schedules] == [
        (["a@seed=0", "early@seed=0"], "a@seed=0", 10.0), (["a@seed=1"], "a@seed=1", 10.0)]
    assert "get a panel each: `a@seed=0`, `early@seed=0`; `a@seed=1`." in text
    _assert_png(run_dir / "plots" / "availability.png")


# ------------------------------------------------------------------------------------------- many clients

def test_many_clients_are_summarised_not_listed(tmp_path):
    # Prepare: 200 clients, client c reported in c % 7 rounds; each goes offline once, at c/100 s, for 1 s
    n = 200
    updates = [{"algorithm": "local_sgd", "time_s": 0.5 * r, "client": -1, "round": r,
                "participants": list(range(r % 10, n, 10)), "online": n - 3} for r in range(20)]
    for c in range(n):
        updates += [{"algorithm": "local_sgd", "time_s": c / 100, "client": c, "presence": "offline"},
                    {"algorithm": "local_sgd", "time_s": c / 100 + 1, "client": c, "presence": "online"}]
    updates.sort(key=lambda r: r["time_s"])
    clients = [_client("local_sgd", c, offline_s=1.0, **({"rounds": c % 7} if c % 7 else {})) for c in range(n)]
    scenario = {"name": "many", "runtime": "sim", "clients": {"count": n},
                "algorithms": [{"name": "local_sgd", "client_fraction": 0.1}]}
    run_dir = _write(tmp_path, scenario, _evals(["local_sgd"], 10.0, 5.0), clients, updates)
    # Execute
    text = render_report(run_dir).read_text()
    lines = text.splitlines()
    # Assert: a row per entry, extremes named, the histogram instead of 200 rows
    assert "| `local_sgd` | 20 | 20 | 197 | — | 3.0 (0–6) | 29 of 200 |" in lines
    assert "| `local_sgd` | 200 of 200 | 1.0 | 1.0 | 10.0 % | 10.0 % |" in lines
    assert not any(line.startswith("| Entry | Client | Rounds") for line in lines)
    assert ("- `local_sgd`: most often client 6 (6 rounds), client 13 (6 rounds), client 20 (6 rounds), "
            "client 27 (6 rounds), client 34 (6 rounds); least often client 0 (0 rounds), client 7 (0 rounds), "
            "client 14 (0 rounds), client 21 (0 rounds), client 28 (0 rounds) (29 of 200 clients in no round).") \
        in lines
    assert "![Rounds each client took part in](plots/rounds_per_client.png)" in lines
    assert "With 200 clients, the plot draws the first 50 by rank (clients 0–49)." in text
    _assert_png(run_dir / "plots" / "rounds_per_client.png")
    _assert_png(run_dir / "plots" / "availability.png")


# ------------------------------------------------------------------------------------------- traces

TRACED = {
    "name": "traced", "runtime": "sim", "seed": 1, "stop": {"time_budget_s": 5.0},
    "links": {"trace": [[0, 10, 5], [2, 1, 50]]},
    "clients": [{"profile": {"kind": "trace", "steps": [[1, 1], [3, 5]]}},
                {"link": {"up": {"trace": [[0, 2, 5]]}}},
                {"link": {"rate_mbps": 5}},
                {"link": {"trace": [[0, 100, 1]]}}],
    "algorithms": [{"name": "asgd"}],
}


def test_link_traces_resolve_as_the_scenario_does():
    # the resolved scenario as a run folder keeps it, read back by the report …
    scenario = load_scenario(TRACED)
    resolved = yaml.safe_load(yaml.safe_dump(to_plain(scenario.resolved()), sort_keys=False))
    links = link_traces(resolved)
    # … gives each client the trace its links run with (config/links.py: latency in seconds there)
    for rank in range(4):
        up, down = scenario.client_links(rank)
        for which, link in (("up", up), ("down", down)):
            assert [(t, rate, ms / 1e3) for t, rate, ms in links[rank][which]] == list(link.trace), (rank, which)
    assert links[1]["up"] == [(0.0, 2.0, 5.0)] and links[1]["down"] == [(0.0, 10.0, 5.0), (2.0, 1.0, 50.0)]
    assert device_traces(resolved) == {0: [(0.0, 1.0), (1.0, 1.0), (3.0, 5.0)]}  # ×1 before the first row


def test_traces_section_and_plot_only_with_traces(tmp_path):
    # client 0's device recorded three of its steps: 10 ms at 0.5 s, 11 ms at 1.5 s, 50 ms at 3.5 s
    timeline = {"step_timeline": [[0.5, 0.01], [1.5, 0.011], [3.5, 0.05]]}
    traced = _write(tmp_path / "traced", TRACED, _evals(["asgd"], 5.0, 1.0),
                    [_client("asgd", c, base_step_s=0.01, achieved_factor=1.0, **(timeline if c == 0 else {}))
                     for c in range(4)])
    plain = _write(tmp_path / "plain", {**TRACED, "links": None, "clients": [{"profile": "x1"}, {}]},
                   _evals(["asgd"], 5.0, 1.0), [_client("asgd", c) for c in range(2)])

    text = render_report(traced).read_text()
    plain_text = render_report(plain).read_text()

    assert "## Traces" in text
    assert ("In this run, device traces: client 0; link traces: clients 0–3 (up and down differ for 1).") in text
    assert "is one figure, not a time series: not drawn here" in text
    assert "Dots: the steps a traced device recorded (clients.jsonl's `step_timeline`, sampled)" in text
    [(rank, (label, points))] = ChurnRecords(load_run(traced)).achieved_factors.items()
    assert (rank, label) == (0, "asgd") and [t for t, _ in points] == [0.5, 1.5, 3.5]
    assert [f for _, f in points] == pytest.approx([1.0, 1.1, 5.0])
    assert "![Device and link traces](plots/traces.png)" in text
    _assert_png(traced / "plots" / "traces.png", min_bytes=20_000)
    assert "## Traces" not in plain_text and not (plain / "plots" / "traces.png").exists()


# ------------------------------------------------------------------------------------------- old folders

def test_a_folder_without_these_records_has_no_such_sections(tmp_path):
    old = _write(tmp_path / "old", {"name": "old", "clients": [{"profile": "x1"}, {"profile": "x10"}],
                                    "algorithms": [{"name": "ssgd"}]},
                 _evals(["ssgd"], 10.0, 5.0), [_client("ssgd", c) for c in range(2)],
                 [{"algorithm": "ssgd", "time_s": 1.0, "client": 0, "update": 1}])

    text = render_report(old).read_text()

    for heading in ("## Participation", "## Availability", "## Traces"):
        assert heading not in text
    for name in NEW_PLOTS:
        assert not (old / "plots" / name).exists()
    _assert_png(old / "plots" / "accuracy_vs_time.png")


def test_rounds_without_round_rows_say_every_online_client_took_part(tmp_path):
    # a synchronous simulator run with no sampling and no churn: `rounds` and `offline_s` 0, no round rows
    run_dir = _write(tmp_path, {"name": "plain-sync", "runtime": "sim", "clients": [{}, {}]},
                     _evals(["ssgd"], 10.0, 5.0), [_client("ssgd", c, rounds=12, offline_s=0.0) for c in range(2)])

    lines = render_report(run_dir).read_text().splitlines()

    assert "| `ssgd` | — | — | — | — | 12 | 0 of 2 |" in lines
    assert "No round rows: every client online took part in every round." in lines
    assert not any(line.startswith("| Entry | Clients ever offline") for line in lines)  # nobody was offline
    assert "## Availability" not in lines


# ------------------------------------------------------------------------------------------- a real run

def test_a_simulated_churn_run_reports_what_its_logs_say(tmp_path):
    from edgesync.runtime.runs import run_scenario  # the simulator: only this test needs it

    # Prepare: 6 clients on and off, a throttling device and a link whose up and down differ
    # (0.5 virtual s: the device and link traces change at 0.25 s)
    clients = [{"availability": {"kind": "exponential", "mean_on_s": 0.4, "mean_off_s": 0.2}} for _ in range(6)]
    clients[0]["profile"] = {"kind": "trace", "steps": [[0, 1], [0.25, 4]]}
    clients[1]["link"] = {"trace": [[0, 100, 5], [0.25, 20, 20]], "up": {"trace": [[0, 50, 5]]}}
    scenario = load_scenario({
        "name": "churn-report", "seed": 3, "runtime": "sim", "clients": clients,
        "dataset": {"name": "fashion_mnist", "train_size": 600},
        "algorithms": [{"name": "local_sgd", "clients_per_round": 3, "local_steps": 3, "lr": 0.05, "batch_size": 8},
                       {"name": "asgd", "lr": 0.05, "batch_size": 8}],  # small batches: the report, not learning
        "stop": {"time_budget_s": 0.5, "target_acc": None}, "eval": {"every_s": 0.25, "test_size": 200},
        "sim": {"base_step_s": 0.01, "server_time": "zero"}})
    out = tmp_path / "run"
    # Execute
    run_scenario(scenario, out, progress=False)
    text = (out / "report.md").read_text()
    run = load_run(out)
    churn = ChurnRecords(run)
    # Assert: the presence rows and clients.jsonl's offline time tell the same story
    for label in ("local_sgd", "asgd"):
        intervals = churn.online_intervals(label, 0.5)
        for row in (r for r in run.clients if r["algorithm"] == label):
            online = sum(e - s for s, e in intervals[row["client"]])
            assert online + row["offline_s"] == pytest.approx(0.5, abs=1e-5), (label, row["client"])
    assert any(r["offline_s"] > 0 for r in run.clients)
    # … the rounds table counts the round rows, the per-client rows carry clients.jsonl's rounds
    rows = [r for r in read_jsonl(out / "updates.jsonl") if r["algorithm"] == "local_sgd"]
    rounds = len({r["round"] for r in rows if "participants" in r})
    redraws = sum("participants" in r for r in rows) - rounds
    lines = text.splitlines()
    assert any(line.startswith(f"| `local_sgd` | {rounds}{f' (+{redraws} redrawn)' if redraws else ''} | ")
               for line in lines)
    for r in (r for r in run.clients if r["algorithm"] == "local_sgd"):
        assert any(line.startswith(f"| `local_sgd` | {r['client']} | {r.get('rounds', 0)} | ") for line in lines)
    # … one availability panel for both entries, and both traces
    assert "Every entry faced the same schedule" in text
    assert "device traces: client 0; link traces: client 1 (up and down differ for 1)." in text
    for name in ("availability.png", "traces.png"):
        _assert_png(out / "plots" / name)
