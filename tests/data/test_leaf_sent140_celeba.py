"""LEAF's Sent140 and CelebA: the readers (edgesync/data/leaf_sent140.py, leaf_celeba.py through leaf.py), LEAF's
tokenisation worked by hand, the vocabulary of the training split, the images beside the JSON, their errors, the
scenario check and the `natural` partition.

Every test writes its own small folder in LEAF's real layout (edgesync/testing/leaf_files.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgesync.data.leaf as leaf
from edgesync.config import ScenarioError, load_scenario
from edgesync.data.__main__ import main as data_main
from edgesync.data.arrays import DataNotFoundError
from edgesync.data.datasets import INPUT_SHAPES, TOKEN_INDICES, load_dataset
from edgesync.data.leaf_sent140 import (MAX_WORDS, UNKNOWN, VOCABULARY_CAP, build_vocabulary, encode,
                                        line_to_indices, split_line)
from edgesync.models import TOKEN_INDICES as MODEL_TOKEN_INDICES
from edgesync.runtime.bookkeeping.workload import client_splits, client_test_splits, client_users, scenario_dataset
from edgesync.testing.leaf_files import write_celeba, write_leaf_file, write_sent140

# Sentiment140's first training tweet, as its CSV and LEAF's JSON hold it
TWEET = ("@switchfoot http://twitpic.com/2y1zl - Awww, that's a bummer.  You shoulda got David Carr of Third Day to "
         "do it. ;D")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(leaf.ENV_VAR, raising=False)
    monkeypatch.setattr(leaf, "SEARCH_BASE", tmp_path / "no-repo-data")  # no default place holds anything


@pytest.fixture
def sent140(tmp_path: Path) -> tuple[Path, dict]:
    folder = tmp_path / "sent140" / "data"
    return folder, write_sent140(folder, users=10, seed=1)


@pytest.fixture
def celeba(tmp_path: Path) -> tuple[Path, dict]:
    folder = tmp_path / "celeba" / "data"
    return folder, write_celeba(folder, users=6, seed=2)


def _tweet(text: str, user: str = "u") -> list[str]:
    return ["1467810369", "Mon Apr 06 22:19:45 PDT 2009", "NO_QUERY", user, text]


# --- LEAF's tokenisation --------------------------------------------------------------------------------------

def test_split_line_is_leafs_regular_expression_worked_by_hand() -> None:
    # runs of word characters and apostrophes, and . , ! ? ; alone; @ : / - are dropped, nothing lower-cased
    assert split_line(TWEET) == ["switchfoot", "http", "twitpic", ".", "com", "2y1zl", "Awww", ",", "that's", "a",
                                 "bummer", ".", "You", "shoulda", "got", "David", "Carr", "of", "Third", "Day",
                                 "to", "do", "it", ".", ";", "D"]  # 26 words


def test_line_to_indices_keeps_25_words_and_pads_with_the_unknown_index() -> None:
    vocabulary = {".": 0, "a": 1, "that's": 2, "You": 3}
    u = UNKNOWN
    assert line_to_indices(TWEET, vocabulary) == [u, u, u, 0, u, u, u, u, 2, 1, u, 0, 3, u, u, u, u, u, u, u, u, u,
                                                  u, 0, u]  # the 26th word, "D", is cut
    assert line_to_indices("is it a dog?", vocabulary) == [u, u, 1, u, u] + [u] * 20
    assert line_to_indices("", vocabulary) == [u] * MAX_WORDS
    assert UNKNOWN == VOCABULARY_CAP == 10_000 and TOKEN_INDICES["sent140"] == 10_001


def test_the_vocabulary_ranks_by_count_then_alphabetically_up_to_the_cap() -> None:
    texts = ["b a c", "a b", "a", "Z z"]  # a ×3, b ×2, then c, Z, z once each: Z before c before z (code points)
    assert build_vocabulary(texts) == {"a": 0, "b": 1, "Z": 2, "c": 3, "z": 4}
    assert build_vocabulary(texts, cap=3) == {"a": 0, "b": 1, "Z": 2}
    assert build_vocabulary(reversed(texts)) == build_vocabulary(texts)  # the order of the tweets does not matter
    assert encode(["a b q"], {"a": 0, "b": 1}).tolist() == [[0, 1] + [UNKNOWN] * 23]


# --- Sent140 read ---------------------------------------------------------------------------------------------

def test_sent140_loads_word_indices_labels_and_users(sent140: tuple[Path, dict]) -> None:
    folder, written = sent140
    data = load_dataset("sent140", folder, "dataset.root")
    assert data.kind == "tokens" and data.num_classes == 2 and data.name == "sent140"
    assert data.train_x.dtype == np.int64 and data.train_x.shape == (len(data.train_y), MAX_WORDS)
    assert data.test_x.shape == (len(data.test_y), MAX_WORDS) and data.input_shape == INPUT_SHAPES["sent140"]
    assert data.train_y.dtype == np.int64 and set(np.unique(data.train_y)) <= {0, 1}
    assert 0 <= data.train_x.min() and data.train_x.max() <= UNKNOWN and (data.train_x == UNKNOWN).any()  # padding
    assert data.group_names == tuple(sorted(written["train"]))
    for i, user in enumerate(data.group_names):
        assert (data.train_groups == i).sum() == len(written["train"][user]["y"])
        assert data.train_y[data.train_groups == i].tolist() == written["train"][user]["y"]
    # the same files, the same arrays: the vocabulary is deterministic
    again = load_dataset("sent140", folder)
    assert np.array_equal(again.train_x, data.train_x) and np.array_equal(again.test_x, data.test_x)


def test_sent140_vocabulary_comes_from_the_training_split_only(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write_leaf_file(folder / "train" / "a.json", {
        "bob": {"x": [_tweet("good good day", "bob"), _tweet("bad day", "bob")], "y": [1, 0]},
        "amy": {"x": [_tweet("day", "amy")], "y": [0]}})
    write_leaf_file(folder / "test" / "a.json", {
        "bob": {"x": [_tweet("good zebra zebra zebra", "bob")], "y": [1]},
        "amy": {"x": [_tweet("bad", "amy")], "y": [0]}})
    data = load_dataset("sent140", folder)
    # train: day ×3, good ×2, bad ×1 -> day 0, good 1, bad 2; "zebra", frequent in test only, is unknown
    pad = [UNKNOWN] * (MAX_WORDS - 3)
    assert data.group_names == ("amy", "bob")
    assert data.train_x[:, :3].tolist() == [[0, UNKNOWN, UNKNOWN], [1, 1, 0], [2, 0, UNKNOWN]]
    assert data.test_x.tolist() == [[2] + pad + [UNKNOWN] * 2, [1, UNKNOWN, UNKNOWN, UNKNOWN] + pad[1:]]
    assert data.train_x[1].tolist() == [1, 1, 0] + pad


@pytest.mark.parametrize("x, needle", [
    (["1", "date", "NO_QUERY", "u"], "x is a list of 4, expected LEAF's 5 strings"),
    ("just text", "x is 'just text', expected LEAF's 5 strings"),
    (["1", "date", "NO_QUERY", "u", 7], r"x is \[.*, 7\], expected LEAF's 5 strings \[tweet_id, date, query, user, "
                                        r"text\]"),
])
def test_a_malformed_tweet_names_the_file_user_and_sample(tmp_path: Path, x, needle: str) -> None:
    write_leaf_file(tmp_path / "train" / "a.json", {"ann": {"x": [_tweet("ok"), x], "y": [1, 0]}})
    write_leaf_file(tmp_path / "test" / "a.json", {"ann": {"x": [_tweet("ok")], "y": [1]}})
    with pytest.raises(ValueError, match=rf"a.json: user_data\['ann'\], sample 1: {needle}"):
        load_dataset("sent140", tmp_path)


def test_sent140_labels_must_be_0_or_1(tmp_path: Path) -> None:
    write_leaf_file(tmp_path / "train" / "a.json", {"ann": {"x": [_tweet("ok")], "y": [4]}})
    write_leaf_file(tmp_path / "test" / "a.json", {"ann": {"x": [_tweet("ok")], "y": [1]}})
    with pytest.raises(ValueError, match=r"y spans 4..4, expected classes 0..1"):
        load_dataset("sent140", tmp_path)


# --- CelebA read ----------------------------------------------------------------------------------------------

def test_celeba_loads_84_by_84_colour_images_from_the_raw_folder(celeba: tuple[Path, dict]) -> None:
    folder, written = celeba
    data = load_dataset("celeba", folder)
    assert data.kind == "image" and data.num_classes == 2 and data.input_shape == INPUT_SHAPES["celeba"] == (3, 84, 84)
    assert data.train_x.dtype == np.uint8 and data.train_x.shape == (len(data.train_y), 3, 84, 84)
    assert data.test_x.shape == (len(data.test_y), 3, 84, 84)
    assert len(data.mean) == len(data.std) == 3 and all(0 < m < 1 for m in data.mean)
    assert data.group_names == tuple(sorted(written["train"])) and all(u.isdigit() for u in data.group_names)
    # LEAF writes y as 1.0 and 0.0; read as the classes 1 and 0
    assert all(isinstance(v, float) for d in written["train"].values() for v in d["y"])
    for i, user in enumerate(data.group_names):
        assert data.train_y[data.train_groups == i].tolist() == [int(v) for v in written["train"][user]["y"]]
    # a smiling face's mouth band is bright, the same band of a face that is not is the face's own tone
    mouth = data.train_x[:, :, 58:62, 35:49].astype(float).mean(axis=(1, 2, 3))
    assert mouth[data.train_y == 1].min() > 215 and mouth[data.train_y == 0].max() < 215


def test_a_missing_image_is_an_error_naming_the_file_and_user(celeba: tuple[Path, dict]) -> None:
    folder, written = celeba
    user = sorted(written["test"])[1]
    name = written["test"][user]["x"][0]
    (folder / "raw" / "img_align_celeba" / name).unlink()
    with pytest.raises(DataNotFoundError, match=rf"test/ user '{user}': image {name} is not in .*img_align_celeba"):
        load_dataset("celeba", folder)


def test_a_missing_image_folder_says_where_leaf_keeps_it(celeba: tuple[Path, dict]) -> None:
    folder, _ = celeba
    (folder / "raw" / "img_align_celeba").rename(folder / "raw" / "elsewhere")
    with pytest.raises(DataNotFoundError, match=r"raw/img_align_celeba: no such folder.*data/celeba/data/raw"):
        load_dataset("celeba", folder)


def test_a_celeba_label_that_is_not_0_or_1_is_refused(tmp_path: Path) -> None:
    write_leaf_file(tmp_path / "train" / "a.json", {"7": {"x": ["000001.jpg"], "y": [0.5]}})
    write_leaf_file(tmp_path / "test" / "a.json", {"7": {"x": ["000002.jpg"], "y": [1.0]}})
    with pytest.raises(ValueError, match=r"user_data\['7'\]: y holds 0.5, expected 0 or 1"):
        load_dataset("celeba", tmp_path)


# --- the command, the scenario check, the natural partition ---------------------------------------------------

def test_the_data_command_finds_both_and_says_how_to_build_them(sent140, celeba, tmp_path, capsys) -> None:
    assert data_main(["--dataset", "sent140", "--root", str(sent140[0])]) == 0
    assert data_main(["--dataset", "celeba", "--root", str(celeba[0])]) == 0
    out = capsys.readouterr().out
    assert "sent140: " in out and "users 10" in out and "celeba: " in out and "users 6" in out
    assert data_main(["--dataset", "celeba", "--ensure"]) == 2
    err = capsys.readouterr().err
    assert "./preprocess.sh -s niid --sf 1.0 -k 5 -t sample" in err and "img_align_celeba" in err
    assert data_main(["--dataset", "sent140", "--ensure"]) == 2
    assert "./preprocess.sh -s niid --sf 1.0 -k 64 -t sample" in capsys.readouterr().err


def _scenario(name: str, root: Path, model: str, clients: int = 4):
    return load_scenario({"name": name, "seed": 1, "runtime": "sim", "clients": clients,
                          "dataset": {"name": name, "root": str(root)}, "model": {"name": model},
                          "partition": {"kind": "natural"}, "algorithms": [{"name": "local_sgd"}]})


def test_the_scenario_check_matches_models_to_their_data(tmp_path: Path) -> None:
    assert MODEL_TOKEN_INDICES["leaf_sent140_lstm"] == TOKEN_INDICES["sent140"]
    assert MODEL_TOKEN_INDICES["leaf_lstm"] == TOKEN_INDICES["shakespeare"]
    _scenario("sent140", tmp_path, "leaf_sent140_lstm")
    _scenario("celeba", tmp_path, "leaf_celeba_cnn")
    with pytest.raises(ScenarioError, match=r"leaf_lstm takes token indices 0..79, but dataset.name sent140 holds "
                                            r"0..10000: use model.name leaf_sent140_lstm"):
        _scenario("sent140", tmp_path, "leaf_lstm")
    with pytest.raises(ScenarioError, match=r"leaf_sent140_lstm takes token indices 0..10000, but dataset.name "
                                            r"shakespeare holds 0..79: use model.name leaf_lstm"):
        _scenario("shakespeare", tmp_path, "leaf_sent140_lstm")
    with pytest.raises(ScenarioError, match="leaf_cnn takes images, .* use model.name leaf_sent140_lstm"):
        _scenario("sent140", tmp_path, "leaf_cnn")
    with pytest.raises(ScenarioError, match="leaf_celeba_cnn is built for 84×84 images, but dataset.name femnist"):
        _scenario("femnist", tmp_path, "leaf_celeba_cnn")
    with pytest.raises(ScenarioError, match="leaf_cnn is built for 28×28 images, but dataset.name celeba has 84×84"):
        _scenario("celeba", tmp_path, "leaf_cnn")


@pytest.mark.parametrize("name, model", [("sent140", "leaf_sent140_lstm"), ("celeba", "leaf_celeba_cnn")])
def test_natural_clients_get_their_users_samples(sent140, celeba, name: str, model: str) -> None:
    folder = {"sent140": sent140, "celeba": celeba}[name][0]
    sc = _scenario(name, folder, model, clients=4)
    data = scenario_dataset(sc.dataset)
    users = client_users(sc, data)
    assert len(users) == 4 and len(set(users.tolist())) == 4
    for user, split, test in zip(users, client_splits(sc, data.train_y, data.train_groups),
                                 client_test_splits(sc, data)):
        assert split.tolist() == np.flatnonzero(data.train_groups == user).tolist()
        assert test.tolist() == np.flatnonzero(data.test_groups == user).tolist() and len(test) >= 1
