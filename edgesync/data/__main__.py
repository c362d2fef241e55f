"""Say where a dataset is, or fetch it.

    python -m edgesync.data                      # print where Fashion-MNIST is found; exit 1 if nowhere
    python -m edgesync.data --dataset cifar10    # the same for CIFAR-10 (femnist, shakespeare: LEAF's)
    python -m edgesync.data --ensure             # if nowhere, download (needs internet) into <repo>/data/fashion-mnist
                                                 # (CIFAR-10: <repo>/data/cifar-10)
    python -m edgesync.data --root DIR           # look only in DIR ($EDGESYNC_DATA still wins); --ensure downloads there

LEAF's FEMNIST and Shakespeare cannot be downloaded ready-made (LEAF's scripts build them from the raw
data): --ensure says so, how to build them and where to put them, and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgesync.data import cifar10, fashion_mnist, leaf
from edgesync.data.arrays import ArrayDataset, DataNotFoundError
from edgesync.data.datasets import download_cifar10, download_fashion_mnist


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
    parser.add_argument("--dataset", choices=tuple(DATASETS), default="fashion_mnist",
                        help="which dataset (default: fashion_mnist)")
    parser.add_argument("--root", help="the directory to look in (instead of the usual places)")
    parser.add_argument("--ensure", action="store_true",
                        help="download if not found: into --root, else into <repo>/data/fashion-mnist or "
                        "<repo>/data/cifar-10 (femnist, shakespeare: say how to build them with LEAF)")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
