"""Each client's accuracy under the final global model: the spread federated papers report beside the mean.

Two ways, by the data the run has:

- **own**: a `natural` partition (LEAF's users) gives each client its user's own test samples
  (workload.client_test_splits, from the whole test set); its accuracy is the model's on those. A user with no
  test sample (LEAF's `-t user` split puts some users in train only) has none (None), and is left out of the
  figures below.
- **label-weighted**: any other partition has no per-client test data, so a client's accuracy is the model's
  accuracy on each class of the evaluation set, weighted by that class's share of the client's training samples:
  Σ_k p_ik · acc_k. It is what the client would measure on a test set drawn like its own data (classes the
  evaluation set lacks are left out and the shares renormalised).

`client_figures` gives the per-client list and how it was measured; each client's row of clients.jsonl keeps its
own (`final_acc`, `final_acc_on`), and the summary reads the mean, the 10th percentile (numpy's linear
interpolation) and the worst client from those rows (metrics/summary.py, `client_spread`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from edgesync.data.arrays import ArrayDataset, to_tensor
from edgesync.data.partition import label_histogram
from edgesync.params import set_buffers, set_params
from edgesync.trainer import use_channels_last

OWN, LABEL_WEIGHTED = "own", "label-weighted"


@dataclass
class ClientEvalSets:
    """What each client is evaluated on: samples (x, y), and per client either its indices into them (own) or
    its training label shares (label-weighted, clients × classes, rows summing to 1)."""

    how: str
    x: torch.Tensor
    y: torch.Tensor
    members: list[np.ndarray] | None = None
    shares: np.ndarray | None = None


def client_eval_sets(data: ArrayDataset, splits: list[np.ndarray], test_splits: list[np.ndarray] | None,
                     eval_x: torch.Tensor, eval_y: torch.Tensor) -> ClientEvalSets:
    """`test_splits` (a natural partition's per-client test indices) → own; None → label-weighted on the run's
    evaluation set (eval_x, eval_y)."""
    if test_splits is not None:
        return ClientEvalSets(OWN, to_tensor(data.test_x, data.mean, data.std),
                              torch.as_tensor(data.test_y, dtype=torch.int64), members=test_splits)
    counts = label_histogram(data.train_y, splits, data.num_classes).astype(np.float64)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    return ClientEvalSets(LABEL_WEIGHTED, eval_x, eval_y, shares=shares)


def hits_and_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int) -> tuple[np.ndarray, float]:
    """One pass of `model` over (x, y), `batch_size` samples at a time: whether its top class is each sample's label
    (bool, one per sample) and the summed cross-entropy. The evaluator's accuracy and loss come from it too."""
    model.eval()
    fast = use_channels_last(model, x)
    hits, loss = [], 0.0
    with torch.no_grad():
        for i in range(0, len(y), batch_size):
            chunk = x[i:i + batch_size]
            out = model(chunk.contiguous(memory_format=torch.channels_last) if fast else chunk)
            loss += float(F.cross_entropy(out, y[i:i + batch_size], reduction="sum"))
            hits.append((out.argmax(1) == y[i:i + batch_size]).cpu().numpy())
    return (np.concatenate(hits) if hits else np.zeros(0, dtype=bool)), loss


def client_accuracies(correct: np.ndarray, sets: ClientEvalSets) -> list[float | None]:
    """Each client's accuracy from the per-sample hits on sets.x (see the module docstring)."""
    if sets.how == OWN:
        return [float(correct[idx].mean()) if len(idx) else None for idx in sets.members]
    labels = sets.y.cpu().numpy()
    classes = sets.shares.shape[1]
    present = np.bincount(labels, minlength=classes) > 0
    per_class = np.zeros(classes)
    per_class[present] = (np.bincount(labels, weights=correct.astype(np.float64), minlength=classes)[present]
                          / np.bincount(labels, minlength=classes)[present])
    out: list[float | None] = []
    for row in sets.shares:
        weight = row[present].sum()
        out.append(float((row[present] * per_class[present]).sum() / weight) if weight > 0 else None)
    return out


def client_figures(model: torch.nn.Module, params: torch.Tensor, buffers: torch.Tensor, sets: ClientEvalSets,
                   batch_size: int) -> dict:
    """The final row's per-client fields: `client_acc` (one per client, rank order) and `client_eval` (how)."""
    set_params(model, params)
    if buffers.numel():
        set_buffers(model, buffers)
    accs = client_accuracies(hits_and_loss(model, sets.x, sets.y, batch_size)[0], sets)
    return {"client_acc": [None if a is None else round(a, 6) for a in accs], "client_eval": sets.how}



def final_client_figures(model: torch.nn.Module, server, sets: ClientEvalSets | None, batch_size: int) -> dict | None:
    """`client_figures` of a server half's global model (the simulator's end of an entry); None without sets."""
    if sets is None:
        return None
    return client_figures(model, server.global_params(), server.global_buffers(), sets, batch_size)
