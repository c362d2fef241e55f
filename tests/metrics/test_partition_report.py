"""The run folder's partition.json and the report's "Data partition" section: the split recomputed through the
runtimes' own `client_splits`, checked on splits whose outcome is known by hand (Fashion-MNIST has 6,000
training images of each of its 10 classes)."""
from __future__ import annotations

import json

from edgesync.config import load_scenario, variants
from edgesync.metrics.partition_report import PARTITION_FILE, PARTITION_PLOT, partition_section, plot_partition, read_partitions
from edgesync.runtime.bookkeeping.partition_record import describe_partition, write_partitions


def _scenario(**extra):
    return load_scenario({"name": "split", "clients": 10, "algorithms": [{"name": "ssgd"}], **extra})


def test_sorted_slices_give_each_of_ten_clients_one_class_whole():
    # label-sorted, cut into 10 equal slices of 6,000: client i holds all of class i and nothing else
    record = describe_partition(_scenario(partition={"kind": "sorted_slices"}))
    assert record["train_samples"] == 60_000 and record["num_classes"] == 10 and record["validation_samples"] == 0
    for c in record["clients"]:
        assert c["samples"] == 6000 and c["kind"] == "sorted_slices"
        assert c["labels"] == [6000 if k == c["client"] else 0 for k in range(10)]
    lines = partition_section({"": record})
    text = "\n".join(lines)
    assert lines[0] == "## Data partition"
    assert "60,000 training samples, split `sorted_slices` among 10 clients" in text
    assert "min 6,000, median 6,000, max 6,000; classes held: min 1, median 1, max 1 of 10." in text
    assert "| 3 | `sorted_slices` | 6,000 | 1 | 100% |" in text
    assert f"(plots/{PARTITION_PLOT})" in text


def test_iid_split_of_a_subset_with_a_validation_hold_out():
    # 1,000 samples, 100 held out for tuning, 900 left: i.i.d. cuts 10 parts of 90 each
    record = describe_partition(_scenario(dataset={"name": "fashion_mnist", "train_size": 1000},
                                          tune={"validation_size": 100, "grid": {"lr": [0.1]}}))
    assert record["validation_samples"] == 100
    assert [c["samples"] for c in record["clients"]] == [90] * 10
    assert all(sum(c["labels"]) == 90 for c in record["clients"])


def test_each_seed_of_a_run_keeps_its_own_split_and_equal_splits_are_written_once(tmp_path):
    scenario = _scenario(dataset={"name": "fashion_mnist", "train_size": 2000},
                         partition={"kind": "dirichlet", "alpha": 0.3}, seeds=[0, 1])
    write_partitions(tmp_path, variants(scenario))
    stored = read_partitions(tmp_path)
    assert sorted(stored) == ["seed=0", "seed=1"]
    assert stored["seed=0"]["clients"] != stored["seed=1"]["clients"]  # Dirichlet draws differ by seed
    assert "the other 1 differ by their seed or sweep values" in "\n".join(partition_section(stored))
    plain = _scenario(dataset={"name": "fashion_mnist", "train_size": 2000}, sweep={"algorithms.0.lr": [0.1, 0.2]})
    write_partitions(tmp_path, variants(plain))  # a learning-rate sweep keeps one split: written once
    assert len(read_partitions(tmp_path)) == 1
    assert plot_partition(read_partitions(tmp_path), tmp_path / PARTITION_PLOT).stat().st_size > 1000


def test_a_folder_without_a_record_or_with_a_broken_one_has_no_section(tmp_path):
    assert read_partitions(tmp_path) == {} and partition_section({}) == []
    (tmp_path / PARTITION_FILE).write_text("{not json")
    assert read_partitions(tmp_path) == {}
    assert plot_partition({}, tmp_path / PARTITION_PLOT) is None


def test_a_dataset_that_cannot_load_leaves_no_record_for_the_runtime_to_report(tmp_path):
    scenario = _scenario(dataset={"name": "fashion_mnist", "root": str(tmp_path)})  # an empty root: no data
    write_partitions(tmp_path, variants(scenario))
    assert not (tmp_path / PARTITION_FILE).exists()
    json.dumps(read_partitions(tmp_path))
