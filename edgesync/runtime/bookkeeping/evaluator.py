"""Evaluation off the coordinator's message loop: a worker thread tests model snapshots.

The loop hands over a snapshot (θ, buffers, and the counters at that instant) and goes back to its
messages; results come back through `results()` as (counters, accuracy, loss), carrying the snapshot's time, so time-to-accuracy
is measured when the model existed, not when its test finished. If evaluations fall behind, only
the newest pending snapshot is kept (the curve gets coarser; the loop never waits).
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any

import torch

from edgesync.models import build_model
from edgesync.params import set_buffers, set_params
from edgesync.runtime.bookkeeping.client_eval import ClientEvalSets, client_figures, hits_and_loss


@dataclass
class Snapshot:
    params: torch.Tensor
    buffers: torch.Tensor
    info: dict[str, Any]  # counters at the snapshot's time: algorithm, time_s, updates, …


Result = tuple[dict[str, Any], float, float]  # a snapshot's counters, test accuracy, test loss


def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of `model` on (x, y), `batch_size` samples at a time. `x` is float images
    (N, C, H, W) or int64 token indices (N, L); accuracy is the share of samples whose largest logit is their
    label, which for a next-character model is LEAF's next-character accuracy."""
    hits, loss = hits_and_loss(model, x, y, batch_size)
    return int(hits.sum()) / len(y), loss / len(y)


def evaluate_state(model: torch.nn.Module, params: torch.Tensor, buffers: torch.Tensor, x: torch.Tensor,
                   y: torch.Tensor, batch_size: int) -> tuple[float, float]:
    """(accuracy, loss) of the flat model state (params, buffers) loaded into `model`."""
    set_params(model, params)
    if buffers.numel():
        set_buffers(model, buffers)
    return evaluate(model, x, y, batch_size)


class Evaluator:
    def __init__(self, model_name: str, num_classes: int, in_channels: int,
                 x: torch.Tensor, y: torch.Tensor, batch_size: int, clients: ClientEvalSets | None = None):
        self.model = build_model(model_name, num_classes=num_classes, in_channels=in_channels)
        self.x, self.y, self.batch_size = x, y, batch_size
        self.clients = clients  # the final model is also measured per client on these (client_eval.py)
        self._pending: Snapshot | None = None
        self._cond = threading.Condition()
        self._results: queue.Queue[Result] = queue.Queue()
        self._busy = False
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="evaluator", daemon=True)
        self._thread.start()

    def submit(self, snapshot: Snapshot) -> None:
        with self._cond:
            self._pending = snapshot  # newest wins
            self._cond.notify()

    def evaluate_now(self, snapshot: Snapshot) -> Result:
        """Synchronous evaluation (used for the final model of an algorithm): its counters also carry each
        client's accuracy (`client_acc`, `client_eval`) when the evaluator has the clients' sets, which
        AlgorithmAccount.log_final takes to clients.jsonl."""
        self.drain()
        counters, acc, loss = self._run(snapshot)
        if self.clients is None:
            return counters, acc, loss
        return {**counters, **client_figures(self.model, snapshot.params, snapshot.buffers, self.clients,
                                             self.batch_size)}, acc, loss

    def results(self) -> list[Result]:
        out = []
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                return out

    def drain(self) -> None:
        """Wait until no snapshot is pending or being evaluated."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending is None and not self._busy)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=10)

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._closed)
                if self._closed:
                    return
                snap, self._pending, self._busy = self._pending, None, True
            try:
                self._results.put(self._run(snap))
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _run(self, snap: Snapshot) -> Result:
        return (snap.info, *evaluate_state(self.model, snap.params, snap.buffers, self.x, self.y, self.batch_size))
