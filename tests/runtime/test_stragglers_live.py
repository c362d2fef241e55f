"""Straggler mitigations in the live runtime, over real sockets: one ×10 client among four. A backup worker
discards its gradients; a deadline relative to the median client (the coordinator's loop wakes for it: the
server half's `due()`) closes rounds without it; both counted in clients.jsonl."""
from __future__ import annotations

from edgesync.metrics.recorder import read_jsonl


def test_backup_workers_and_a_median_deadline_leave_the_straggler_behind(loopback):
    run = loopback(
        clients=["x1", "x1", "x1", "x10"],
        algorithms=[{"name": "ssgd", "label": "backup", "backup_workers": 1, "lr": 0.05},
                    {"name": "local_sgd", "label": "deadline", "local_steps": 2, "deadline_median": 2.0,
                     "lr": 0.05}],
        stop={"time_budget_s": 30, "max_updates": 30, "target_acc": None}).start()
    run.join(120)
    assert run.error is None and not run.client_errors
    rows = read_jsonl(run.run_dir / "updates.jsonl")
    clients = {(r["algorithm"], r["client"]): r for r in read_jsonl(run.run_dir / "clients.jsonl")}
    backup = [r for r in rows if r["algorithm"] == "backup" and "contributors" in r]
    assert len(backup) == 30 and all(len(r["contributors"]) == 3 for r in backup)
    # the ×10 client computes one gradient while the others close several rounds: most of its are discarded
    assert clients[("backup", 3)]["discarded_updates"] >= 1
    assert sum(3 in r["contributors"] for r in backup) <= 2
    # the deadline is 2 × the median round time (round 0: its own, once two of four reports are in), which the
    # ×10 client's 2 steps overrun: rounds close without it, at their deadline
    deadline = [r for r in rows if r["algorithm"] == "deadline" and "contributors" in r]
    assert 3 not in deadline[0]["contributors"]
    dropped = [r for r in deadline if r.get("dropped")]
    assert any(r["dropped"] == [3] for r in dropped)  # (a ×1 client held up on a loaded host may miss one too)
    assert clients[("deadline", 3)]["wasted_steps"] == 2 * clients[("deadline", 3)]["discarded_updates"]
