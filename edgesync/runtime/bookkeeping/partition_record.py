"""What each client trains on, written into the run folder before any client trains: partition.json.

A federated result means little without its split: the report draws it (samples per client, a clients × classes
heatmap; metrics/partition_report.py). The split is recomputed here from the scenario through the same
`client_splits` the runtimes use (one data load, which the runtimes' loader cache then reuses), per sweep
variant whose data or partition differs. The file maps a variant's tag ("" without a sweep) to:

    {"dataset": name, "train_samples": N, "num_classes": K, "validation_samples": V,
     "clients": [{"client": rank, "kind": partition kind, "samples": n, "labels": [count per class]}, …]}
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from edgesync.config import Scenario
from edgesync.data.partition import label_histogram
from edgesync.metrics.partition_report import PARTITION_FILE
from edgesync.metrics.recorder import write_atomic
from edgesync.runtime.bookkeeping.workload import client_splits, scenario_dataset, validation_indices

log = logging.getLogger(__name__)


def describe_partition(scenario: Scenario) -> dict:
    """The scenario's split, client by client (see the module docstring)."""
    data = scenario_dataset(scenario.dataset)
    splits = client_splits(scenario, data.train_y, data.train_groups)
    counts = label_histogram(data.train_y, splits, data.num_classes)
    return {
        "dataset": scenario.dataset.id, "train_samples": int(len(data.train_y)), "num_classes": int(data.num_classes),
        "validation_samples": int(len(validation_indices(scenario, data.train_y))),
        "clients": [{"client": rank, "kind": (client.partition or scenario.partition).kind,
                     "samples": int(len(split)), "labels": [int(c) for c in row]}
                    for rank, (client, split, row) in enumerate(zip(scenario.clients, splits, counts))],
    }


def write_partitions(run_dir: Path, variants: list) -> None:
    """partition.json for `variants` (sweep variants: `.tag`, `.scenario`), each distinct split once. A dataset
    that cannot be loaded here is left to the runtime, which fails with its own message just after."""
    found: dict[str, dict] = {}
    seen: dict[str, str] = {}
    for variant in variants:
        sc = variant.scenario
        key = json.dumps([sc.dataset.model_dump(mode="json"), sc.partition.model_dump(mode="json"), sc.seed,
                          [c.partition and c.partition.model_dump(mode="json") for c in sc.clients],
                          sc.tune and sc.tune.model_dump(mode="json")], sort_keys=True)
        if key in seen:
            continue
        try:
            found[variant.tag or ""] = describe_partition(sc)
        except Exception as exc:  # noqa: BLE001 - the runtime reports a dataset it cannot load
            log.debug("no partition record: %s", exc)
            return
        seen[key] = variant.tag or ""
    write_atomic(Path(run_dir) / PARTITION_FILE, json.dumps(found, indent=1) + "\n")
