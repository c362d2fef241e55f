"""Say where a dataset is, or fetch it.

    python -m edgesync.data                      # print where Fashion-MNIST is found; exit 1 if nowhere
    python -m edgesync.data --dataset cifar10    # the same for CIFAR-10 (LEAF's: femnist, shakespeare, sent140, celeba)
    python -m edgesync.data --ensure             # if nowhere, download (needs internet) into <repo>/data/fashion-mnist
                                                 # (CIFAR-10: <repo>/data/cifar-10)
    python -m edgesync.data --root DIR           # look only in DIR ($EDGESYNC_DATA still wins); --ensure downloads there
    python -m edgesync.data --dataset hf --args '{"path": "data/writers.parquet", "feature": "pixels", "shape": [28, 28]}'
    python -m edgesync.data --dataset image_folder --args '{"path": "data/flowers", "size": [32, 32]}'

LEAF's FEMNIST, Shakespeare, Sent140 and CelebA cannot be downloaded ready-made (LEAF's scripts build them from
the raw data): --ensure says so, how to build them and where to put them, and exits 2.

Your own files (hf: a saved Hugging Face dataset, or Parquet, CSV or JSON-lines files; image_folder: a
folder per class) are named in a scenario as `dataset: {name: hf, args: {path: …, feature: …, label: …}}`
(docs/scenarios.md); --args takes those args as JSON, loads them as a run will and says what they hold.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgesync.data import cifar10, fashion_mnist, leaf
from edgesync.data.arrays import ArrayDataset, DataNotFoundError
from edgesync.data.datasets import FILE_DATASETS, download_cifar10, download_fashion_mnist, load_dataset


@dataclass(frozen=True)
class Entry:
    """How this command finds, loads and downloads one dataset."""

    title: str
    repo_dir: Path
    find: Callable[[str | None, str], object]  # (root, origin) -> where; raises DataNotFoundError
    load: Callable[[str | None, str], ArrayDataset]
    download: Callable[[Path], Path] | None  # None: there is nothing to download it from
    how_to_get: Callable[[], str] = str  # where download is None: how to build the files and where to put them


DATASETS = {
    "fashion_mnist": Entry("Fashion-MNIST", fashion_mnist.REPO_DIR, fashion_mnist.find_root,
                           fashion_mnist.load_fashion_mnist, download_fashion_mnist),
    "cifar10": Entry("CIFAR-10", cifar10.REPO_DIR, lambda root, origin: cifar10.find_cifar10(root, origin).path,
                     cifar10.load_cifar10, download_cifar10),
    **{name: Entry(fmt.title, leaf.SEARCH_BASE / name / "data",
                   lambda root, origin, name=name: leaf.find_leaf(name, root, origin),
                   lambda root, origin, name=name: leaf.load_leaf(name, root, origin), None,
                   lambda fmt=fmt: fmt.how_to_get)
       for name, fmt in leaf.FORMATS.items()},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgesync.data", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=(*DATASETS, *FILE_DATASETS), default="fashion_mnist",
                        help="which dataset (default: fashion_mnist)")
    parser.add_argument("--root", help="the directory to look in (instead of the usual places)")
    parser.add_argument("--ensure", action="store_true",
                        help="download if not found: into --root, else into <repo>/data/fashion-mnist or "
                        "<repo>/data/cifar-10 (LEAF's femnist, shakespeare, sent140, celeba: say how to build "
                        "them)")
    parser.add_argument("--args", help="hf, image_folder: the scenario's dataset.args as JSON (path, columns)")
    args = parser.parse_args(argv)
    if args.dataset in FILE_DATASETS:
        return _load_own_files(args.dataset, args.args, args.root)
    entry = DATASETS[args.dataset]
    try:
        where = entry.find(args.root, "--root")
    except DataNotFoundError as e:
        if not args.ensure:
            print(e, file=sys.stderr)
            return 1
        if entry.download is None:  # say how to get it, once (the search's own message may say it already)
            how_to_get = entry.how_to_get()
            how = "" if how_to_get in str(e) else f" {how_to_get}."
            print(f"{e}\n--ensure cannot fetch {entry.title}.{how}", file=sys.stderr)
            return 2
        dest = Path(args.root) if args.root is not None else entry.repo_dir
        print(f"{entry.title} not found; downloading into {dest} ...", file=sys.stderr)
        try:
            entry.download(dest)
            where = entry.find(args.root, "--root")
        except Exception as e2:  # network errors come in many types; report any of them plainly
            print(f"download into {dest} failed: {type(e2).__name__}: {e2}\n{e}", file=sys.stderr)
            return 2
    ds = entry.load(args.root, "--root")
    users = f", users {len(ds.group_names)}" if ds.group_names else ""
    print(f"{args.dataset}: {where} (train {len(ds.train_y)}, test {len(ds.test_y)}{users})")
    return 0


def _load_own_files(name: str, loader_args: str | None, root: str | None) -> int:
    """Load a dataset of one's own files as a run will, and say what it holds; 1 when it cannot."""
    if loader_args is None:
        print(f"{name} reads your own files: give them as --args '{{\"path\": …}}', the JSON of a scenario's "
              f"dataset.args (docs/scenarios.md); there is nothing to download", file=sys.stderr)
        return 1
    try:
        given = json.loads(loader_args)
    except json.JSONDecodeError as e:
        print(f"--args: not JSON: {e}", file=sys.stderr)
        return 1
    if not isinstance(given, dict):
        print(f"--args: a JSON object of the dataset's args, not a {type(given).__name__}", file=sys.stderr)
        return 1
    try:  # the dataset's id as a run passes it (models.model_id): name{args}
        ds = load_dataset(name + json.dumps(given, sort_keys=True), root, "--root")
    except (ValueError, DataNotFoundError) as e:
        print(e, file=sys.stderr)
        return 1
    users = f", users {len(ds.group_names)}" if ds.group_names else ""
    print(f"{name}: {ds.kind} {ds.input_shape}, {ds.num_classes} classes (train {len(ds.train_y)}, test "
          f"{len(ds.test_y)}{users})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
