"""A stock strategy over EdgeSync's emulated devices, written as a Flower user writes a ServerApp.

It keeps what each node reported (the strategy averages the MetricRecords; the test wants them per
node) and the global model's size after each round in OUT/result.json.
"""
import json
from pathlib import Path

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAdam, FedAvg
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords

from edgesync.models import build_model

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    replies: list[dict] = []
    norms: list[float] = []

    def keep_train_metrics(records, weighting_key):
        replies.extend(dict(r["metrics"]) for r in records)
        return aggregate_metricrecords(records, weighting_key)

    def watch(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        norms.append(float(sum(np.abs(a).sum() for a in arrays.to_numpy_ndarrays())))
        return MetricRecord({})

    if cfg["strategy"] == "fedadam":
        strategy = FedAdam(fraction_evaluate=0.0, eta=0.01, train_metrics_aggr_fn=keep_train_metrics)
    else:
        strategy = FedAvg(fraction_evaluate=1.0, train_metrics_aggr_fn=keep_train_metrics)
    torch.manual_seed(0)  # one initial model every run: the accuracies the test checks replay
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(build_model("cnn").state_dict()),
                            num_rounds=int(cfg["num-server-rounds"]),
                            train_config=ConfigRecord({"lr": float(cfg["lr"]), "local-steps": int(cfg["local-steps"])}),
                            evaluate_fn=watch)
    accuracy = {int(r): float(m["eval_acc"]) for r, m in result.evaluate_metrics_clientapp.items()}
    Path(cfg["out"], "result.json").write_text(json.dumps({"train": replies, "norms": norms, "accuracy": accuracy}))
