"""LEAF's FEMNIST and Shakespeare: the JSON reader, finding the folder, its errors, the `natural` partition and
each client's own test samples.

Every test writes its own small LEAF folder in the real layout (edgesync/testing/leaf_files.py): train/ and
test/ with several JSON files each, users spread over them unsorted, each user's samples split 90/10.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import edgesync.data.leaf as leaf
from edgesync.config import load_scenario
from edgesync.data.__main__ import main as data_main
from edgesync.data.arrays import ArrayDataset, DataNotFoundError, to_tensor
from edgesync.data.datasets import INPUT_SHAPES, load_dataset
from edgesync.data.leaf import ALL_LETTERS, letter_to_index
from edgesync.data.partition import natural_users, partition
from edgesync.runtime.bookkeeping.workload import (client_splits, client_test_splits, client_users, dataset,
                                                   prepare_workload, scenario_dataset, validation_indices)
from edgesync.testing.leaf_files import write_femnist, write_leaf_file, write_shakespeare


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(leaf.ENV_VAR, raising=False)
    monkeypatch.setattr(leaf, "SEARCH_BASE", tmp_path / "no-repo-data")  # no default place holds anything


@pytest.fixture
def femnist(tmp_path: Path) -> tuple[Path, dict]:
    folder = tmp_path / "femnist" / "data"
    return folder, write_femnist(folder, writers=20, seed=1)


@pytest.fixture
def shakespeare(tmp_path: Path) -> tuple[Path, dict]:
    folder = tmp_path / "shakespeare" / "data"
    return folder, write_shakespeare(folder, roles=10, seed=2)


def _rows_of(ds: ArrayDataset, split: str, user: str) -> np.ndarray:
    groups = ds.train_groups if split == "train" else ds.test_groups
    return np.flatnonzero(groups == ds.group_names.index(user))


# --- loading -----------------------------------------------------------------------------------------


def test_femnist_loads_every_writer_with_its_samples(femnist: tuple[Path, dict]) -> None:
    folder, written = femnist
    ds = load_dataset("femnist", folder)
    assert len(list((folder / "train").glob("*.json"))) == 2  # several files per split, all read
    assert ds.kind == "image" and ds.input_shape == INPUT_SHAPES["femnist"] == (1, 28, 28) and ds.num_classes == 62
    assert ds.train_x.dtype == np.uint8 and ds.train_x.shape[1:] == (28, 28) and ds.test_x.shape[1:] == (28, 28)
    assert ds.train_y.dtype == ds.test_y.dtype == ds.train_groups.dtype == ds.test_groups.dtype == np.int64
    assert 0 <= ds.train_y.min() and ds.train_y.max() < 62
    assert ds.group_names == tuple(sorted(written["train"])) and len(ds.group_names) == 20
    for split in ("train", "test"):
        for user, samples in written[split].items():
            rows = _rows_of(ds, split, user)
            x, y = (ds.train_x, ds.train_y) if split == "train" else (ds.test_x, ds.test_y)
            assert y[rows].tolist() == samples["y"]  # the user's samples, in file order
            expected = np.rint(np.array(samples["x"]) * 255).astype(np.uint8).reshape(-1, 28, 28)
            np.testing.assert_array_equal(x[rows], expected)  # kept as LEAF stores them: white is 255
        assert len(written[split]) == 20 and all(len(s["y"]) >= 1 for s in written[split].values())
    assert np.all(np.diff(ds.train_groups) >= 0)  # ordered by user
    assert 0.5 < ds.mean < 1 and 0 < ds.std  # the files' own pixel statistics: mostly white background


def test_shakespeare_loads_every_role_as_character_indices(shakespeare: tuple[Path, dict]) -> None:
    folder, written = shakespeare
    ds = load_dataset("shakespeare", folder)
    assert ds.kind == "tokens" and ds.input_shape == INPUT_SHAPES["shakespeare"] == (80,) and ds.num_classes == 80
    assert ds.train_x.dtype == np.int64 and ds.train_x.shape[1] == 80 and ds.test_x.shape[1] == 80
    assert ds.group_names == tuple(sorted(written["train"])) and len(ds.group_names) == 10
    for split in ("train", "test"):
        x, y = (ds.train_x, ds.train_y) if split == "train" else (ds.test_x, ds.test_y)
        for user, samples in written[split].items():
            rows = _rows_of(ds, split, user)
            assert ["".join(ALL_LETTERS[i] for i in row) for row in x[rows]] == samples["x"]
            assert "".join(ALL_LETTERS[i] for i in y[rows]) == "".join(samples["y"])
    tokens = to_tensor(ds.train_x[:3], ds.mean, ds.std)
    assert tokens.dtype == torch.long and torch.equal(tokens, torch.from_numpy(ds.train_x[:3]))


def test_the_order_never_depends_on_the_files(femnist: tuple[Path, dict]) -> None:
    folder, _ = femnist
    before = load_dataset("femnist", folder)
    for split in ("train", "test"):  # swap the two files' names: LEAF's file order differs between builds
        a, b = sorted((folder / split).glob("*.json"))
        tmp = a.with_suffix(".tmp")
        a.rename(tmp), b.rename(a), tmp.rename(b)
    after = load_dataset("femnist", folder)
    assert after.group_names == before.group_names
    for key in ("train_x", "train_y", "train_groups", "test_x", "test_y", "test_groups"):
        np.testing.assert_array_equal(getattr(after, key), getattr(before, key))


def test_the_vocabulary_is_leafs(tmp_path: Path) -> None:
    assert len(ALL_LETTERS) == 80 and len(set(ALL_LETTERS)) == 80
    assert all(letter_to_index(c) == ALL_LETTERS.find(c) for c in ALL_LETTERS + "~é")
    assert letter_to_index("~") == -1  # what LEAF's letter_to_index gives outside the vocabulary
    # By hand: "\n" 0, " " 1, "!" 2, "," 8, A..Z 25..50 ("H" 32), a..z 53..78 ("i" 61, "m" 65, "e" 57), "}" 79
    x = "Hi, me!" + " " * 72 + "\n"
    for split in ("train", "test"):
        write_leaf_file(tmp_path / split / "a.json", {"KING_LEAR_KENT": {"x": [x], "y": ["}"]}}, ["KING_LEAR"])
    ds = load_dataset("shakespeare", tmp_path)
    assert ds.train_x[0].tolist() == [32, 61, 8, 1, 65, 57, 2] + [1] * 72 + [0]
    assert ds.train_y.tolist() == [79] and ds.group_names == ("KING_LEAR_KENT",)


# --- what LEAF allows, and bad files -----------------------------------------------------------------


def _one_femnist_user(x: list | None = None, y: list | None = None) -> dict:
    return {"x": x if x is not None else [[1.0] * 784, [0.5] * 784], "y": y if y is not None else [3, 61]}


def test_a_user_in_one_split_only_is_allowed(tmp_path: Path) -> None:
    # LEAF's `-t user` puts each user in train or test; `-t sample` keeps a dropped user in user_data, empty
    write_leaf_file(tmp_path / "train" / "a.json", {"w1": _one_femnist_user(), "w2": _one_femnist_user()})
    write_leaf_file(tmp_path / "test" / "a.json", {"w2": _one_femnist_user(), "w3": _one_femnist_user()})
    doc = json.loads((tmp_path / "test" / "a.json").read_text())
    doc["user_data"]["dropped"] = {"x": [], "y": []}
    (tmp_path / "test" / "a.json").write_text(json.dumps(doc))
    ds = load_dataset("femnist", tmp_path)
    assert ds.group_names == ("w1", "w2", "w3")
    assert ds.train_groups.tolist() == [0, 0, 1, 1] and ds.test_groups.tolist() == [1, 1, 2, 2]
    np.testing.assert_array_equal(ds.train_x[0], np.full((28, 28), 255, np.uint8))
    np.testing.assert_array_equal(ds.train_x[1], np.full((28, 28), 128, np.uint8))  # round(0.5 · 255)


def _femnist_doc(**changes) -> dict:
    doc = {"users": ["w1"], "num_samples": [2], "user_data": {"w1": _one_femnist_user()}}
    doc.update(changes)
    return doc


@pytest.mark.parametrize(("dataset", "doc", "match"), [
    ("femnist", {"users": ["w1"], "num_samples": [2]}, r"a\.json: no key 'user_data'"),
    ("femnist", _femnist_doc(num_samples=[3]),
     r"a\.json: user_data\['w1'\]: num_samples says 3, but x has 2 samples and y 2"),
    ("femnist", _femnist_doc(num_samples=[2, 5]), r"a\.json: 'num_samples' has 2 entries for 1 users"),
    ("femnist", _femnist_doc(user_data={"w1": _one_femnist_user([[1.0] * 784, [1.0] * 783])}),
     r"a\.json: user_data\['w1'\], sample 1: x has 783 values, expected a list of 784 floats"),
    ("femnist", _femnist_doc(user_data={"w1": _one_femnist_user([[1.0] * 784, [1.5] * 784])}),
     r"user_data\['w1'\], sample 1: x\[0\] = 1\.5, expected a pixel value in \[0, 1\]"),
    ("femnist", _femnist_doc(user_data={"w1": _one_femnist_user(y=[0, 62])}),
     r"user_data\['w1'\]: y spans 0\.\.62, expected classes 0\.\.61"),
    ("femnist", _femnist_doc(users=["w1", "w2"], num_samples=[2, 1]),
     r"user_data\['w2'\]: expected an object with lists 'x' and 'y' \('users' lists 'w2'\), got nothing"),
    ("femnist", _femnist_doc(users=[], num_samples=[]),
     r"user_data\['w1'\] holds samples, but 'users' does not list 'w1'"),
    ("shakespeare", {"users": ["KENT"], "num_samples": [1], "user_data": {"KENT": {"x": ["a" * 79], "y": ["b"]}}},
     r"user_data\['KENT'\], sample 0: x is 79 characters, expected a string of 80"),
    ("shakespeare", {"users": ["KENT"], "num_samples": [1], "user_data": {"KENT": {"x": ["a" * 80], "y": ["bc"]}}},
     r"user_data\['KENT'\], sample 0: y is 'bc', expected one character"),
    ("shakespeare", {"users": ["KENT"], "num_samples": [2],
                     "user_data": {"KENT": {"x": ["a" * 80, "a" * 40 + "~" + "a" * 39], "y": ["b", "c"]}}},
     r"a\.json: user_data\['KENT'\], sample 1: x holds '~', which is not in LEAF's 80-character vocabulary"),
    ("shakespeare", {"users": ["KENT"], "num_samples": [1], "user_data": {"KENT": {"x": ["a" * 80], "y": ["é"]}}},
     r"sample 0: y holds 'é', which is not in LEAF's 80-character vocabulary .*-1"),
])
def test_a_bad_file_is_refused_naming_file_key_and_what_was_expected(tmp_path: Path, dataset: str, doc: dict,
                                                                   match: str) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "a.json").write_text(json.dumps(doc), encoding="utf-8")
    good = {"w1": _one_femnist_user()} if dataset == "femnist" else {"KENT": {"x": ["a" * 80], "y": ["b"]}}
    write_leaf_file(tmp_path / "test" / "b.json", good)
    with pytest.raises(ValueError, match=match) as info:
        load_dataset(dataset, tmp_path)
    assert str(tmp_path / "train" / "a.json") in str(info.value)


def test_a_user_twice_in_one_split_and_unreadable_json_are_refused(tmp_path: Path) -> None:
    write_leaf_file(tmp_path / "train" / "a.json", {"w1": _one_femnist_user()})
    write_leaf_file(tmp_path / "train" / "b.json", {"w1": _one_femnist_user()})
    write_leaf_file(tmp_path / "test" / "a.json", {"w1": _one_femnist_user()})
    with pytest.raises(ValueError, match=r"b\.json: user 'w1' is in a\.json too"):
        load_dataset("femnist", tmp_path)
    (tmp_path / "train" / "b.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"b\.json: cannot read it as JSON"):
        load_dataset("femnist", tmp_path)


# --- finding the folder ------------------------------------------------------------------------------


def test_where_the_folder_is_looked_for(tmp_path: Path, femnist: tuple[Path, dict],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _ = femnist  # tmp_path/femnist/data
    for root in (folder, folder.parent, tmp_path):  # LEAF's data folder, its data/femnist, a folder above both
        assert leaf.find_leaf("femnist", root) == folder
    typo = tmp_path / "typo"
    with pytest.raises(DataNotFoundError, match=rf"^dataset.root {typo}: no such directory"):
        load_dataset("femnist", typo, origin="dataset.root")
    with pytest.raises(DataNotFoundError, match=r"(?s)FEMNIST not found. Looked in:.*no-repo-data/femnist/data: "
                                                r"no such directory.*no ready-made download.*"
                                                r"preprocess.sh -s niid --sf 1.0 -k 0 -t sample"):
        load_dataset("femnist")
    monkeypatch.setattr(leaf, "SEARCH_BASE", tmp_path)  # <repo>/data/femnist/data
    assert leaf.find_leaf("femnist") == folder
    monkeypatch.setenv(leaf.ENV_VAR, str(typo))  # $EDGESYNC_DATA wins, and a wrong one is an error
    with pytest.raises(DataNotFoundError, match=rf"\$EDGESYNC_DATA={typo} does not hold FEMNIST"):
        leaf.find_leaf("femnist", folder)


def test_the_command_says_where_or_how_to_get_it(femnist: tuple[Path, dict], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    folder, _ = femnist
    assert data_main(["--dataset", "femnist", "--root", str(folder)]) == 0
    assert f"femnist: {folder} (train" in capsys.readouterr().out
    assert data_main(["--dataset", "shakespeare", "--ensure"]) == 2
    err = capsys.readouterr().err
    assert "--ensure cannot fetch Shakespeare" in err and "no ready-made download" in err
    assert "./preprocess.sh -s niid --sf 1.0 -k 0 -t sample --tf 0.8" in err and "data/shakespeare/data" in err


# --- the natural partition ---------------------------------------------------------------------------


def test_natural_gives_each_client_exactly_its_users_samples() -> None:
    groups = np.random.default_rng(0).integers(0, 6, 60)
    labels = np.zeros(60, dtype=np.int64)
    parts = partition(labels, 6, "natural", seed=3, groups=groups)
    assert [p.tolist() for p in parts] == [np.flatnonzero(groups == u).tolist() for u in range(6)]
    # fewer clients: a seeded draw of ids, sorted; the same for a seed, different for another
    draws = {seed: natural_users(groups, 3, seed).tolist() for seed in range(6)}
    assert draws[0] == sorted(np.random.default_rng(0).choice(np.arange(6), 3, replace=False).tolist())
    assert natural_users(groups, 3, 0).tolist() == draws[0] and len({tuple(d) for d in draws.values()}) > 1
    parts = partition(labels, 3, "natural", seed=4, groups=groups)
    assert [p.tolist() for p in parts] == [np.flatnonzero(groups == u).tolist() for u in draws[4]]
    with pytest.raises(ValueError, match="natural: 7 clients but the data has 6 natural ids"):
        partition(labels, 7, "natural", seed=0, groups=groups)
    with pytest.raises(ValueError, match="partition kind natural needs .* this dataset has no natural ids"):
        partition(labels, 3, "natural", seed=0)
    assert [p.tolist() for p in partition(labels, 2, "iid", 0, groups=groups)] == \
        [p.tolist() for p in partition(labels, 2, "iid", 0)]  # the other kinds ignore groups


def _scenario(root: Path, clients: int | list, **extra):
    return load_scenario({"name": "leaf", "seed": 1, "runtime": "sim", "clients": clients,
                          "dataset": {"name": "femnist", "root": str(root), **extra.pop("dataset", {})},
                          "partition": {"kind": "natural"}, "algorithms": [{"name": "local_sgd"}], **extra})


def test_natural_clients_in_a_run_train_and_test_on_their_users_samples(femnist: tuple[Path, dict]) -> None:
    folder, _ = femnist
    sc = _scenario(folder, 20)
    data = scenario_dataset(sc.dataset)
    splits, tests = client_splits(sc, data.train_y, data.train_groups), client_test_splits(sc, data)
    assert client_users(sc, data).tolist() == list(range(20))
    for user, split, test in zip(data.group_names, splits, tests):
        assert split.tolist() == _rows_of(data, "train", user).tolist()
        assert test.tolist() == _rows_of(data, "test", user).tolist() and len(test) >= 1
    work = prepare_workload(sc)  # the runtimes' preparation passes the users too
    assert all(np.array_equal(a, b) for a, b in zip(work.splits, splits))
    # fewer clients: seeded, reproducible, each its drawn user's samples and test samples
    few = _scenario(folder, 5)
    users = client_users(few, data)
    assert users.tolist() == natural_users(data.train_groups, 5, few.seed).tolist()
    assert np.array_equal(users, client_users(_scenario(folder, 5), data))
    assert any(not np.array_equal(users, client_users(_scenario(folder, 5, seed=s), data)) for s in range(2, 6))
    for user, split, test in zip(users, client_splits(few, data.train_y, data.train_groups),
                                 client_test_splits(few, data)):
        assert split.tolist() == np.flatnonzero(data.train_groups == user).tolist()
        assert test.tolist() == np.flatnonzero(data.test_groups == user).tolist()
    with pytest.raises(ValueError, match="21 clients but the data has 20 natural ids"):
        client_splits(_scenario(folder, 21), data.train_y, data.train_groups)
    with pytest.raises(ValueError, match="no natural ids"):
        client_splits(sc, data.train_y)  # a caller that forgets the users
    iid = load_scenario({"name": "iid", "runtime": "sim", "clients": 4, "algorithms": [{"name": "local_sgd"}],
                         "dataset": {"name": "femnist", "root": str(folder)}})
    assert client_test_splits(iid, data) is None and client_users(iid, data) is None


def test_natural_with_a_validation_set_and_train_size(femnist: tuple[Path, dict]) -> None:
    folder, _ = femnist
    sc = _scenario(folder, 20, tune={"grid": {"lr": [0.05]}, "validation_size": 30})
    data = scenario_dataset(sc.dataset)
    held = set(validation_indices(sc, data.train_y).tolist())
    for user, split in zip(client_users(sc, data), client_splits(sc, data.train_y, data.train_groups)):
        assert split.tolist() == [i for i in np.flatnonzero(data.train_groups == user) if i not in held]
    # train_size keeps the first samples, and their users with them: the first users, whole
    full = dataset("femnist", str(folder), None)
    cut = dataset("femnist", str(folder), 50)
    np.testing.assert_array_equal(cut.train_groups, full.train_groups[:50])
    present = len(np.unique(cut.train_groups))
    small = _scenario(folder, present, dataset={"train_size": 50})
    assert sorted(client_users(small, cut).tolist()) == np.unique(cut.train_groups).tolist()
    with pytest.raises(ValueError, match=f"{present + 1} clients but the data has {present} natural ids"):
        client_splits(_scenario(folder, present + 1, dataset={"train_size": 50}), cut.train_y, cut.train_groups)


def test_natural_cannot_share_the_training_set_with_another_partition(femnist: tuple[Path, dict]) -> None:
    folder, _ = femnist
    sc = _scenario(folder, ["x1", "x1", {"partition": {"kind": "iid"}}])
    data = scenario_dataset(sc.dataset)
    with pytest.raises(ValueError, match="cannot share the training set with clients of another partition"):
        client_splits(sc, data.train_y, data.train_groups)


# --- ArrayDataset and to_tensor keep their image behaviour --------------------------------------------


def test_image_datasets_are_unchanged_and_tokens_pass_through() -> None:
    z, y = np.zeros((3, 28, 28), np.uint8), np.zeros(3, np.int64)
    ds = ArrayDataset(z, y, z, y, 10, 0.0, 1.0, "x")
    assert ds.kind == "image" and ds.train_groups is None and ds.group_names == () and ds.input_shape == (1, 28, 28)
    with pytest.raises(ValueError, match="kind 'text', expected one of image, tokens"):
        ArrayDataset(z, y, z, y, 10, 0.0, 1.0, "x", kind="text")
    tokens = np.arange(160, dtype=np.int64).reshape(2, 80) % 80
    t = to_tensor(tokens, 0.5, 0.25)
    assert t.dtype == torch.long and t.tolist() == tokens.tolist()
    t[0, 0] = 99
    assert tokens[0, 0] == 0  # a copy: the dataset's arrays are never changed through a batch
    with pytest.raises(ValueError, match="uint8 images .* or int64 token sequences"):
        to_tensor(tokens.astype(np.int32), 0.5, 0.25)
