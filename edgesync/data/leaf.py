"""LEAF's naturally partitioned datasets, FEMNIST, Shakespeare, Sent140 and CelebA, read from LEAF's own JSON files.

LEAF (https://github.com/TalwalkarLab/leaf) builds each dataset with its scripts (`./preprocess.sh` in
its `data/femnist`, `data/shakespeare`, `data/sent140` or `data/celeba` folder) into a data folder holding
`train/*.json` and `test/*.json`, several files per split. Each file is one JSON object:

- `users`: the user ids (FEMNIST: writers; Shakespeare: a play's speaking roles; Sent140: Twitter users;
  CelebA: celebrities);
- `num_samples`: how many samples each user has in this file, in the order of `users`;
- `user_data`: {user: {"x": [...], "y": [...]}};
- `hierarchies` (optional; Shakespeare's plays): one entry per user.

FEMNIST's x is 784 floats in [0, 1] (a 28×28 image, 1.0 the white background, as LEAF stores it: the
values are kept, as uint8 round(x·255)); y is a class 0..61 (digits, upper-, lower-case letters).
Shakespeare's x is an 80-character string, y the character that follows; both map to indices with LEAF's
own vocabulary, ALL_LETTERS (80 characters, `letter_to_index` = `ALL_LETTERS.find`): a character outside
it, which LEAF would map to -1, is refused here. Sent140's tweets become word indices over a vocabulary of
the training split (leaf_sent140.py), CelebA's image names the images LEAF keeps beside the JSON
(leaf_celeba.py): each format's `finish` step, once both splits are read.

What LEAF allows, and this reader with it: with `-t sample` every user of the train files is in the test
files too (LEAF drops users with fewer than two samples from both); with `-t user` a user is in one split
only. So a user may be in train and not in test, or the other way round; a user twice in one split (in two
of its files) is an error. LEAF's sample split leaves a dropped user in `user_data` with no samples and
out of `users`: such an empty entry is skipped; one with samples is an error.

Samples are ordered by user (ids sorted, so never by file order), each user's in file order; the
`dataset.train_size` cut therefore keeps the first users whole. Nothing is downloaded: LEAF builds the
files from the raw NIST and Gutenberg data, and `HOW_TO_GET` says how.

Where the folder is looked for (`find_leaf`), as for Fashion-MNIST and CIFAR-10:
  1. $EDGESYNC_DATA: when set it wins, and a wrong value is an error;
  2. else the `root` argument when given (dataset.root, a client's --data-root): the only place looked in;
  3. else <repo>/data/<name>/data, <repo>/data/<name>, <repo>/data/leaf/data/<name>/data (a LEAF clone).
In 1 and 2 a folder counts if it, or its `data/`, `<name>/` or `<name>/data/`, holds train/ and test/
with JSON files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgesync.data.arrays import REPO_DATA_DIR, ArrayDataset, DataNotFoundError, class_labels, explicit_root_error
from edgesync.data.fashion_mnist import ENV_VAR
from edgesync.data.images import pixel_moments
from edgesync.data.leaf_celeba import CELEBA_CLASSES, image_names, load_images
from edgesync.data.leaf_sent140 import SENT140_CLASSES, tokenise, tweets

ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
NUM_LETTERS = len(ALL_LETTERS)
assert NUM_LETTERS == 80, "LEAF's Shakespeare vocabulary has 80 characters"
SEQ_LENGTH = 80  # characters in one Shakespeare sample
FEMNIST_SIDE = 28
FEMNIST_CLASSES = 62
SPLITS = ("train", "test")
SEARCH_BASE = REPO_DATA_DIR  # <repo>/data: the default places are under it (a module name, so tests can move it)
LEAF_REPO = "https://github.com/TalwalkarLab/leaf"

# ASCII code -> vocabulary index, -1 outside the vocabulary (LEAF's ALL_LETTERS.find)
_LETTER_INDEX = np.full(128, -1, dtype=np.int64)
_LETTER_INDEX[[ord(c) for c in ALL_LETTERS]] = np.arange(NUM_LETTERS)

Samples = tuple[np.ndarray, np.ndarray]  # (x, y) of one user in one file


def letter_to_index(letter: str) -> int:
    """LEAF's index of one character: its position in ALL_LETTERS, -1 when it is not there."""
    return ALL_LETTERS.find(letter)


@dataclass(frozen=True)
class LeafFormat:
    """What differs between LEAF's datasets: how a user's x and y become arrays, what they are, how LEAF
    builds them."""

    name: str  # the dataset name and LEAF's folder name
    title: str
    kind: str  # ArrayDataset.kind
    num_classes: int
    convert: Callable[[list, list, str], Samples]  # (x, y, where) -> (x array, y int64); where names the user
    preprocess: str  # the options of LEAF's ./preprocess.sh we advise
    split: str  # the per-user train/test split those options make
    # (the folder read, {split: {user: samples}}) -> the same with the final arrays: what needs every user's
    # samples (Sent140's vocabulary) or the folder (CelebA's images); None: convert's arrays are final
    finish: Callable[[Path, dict[str, dict[str, Samples]]], dict[str, dict[str, Samples]]] | None = None
    before: str = ""  # what to do before ./preprocess.sh, where LEAF needs files it does not fetch

    @property
    def how_to_get(self) -> str:
        return (f"LEAF's scripts build it from the raw data (there is no ready-made download): `git clone "
                f"{LEAF_REPO}`, {self.before}then in its data/{self.name} folder run `./preprocess.sh "
                f"{self.preprocess}` "
                f"(`-t sample` splits each user's samples {self.split} into train and test, so every user has "
                "test data of its own; `--sf 0.05` builds a small sample), and put the folder it writes, "
                f"data/{self.name}/data (holding train/ and test/), at {SEARCH_BASE / self.name / 'data'}, or "
                f"point dataset.root or ${ENV_VAR} at it")


def _femnist_samples(x: list, y: list, where: str) -> Samples:
    """FEMNIST's 784 floats per sample -> uint8 (n, 28, 28) as round(x·255); y -> int64 0..61."""
    pixels = FEMNIST_SIDE * FEMNIST_SIDE
    for i, row in enumerate(x):
        if not isinstance(row, list) or len(row) != pixels:
            got = f"{len(row)} values" if isinstance(row, list) else type(row).__name__
            raise ValueError(f"{where}, sample {i}: x has {got}, expected a list of {pixels} floats "
                             f"(a {FEMNIST_SIDE}×{FEMNIST_SIDE} image)")
    try:
        values = np.asarray(x, dtype=np.float64).reshape(len(x), pixels)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: x holds a value that is not a number: {e}") from None
    bad = ~((values >= 0.0) & (values <= 1.0))  # NaN fails too
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"{where}, sample {i}: x[{j}] = {float(values[i, j])!r}, expected a pixel value in [0, 1]")
    images = np.rint(values * 255.0).astype(np.uint8).reshape(len(x), FEMNIST_SIDE, FEMNIST_SIDE)
    return images, class_labels(y, FEMNIST_CLASSES, where)


def _shakespeare_samples(x: list, y: list, where: str) -> Samples:
    """Shakespeare's 80-character strings -> int64 (n, 80) indices; the next characters -> int64 (n,)."""
    for i, s in enumerate(x):
        if not isinstance(s, str) or len(s) != SEQ_LENGTH:
            got = f"{len(s)} characters" if isinstance(s, str) else f"a {type(s).__name__}"
            raise ValueError(f"{where}, sample {i}: x is {got}, expected a string of {SEQ_LENGTH} characters")
    for i, c in enumerate(y):
        if not isinstance(c, str) or len(c) != 1:
            raise ValueError(f"{where}, sample {i}: y is {c!r}, expected one character (the one after x)")
    return (_indices("".join(x), where, "x", SEQ_LENGTH).reshape(len(x), SEQ_LENGTH),
            _indices("".join(y), where, "y", 1))


def _indices(text: str, where: str, key: str, per_sample: int) -> np.ndarray:
    """Vocabulary indices of every character of text, which holds per_sample characters per sample."""
    # the code points, in one vectorised step (a Python loop over a full Shakespeare's characters is slow)
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.int64)
    index = np.where(codes < 128, _LETTER_INDEX[np.minimum(codes, 127)], -1)
    if (index < 0).any():
        at = int(np.flatnonzero(index < 0)[0])
        raise ValueError(f"{where}, sample {at // per_sample}: {key} holds {text[at]!r}, which is not in LEAF's "
                         f"{NUM_LETTERS}-character vocabulary ALL_LETTERS (LEAF's letter_to_index would map it "
                         "to -1)")
    return index


FORMATS = {
    "femnist": LeafFormat("femnist", "FEMNIST", "image", FEMNIST_CLASSES, _femnist_samples,
                          "-s niid --sf 1.0 -k 0 -t sample", "90/10"),
    # --tf 0.8: the train/test split of the FedAvg paper's Shakespeare, which LEAF's README uses
    "shakespeare": LeafFormat("shakespeare", "Shakespeare", "tokens", NUM_LETTERS, _shakespeare_samples,
                              "-s niid --sf 1.0 -k 0 -t sample --tf 0.8", "80/20"),
    # LEAF's README's full-sized builds; its script fetches Sentiment140 itself, CelebA it cannot
    "sent140": LeafFormat("sent140", "Sent140", "tokens", SENT140_CLASSES, tweets, "-s niid --sf 1.0 -k 64 -t sample",
                          "90/10", tokenise),
    "celeba": LeafFormat("celeba", "CelebA", "image", CELEBA_CLASSES, image_names, "-s niid --sf 1.0 -k 5 -t sample",
                         "90/10", load_images,
                         "put CelebA's identity_CelebA.txt, list_attr_celeba.txt and img_align_celeba/ (from "
                         "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html) in its data/celeba/data/raw (the images "
                         "stay there: they are read from raw/img_align_celeba beside train/ and test/), "),
}


def find_leaf(name: str, root: str | os.PathLike | None = None, origin: str | None = None) -> Path:
    """The folder holding LEAF's train/ and test/ for `name` (see the module docstring for the order).
    `origin` names where an explicit `root` came from, for the error when it does not hold them."""
    fmt = FORMATS[name]
    env = os.environ.get(ENV_VAR)
    if env:
        found, why = _probe(Path(env), name)
        if found is not None:
            return found
        raise DataNotFoundError(f"${ENV_VAR}={env} does not hold {fmt.title}: {why}. Point {ENV_VAR} at LEAF's "
                                f"data/{name}/data folder, or unset it to use the default places. {fmt.how_to_get}.")
    if root is not None:
        found, why = _probe(Path(root), name)
        if found is None:
            raise explicit_root_error(root, origin, f"{why}; {fmt.title} needs LEAF's train/ and test/ folders of "
                                      "JSON files there")
        return found
    tried = [f"${ENV_VAR}: not set"]
    for place in default_places(name):
        found, why = _holds_splits(place)
        if found:
            return place
        tried.append(f"{place}: {why}")
    places = "\n  - ".join(tried)
    raise DataNotFoundError(f"{fmt.title} not found. Looked in:\n  - {places}\nFix: {fmt.how_to_get}.")


def default_places(name: str) -> list[Path]:
    """Where a LEAF dataset is looked for without $EDGESYNC_DATA or a root, in order."""
    return [SEARCH_BASE / name / "data", SEARCH_BASE / name, SEARCH_BASE / "leaf" / "data" / name / "data"]


def load_leaf(name: str, root: str | os.PathLike | None = None, origin: str | None = None) -> ArrayDataset:
    """Load LEAF's `name` (one of FORMATS) from `find_leaf(root, origin)`: every JSON file of train/
    and test/, samples ordered by user, with each sample's user in train_groups and test_groups."""
    fmt = FORMATS[name]
    folder = find_leaf(name, root, origin)
    splits = {split: read_split(folder / split, fmt) for split in SPLITS}
    if fmt.finish is not None:
        splits = fmt.finish(folder, splits)
    names = tuple(sorted(set(splits["train"]) | set(splits["test"])))
    index = {user: i for i, user in enumerate(names)}
    arrays = {split: _concatenate(users, index) for split, users in splits.items()}
    (train_x, train_y, train_groups), (test_x, test_y, test_groups) = arrays["train"], arrays["test"]
    # FEMNIST's and CelebA's figures are those of the files loaded (FEMNIST's white background included)
    mean, std = pixel_moments(train_x) if fmt.kind == "image" else (0.0, 1.0)
    return ArrayDataset(train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y,
                        num_classes=fmt.num_classes, mean=mean, std=std, name=name, kind=fmt.kind,
                        train_groups=train_groups, test_groups=test_groups, group_names=names)


def load_femnist(root: str | os.PathLike | None = None, origin: str | None = None) -> ArrayDataset:
    """FEMNIST: uint8 (N, 28, 28) images as LEAF stores them (white background), 62 classes, writer groups."""
    return load_leaf("femnist", root, origin)


def load_shakespeare(root: str | os.PathLike | None = None, origin: str | None = None) -> ArrayDataset:
    """Shakespeare: int64 (N, 80) character indices, the next character's index as label, role groups."""
    return load_leaf("shakespeare", root, origin)


def read_split(folder: Path, fmt: LeafFormat) -> dict[str, Samples]:
    """Every user's samples in one split folder: its JSON files read in name order, a user in one file only."""
    files = sorted(folder.glob("*.json"))
    if not files:
        raise DataNotFoundError(f"{folder}: no .json files; expected LEAF's {fmt.title} files")
    users: dict[str, Samples] = {}
    came_from: dict[str, Path] = {}
    for path in files:
        for user, samples in read_file(path, fmt).items():
            if user in users:
                raise ValueError(f"{path}: user {user!r} is in {came_from[user].name} too; a user's samples of "
                                 "one split belong in one file")
            users[user], came_from[user] = samples, path
    if not any(len(y) for _, y in users.values()):
        raise ValueError(f"{folder}: its {len(files)} file(s) hold no samples")
    return users


def read_file(path: Path, fmt: LeafFormat) -> dict[str, Samples]:
    """One LEAF JSON file -> {user: (x, y)}, every key and count checked against the format."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read it as JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: holds a {type(data).__name__}, expected a JSON object with users, num_samples "
                         "and user_data")
    for key, kind in (("users", list), ("num_samples", list), ("user_data", dict)):
        if key not in data:
            raise ValueError(f"{path}: no key {key!r}; a LEAF file holds users, num_samples and user_data")
        if not isinstance(data[key], kind):
            raise ValueError(f"{path}: {key!r} is a {type(data[key]).__name__}, expected a JSON "
                             f"{'array' if kind is list else 'object'}")
    listed, counts, user_data = data["users"], data["num_samples"], data["user_data"]
    if len(counts) != len(listed):
        raise ValueError(f"{path}: 'num_samples' has {len(counts)} entries for {len(listed)} users, expected one "
                         "per user")
    hierarchies = data.get("hierarchies", listed)  # optional; when there, one per user
    if not isinstance(hierarchies, list) or len(hierarchies) != len(listed):
        raise ValueError(f"{path}: 'hierarchies' must be a list with one entry per user ({len(listed)})")
    if len(set(listed)) != len(listed):
        twice = sorted({u for u in listed if listed.count(u) > 1})
        raise ValueError(f"{path}: 'users' lists {', '.join(map(repr, twice))} more than once")
    for user in user_data:
        if user not in listed and _sample_count(user_data[user]):
            raise ValueError(f"{path}: user_data[{user!r}] holds samples, but 'users' does not list {user!r}")
    out: dict[str, Samples] = {}
    for user, count in zip(listed, counts):
        where = f"{path}: user_data[{user!r}]"
        entry = user_data.get(user)
        if not isinstance(entry, dict) or not isinstance(entry.get("x"), list) or not isinstance(entry.get("y"), list):
            raise ValueError(f"{where}: expected an object with lists 'x' and 'y' ('users' lists {user!r}), got "
                             f"{_shown(entry)}")
        x, y = entry["x"], entry["y"]
        if not (count == len(x) == len(y)):
            raise ValueError(f"{where}: num_samples says {count}, but x has {len(x)} samples and y {len(y)}; "
                             "expected all three equal")
        out[str(user)] = fmt.convert(x, y, where)
    return out


def _sample_count(entry: object) -> int:
    return len(entry.get("y") or []) if isinstance(entry, dict) else 1


def _shown(entry: object) -> str:
    if isinstance(entry, dict):
        return "an object with keys " + (", ".join(map(repr, entry)) or "none")
    return "nothing" if entry is None else f"a {type(entry).__name__}"


def _concatenate(users: dict[str, Samples], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, groups) of a split, users in sorted order (read_split has made sure there are samples)."""
    order = sorted(users)
    xs = [users[u][0] for u in order]
    ys = [users[u][1] for u in order]
    groups = np.concatenate([np.full(len(users[u][1]), index[u], dtype=np.int64) for u in order])
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64), groups


def _holds_splits(folder: Path) -> tuple[bool, str]:
    """(True, "") when folder holds train/ and test/ with JSON files, else (False, why not)."""
    if not folder.is_dir():
        return False, "no such directory"
    for split in SPLITS:
        if not (folder / split).is_dir():
            return False, f"no {split}/ folder"
        if not any((folder / split).glob("*.json")):
            return False, f"{split}/ holds no .json files"
    return True, ""


def _probe(base: Path, name: str) -> tuple[Path | None, str]:
    """(the folder holding train/ and test/, "") or (None, why not), for base and the folders LEAF's layout
    puts below it."""
    if not base.is_dir():
        return None, "no such directory"
    first_why = ""
    for folder in (base, base / "data", base / name, base / name / "data"):
        found, why = _holds_splits(folder)
        if found:
            return folder, ""
        first_why = first_why or why
    return None, f"{first_why} (also looked in data/, {name}/ and {name}/data/ below it)"
