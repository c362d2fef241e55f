"""The report's "Per-client accuracy" section: how the final global model does client by client (mean, 10th
percentile, worst; runtime/bookkeeping/client_eval.py measures it), since a federated model that is good on
average can fail the clients whose data is least like the rest."""
from __future__ import annotations

from edgesync.metrics.formatting import RunData, code, num, pct

HOW = {"own": "each client's own test split (its user's test samples)",
       "label-weighted": "the test set's per-class accuracy weighted by each client's training label shares"}


def has_client_accuracy(run: RunData) -> bool:
    return any(num(e.get("client_acc_mean")) is not None for e in run.summary.values())


def client_accuracy_section(run: RunData) -> list[str]:
    """Per entry (over seeds when the run has them): mean, 10th percentile and worst client accuracy."""
    entries = run.aggregates or {label: run.summary[label] for label in run.labels}
    hows = sorted({str(e.get("client_eval")) for e in run.summary.values() if e.get("client_eval") in HOW})
    over = " (means over seeds)" if run.aggregates else ""
    lines = ["## Per-client accuracy", "",
             f"The final global model's accuracy for each client{over}, measured on "
             + "; ".join(HOW[h] for h in hows) + ". The mean is over clients, unweighted by their sizes; "
             "the 10th percentile and the worst show the clients the model serves least.", "",
             "| Entry | Mean | 10th percentile | Worst | Global (test set) |", "| --- | ---: | ---: | ---: | ---: |"]
    for label, e in entries.items():
        if num(e.get("client_acc_mean")) is None:
            continue
        lines.append(f"| {code(label)} | {pct(e.get('client_acc_mean'))} | {pct(e.get('client_acc_p10'))} | "
                     f"{pct(e.get('client_acc_worst'))} | {pct(e.get('final_acc'))} |")
    return lines + [""]
