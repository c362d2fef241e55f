"""CIFAR-10: the batch reader, finding the data, the loader and its error when the data is absent.

Every test writes its own small CIFAR-10 in the real format, never downloading: batches pickled byte for
byte as the archive's Python 2 files are (`py2_batch`), in a real ``cifar-10-python.tar.gz`` or in the
extracted ``cifar-10-batches-py/`` folder.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import edgesync.data.cifar10 as cf
from edgesync.data.__main__ import main as data_main
from edgesync.data.arrays import CIFAR10_MEAN, CIFAR10_STD, DataNotFoundError, to_tensor
from edgesync.data.cifar10 import ARCHIVE, ARCHIVE_URL, BATCHES, FOLDER, find_cifar10, load_cifar10, read_batch
from edgesync.data.datasets import load_dataset

N_PER_BATCH, N_TEST = 6, 8  # 30 training images in five batches, 8 test images


def py2_batch(images: np.ndarray, labels: list[int], batch_label: bytes) -> bytes:
    """A batch pickled as the archive's own files are: Python 2 cPickle at protocol 2, keys and the pixel
    buffer as Python 2 str, the array rebuilt by numpy 1's numpy.core.multiarray._reconstruct."""
    def s(b: bytes) -> bytes:  # a Python 2 str: SHORT_BINSTRING, or BINSTRING past 255 bytes
        return b"U" + bytes([len(b)]) + b if len(b) < 256 else b"T" + struct.pack("<I", len(b)) + b

    def i(n: int) -> bytes:  # BININT
        return b"J" + struct.pack("<i", n)

    n, row = images.shape
    dtype = b"cnumpy\ndtype\n" + s(b"u1") + i(0) + i(1) + b"\x87R" + b"(" + i(3) + s(b"|") + b"NNN" + i(-1) \
        + i(-1) + i(0) + b"tb"  # dtype('uint8') and its state (3, '|', None, None, None, -1, -1, 0)
    array = (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n" + i(0) + b"\x85" + s(b"b") + b"\x87R"
             + b"(" + i(1) + i(n) + i(row) + b"\x86" + dtype + b"\x89" + s(images.tobytes()) + b"tb")
    label_list = b"](" + b"".join(i(v) for v in labels) + b"e"
    return (b"\x80\x02}(" + s(b"data") + array + s(b"labels") + label_list
            + s(b"batch_label") + s(batch_label) + b"u.")


def fake_batches(seed: int = 0) -> dict[str, tuple[np.ndarray, list[int]]]:
    """Batch name -> (rows uint8 (N, 3072), labels): random images, every class among the labels."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in BATCHES:
        n = N_TEST if name == "test_batch" else N_PER_BATCH
        out[name] = (rng.integers(0, 256, (n, 3072), dtype=np.uint8), rng.integers(0, 10, n).tolist())
    return out


def write_cifar(base: Path, form: str, batches: dict | None = None) -> dict[str, tuple[np.ndarray, list[int]]]:
    """CIFAR-10 under base as the archive (`form` "archive": base/cifar-10-python.tar.gz) or the folder it
    extracts to ("folder": base/cifar-10-batches-py/); returns the batches written."""
    batches = batches or fake_batches()
    files = {name: py2_batch(x, y, name.encode()) for name, (x, y) in batches.items()}
    files["batches.meta"] = pickle.dumps({b"label_names": [b"airplane", b"automobile"]}, protocol=2)
    base.mkdir(parents=True, exist_ok=True)
    if form == "folder":
        (base / FOLDER).mkdir(exist_ok=True)
        for name, data in files.items():
            (base / FOLDER / name).write_bytes(data)
    else:
        with tarfile.open(base / ARCHIVE, "w:gz") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(f"{FOLDER}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return batches


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cf.ENV_VAR, raising=False)


@pytest.fixture
def no_repo_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point the default place at an empty tmp path, so only what a test provides is found."""
    repo = tmp_path / "no-repo" / "cifar-10"
    monkeypatch.setattr(cf, "REPO_DIR", repo)
    return repo


# --- the loader --------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["archive", "folder"])
def test_train_is_batches_1_to_5_in_order_and_test_is_test_batch(tmp_path: Path, form: str) -> None:
    batches = write_cifar(tmp_path, form)
    ds = load_cifar10(tmp_path)
    train = [batches[f"data_batch_{i}"] for i in range(1, 6)]
    assert ds.train_x.shape == (5 * N_PER_BATCH, 3, 32, 32) and ds.train_x.dtype == np.uint8
    assert ds.test_x.shape == (N_TEST, 3, 32, 32)
    np.testing.assert_array_equal(ds.train_x.reshape(-1, 3072), np.concatenate([x for x, _ in train]))
    np.testing.assert_array_equal(ds.train_y, np.concatenate([y for _, y in train]))
    np.testing.assert_array_equal(ds.test_x.reshape(-1, 3072), batches["test_batch"][0])
    np.testing.assert_array_equal(ds.test_y, batches["test_batch"][1])
    assert ds.train_y.dtype == np.int64 and ds.test_y.dtype == np.int64
    assert ds.input_shape == (3, 32, 32) and ds.num_classes == 10 and ds.name == "cifar10"
    assert (ds.mean, ds.std) == (CIFAR10_MEAN, CIFAR10_STD)


def test_archive_and_folder_give_the_same_data(tmp_path: Path) -> None:
    write_cifar(tmp_path / "a", "archive")
    write_cifar(tmp_path / "f", "folder")
    a, f = load_cifar10(tmp_path / "a"), load_cifar10(tmp_path / "f")
    for field in ("train_x", "train_y", "test_x", "test_y"):
        np.testing.assert_array_equal(getattr(a, field), getattr(f, field))


@pytest.mark.parametrize("form", ["archive", "folder"])
def test_rows_are_channel_major_red_then_green_then_blue(tmp_path: Path, form: str) -> None:
    batches = fake_batches()
    x, y = batches["data_batch_2"]
    red = np.zeros(3072, np.uint8)
    red[:1024] = 255  # a pure red image: the first 1024 values of a row are the red channel
    pattern = (np.arange(3072) % 251).astype(np.uint8)  # value c·1024 + 32·h + w (mod 251) at (c, h, w)
    x[0], x[1] = red, pattern
    write_cifar(tmp_path, form, batches)
    ds = load_cifar10(tmp_path)
    img = ds.train_x[N_PER_BATCH]  # data_batch_2's first image
    assert (img[0] == 255).all() and (img[1] == 0).all() and (img[2] == 0).all()
    c, h, w = np.indices((3, 32, 32))
    np.testing.assert_array_equal(ds.train_x[N_PER_BATCH + 1], (c * 1024 + h * 32 + w) % 251)
    # ... and normalised, channel by channel with the dataset's own mean and std
    t = to_tensor(ds.train_x[N_PER_BATCH:N_PER_BATCH + 1], ds.mean, ds.std)
    expected = [(1.0 - CIFAR10_MEAN[0]) / CIFAR10_STD[0], -CIFAR10_MEAN[1] / CIFAR10_STD[1],
                -CIFAR10_MEAN[2] / CIFAR10_STD[2]]
    for channel, value in enumerate(expected):
        torch.testing.assert_close(t[0, channel], torch.full((32, 32), value))


def test_to_tensor_normalises_each_channel(tmp_path: Path) -> None:
    write_cifar(tmp_path, "folder")
    ds = load_cifar10(tmp_path)
    t = to_tensor(ds.train_x, ds.mean, ds.std)
    assert t.shape == (5 * N_PER_BATCH, 3, 32, 32) and t.dtype == torch.float32
    mean = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(t, (torch.from_numpy(ds.train_x).float() / 255 - mean) / std)
    with pytest.raises(ValueError, match="3 channels need 3 means"):
        to_tensor(ds.train_x, 0.5, (0.2, 0.2, 0.2))
    with pytest.raises(ValueError, match="grayscale"):
        to_tensor(ds.train_x[:, 0], ds.mean, ds.std)


def test_train_size_takes_the_first_samples_and_leaves_the_test_set(tmp_path: Path) -> None:
    from edgesync.runtime.bookkeeping.workload import dataset

    write_cifar(tmp_path, "archive")
    full = load_cifar10(tmp_path)
    sub = dataset("cifar10", str(tmp_path), 13)
    np.testing.assert_array_equal(sub.train_x, full.train_x[:13])
    np.testing.assert_array_equal(sub.train_y, full.train_y[:13])
    np.testing.assert_array_equal(sub.test_x, full.test_x)


def test_a_tuned_scenario_holds_out_a_stratified_validation_set(tmp_path: Path) -> None:
    from edgesync.runtime.bookkeeping.workload import prepare_workload, validation_indices
    from edgesync.config import load_scenario

    batches = fake_batches()
    for b, (name, (x, _)) in enumerate(batches.items()):  # labels 0..4 in turn: 6 of each in training
        batches[name] = (x, [(b * N_PER_BATCH + k) % 5 for k in range(len(x))])
    write_cifar(tmp_path, "folder", batches)
    sc = load_scenario({
        "name": "cifar-split", "runtime": "sim", "dataset": {"name": "cifar10", "root": str(tmp_path)},
        "model": {"name": "resnet18"}, "clients": 2, "algorithms": [{"name": "asgd"}],
        "tune": {"grid": {"lr": [0.05]}, "validation_size": 10}, "eval": {"on": "validation"}})
    work = prepare_workload(sc)
    assert work.eval_x.shape == (10, 3, 32, 32) and work.eval_x.dtype == torch.float32
    assert torch.bincount(work.eval_y, minlength=5).tolist() == [2, 2, 2, 2, 2]  # stratified
    held = set(validation_indices(sc, work.data.train_y).tolist())
    trained = [set(s.tolist()) for s in work.splits]
    assert not any(held & t for t in trained) and sum(map(len, trained)) == 30 - 10
    torch.testing.assert_close(work.eval_x, to_tensor(work.data.train_x[sorted(held)], work.data.mean,
                                                      work.data.std))


# --- finding the data ----------------------------------------------------------------------------------


def test_the_folder_itself_its_parent_or_the_archive(tmp_path: Path) -> None:
    write_cifar(tmp_path / "both", "folder")
    write_cifar(tmp_path / "both", "archive")
    assert find_cifar10(tmp_path / "both") == cf.Source(tmp_path / "both" / FOLDER, is_archive=False)  # faster
    assert find_cifar10(tmp_path / "both" / FOLDER) == cf.Source(tmp_path / "both" / FOLDER, is_archive=False)
    write_cifar(tmp_path / "tgz", "archive")
    assert find_cifar10(tmp_path / "tgz") == cf.Source(tmp_path / "tgz" / ARCHIVE, is_archive=True)


def test_env_wins_then_root_then_the_repo_dir(tmp_path: Path, no_repo_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_cifar(no_repo_dir, "archive")
    assert find_cifar10().path == no_repo_dir / ARCHIVE
    write_cifar(tmp_path / "root", "folder")
    assert find_cifar10(tmp_path / "root").path == tmp_path / "root" / FOLDER
    write_cifar(tmp_path / "env", "archive")
    monkeypatch.setenv(cf.ENV_VAR, str(tmp_path / "env"))
    assert find_cifar10(tmp_path / "root").path == tmp_path / "env" / ARCHIVE
    monkeypatch.setenv(cf.ENV_VAR, str(tmp_path / "typo"))
    with pytest.raises(DataNotFoundError, match=rf"\${cf.ENV_VAR}={tmp_path / 'typo'} does not hold CIFAR-10"):
        find_cifar10(tmp_path / "root")


def test_missing_everywhere_is_one_error_naming_the_places_the_files_and_the_url(no_repo_dir: Path) -> None:
    with pytest.raises(DataNotFoundError) as info:
        load_dataset("cifar10")
    msg = str(info.value)
    assert msg.startswith("CIFAR-10 not found. Looked in:")
    for expected in (f"${cf.ENV_VAR}: not set", f"{no_repo_dir}: no such directory", ARCHIVE, ARCHIVE_URL,
                     f"{FOLDER}/", *BATCHES, f"into {no_repo_dir}", "--dataset cifar10 --ensure"):
        assert expected in msg, expected
    assert info.value.__cause__ is None and info.value.__context__ is None  # one error, nothing chained
    assert isinstance(info.value, FileNotFoundError)  # what the CLI reports as missing data


def test_an_explicit_root_is_the_only_place_looked_in(tmp_path: Path, no_repo_dir: Path) -> None:
    write_cifar(no_repo_dir, "archive")  # a copy the search would find
    with pytest.raises(DataNotFoundError, match=rf"^dataset.root {tmp_path / 'typo'}: no such directory"):
        load_dataset("cifar10", tmp_path / "typo", origin="dataset.root")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError) as info:
        load_dataset("cifar10", tmp_path / "empty", origin="--data-root")
    msg = str(info.value)
    assert f"--data-root {tmp_path / 'empty'}: neither {FOLDER}/ nor {ARCHIVE} in it" in msg
    assert ARCHIVE_URL in msg and str(no_repo_dir) not in msg


def test_a_folder_missing_a_batch_names_it(tmp_path: Path, no_repo_dir: Path) -> None:
    write_cifar(tmp_path, "folder")
    (tmp_path / FOLDER / "data_batch_3").unlink()
    with pytest.raises(DataNotFoundError, match=rf"missing {tmp_path / FOLDER / 'data_batch_3'}, and no {ARCHIVE}"):
        find_cifar10(tmp_path)
    write_cifar(tmp_path, "archive")  # the archive is complete: it is used
    assert find_cifar10(tmp_path).is_archive


# --- broken files --------------------------------------------------------------------------------------


def test_an_archive_without_a_batch_or_cut_short_names_the_archive(tmp_path: Path) -> None:
    batches = fake_batches()
    write_cifar(tmp_path, "archive", batches)
    with tarfile.open(tmp_path / ARCHIVE, "w:gz") as tar:  # rewritten without test_batch
        for name, (x, y) in batches.items():
            if name != "test_batch":
                data = py2_batch(x, y, b"")
                info = tarfile.TarInfo(f"{FOLDER}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ValueError, match=rf"{ARCHIVE}: the archive lacks {FOLDER}/test_batch"):
        load_cifar10(tmp_path)
    write_cifar(tmp_path, "archive", batches)
    archive = tmp_path / ARCHIVE
    archive.write_bytes(archive.read_bytes()[:-200])
    with pytest.raises(ValueError, match=rf"{ARCHIVE}: cannot read the archive"):
        load_cifar10(tmp_path)


def test_bad_batches_are_errors_naming_the_file() -> None:
    x = np.zeros((3, 3072), np.uint8)
    with pytest.raises(ValueError, match=r"b1: labels span 0..10, expected 0..9"):
        read_batch(py2_batch(x, [0, 10, 1], b""), "b1")
    with pytest.raises(ValueError, match=r"b2: 3 images but b'labels' has shape \(2,\)"):
        read_batch(py2_batch(x, [0, 1], b""), "b2")
    with pytest.raises(ValueError, match=r"b3: b'data' must be a uint8 array \(N, 3072\), got uint8 \(3, 1024\)"):
        read_batch(pickle.dumps({b"data": np.zeros((3, 1024), np.uint8), b"labels": [0, 1, 2]}), "b3")
    with pytest.raises(ValueError, match=r"b4: no b'labels' in the batch"):
        read_batch(pickle.dumps({b"data": x}), "b4")
    with pytest.raises(ValueError, match=r"b5: not a CIFAR-10 batch pickle"):
        read_batch(b"not a pickle", "b5")


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_batches_re_pickled_under_python_3_load_too(protocol: int) -> None:
    x = np.arange(2 * 3072, dtype=np.int64).astype(np.uint8).reshape(2, 3072)
    for keys in ((b"data", b"labels"), ("data", "labels")):  # torchvision-style str keys as well
        images, labels = read_batch(pickle.dumps({keys[0]: x, keys[1]: [7, 3]}, protocol=protocol), "b")
        np.testing.assert_array_equal(images.reshape(2, -1), x)
        assert labels.tolist() == [7, 3]


class _RunsCode:
    """Pickles as a call of os.system: what a hostile file in a data folder would hold."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps({b"data": _RunsCode(marker), b"labels": []})
    with pytest.raises(ValueError, match=r"b: not a CIFAR-10 batch pickle: UnpicklingError: refusing \w+\.system"):
        read_batch(data, "b")
    assert not marker.exists()


# --- python -m edgesync.data --dataset cifar10 ----------------------------------------------------------


def test_cli_says_where_cifar10_is(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_cifar(tmp_path, "archive")
    assert data_main(["--dataset", "cifar10", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"cifar10: {tmp_path / ARCHIVE} (train 30, test 8)"


def test_cli_cifar10_missing_exits_1_with_the_fix(no_repo_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert data_main(["--dataset", "cifar10"]) == 1
    err = capsys.readouterr().err
    assert "CIFAR-10 not found" in err and ARCHIVE_URL in err and str(no_repo_dir) in err


# --- the real archive ----------------------------------------------------------------------------------

def _real_source() -> cf.Source | None:
    try:
        return find_cifar10()
    except DataNotFoundError:
        return None


real = pytest.mark.skipif(_real_source() is None, reason=f"no CIFAR-10 in ${cf.ENV_VAR} or {cf.REPO_DIR}")


@real
def test_real_cifar10() -> None:
    start = time.perf_counter()
    ds = load_cifar10()
    elapsed = time.perf_counter() - start
    assert ds.train_x.shape == (50000, 3, 32, 32) and ds.test_x.shape == (10000, 3, 32, 32)
    np.testing.assert_array_equal(np.bincount(ds.train_y), np.full(10, 5000))
    np.testing.assert_array_equal(np.bincount(ds.test_y), np.full(10, 1000))
    pixels = ds.train_x.astype(np.float64) / 255
    np.testing.assert_allclose(pixels.mean(axis=(0, 2, 3)), CIFAR10_MEAN, atol=1e-3)
    np.testing.assert_allclose(pixels.std(axis=(0, 2, 3)), CIFAR10_STD, atol=1e-3)
    assert elapsed < 20, f"loading took {elapsed:.1f} s"


def test_a_simulated_run_trains_resnet18_on_it(tmp_path: Path) -> None:
    # The loader's arrays through the whole path: partition, to_tensor, a trainer per client, evaluation.
    from edgesync.metrics.recorder import read_jsonl
    from edgesync.runtime.runs import run_scenario
    from edgesync.config import load_scenario

    write_cifar(tmp_path / "data", "archive")
    sc = load_scenario({
        "name": "cifar-sim", "seed": 0, "runtime": "sim", "dataset": {"name": "cifar10", "root": str(tmp_path / "data")},
        "model": {"name": "resnet18"}, "clients": 2, "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 4}],
        "stop": {"max_updates": 3, "time_budget_s": 100, "target_acc": None},
        "eval": {"every_s": 1000, "test_size": None, "batch_size": 8},
        "sim": {"base_step_s": 0.01, "server_time": "zero"}})
    run_scenario(sc, tmp_path / "run", progress=False)
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if r["algorithm"] == "asgd"]
    assert rows[0]["updates"] == 0 and (rows[-1]["updates"], rows[-1]["samples"]) == (3, 3 * 4)
    assert all(0.0 <= r["test_acc"] <= 1.0 and np.isfinite(r["test_loss"]) for r in rows)  # on the 8 test images
