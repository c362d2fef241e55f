"""LEAF's CelebA (faces by celebrity, smiling or not): the image files LEAF's JSON names, read as its reference
model reads them (models/celeba/cnn.py).

Each sample's x in LEAF's files is an image's file name (`000001.jpg`), y whether the face smiles: 1 or 0, which
LEAF's metadata_to_json.py writes as the floats 1.0 and 0.0 (`(attribute + 1) / 2`); both are read. The images
stay where LEAF's set-up puts them, `data/celeba/data/raw/img_align_celeba/`: below the folder that holds
train/ and test/, `raw/img_align_celeba/` (`IMAGES`). Each is decoded with PIL (edgesync/data/images.py), made
RGB and resized to 84×84 as LEAF's `_load_image` does, into uint8 (N, 3, 84, 84). LEAF's resize uses PIL's
default filter; here it is bilinear, the shared decoder's. An image that is not there is an error naming the
file, the user and the folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgesync.data.arrays import DataNotFoundError, class_labels
from edgesync.data.images import ImageSource, stack

IMAGE_SIDE = 84  # LEAF's IMAGE_SIZE
CELEBA_CLASSES = 2
IMAGES = Path("raw") / "img_align_celeba"  # below the folder holding train/ and test/, as LEAF lays it out

Samples = tuple[np.ndarray, np.ndarray]


def image_names(x: list, y: list, where: str) -> Samples:
    """One user's samples as LEAF stores them -> (their file names as an object array, int64 labels 0 or 1);
    the files are read once the folder is known (`load_images`)."""
    for i, name in enumerate(x):
        if not isinstance(name, str) or not name or Path(name).is_absolute():
            raise ValueError(f"{where}, sample {i}: x is {name!r}, expected an image file name (as "
                             "'000001.jpg') in LEAF's raw/img_align_celeba folder")
    names = np.empty(len(x), dtype=object)
    names[:] = x
    return names, class_labels(_whole(y, where), CELEBA_CLASSES, where)


def _whole(y: list, where: str) -> list:
    """LEAF's 0.0 and 1.0 as 0 and 1; any other value is left for class_labels to refuse."""
    for v in y:
        if isinstance(v, float) and not v.is_integer():
            raise ValueError(f"{where}: y holds {v!r}, expected 0 or 1 (LEAF writes 0.0 and 1.0)")
    return [int(v) if isinstance(v, float) else v for v in y]


def load_images(folder: Path, splits: dict[str, dict[str, Samples]]) -> dict[str, dict[str, Samples]]:
    """Both splits' file names replaced by their images, uint8 (n, 3, 84, 84), read from folder/raw/img_align_celeba."""
    images = folder / IMAGES
    if not images.is_dir():
        raise DataNotFoundError(f"{images}: no such folder. CelebA's JSON files name images that LEAF keeps in "
                                f"data/celeba/data/raw/img_align_celeba, beside train/ and test/: put CelebA's "
                                f"img_align_celeba folder at {images}")
    return {split: {user: (_read(images, names, f"{split}/ user {user!r}"), labels)
                    for user, (names, labels) in users.items()}
            for split, users in splits.items()}


def _read(images: Path, names: np.ndarray, who: str) -> np.ndarray:
    if not len(names):
        return np.zeros((0, 3, IMAGE_SIDE, IMAGE_SIDE), dtype=np.uint8)
    sources = []
    for name in names:
        path = images / name
        if not path.is_file():
            raise DataNotFoundError(f"{who}: image {name} is not in {images}; LEAF's CelebA images belong in "
                                    "raw/img_align_celeba beside train/ and test/")
        sources.append(ImageSource(f"{path} ({who})", path))
    return stack(sources, grayscale=False, size=(IMAGE_SIDE, IMAGE_SIDE))
