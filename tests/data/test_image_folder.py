"""The built-in dataset `image_folder`: a folder per class, torchvision's ImageFolder layout
(edgesync/data/image_folder.py), on PNGs each test writes with PIL into tmp_path."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgesync.config import load_scenario
from edgesync.data.arrays import DataNotFoundError
from edgesync.data.datasets import load_dataset
from edgesync.data.image_folder import load_image_folder


def write_png(path: Path, value: int, size: tuple[int, int] = (6, 4), mode: str = "L") -> None:
    """A flat image of `value` (W×H `size`), its value telling which file it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, value if mode == "L" else (value, value // 2, 7)).save(path)


def write_split_folder(root: Path) -> None:
    """train/ and test/, classes unsorted on disk, one class without test images."""
    for split, classes in {"train": {"zebra": (10, 11, 12), "ant": (20, 21), "moth": (30,)},
                           "test": {"ant": (40,), "zebra": (50, 51)}}.items():
        for name, values in classes.items():
            for value in values:
                write_png(root / split / name / f"img{value}.png", value)


def test_train_and_test_folders_with_classes_as_sorted_folder_names(tmp_path: Path) -> None:
    write_split_folder(tmp_path)
    (tmp_path / "train" / "ant" / "notes.txt").write_text("not an image")  # skipped, as ImageFolder does
    (tmp_path / "train" / "ant" / ".hidden.png").write_text("skipped too")
    ds = load_image_folder(path=str(tmp_path))
    assert ds.class_names == ("ant", "moth", "zebra") and ds.num_classes == 3 and ds.name == "image_folder"
    assert ds.train_x.dtype == np.uint8 and ds.train_x.shape == (6, 4, 6) and ds.input_shape == (1, 4, 6)
    # class by class, files in name order; each image's value says which it is
    assert ds.train_x[:, 0, 0].tolist() == [20, 21, 30, 10, 11, 12] and ds.train_y.tolist() == [0, 0, 1, 2, 2, 2]
    assert ds.test_x[:, 0, 0].tolist() == [40, 50, 51] and ds.test_y.tolist() == [0, 2, 2]
    assert ds.train_y.dtype == ds.test_y.dtype == np.int64 and ds.train_groups is None
    pixels = ds.train_x.astype(np.float64) / 255
    assert ds.mean == pytest.approx(pixels.mean()) and ds.std == pytest.approx(pixels.std())
    with pytest.raises(ValueError, match=r"args.test_fraction: .*/test is the test split"):
        load_image_folder(path=str(tmp_path), test_fraction=0.5)


def test_one_folder_per_class_alone_holds_out_a_seeded_share_of_each_class(tmp_path: Path) -> None:
    for c, name in enumerate(("b", "a")):
        for i in range(10):
            write_png(tmp_path / name / f"{i:02d}.png", c * 100 + i)
    ds = load_image_folder(path=str(tmp_path), test_fraction=0.3, split_seed=3)
    assert ds.class_names == ("a", "b") and np.bincount(ds.test_y).tolist() == [3, 3]
    assert np.bincount(ds.train_y).tolist() == [7, 7]
    assert sorted([*ds.train_x[:, 0, 0].tolist(), *ds.test_x[:, 0, 0].tolist()]) == [*range(10), *range(100, 110)]
    assert all(ds.class_names[y] == ("b" if x[0, 0] < 100 else "a") for x, y in zip(ds.train_x, ds.train_y))
    again = load_image_folder(path=str(tmp_path), test_fraction=0.3, split_seed=3)
    assert np.array_equal(again.test_x, ds.test_x) and np.array_equal(again.train_x, ds.train_x)
    assert not np.array_equal(load_image_folder(path=str(tmp_path), test_fraction=0.3, split_seed=4).test_x,
                              ds.test_x)
    assert len(load_image_folder(path=str(tmp_path)).test_y) == 4  # the default 0.2


def test_colour_resizing_and_grayscale(tmp_path: Path) -> None:
    write_png(tmp_path / "red" / "a.png", 200, size=(5, 3), mode="RGB")
    write_png(tmp_path / "red" / "b.png", 100, size=(5, 3), mode="RGB")
    write_png(tmp_path / "gray" / "c.png", 50, size=(5, 3))
    write_png(tmp_path / "gray" / "d.png", 60, size=(5, 3))
    ds = load_image_folder(path=str(tmp_path), test_fraction=0.5)
    assert ds.train_x.shape == (2, 3, 3, 5) and ds.input_shape == (3, 3, 5)  # colour among grayscale: all colour
    assert isinstance(ds.mean, tuple) and len(ds.mean) == 3
    red = ds.train_x[ds.train_y == 1][0]
    assert red[:, 0, 0].tolist() in ([200, 100, 7], [100, 50, 7])
    gray = ds.train_x[ds.train_y == 0][0]
    assert gray[0].tolist() == gray[1].tolist() == gray[2].tolist()  # repeated over the channels
    small = load_image_folder(path=str(tmp_path), size=[8, 8], grayscale=True, test_fraction=0.5)
    assert small.train_x.shape == (2, 8, 8) and small.input_shape == (1, 8, 8)


def test_what_is_refused_names_the_folder_or_file(tmp_path: Path) -> None:
    write_png(tmp_path / "mixed" / "a" / "1.png", 1, size=(4, 4))
    write_png(tmp_path / "mixed" / "a" / "2.png", 1, size=(5, 4))
    with pytest.raises(ValueError, match=r"images of different sizes: .*1.png is 4×4 \(H×W\), .*2.png is 4×5"):
        load_image_folder(path=str(tmp_path / "mixed"))
    write_png(tmp_path / "empty" / "a" / "1.png", 1)
    (tmp_path / "empty" / "b").mkdir()
    (tmp_path / "empty" / "b" / "readme.txt").write_text("x")
    with pytest.raises(ValueError, match=r"class folder .*/empty/b holds no image files; expected files ending in "
                                         r".jpg"):
        load_image_folder(path=str(tmp_path / "empty"))
    write_png(tmp_path / "broken" / "a" / "1.png", 1)
    (tmp_path / "broken" / "a" / "2.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match=r"broken/a/2.png: cannot read it as an image"):
        load_image_folder(path=str(tmp_path / "broken"))
    write_png(tmp_path / "deep" / "a" / "1.png", 1)
    Image.new("I;16", (6, 4), 1000).save(tmp_path / "deep" / "a" / "2.png")
    with pytest.raises(ValueError, match=r"deep/a/2.png: image mode 'I;16' \(not 8-bit grayscale or colour\)"):
        load_image_folder(path=str(tmp_path / "deep"))
    write_png(tmp_path / "loose" / "a" / "1.png", 1)
    write_png(tmp_path / "loose" / "2.png", 1)
    with pytest.raises(ValueError, match=r"loose/2.png: an image outside a class folder; expected .*loose/<class>/2.png"):
        load_image_folder(path=str(tmp_path / "loose"))
    (tmp_path / "flat").mkdir()
    with pytest.raises(ValueError, match=r"flat holds no class folders; expected .*flat/<class>/<image>"):
        load_image_folder(path=str(tmp_path / "flat"))
    write_png(tmp_path / "testonly" / "test" / "a" / "1.png", 1)
    with pytest.raises(ValueError, match=r"testonly holds test/ but no train/"):
        load_image_folder(path=str(tmp_path / "testonly"))
    with pytest.raises(DataNotFoundError, match=r"dataset image_folder: args.path nowhere: no such file or directory "
                                                rf"\(looked at {tmp_path}/nowhere; a relative path is taken from "
                                                "the data root"):
        load_image_folder(tmp_path, path="nowhere")
    with pytest.raises(ValueError, match=r"args.size: got \[0, 4\]; expected \[H, W\], two positive integers"):
        load_image_folder(path=str(tmp_path / "mixed"), size=[0, 4])
    with pytest.raises(ValueError, match=r"args.grayscale: input should be a valid boolean"):
        load_image_folder(path=str(tmp_path / "mixed"), grayscale="sometimes")


def test_a_scenario_names_the_folder(tmp_path: Path) -> None:
    write_split_folder(tmp_path / "pics")
    spec = {"name": "image_folder", "root": str(tmp_path), "args": {"path": "pics", "size": [28, 28]}}
    sc = load_scenario({"name": "pics", "runtime": "sim", "clients": 2, "algorithms": [{"name": "local_sgd"}],
                        "model": {"name": "cnn"}, "dataset": spec})
    assert sc.dataset.id == "image_folder" + json.dumps(spec["args"], sort_keys=True, separators=(",", ":"))
    ds = load_dataset(sc.dataset.id, sc.dataset.root)
    assert ds.train_x.shape == (6, 28, 28) and ds.class_names == ("ant", "moth", "zebra")
    with pytest.raises(ValueError, match=r"dataset: args.path elsewhere: no such file or directory"):
        load_scenario({"name": "pics", "algorithms": [{"name": "local_sgd"}],
                       "dataset": {**spec, "args": {"path": "elsewhere"}}})
    with pytest.raises(ValueError, match=r"dataset: args.path pics/train/ant/img20.png: .* is a file; expected a "
                                         "folder of class folders"):
        load_scenario({"name": "pics", "algorithms": [{"name": "local_sgd"}],
                       "dataset": {**spec, "args": {"path": "pics/train/ant/img20.png"}}})
