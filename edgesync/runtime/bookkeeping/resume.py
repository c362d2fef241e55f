"""A live algorithm's place in checkpoint.pt: saved as it trains, restored by `--resume`.

What is saved: the server half's `state_dict()`, the algorithm's clock, its counters (samples, traffic,
best accuracy, target reached) and, once written, its final evaluation row. An algorithm is saved as soon
as it starts, so a crash before its first periodic checkpoint resumes it too, and again with its final
row, so one killed after that row (during END, while its clients send their statistics) is not evaluated
a second time: the resume only ends it. A resumed algorithm's clock goes on from the latest time its rows
in the run folder carry (`last_logged_s`): every algorithm's rows stay unique and its clock monotonic;
the work between the checkpoint and the crash is lost time.
"""
from __future__ import annotations

import logging
from pathlib import Path

from edgesync.algorithms.machinery.base import ServerAlgorithm
from edgesync.runtime.bookkeeping.accounting import AlgorithmAccount
from edgesync.runtime.bookkeeping.checkpoint import Checkpointer, last_logged_s

log = logging.getLogger("edgesync.coordinator")


def restore_algorithm(checkpoints: Checkpointer | None, run_dir: Path, account: AlgorithmAccount,
                      server: ServerAlgorithm, alive: list[int], lost: list[int]) -> tuple[float, tuple[int, int]]:
    """Restore `server` and `account` if the checkpoint has this algorithm in progress. Returns the clock to
    go on from (0.0 for a fresh start) and the traffic (bytes up, down) before the resume."""
    if checkpoints is None:
        return 0.0, (0, 0)
    elapsed = last_logged_s(run_dir, account.key)
    saved = checkpoints.resume_point(account.key)
    if saved is None:
        if elapsed:
            log.info("%s started before the resume but has no checkpoint: it starts afresh, its clock at %.1f s",
                     account.key, elapsed)
        return elapsed, (0, 0)
    server.load_state_dict(saved["server"])
    _match_membership(server, alive, lost)
    account.samples, account.best_acc = saved["samples"], saved["best_acc"]
    account.reached_target = saved["reached_target"]
    account.final_row = account.last_row = saved.get("final_row")  # written before the crash: not again
    elapsed = max(saved["elapsed_s"], elapsed)
    log.info("%s resumed from its checkpoint at %d updates (%.1f s); the clock goes on at %.1f s",
             account.key, server.updates, saved["elapsed_s"], elapsed)
    return elapsed, (saved["bytes_up"], saved["bytes_down"])


def _match_membership(server: ServerAlgorithm, alive: list[int], lost: list[int]) -> None:
    """The checkpoint lists the clients the old coordinator had; those alive now are what counts. A
    client lost while this one set up would otherwise stay in a barrier that waits for it forever.
    What the calls would send is dropped: `start()` follows and instructs every member."""
    for rank in sorted(lost):
        server.on_client_lost(rank)
    for rank in alive:
        if rank not in server.clients:
            server.on_client_joined(rank)


def save_algorithm(checkpoints: Checkpointer | None, account: AlgorithmAccount, server: ServerAlgorithm,
                   now: float, traffic: tuple[int, int]) -> None:
    if checkpoints is None:
        return
    up, down = traffic
    checkpoints.save_progress(account.key, server.state_dict(), round(now, 4), server.updates,
                              samples=account.samples, bytes_up=up, bytes_down=down, best_acc=account.best_acc,
                              reached_target=account.reached_target, final_row=account.final_row)
