"""Image files and encoded images into the uint8 arrays an `ArrayDataset` holds, and their pixel statistics.

Shared by the loaders of local files (hf.py, image_folder.py): each image is decoded with PIL, made grayscale
or RGB, resized when a size is asked for, and the images stacked into (N, H, W) grayscale or (N, 3, H, W)
colour. Without a size every image must have the same one: a different size is an error naming the first
image of each size, never a silent resize. Modes PIL cannot turn into 8-bit pixels without losing values
(16- and 32-bit, float) are refused, naming the image.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

# Extensions read as images (torchvision's IMG_EXTENSIONS, which its ImageFolder lists)
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
GRAY_MODES = ("1", "L", "LA")  # kept one channel (alpha dropped)
COLOUR_MODES = ("RGB", "RGBA", "RGBX", "P", "PA", "CMYK", "YCbCr", "LAB", "HSV")  # made RGB (palette expanded)


@dataclass(frozen=True)
class ImageSource:
    """One image to decode: `where` names it in errors (a file, or a column and row); `data` is a path or the
    encoded bytes."""

    where: str
    data: str | os.PathLike | bytes


def decode(source: ImageSource, grayscale: bool | None, size: tuple[int, int] | None) -> np.ndarray:
    """One image as uint8 (H, W) (grayscale) or (H, W, 3) (colour). `grayscale` True or False converts to
    that; None keeps what the image is. `size` (H, W) resizes (bilinear)."""
    try:
        with Image.open(io.BytesIO(source.data) if isinstance(source.data, bytes) else source.data) as image:
            image.load()
            mode = image.mode
            if mode not in GRAY_MODES and mode not in COLOUR_MODES:
                raise ValueError(f"{source.where}: image mode {mode!r} (not 8-bit grayscale or colour); expected "
                                 f"one of {', '.join(GRAY_MODES + COLOUR_MODES)}: convert it to 8-bit first")
            gray = mode in GRAY_MODES if grayscale is None else grayscale
            image = image.convert("L" if gray else "RGB")
            if size is not None and image.size != (size[1], size[0]):
                image = image.resize((size[1], size[0]), Image.Resampling.BILINEAR)
            return np.asarray(image, dtype=np.uint8)
    except (UnidentifiedImageError, OSError, SyntaxError) as e:  # PIL raises SyntaxError for some broken files
        raise ValueError(f"{source.where}: cannot read it as an image: {e}") from None


def stack(sources: Iterable[ImageSource], grayscale: bool | None = None,
          size: tuple[int, int] | None = None) -> np.ndarray:
    """The images as uint8 (N, H, W) when all are grayscale, else (N, 3, H, W) (a grayscale one among colour
    ones repeated over the channels, as PIL's convert("RGB") does). An empty input gives (0, 1, 1)."""
    arrays, first = [], {}
    for source in sources:
        array = decode(source, grayscale, size)
        shape = array.shape[:2]
        first.setdefault(shape, source.where)
        if len(first) > 1:
            (a, where_a), (b, where_b) = list(first.items())[:2]
            raise ValueError(f"images of different sizes: {where_a} is {_size(a)}, {where_b} is {_size(b)}; give "
                             "the dataset arg `size: [H, W]` to resize them all, or make them one size")
        arrays.append(array)
    if not arrays:
        return np.zeros((0, 1, 1), dtype=np.uint8)
    if all(a.ndim == 2 for a in arrays):
        return np.stack(arrays)
    colour = [np.repeat(a[:, :, None], 3, axis=2) if a.ndim == 2 else a for a in arrays]
    return np.ascontiguousarray(np.stack(colour).transpose(0, 3, 1, 2))  # channels first, as the models take them


def one_shape(train: np.ndarray, test: np.ndarray, where_train: str, where_test: str) -> tuple[np.ndarray,
                                                                                                  np.ndarray]:
    """Two splits stacked apart made one layout: grayscale beside colour becomes colour; sizes must agree."""
    if not len(test):
        return train, np.zeros((0, *train.shape[1:]), dtype=np.uint8)
    if train.ndim != test.ndim and len(train):
        train, test = (np.repeat(a[:, None], 3, axis=1) if a.ndim == 3 else a for a in (train, test))
    if len(train) and train.shape[-2:] != test.shape[-2:]:
        raise ValueError(f"images of different sizes: {where_train} holds {_size(train.shape[-2:])}, {where_test} "
                         f"{_size(test.shape[-2:])}; give the dataset arg `size: [H, W]` to resize them all")
    return train, test


def _size(hw: tuple[int, int]) -> str:
    return f"{hw[0]}×{hw[1]} (H×W)"


def pixel_moments(images: np.ndarray) -> tuple[float | tuple[float, ...], float | tuple[float, ...]]:
    """Mean and std of the pixels scaled to [0, 1]: one of each for grayscale (N, H, W), one per channel for
    (N, C, H, W). From a histogram of the 256 values, so no float copy of the images is made; a std of 0 (one
    flat colour) is given as 1, which to_tensor can divide by."""
    if images.ndim == 3:
        return _moments(images)
    per_channel = [_moments(images[:, c]) for c in range(images.shape[1])]
    return tuple(m for m, _ in per_channel), tuple(s for _, s in per_channel)


def _moments(pixels: np.ndarray) -> tuple[float, float]:
    counts = np.bincount(pixels.reshape(-1), minlength=256).astype(np.float64)
    if counts.sum() == 0:
        return 0.0, 1.0
    values = np.arange(256, dtype=np.float64) / 255.0
    mean = float(counts @ values / counts.sum())
    std = float(np.sqrt(counts @ (values - mean) ** 2 / counts.sum()))
    return mean, std if std > 0 else 1.0
