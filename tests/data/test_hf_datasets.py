"""The built-in dataset `hf`: Hugging Face datasets from local files (edgesync/data/hf.py).

Every test writes its own small files in tmp_path, in each form hf reads: a Parquet file of pixel lists with a
`user` column, CSV files of one pixel per column, a JSON-lines file of token lists, and folders
`save_to_disk` wrote (a DatasetDict of PIL images, a single Dataset). Nothing is fetched.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from edgesync.config import load_scenario
from edgesync.data.__main__ import main as data_main
from edgesync.data.arrays import DataNotFoundError
from edgesync.data.datasets import INPUT_SHAPES, load_dataset
from edgesync.data.hf import load_hf
from edgesync.runtime.runs import run_scenario

datasets = pytest.importorskip("datasets")

SIDE = 28
USERS = ("u10", "u2", "alice", "bob")  # unsorted, as files list them
PER_USER = 12
LABELS = ("cat", "dog", "ant")


def write_parquet(path: Path, seed: int = 0) -> list[dict]:
    """Rows of 28×28 pixel lists, each unique, with a string label and a user; users interleaved."""
    rng = np.random.default_rng(seed)
    rows = [{"pixels": rng.integers(0, 256, SIDE * SIDE).tolist(), "label": LABELS[(i + u) % 3], "user": user}
            for i in range(PER_USER) for u, user in enumerate(USERS)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return rows


def _row_of(rows: list[dict]) -> dict[bytes, dict]:
    return {np.array(r["pixels"], dtype=np.uint8).tobytes(): r for r in rows}


@pytest.fixture
def parquet(tmp_path: Path) -> tuple[Path, list[dict]]:
    path = tmp_path / "writers.parquet"
    return path, write_parquet(path)


HF_ARGS = {"feature": "pixels", "shape": [SIDE, SIDE], "natural_id": "user"}


def _load(**args):
    return load_dataset("hf" + json.dumps(args, sort_keys=True))


# --- what each form becomes ----------------------------------------------------------------------------


def test_parquet_pixel_lists_with_users_and_a_seeded_test_split(parquet: tuple[Path, list[dict]]) -> None:
    path, rows = parquet
    ds = _load(path=str(path), **HF_ARGS)
    assert ds.kind == "image" and ds.name == "hf" and "hf" not in INPUT_SHAPES and ds.input_shape == (1, SIDE, SIDE)
    assert ds.train_x.dtype == np.uint8 and ds.train_x.shape[1:] == (SIDE, SIDE)
    assert ds.train_y.dtype == ds.test_y.dtype == ds.train_groups.dtype == ds.test_groups.dtype == np.int64
    assert ds.class_names == ("ant", "cat", "dog") and ds.num_classes == 3  # sorted names, their indices
    assert ds.group_names == ("alice", "bob", "u10", "u2")
    by_pixels = _row_of(rows)
    for x, y, g in [*zip(ds.train_x, ds.train_y, ds.train_groups), *zip(ds.test_x, ds.test_y, ds.test_groups)]:
        row = by_pixels[x.tobytes()]  # every sample is a written row, with its own label and user
        assert ds.class_names[y] == row["label"] and ds.group_names[g] == row["user"]
    assert len(ds.train_y) + len(ds.test_y) == len(rows)
    assert len({x.tobytes() for x in [*ds.train_x, *ds.test_x]}) == len(rows)  # no row twice
    # the default 0.2 of each user's 12 samples (2) held out; samples ordered by user
    assert np.bincount(ds.test_groups).tolist() == [2] * 4 and np.bincount(ds.train_groups).tolist() == [10] * 4
    assert (np.diff(ds.train_groups) >= 0).all() and (np.diff(ds.test_groups) >= 0).all()
    pixels = ds.train_x.astype(np.float64) / 255
    assert ds.mean == pytest.approx(pixels.mean()) and ds.std == pytest.approx(pixels.std())
    # the split is the seed's: the same again, another with another seed or fraction
    again = _load(path=str(path), **HF_ARGS)
    assert np.array_equal(again.test_x, ds.test_x) and np.array_equal(again.train_groups, ds.train_groups)
    other = _load(path=str(path), split_seed=5, **HF_ARGS)
    assert not np.array_equal(other.test_x, ds.test_x)
    half = _load(path=str(path), test_fraction=0.5, **HF_ARGS)
    assert np.bincount(half.test_groups).tolist() == [6] * 4


def test_numeric_ids_sort_as_numbers_and_a_test_split_keeps_them_aligned(tmp_path: Path) -> None:
    rows = [{"x": [i, i + 1], "y": i % 2, "writer": w} for i, w in enumerate([10, 2, 10, 2, 33])]
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    test.write_text("".join(json.dumps(r) + "\n" for r in rows[3:]))
    ds = _load(path={"train": str(train), "test": str(test)}, feature="x", label="y", natural_id="writer")
    assert ds.group_names == ("2", "10", "33")  # 2 before 10: numbers as numbers, one index for both splits
    assert ds.train_groups.tolist() == [0, 1, 1] and ds.train_x[:, 0].tolist() == [1, 0, 2]  # by user, file order
    assert ds.test_groups.tolist() == [0, 2] and ds.test_x[:, 0].tolist() == [3, 4]


def test_csv_of_one_pixel_per_column_with_its_own_test_file(tmp_path: Path) -> None:
    header = "label," + ",".join(f"pixel{i}" for i in range(16))
    lines = {s: [header] + [f"{(i + k) % 4}," + ",".join(str((i * 16 + j) % 256) for j in range(16))
                            for i in range(n)] for s, n, k in (("train", 6, 0), ("test", 3, 1))}
    for split, text in lines.items():
        (tmp_path / f"{split}.csv").write_text("\n".join(text) + "\n")
    ds = load_hf(tmp_path, path={"train": "train.csv", "test": "test.csv"}, feature="pixel*", shape=[4, 4])
    assert ds.train_x.shape == (6, 4, 4) and ds.test_x.shape == (3, 4, 4) and ds.train_x.dtype == np.uint8
    assert ds.train_x[1].reshape(-1).tolist() == list(range(16, 32))  # pixel0..pixel15, in the columns' order
    assert ds.train_y.tolist() == [0, 1, 2, 3, 0, 1] and ds.test_y.tolist() == [1, 2, 3]
    assert ds.num_classes == 4 and ds.class_names == () and ds.train_groups is None
    with pytest.raises(ValueError, match=r"args.test_fraction: the files have a test split 'test'"):
        load_hf(tmp_path, path={"train": "train.csv", "test": "test.csv"}, feature="pixel*", shape=[4, 4],
                test_fraction=0.3)
    with pytest.raises(ValueError, match=r"args.feature 'px\*' matches no column; its columns: label, pixel0"):
        load_hf(tmp_path, path="train.csv", feature="px*", shape=[4, 4])


def test_json_lines_of_integers_are_token_sequences(tmp_path: Path) -> None:
    path = tmp_path / "text.jsonl"
    path.write_text("".join(json.dumps({"tokens": [i, i + 1, i + 2], "next": (i + 3) % 5}) + "\n" for i in range(10)))
    ds = load_hf(path=str(path), feature="tokens", label="next", test_fraction=0.3, split_seed=1)
    assert ds.kind == "tokens" and ds.train_x.dtype == np.int64 and ds.input_shape == (3,)
    assert len(ds.train_y) + len(ds.test_y) == 10 and ds.mean == 0.0 and ds.std == 1.0
    # without users the fraction is per class: every class with two samples keeps one for the test
    assert sorted(set(ds.test_y.tolist())) == [0, 1, 2, 3, 4]
    assert all(int(t[0]) + 3 == y or (int(t[0]) + 3) % 5 == y for t, y in zip(ds.train_x, ds.train_y))


def _png(mode: str, size: tuple[int, int], value) -> Image.Image:
    return Image.new(mode, size, value)


def test_a_saved_dataset_dict_of_images_with_class_label_names(tmp_path: Path) -> None:
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=["no", "yes"])})
    train = datasets.Dataset.from_dict({"img": [_png("L", (5, 4), 10), _png("RGB", (5, 4), (1, 2, 3)),
                                                _png("L", (5, 4), 255)], "label": [1, 0, 1]}, features=features)
    test = datasets.Dataset.from_dict({"img": [_png("RGB", (5, 4), (9, 9, 9))], "label": [0]}, features=features)
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(tmp_path / "saved"))
    ds = load_hf(path=str(tmp_path / "saved"), feature="img")
    # a colour image among grayscale ones: all colour, the grayscale ones repeated over the channels
    assert ds.train_x.shape == (3, 3, 4, 5) and ds.test_x.shape == (1, 3, 4, 5) and ds.input_shape == (3, 4, 5)
    assert ds.train_x[0].tolist() == np.full((3, 4, 5), 10).tolist() and ds.train_x[1, :, 0, 0].tolist() == [1, 2, 3]
    assert ds.class_names == ("no", "yes") and ds.num_classes == 2 and ds.train_y.tolist() == [1, 0, 1]
    assert isinstance(ds.mean, tuple) and len(ds.mean) == len(ds.std) == 3
    gray = load_hf(path=str(tmp_path / "saved"), feature="img", grayscale=True, size=[8, 6])
    assert gray.train_x.shape == (3, 8, 6) and gray.test_x.shape == (1, 8, 6)
    with pytest.raises(ValueError, match=r"args.test_split: no split 'valid' in .*; its splits: train, test"):
        load_hf(path=str(tmp_path / "saved"), feature="img", test_split="valid")


def test_a_saved_single_dataset_is_training_data_with_a_test_share(tmp_path: Path) -> None:
    encoded = []
    for value in range(10):
        buf = io.BytesIO()
        _png("L", (3, 3), value * 20).save(buf, "PNG")
        encoded.append(buf.getvalue())
    datasets.Dataset.from_dict({"png": encoded, "label": [float(v % 2) for v in range(10)]}).save_to_disk(
        str(tmp_path / "one"))
    ds = load_hf(path=str(tmp_path / "one"), feature="png")  # raw PNG bytes; integral float labels
    assert ds.train_x.shape == (8, 3, 3) and ds.test_x.shape == (2, 3, 3) and sorted(ds.test_y.tolist()) == [0, 1]
    assert sorted([*ds.train_x[:, 0, 0].tolist(), *ds.test_x[:, 0, 0].tolist()]) == [v * 20 for v in range(10)]


def test_nothing_is_fetched_even_where_datasets_was_imported_online(parquet: tuple[Path, list[dict]],
                                                                     monkeypatch) -> None:
    path, _ = parquet
    reached = []

    def no_network(*args, **kwargs):
        reached.append(args[:2])
        raise OSError("this test has no network")

    monkeypatch.setattr("socket.getaddrinfo", no_network)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)  # as after an import without HF_HUB_OFFLINE
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", True)
    assert len(_load(path=str(path), **HF_ARGS).train_y) == 40
    assert reached == [] and datasets.config.HF_HUB_OFFLINE is False  # and the setting is left as it was


# --- what is refused ----------------------------------------------------------------------------------


def test_each_bad_input_names_the_file_column_key_and_what_was_expected(tmp_path: Path,
                                                                        parquet: tuple[Path, list[dict]]) -> None:
    path, _ = parquet
    where = str(path)
    with pytest.raises(ValueError, match=rf"{where} \(split 'train'\): no column 'writer' \(args.natural_id\); "
                       "its columns: pixels, label, user"):
        _load(path=where, feature="pixels", shape=[SIDE, SIDE], natural_id="writer")
    with pytest.raises(DataNotFoundError, match=r"args.path nowhere.parquet: no such file or directory \(looked at "
                       rf"{tmp_path}/nowhere.parquet"):
        load_hf(tmp_path, path="nowhere.parquet")
    with pytest.raises(DataNotFoundError, match=r"args.path \*.csv: no file matches"):
        load_hf(tmp_path, path="*.csv")
    with pytest.raises(ValueError, match=r"args.shape \[27, 27\] holds 729 values, but each row of column 'pixels'"):
        _load(path=where, feature="pixels", shape=[27, 27])
    with pytest.raises(ValueError, match=r"args.colour: not an argument of this dataset; its arguments: .*path"):
        _load(path=where, colour=True)
    with pytest.raises(ValueError, match=r"args.path: required"):
        load_hf()
    with pytest.raises(ValueError, match="column 'label' .* holds text; hf reads images and lists of numbers"):
        _load(path=where, feature="label")
    cases = {
        "floats.jsonl": ([{"x": [0, 1], "label": 1.5}], r"row 0: 1.5, not an integer; expected integer classes"),
        "ragged.jsonl": ([{"x": [0, 1], "label": 0}, {"x": [1], "label": 1}],
                         r"column 'x' \(args.feature\): rows of different lengths: row 1 has a list of 1, row 0 of 2"),
        "pixels.jsonl": ([{"x": [0.5, 1.5], "label": 0}], r"row 0: a pixel value 1.5; expected floats in \[0, 1\]"),
        "nolabel.jsonl": ([{"x": [0, 1], "label": 0}, {"x": [0, 1], "label": None}],
                          r"column 'label' \(args.label\), row 1: no value"),
        "negative.jsonl": ([{"x": [0, 1], "label": -1}], r"row 0: class -1; expected classes 0..K-1"),
    }
    for name, (rows, message) in cases.items():
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        with pytest.raises(ValueError, match=rf"{tmp_path}/{name} \(split 'train'\).*{message}"):
            load_hf(path=str(tmp_path / name), feature="x", shape=[1, 2] if name == "pixels.jsonl" else None)
    (tmp_path / "floats2.jsonl").write_text(json.dumps({"x": [0.5, 0.25], "label": 0}) + "\n")
    with pytest.raises(ValueError, match=r"holds lists of float64; token sequences are integers, and pixel lists "
                       r"need args.shape"):
        load_hf(path=str(tmp_path / "floats2.jsonl"), feature="x")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match=r"a folder is read only when save_to_disk wrote it"):
        load_hf(path=str(tmp_path / "plain"))
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ValueError, match=r"a.txt: not a file hf reads by its name; expected one ending in .parquet"):
        load_hf(path=str(tmp_path / "a.txt"))
    (tmp_path / "broken.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match=r"broken.parquet: cannot read them as parquet"):
        load_hf(path=str(tmp_path / "broken.parquet"))


def test_images_of_different_sizes_are_refused_unless_resized(tmp_path: Path) -> None:
    datasets.Dataset.from_dict({"image": [_png("L", (4, 4), 0), _png("L", (6, 4), 0)], "label": [0, 1]}).save_to_disk(
        str(tmp_path / "mixed"))
    with pytest.raises(ValueError, match=r"images of different sizes: .*row 0 is 4×4 \(H×W\), .*row 1 is 4×6 "
                       r"\(H×W\); give the dataset arg `size: \[H, W\]`"):
        load_hf(path=str(tmp_path / "mixed"))
    with pytest.raises(ValueError, match="none can be held out: every class has a single sample"):
        load_hf(path=str(tmp_path / "mixed"), size=[5, 5])
    both = {"train": str(tmp_path / "mixed"), "test": str(tmp_path / "mixed")}
    datasets.DatasetDict({"train": datasets.load_from_disk(both["train"]), "test": datasets.load_from_disk(
        both["test"])}).save_to_disk(str(tmp_path / "split"))
    resized = load_hf(path=str(tmp_path / "split"), size=[5, 5])
    assert resized.train_x.shape == resized.test_x.shape == (2, 5, 5)


def test_a_scenario_names_the_files_and_validation_names_the_key(parquet: tuple[Path, list[dict]]) -> None:
    path, _ = parquet
    sc = load_scenario({"name": "hf", "runtime": "sim", "clients": 4, "algorithms": [{"name": "local_sgd"}],
                        "dataset": {"name": "hf", "root": str(path.parent), "args": {"path": path.name, **HF_ARGS}},
                        "partition": {"kind": "natural"}, "model": {"name": "mlp"}})
    assert sc.dataset.id.startswith('hf{"feature":"pixels"')
    assert load_dataset(sc.dataset.id, sc.dataset.root).group_names == ("alice", "bob", "u10", "u2")
    for args, message in (({"path": "gone.parquet"}, "dataset: args.path gone.parquet: no such file or directory"),
                          ({"path": path.name, "shape": "28x28"}, "dataset: args.shape: got '28x28'; expected"),
                          ({"path": path.name, "test_fraction": 1.5}, "args.test_fraction: input should be less "
                                                                      "than 1 .got 1.5.")):
        with pytest.raises(ValueError, match=message):
            load_scenario({"name": "hf", "runtime": "sim", "algorithms": [{"name": "local_sgd"}],
                           "dataset": {"name": "hf", "root": str(path.parent), "args": args}})
    with pytest.raises(ValueError, match="dataset.args: fashion_mnist is built in and takes none"):
        load_scenario({"name": "x", "algorithms": [{"name": "local_sgd"}],
                       "dataset": {"name": "fashion_mnist", "args": {"path": "x"}}})


def test_the_command_loads_the_args_and_says_what_they_hold(parquet: tuple[Path, list[dict]], capsys) -> None:
    path, _ = parquet
    assert data_main(["--dataset", "hf", "--args", json.dumps({"path": str(path), **HF_ARGS})]) == 0
    assert "hf: image (1, 28, 28), 3 classes (train 40, test 8, users 4)" in capsys.readouterr().out
    assert data_main(["--dataset", "hf"]) == 1
    assert "give them as --args" in capsys.readouterr().err
    assert data_main(["--dataset", "hf", "--args", json.dumps({"path": "gone.parquet"}), "--root", str(path.parent)]) == 1
    assert "args.path gone.parquet: no such file or directory" in capsys.readouterr().err


def test_a_short_sim_run_of_natural_clients_on_the_parquet_users(parquet: tuple[Path, list[dict]],
                                                                  tmp_path: Path, monkeypatch) -> None:
    path, _ = parquet
    monkeypatch.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)  # the run, not its report
    sc = load_scenario({
        "name": "hf-natural", "seed": 1, "runtime": "sim", "clients": 4, "model": {"name": "mlp"},
        "dataset": {"name": "hf", "args": {"path": str(path), **HF_ARGS}}, "partition": {"kind": "natural"},
        "algorithms": [{"name": "local_sgd", "local_steps": 2, "lr": 0.05, "batch_size": 4}],
        "stop": {"time_budget_s": 0.5, "target_acc": None}, "eval": {"every_s": 0.25},
        "sim": {"base_step_s": 0.01, "server_time": "zero"},
    })
    out = tmp_path / "run"
    summary = run_scenario(sc, out, progress=False)
    assert summary["local_sgd"]["updates"] > 0 and summary["local_sgd"]["evals"] >= 1
    record = json.loads((out / "partition.json").read_text())[""]  # one variant, no sweep tag
    assert record["dataset"] == sc.dataset.id and record["train_samples"] == 40
    assert [c["samples"] for c in record["clients"]] == [10] * 4  # one client per user, all of its samples
