"""`partition: {kind: natural, by: …}`: the natural id named in the partition, as the issue's users write it —
`user` for LEAF's data sets, the id column of an `hf` dataset (carried into its dataset.args.natural_id, so every
process loads the same groups); refused where the data has no such id."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync.config import ScenarioError, load_scenario

pytest.importorskip("datasets")
from test_hf_datasets import SIDE, write_parquet  # noqa: E402 - after the skip: it needs datasets


def _scenario(dataset: dict, partition: dict):
    return load_scenario({"name": "by", "clients": 4, "model": {"name": "mlp"}, "dataset": dataset,
                          "partition": partition, "algorithms": [{"name": "local_sgd"}]})


def test_a_parquet_column_named_in_the_partition_becomes_the_datasets_natural_id(tmp_path: Path):
    path = tmp_path / "w.parquet"
    write_parquet(path)
    hf = {"name": "hf", "args": {"path": str(path), "feature": "pixels", "shape": [SIDE, SIDE]}}
    sc = _scenario(hf, {"kind": "natural", "by": "user"})
    assert sc.dataset.args["natural_id"] == "user" and '"natural_id":"user"' in sc.dataset.id
    same = _scenario({**hf, "args": {**hf["args"], "natural_id": "user"}}, {"kind": "natural", "by": "user"})
    assert same.dataset.id == sc.dataset.id
    with pytest.raises(ScenarioError, match="partition.by 'writer' differs from dataset.args.natural_id 'user'"):
        _scenario({**hf, "args": {**hf["args"], "natural_id": "user"}}, {"kind": "natural", "by": "writer"})
    again = load_scenario(json.loads(json.dumps(sc.resolved())))  # what a run folder's scenario.yaml replays
    assert again.dataset.id == sc.dataset.id


def test_leaf_data_sets_have_one_natural_id_and_others_none(tmp_path: Path):
    assert _scenario({"name": "femnist"}, {"kind": "natural", "by": "user"}).partition.by == "user"
    with pytest.raises(ScenarioError, match=r"partition.by 'writer': dataset.name femnist \(LEAF\) has one natural "
                                            "id, `user`"):
        _scenario({"name": "femnist"}, {"kind": "natural", "by": "writer"})
    with pytest.raises(ScenarioError, match="dataset.name fashion_mnist has no natural ids"):
        _scenario({"name": "fashion_mnist"}, {"kind": "natural", "by": "user"})
    with pytest.raises(ScenarioError, match="partition.by names the natural id of kind natural; kind iid takes none"):
        _scenario({"name": "femnist"}, {"kind": "iid", "by": "user"})
