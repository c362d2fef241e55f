"""The bookkeeping is written once (runtime/bookkeeping/accounting.py): the same scenario run live (real sockets,
client threads) and in the simulator writes rows of the same keys, in the same order, with the same
stop rules. Only the numbers differ: wall-clock against virtual time."""
from __future__ import annotations

from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.runtime.sim.simulator import run_sim
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.config import load_scenario

from loopback_run import small_scenario

# mini-batches of 8: the rows' keys and stop rules are compared, not what the runs learn
ALGORITHMS = [{"name": "ssgd", "lr": 0.1, "batch_size": 8}, {"name": "asgd", "lr": 0.05, "batch_size": 8},
              {"name": "esync", "lr": 0.05, "batch_size": 8}]
FILES = ("metrics.jsonl", "clients.jsonl", "updates.jsonl")


def shapes(run_dir) -> dict[str, dict[str, set[tuple[str, ...]]]]:
    """Per file and algorithm, the distinct key sequences of its rows (`diverged` and `error` come only
    with trouble, which neither run has)."""
    out: dict[str, dict[str, set[tuple[str, ...]]]] = {}
    for name in FILES:
        per: dict[str, set[tuple[str, ...]]] = {}
        for row in read_jsonl(run_dir / name):
            per.setdefault(row["algorithm"], set()).add(tuple(row))
        out[name] = per
    return out


def test_live_and_simulated_runs_write_the_same_rows(loopback, tmp_path, monkeypatch):
    overrides = {"algorithms": ALGORITHMS, "stop": {"time_budget_s": 30, "max_updates": 6, "target_acc": 0.3}}
    live = loopback(**overrides).start()
    live.join(180)
    assert live.error is None, live.error

    sim_dir = tmp_path / "sim"
    scenario = load_scenario({**small_scenario(**overrides), "runtime": "sim",
                                   "sim": {"base_step_s": 0.01}})
    with RunRecorder(sim_dir) as recorder:
        run_sim(scenario, recorder, Progress(enabled=False))

    live_shapes, sim_shapes = shapes(live.run_dir), shapes(sim_dir)
    for name in FILES:
        assert live_shapes[name] == sim_shapes[name], name
    assert set(live_shapes["updates.jsonl"]) == {"asgd", "esync"}  # the halves that log their updates

    for run_dir in (live.run_dir, sim_dir):
        metrics = read_jsonl(run_dir / "metrics.jsonl")
        for key in ("ssgd", "asgd", "esync"):
            rows = [r for r in metrics if r["algorithm"] == key]
            times = [r["time_s"] for r in rows]
            assert times[0] == 0.0 and times == sorted(times) and len(set(times)) == len(times)
            assert rows[-1]["updates"] == 6  # the same stop rule ended both: max_updates
        clients = read_jsonl(run_dir / "clients.jsonl")
        assert [(c["algorithm"], c["client"]) for c in clients] == [(k, r) for k in ("ssgd", "asgd", "esync")
                                                                    for r in (0, 1)]
        for c in clients:
            assert c["wait_s"] >= 0 and c["compute_s"] > 0 and c["wall_s"] >= c["compute_s"], c
    for c in read_jsonl(sim_dir / "clients.jsonl"):  # virtual time has no overhead: compute + wait = wall
        if c["algorithm"] != "esync":  # (ESync's blocking queries wait inside an instruction)
            assert abs(c["compute_s"] + c["wait_s"] - c["wall_s"]) < 1e-5
