"""A folder of images, one subfolder per class (torchvision's ImageFolder layout): the built-in dataset
`image_folder`.

    dataset:
      name: image_folder
      args: {path: data/flowers, size: [32, 32], grayscale: false}

`path` holds either `train/<class>/…` and `test/<class>/…`, or `<class>/…` alone (then `test_fraction`, default
0.2, of each class's images is held out as the test split, drawn with `split_seed`; so is a `train/` without a
`test/`). The classes are the class folders' names, sorted, over both splits (a class may lack test images);
its images are the files below it with an image extension (images.IMAGE_EXTENSIONS, searched in subfolders
too, in name order), read with PIL. Other files and hidden ones are skipped. `size: [H, W]` resizes every
image; without it all must have one size. `grayscale`: true makes every image one channel, false three, and
left out the images decide (grayscale only if every one is). Refused, naming the folder or file: an empty
class folder, a split folder without class folders, an image outside a class folder, an unreadable image.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from edgesync.data import images
from edgesync.data.arrays import ArrayDataset
from edgesync.data.local_files import LoaderArgs, check_root, held_out, parse_args, resolve

NAME = "image_folder"
SPLITS = ("train", "test")


class ImageFolderArgs(LoaderArgs):
    path: str = Field(description="the folder holding train/<class>/… and test/<class>/…, or <class>/… alone")


def check_image_folder_args(args: dict[str, Any], root: str | None = None,
                            origin: str | None = None) -> ImageFolderArgs:
    """The arguments checked as the loader checks them, and the folder found: what a scenario's check runs."""
    check_root(root, origin, NAME)
    parsed = parse_args(ImageFolderArgs, NAME, args)
    folder = resolve(parsed.path, root, origin, NAME)
    if not folder.is_dir():
        raise ValueError(f"dataset {NAME}: args.path {parsed.path}: {folder} is a file; expected a folder of class "
                         "folders")
    return parsed


def load_image_folder(root: str | os.PathLike | None = None, origin: str | None = None,
                      **args: Any) -> ArrayDataset:
    """The images below args.path as an ArrayDataset (see the module docstring); `root` is where a relative
    path starts."""
    opts = check_image_folder_args(args, None if root is None else str(root), origin)
    folder = resolve(opts.path, root, origin, NAME)
    split_dirs = _split_dirs(folder)
    found = {split: _class_files(where) for split, where in split_dirs.items()}
    classes = sorted({c for per_class in found.values() for c in per_class})
    index = {c: i for i, c in enumerate(classes)}
    files = {split: [(path, index[name]) for name, paths in per_class.items() for path in paths]
             for split, per_class in found.items()}  # class by class, each class's files in name order
    # one stack over both splits: one size and one grayscale-or-colour for all
    x = images.stack((images.ImageSource(str(p), p) for split in files for p, _ in files[split]), opts.grayscale,
                     opts.size)
    y = np.array([label for split in files for _, label in files[split]], dtype=np.int64)
    cut = len(files["train"])
    train_x, train_y, test_x, test_y = x[:cut], y[:cut], x[cut:], y[cut:]
    if "test" in files:
        if opts.test_fraction is not None:
            raise ValueError(f"dataset {NAME}: args.test_fraction: {split_dirs['test']} is the test split, and the "
                             "fraction only applies without one; leave it out")
    else:  # hold out a share of each class's images
        mask = held_out(train_y, opts.fraction, opts.split_seed, "class")
        train_x, train_y, test_x, test_y = train_x[~mask], train_y[~mask], train_x[mask], train_y[mask]
    mean, std = images.pixel_moments(train_x)
    return ArrayDataset(train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y, num_classes=len(classes),
                        mean=mean, std=std, name=NAME, class_names=tuple(classes))


def _split_dirs(folder: Path) -> dict[str, Path]:
    """{split: its folder}: train/ and test/ where there is a train/, else the folder itself as train."""
    if (folder / "train").is_dir():
        return {s: folder / s for s in SPLITS if (folder / s).is_dir()}
    if (folder / "test").is_dir():
        raise ValueError(f"dataset {NAME}: {folder} holds test/ but no train/; expected train/<class>/… beside it, "
                         "or <class>/… alone")
    return {"train": folder}


def _class_files(split_dir: Path) -> dict[str, list[Path]]:
    """{class folder name: its image files, in name order}; every class folder holds at least one."""
    classes: dict[str, list[Path]] = {}
    for entry in sorted(split_dir.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            files = sorted(p for p in entry.rglob("*") if p.is_file() and _is_image(p, entry))
            if not files:
                raise ValueError(f"dataset {NAME}: class folder {entry} holds no image files; expected files ending "
                                 f"in {', '.join(images.IMAGE_EXTENSIONS)} (remove the folder, or fill it)")
            classes[entry.name] = files
        elif _is_image(entry, split_dir):
            raise ValueError(f"dataset {NAME}: {entry}: an image outside a class folder; expected "
                             f"{split_dir}/<class>/{entry.name}")
    if not classes:
        raise ValueError(f"dataset {NAME}: {split_dir} holds no class folders; expected {split_dir}/<class>/<image> "
                         "with one folder per class")
    return classes


def _is_image(path: Path, below: Path) -> bool:
    hidden = any(part.startswith(".") for part in path.relative_to(below).parts)
    return not hidden and path.suffix.lower() in images.IMAGE_EXTENSIONS

