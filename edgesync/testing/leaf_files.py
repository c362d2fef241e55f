"""Small FEMNIST, Shakespeare, Sent140 and CelebA data folders in LEAF's real JSON layout: for tests, and to try
the pipeline without LEAF's multi-gigabyte builds.

    python -m edgesync.testing.leaf_files femnist data/femnist/data        # 20 writers
    python -m edgesync.testing.leaf_files shakespeare data/shakespeare/data # 10 roles
    python -m edgesync.testing.leaf_files sent140 data/sent140/data        # 10 Twitter users
    python -m edgesync.testing.leaf_files celeba data/celeba/data          # 8 celebrities, images in raw/

Each writer makes what LEAF's `./preprocess.sh ... -t sample` makes: `train/` and `test/` folders, each with
several JSON files (users spread over them, not in sorted order), every file an object with `users`,
`num_samples`, `user_data` (and Shakespeare's `hierarchies`), and each user's samples split as LEAF's
split_data.py does: `max(1, int(frac · n))` drawn at random for train (1 of 2 samples), the rest for test,
so every user has at least one test sample. The data is made up, not LEAF's:

- FEMNIST: per class, a fixed random glyph of dark strokes on LEAF's white background (1.0), shifted and
  noised per sample, as floats k/255 (LEAF's `vec / 255`); classes 0..61, ids like LEAF's (`f0003_27`);
- Shakespeare: per role, the words of a public-domain passage (Shakespeare's Sonnet 18) in an order of its
  own, each sample a sliding 80-character window with the character after it as y, as LEAF cuts a role's
  lines; ids like LEAF's (`THE_TEMPEST_PROSPERO`), the play as the role's hierarchy;
- Sent140: per user, tweets of a few words from a positive or a negative list among neutral ones, with
  mentions, links and punctuation, y 1 for a positive one; x LEAF's five strings [tweet_id, date, query, user,
  text]; user ids like Twitter handles;
- CelebA: per celebrity (ids numbers, as LEAF's), small JPEG "faces" written with PIL into
  raw/img_align_celeba/ (000001.jpg, ...): a face-coloured oval of the celebrity's own tone with a bright
  mouth band when y is 1 (smiling); y written as LEAF writes it, 1.0 or 0.0.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from edgesync.data.leaf import ALL_LETTERS, FEMNIST_CLASSES, FEMNIST_SIDE, SEQ_LENGTH
from edgesync.data.leaf_celeba import IMAGES

SONNET_18 = """Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee."""
assert set(SONNET_18) <= set(ALL_LETTERS), "the passage must stay inside LEAF's vocabulary"

PLAYS = ("THE_TEMPEST", "HAMLET", "KING_LEAR", "MACBETH", "OTHELLO")
ROLES = ("PROSPERO", "MIRANDA", "ARIEL", "CALIBAN", "FERDINAND", "GONZALO", "HORATIO", "KENT", "BANQUO", "IAGO")

UserData = dict[str, dict[str, list]]  # {user: {"x": [...], "y": [...]}}

POSITIVE = ("love", "great", "happy", "awesome", "fun", "good", "thanks", "yay")
NEGATIVE = ("sad", "hate", "bad", "sick", "tired", "miss", "ugh", "awful")
NEUTRAL = ("the", "day", "work", "today", "my", "is", "so", "at", "going", "home", "now", "lunch", "I'm", "that's")
HANDLES = ("lyx_fan", "robotickilldozr", "sunny_side", "mattycus", "ElleCTF", "Karoli", "joy_wolf", "coZZ",
           "TheBigDog", "nightowl22", "pinkyfiend", "Bern_Lee")
CELEBA_SIZE = (44, 36)  # (H, W) of the images written: CelebA's aligned 218×178, scaled down


def write_femnist(folder: str | Path, writers: int = 20, per_writer: tuple[int, int] = (8, 16), seed: int = 0,
                  files: int = 2, train_fraction: float = 0.9) -> dict[str, UserData]:
    """FEMNIST-like LEAF files under folder/train and folder/test; returns what each split holds, by user."""
    rng = np.random.default_rng(seed)
    glyphs = rng.random((FEMNIST_CLASSES, FEMNIST_SIDE, FEMNIST_SIDE)) < 0.15  # each class's dark strokes
    users = [f"f{int(n):04d}_{int(rng.integers(100)):02d}" for n in rng.choice(4000, writers, replace=False)]
    data: UserData = {}
    for user in users:
        n = int(rng.integers(per_writer[0], per_writer[1] + 1))
        labels = rng.integers(FEMNIST_CLASSES, size=n)
        images = []
        for label in labels:
            ink = np.roll(glyphs[label], tuple(rng.integers(-1, 2, size=2)), axis=(0, 1))
            pixels = np.where(ink, rng.integers(0, 80, ink.shape), rng.integers(235, 256, ink.shape))
            images.append((pixels.reshape(-1) / 255).tolist())  # LEAF: 1.0 is the white background
        data[user] = {"x": images, "y": labels.tolist()}
    return _write_splits(Path(folder), data, None, rng, files, train_fraction)


def write_shakespeare(folder: str | Path, roles: int = 10, per_role: tuple[int, int] = (20, 40), seed: int = 0,
                      files: int = 2, train_fraction: float = 0.9) -> dict[str, UserData]:
    """Shakespeare-like LEAF files under folder/train and folder/test; returns what each split holds, by user."""
    if not 1 <= roles <= len(PLAYS) * len(ROLES):
        raise ValueError(f"roles={roles}: expected 1..{len(PLAYS) * len(ROLES)}")
    rng = np.random.default_rng(seed)
    words = SONNET_18.split(" ")
    pairs = [(play, role) for role in ROLES for play in PLAYS][:roles]
    data: UserData = {}
    hierarchy: dict[str, str] = {}
    for play, role in pairs:
        n = int(rng.integers(per_role[0], per_role[1] + 1))
        text = ""
        while len(text) < n + SEQ_LENGTH:  # the role's lines: the passage's words in an order of its own
            text += " ".join(rng.permutation(words)) + "\n"
        user = f"{play}_{role}"
        data[user] = {"x": [text[i:i + SEQ_LENGTH] for i in range(n)],
                      "y": [text[i + SEQ_LENGTH] for i in range(n)]}
        hierarchy[user] = play
    return _write_splits(Path(folder), data, hierarchy, rng, files, train_fraction)


def write_sent140(folder: str | Path, users: int = 10, per_user: tuple[int, int] = (8, 16), seed: int = 0,
                  files: int = 2, train_fraction: float = 0.9) -> dict[str, UserData]:
    """Sent140-like LEAF files under folder/train and folder/test; returns what each split holds, by user."""
    if not 1 <= users <= len(HANDLES):
        raise ValueError(f"users={users}: expected 1..{len(HANDLES)}")
    rng = np.random.default_rng(seed)
    data: UserData = {}
    tweet_id = 1467810369  # Sentiment140's ids are numbers of this size
    for user in HANDLES[:users]:
        n = int(rng.integers(per_user[0], per_user[1] + 1))
        labels = rng.integers(2, size=n)
        rows = []
        for label in labels:
            mood = rng.choice(POSITIVE if label else NEGATIVE, size=2)
            words = [*rng.choice(NEUTRAL, size=int(rng.integers(2, 8))), *mood]
            text = " ".join(rng.permutation(words)) + str(rng.choice(["!", ".", " :)", "", "..."]))
            if rng.random() < 0.3:
                text = f"@{rng.choice(HANDLES)} {text}"
            if rng.random() < 0.2:
                text += f" http://twitpic.com/{int(rng.integers(10**5)):x}"
            tweet_id += int(rng.integers(1, 1000))
            hour, minute, second = (int(v) for v in rng.integers(0, (24, 60, 60)))
            date = f"Mon Apr 06 {hour:02d}:{minute:02d}:{second:02d} PDT 2009"
            rows.append([str(tweet_id), date, "NO_QUERY", user, text])
        data[user] = {"x": rows, "y": labels.tolist()}
    return _write_splits(Path(folder), data, None, rng, files, train_fraction)


def write_celeba(folder: str | Path, users: int = 8, per_user: tuple[int, int] = (5, 10), seed: int = 0,
                 files: int = 2, train_fraction: float = 0.9) -> dict[str, UserData]:
    """CelebA-like LEAF files under folder/train and folder/test, their images in folder/raw/img_align_celeba;
    returns what each split holds, by user."""
    from PIL import Image  # only this writer needs it

    rng = np.random.default_rng(seed)
    images = Path(folder) / IMAGES
    images.mkdir(parents=True, exist_ok=True)
    h, w = CELEBA_SIZE
    rows, cols = np.mgrid[0:h, 0:w]
    oval = ((rows - h / 2) / (0.42 * h)) ** 2 + ((cols - w / 2) / (0.4 * w)) ** 2 < 1
    mouth = oval & (rows > 0.66 * h) & (rows < 0.76 * h) & (np.abs(cols - w / 2) < 0.22 * w)
    data: UserData = {}
    count = 0
    for celebrity in sorted(rng.choice(10_000, users, replace=False)):  # LEAF's ids: CelebA's identity numbers
        tone = rng.integers(80, 200, size=3)
        n = int(rng.integers(per_user[0], per_user[1] + 1))
        labels = rng.integers(2, size=n)
        names = []
        for label in labels:
            count += 1
            pixels = np.where(oval[..., None], tone, rng.integers(0, 256, size=3)).astype(np.int64)
            if label:
                pixels[mouth] = 250
            pixels += rng.integers(-12, 13, size=pixels.shape)
            name = f"{count:06d}.jpg"
            Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB").save(images / name, quality=90)
            names.append(name)
        data[str(int(celebrity))] = {"x": names, "y": [float(v) for v in labels]}  # LEAF writes 1.0 and 0.0
    return _write_splits(Path(folder), data, None, rng, files, train_fraction)


def write_leaf_file(path: str | Path, user_data: UserData, hierarchies: list[str] | None = None) -> Path:
    """One LEAF JSON file holding user_data, with users and num_samples as LEAF writes them."""
    users = list(user_data)
    obj: dict = {"users": users}
    if hierarchies is not None:
        obj["hierarchies"] = hierarchies
    obj["num_samples"] = [len(user_data[u]["y"]) for u in users]
    obj["user_data"] = user_data
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def _write_splits(folder: Path, data: UserData, hierarchy: dict[str, str] | None, rng: np.random.Generator,
                  files: int, train_fraction: float) -> dict[str, UserData]:
    """Split each user's samples as LEAF's split_data.py does and write both splits over `files` files."""
    split: dict[str, UserData] = {"train": {}, "test": {}}
    for user, samples in data.items():
        n = len(samples["y"])
        if n < 2:
            raise ValueError(f"user {user!r} has {n} sample(s); LEAF keeps users with at least 2 (one to test)")
        n_train = 1 if n == 2 else max(1, int(train_fraction * n))
        in_train = np.zeros(n, dtype=bool)
        in_train[rng.choice(n, n_train, replace=False)] = True
        for name, keep in (("train", in_train), ("test", ~in_train)):
            split[name][user] = {key: [v for v, k in zip(values, keep) if k] for key, values in samples.items()}
    chunks = np.array_split(np.arange(len(data)), max(1, min(files, len(data))))
    users = list(data)  # in the order drawn, not sorted: the reader must not depend on it
    for name, by_user in split.items():
        for i, chunk in enumerate(chunks):
            part = {users[j]: by_user[users[j]] for j in chunk}
            levels = None if hierarchy is None else [hierarchy[u] for u in part]
            tag = str(train_fraction)[2:]  # LEAF's file names end in the fraction's digits: _train_9.json for 0.9
            write_leaf_file(folder / name / f"all_data_{i}_niid_0_keep_0_{name}_{tag}.json", part, levels)
    return split


# each dataset's writer, called as write(folder, users, seed=…), and its default number of users
WRITERS = {"femnist": (write_femnist, 20), "shakespeare": (write_shakespeare, 10), "sent140": (write_sent140, 10),
           "celeba": (write_celeba, 8)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgesync.testing.leaf_files", description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=tuple(WRITERS))
    parser.add_argument("folder", help="where to write train/ and test/ (e.g. data/femnist/data)")
    parser.add_argument("--users", type=int, help="writers, roles, Twitter users or celebrities (default: "
                        f"{', '.join(str(users) for _, users in WRITERS.values())})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if (Path(args.folder) / "train").exists():
        print(f"{args.folder}/train exists: not writing over it", file=sys.stderr)
        return 1
    write, users = WRITERS[args.dataset]
    written = write(args.folder, args.users or users, seed=args.seed)
    counts = {name: sum(len(d["y"]) for d in users.values()) for name, users in written.items()}
    print(f"{args.dataset}: {len(written['train'])} users, {counts['train']} training and {counts['test']} test "
          f"samples in {args.folder} (made up, in LEAF's layout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
