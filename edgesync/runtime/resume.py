"""A live algorithm's place in checkpoint.pt: saved as it trains, restored by `--resume`.

What is saved: the server half's `state_dict()`, the algorithm's clock, its counters (samples, traffic,
best accuracy, target reached). An algorithm is saved as soon as it starts, so a crash before its
first periodic checkpoint resumes it too. A resumed algorithm's clock goes on from the latest time
its rows in the run folder carry (`last_logged_s`): every algorithm's rows stay unique and its clock
monotonic; the work between the checkpoint and the crash is lost time.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from edgesync.algorithms.base import ServerAlgorithm
from edgesync.runtime.checkpoint import last_logged_s

if TYPE_CHECKING:  # the coordinator calls these with itself
    from edgesync.runtime.coordinator import Coordinator

log = logging.getLogger("edgesync.coordinator")


def restore_algorithm(coord: Coordinator, server: ServerAlgorithm) -> float:
    """Restore the server half and counters of the coordinator's algorithm if the checkpoint has it in
    progress; returns the clock to go on from (0.0 for a fresh start)."""
    account = coord.account
    elapsed = last_logged_s(coord.recorder.run_dir, account.key) if coord.checkpoints else 0.0
    saved = coord.checkpoints.resume_point(account.key) if coord.checkpoints else None
    if saved is None:
        if elapsed:
            log.info("%s started before the resume but has no checkpoint: it starts afresh, its clock at %.1f s",
                     account.key, elapsed)
        return elapsed
    server.load_state_dict(saved["server"])
    _match_membership(coord, server)
    account.samples, account.best_acc = saved["samples"], saved["best_acc"]
    account.reached_target = saved["reached_target"]
    coord.traffic_before_resume = (saved["bytes_up"], saved["bytes_down"])
    elapsed = max(saved["elapsed_s"], elapsed)
    log.info("%s resumed from its checkpoint at %d updates (%.1f s); the clock goes on at %.1f s",
             account.key, server.updates, saved["elapsed_s"], elapsed)
    return elapsed


def _match_membership(coord: Coordinator, server: ServerAlgorithm) -> None:
    """The checkpoint lists the clients the old coordinator had; those alive now are what counts. A
    client lost while this one set up would otherwise stay in a barrier that waits for it forever.
    What the calls would send is dropped: `start()` follows and instructs every member."""
    for rank in sorted(coord.members.liveness.lost):
        server.on_client_lost(rank)
    for rank in coord.members.alive():
        if rank not in server.clients:
            server.on_client_joined(rank)


def save_algorithm(coord: Coordinator, server: ServerAlgorithm, now: float) -> None:
    if coord.checkpoints is None:
        return
    account = coord.account
    up, down = coord.traffic()
    coord.checkpoints.save_progress(account.key, server.state_dict(), round(now, 4), server.updates,
                                    samples=account.samples, bytes_up=up, bytes_down=down, best_acc=account.best_acc,
                                    reached_target=account.reached_target)
