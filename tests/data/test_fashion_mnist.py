"""IDX reader, data discovery, loaders (ours and torchvision's) and the `python -m edgesync.data` entry point."""

from __future__ import annotations

import gzip
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import edgesync.data.fashion_mnist as fm
from edgesync.data.__main__ import main as data_main
from edgesync.data.datasets import DATASET_NAMES, ArrayDataset, load_dataset, to_tensor
from edgesync.data.fashion_mnist import DataNotFoundError, find_root, load_fashion_mnist, read_idx

_CODES = {np.uint8: 0x08, np.int8: 0x09, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D, np.float64: 0x0E}


def write_idx(path: Path, arr: np.ndarray) -> Path:
    """Write arr as an IDX file (gzip'd when the name ends in .gz), big-endian as the format says."""
    header = bytes([0, 0, _CODES[arr.dtype.type], arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    payload = header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(payload) if path.suffix == ".gz" else payload)
    return path


def write_fake_fashion(d: Path, gz: bool, n_train: int = 20, n_test: int = 10, seed: int = 0) -> dict:
    """Four tiny Fashion-MNIST-shaped IDX files in d; returns the arrays written."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for stem, arr in arrays.items():
        write_idx(d / (stem + (".gz" if gz else "")), arr)
    return arrays


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fm.ENV_VAR, raising=False)


@pytest.fixture
def no_default_places(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    """Point the Debian and repo places at empty tmp dirs, so only what a test provides is found."""
    debian, repo = tmp_path / "no-debian", tmp_path / "no-repo"
    monkeypatch.setattr(fm, "DEBIAN_DIR", debian)
    monkeypatch.setattr(fm, "REPO_DIR", repo)
    return debian, repo


# --- read_idx ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize(
    "arr",
    [
        np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4),
        np.array([[1, -2, 70000], [2**31 - 1, -(2**31), 0]], dtype=np.int32),
        np.array([1.5, -0.25, 3e38], dtype=np.float32),
        np.array([-1, 300, -32768], dtype=np.int16),
        np.array([0.1, -1e300], dtype=np.float64),
        np.array([-128, 127], dtype=np.int8),
    ],
    ids=["uint8-3d", "int32-2d", "float32-1d", "int16", "float64", "int8"],
)
def test_read_idx_round_trip(tmp_path: Path, arr: np.ndarray, suffix: str) -> None:
    got = read_idx(write_idx(tmp_path / f"x.idx{suffix}", arr))
    assert got.dtype == arr.dtype and got.dtype.isnative
    assert got.shape == arr.shape
    np.testing.assert_array_equal(got, arr)
    assert got.flags.writeable


def test_read_idx_truncated_names_file(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "t.idx", np.zeros((4, 5), np.uint8))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ValueError, match=r"t\.idx.*truncated"):
        read_idx(path)


def test_read_idx_trailing_bytes(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "t.idx", np.zeros(3, np.uint8))
    path.write_bytes(path.read_bytes() + b"\x00")
    with pytest.raises(ValueError, match="trailing"):
        read_idx(path)


def test_read_idx_truncated_header(tmp_path: Path) -> None:
    path = tmp_path / "h.idx"
    path.write_bytes(bytes([0, 0, 0x08, 3, 0, 0, 0, 1]))  # 3 dims announced, one given
    with pytest.raises(ValueError, match=r"h\.idx.*header"):
        read_idx(path)


@pytest.mark.parametrize("head", [b"\x01\x00\x08\x01", b"\x00\x00\x42\x01", b"\x00\x00"], ids=["magic", "dtype", "short"])
def test_read_idx_bad_magic(tmp_path: Path, head: bytes) -> None:
    path = tmp_path / "bad.idx"
    path.write_bytes(head + b"\x00\x00\x00\x01" + b"\x07")
    with pytest.raises(ValueError, match=r"bad\.idx"):
        read_idx(path)


def test_read_idx_cut_gzip_stream(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "c.idx.gz", np.arange(1000, dtype=np.int32))
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ValueError, match=r"c\.idx\.gz"):
        read_idx(path)


# --- find_root -------------------------------------------------------------------------------------


def test_find_root_env_wins_over_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir, root_dir = tmp_path / "env", tmp_path / "root"
    write_fake_fashion(env_dir, gz=True)
    write_fake_fashion(root_dir, gz=False)
    monkeypatch.setenv(fm.ENV_VAR, str(env_dir))
    assert find_root(root_dir) == env_dir
    monkeypatch.delenv(fm.ENV_VAR)
    assert find_root(root_dir) == root_dir


def test_find_root_bad_env_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root_dir = tmp_path / "root"
    write_fake_fashion(root_dir, gz=True)
    monkeypatch.setenv(fm.ENV_VAR, str(tmp_path / "typo"))
    with pytest.raises(DataNotFoundError, match="typo"):
        find_root(root_dir)


def test_find_root_order_root_debian_repo(tmp_path: Path, no_default_places: tuple[Path, Path]) -> None:
    debian, repo = no_default_places
    write_fake_fashion(repo, gz=True)
    assert find_root() == repo
    write_fake_fashion(debian, gz=True)
    assert find_root() == debian
    write_fake_fashion(tmp_path / "mine", gz=False)
    assert find_root(tmp_path / "mine") == tmp_path / "mine"


def test_find_root_torchvision_layout_and_mixed_gz(tmp_path: Path) -> None:
    raw = tmp_path / "tv" / "FashionMNIST" / "raw"
    write_fake_fashion(raw, gz=True)
    (raw / "t10k-labels-idx1-ubyte.gz").rename(raw / "x.gz")  # one file only uncompressed
    write_idx(raw / "t10k-labels-idx1-ubyte", np.zeros(10, np.uint8))
    assert find_root(tmp_path / "tv") == raw


def test_not_found_message_lists_places(no_default_places: tuple[Path, Path]) -> None:
    debian, repo = no_default_places
    write_fake_fashion(debian, gz=True)
    (debian / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataNotFoundError) as info:
        find_root()
    msg = str(info.value)
    for expected in (fm.ENV_VAR, str(debian), str(repo), "make setup", "train-labels-idx1-ubyte"):
        assert expected in msg
    assert isinstance(info.value, FileNotFoundError)


# An explicit root (a scenario's dataset.root, a client's --data-root) is the only place looked in: a
# wrong one is an error naming it and where it came from, never another copy of the data found elsewhere.


def test_an_explicit_root_that_does_not_exist_is_not_replaced_by_another_copy(
    tmp_path: Path, no_default_places: tuple[Path, Path]
) -> None:
    _, repo = no_default_places
    write_fake_fashion(repo, gz=True)  # a copy the search would find
    typo = tmp_path / "typo"
    with pytest.raises(DataNotFoundError) as info:
        find_root(typo)
    msg = str(info.value)
    assert f"{typo}: no such directory" in msg
    assert str(repo) not in msg  # the message is about the root, not the places a search would look in
    assert find_root() == repo  # without a root the search goes on as before


def test_an_explicit_root_missing_a_file_is_an_error_too(tmp_path: Path, no_default_places: tuple[Path, Path]) -> None:
    _, repo = no_default_places
    write_fake_fashion(repo, gz=True)
    mine = tmp_path / "mine"
    write_fake_fashion(mine, gz=True)
    (mine / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(DataNotFoundError, match=rf"{mine}: missing t10k-images-idx3-ubyte"):
        find_root(mine)
    with pytest.raises(DataNotFoundError, match=rf"^--data-root {mine}: missing t10k-images-idx3-ubyte"):
        find_root(mine, origin="--data-root")


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_every_loader_names_an_explicit_root_and_its_origin(
    tmp_path: Path, no_default_places: tuple[Path, Path], name: str
) -> None:
    _, repo = no_default_places
    write_fake_fashion(repo, gz=True)
    typo = tmp_path / "typo"
    with pytest.raises(DataNotFoundError, match=rf"--data-root {typo}: no such directory"):
        load_dataset(name, typo, origin="--data-root")
    # Without an origin the message says what an explicit root can be.
    with pytest.raises(DataNotFoundError) as info:
        load_dataset(name, typo)
    assert str(typo) in str(info.value) and "dataset.root" in str(info.value) and "--data-root" in str(info.value)


def test_a_client_given_a_root_its_machine_lacks_fails_naming_it(
    tmp_path: Path, no_default_places: tuple[Path, Path]
) -> None:
    # A client reads the data through runtime.workload.dataset with `--data-root` or the root that the
    # coordinator's SETUP carries (dataset.root): the coordinator's machine had it, this one does not.
    from edgesync.runtime.bookkeeping.workload import dataset

    _, repo = no_default_places
    write_fake_fashion(repo, gz=True)
    typo = tmp_path / "on-the-coordinator-only"
    with pytest.raises(DataNotFoundError, match="dataset.root") as info:
        dataset("fashion_mnist", str(typo), None)
    assert f"{typo}: no such directory" in str(info.value)


# --- loaders ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
def test_load_fake_fashion_mnist(tmp_path: Path, gz: bool) -> None:
    arrays = write_fake_fashion(tmp_path, gz=gz)
    ds = load_fashion_mnist(tmp_path)
    np.testing.assert_array_equal(ds.train_x, arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(ds.test_y, arrays["t10k-labels-idx1-ubyte"])
    assert ds.train_x.dtype == np.uint8 and ds.train_y.dtype == np.int64
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10 and ds.name == "fashion_mnist"
    assert (ds.mean, ds.std) == (0.2860, 0.3530)


def test_load_rejects_out_of_range_labels(tmp_path: Path) -> None:
    write_fake_fashion(tmp_path, gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.full(20, 10, np.uint8))
    with pytest.raises(ValueError, match="0..9"):
        load_fashion_mnist(tmp_path)


@pytest.mark.parametrize(("name", "folder"), [("mnist", "MNIST"), ("torchvision_fashion_mnist", "FashionMNIST")])
def test_torchvision_sources_read_what_we_wrote(tmp_path: Path, name: str, folder: str) -> None:
    arrays = write_fake_fashion(tmp_path / folder / "raw", gz=False)  # MNIST uses the same file names
    ds = load_dataset(name, root=tmp_path)
    np.testing.assert_array_equal(ds.train_x, arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(ds.test_y, arrays["t10k-labels-idx1-ubyte"])
    assert ds.train_y.dtype == np.int64 and ds.num_classes == 10 and ds.name == name


def test_torchvision_mnist_missing(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="MNIST"):
        load_dataset("mnist", root=tmp_path)


def test_torchvision_fashion_needs_its_layout(tmp_path: Path) -> None:
    write_fake_fashion(tmp_path, gz=True)
    with pytest.raises(DataNotFoundError, match="layout"):
        load_dataset("torchvision_fashion_mnist", root=tmp_path)


def test_unknown_dataset_lists_names() -> None:
    with pytest.raises(ValueError, match="cifar") as info:
        load_dataset("cifar")
    assert all(n in str(info.value) for n in DATASET_NAMES)


def test_to_tensor_normalizes() -> None:
    x = np.array([[[0, 255], [51, 102]]], dtype=np.uint8)  # (1, 2, 2)
    t = to_tensor(x, mean=0.5, std=0.25)
    assert t.shape == (1, 1, 2, 2) and t.dtype == torch.float32
    expected = (torch.tensor([[0.0, 1.0], [0.2, 0.4]]) - 0.5) / 0.25
    torch.testing.assert_close(t[0, 0], expected)
    with pytest.raises(ValueError, match="uint8"):
        to_tensor(x.astype(np.float32), 0.5, 0.25)


def test_array_dataset_input_shape() -> None:
    z = np.zeros((3, 32, 30), np.uint8)
    y = np.zeros(3, np.int64)
    assert ArrayDataset(z, y, z, y, 10, 0.0, 1.0, "x").input_shape == (1, 32, 30)


# --- python -m edgesync.data -----------------------------------------------------------------------


def test_cli_prints_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    write_fake_fashion(tmp_path, gz=True)
    monkeypatch.setenv(fm.ENV_VAR, str(tmp_path))
    assert data_main([]) == 0
    assert str(tmp_path) in capsys.readouterr().out


def test_cli_root_that_does_not_exist_exits_1(
    tmp_path: Path, no_default_places: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    write_fake_fashion(no_default_places[1], gz=True)
    assert data_main(["--root", str(tmp_path / "typo")]) == 1
    assert f"--root {tmp_path / 'typo'}: no such directory" in capsys.readouterr().err


def test_cli_not_found_exits_1(
    no_default_places: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    assert data_main([]) == 1
    assert "make setup" in capsys.readouterr().err


# --- the real files --------------------------------------------------------------------------------

real = pytest.mark.skipif(
    not fm.DEBIAN_DIR.is_dir(), reason=f"{fm.DEBIAN_DIR} absent (Debian package dataset-fashion-mnist)"
)


@pytest.mark.timing
@real
def test_real_fashion_mnist() -> None:
    start = time.perf_counter()
    ds = load_fashion_mnist()
    elapsed = time.perf_counter() - start
    assert ds.train_x.shape == (60000, 28, 28) and ds.test_x.shape == (10000, 28, 28)
    assert ds.train_y.shape == (60000,) and ds.test_y.shape == (10000,)
    np.testing.assert_array_equal(np.bincount(ds.train_y), np.full(10, 6000))
    np.testing.assert_array_equal(np.bincount(ds.test_y), np.full(10, 1000))
    pixels = ds.train_x.astype(np.float64) / 255
    assert abs(pixels.mean() - ds.mean) < 1e-3 and abs(pixels.std() - ds.std) < 1e-3
    assert elapsed < 10, f"loading took {elapsed:.1f} s"


@real
def test_real_matches_torchvision(tmp_path: Path) -> None:
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for stem in fm.FILES.values():
        with gzip.open(fm.DEBIAN_DIR / f"{stem}.gz", "rb") as src, open(raw / stem, "wb") as dst:
            shutil.copyfileobj(src, dst)
    ours = load_dataset("fashion_mnist")
    theirs = load_dataset("torchvision_fashion_mnist", root=tmp_path)
    for field in ("train_x", "train_y", "test_x", "test_y"):
        np.testing.assert_array_equal(getattr(ours, field), getattr(theirs, field))
