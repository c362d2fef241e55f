"""Say where a dataset is, or fetch it.

    python -m edgesync.data                      # print where Fashion-MNIST is found; exit 1 if nowhere
    python -m edgesync.data --dataset cifar10    # the same for CIFAR-10
    python -m edgesync.data --ensure             # if nowhere, download (needs internet) into <repo>/data/fashion-mnist
                                                 # (CIFAR-10: <repo>/data/cifar-10)
    python -m edgesync.data --root DIR           # look only in DIR ($EDGESYNC_DATA still wins); --ensure downloads there
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgesync.data import cifar10, fashion_mnist
from edgesync.data.arrays import ArrayDataset, DataNotFoundError
from edgesync.data.datasets import download_cifar10, download_fashion_mnist


@dataclass(frozen=True)
class Entry:
    """How this command finds, loads and downloads one dataset."""

    title: str
    repo_dir: Path
    find: Callable[[str | None, str], object]  # (root, origin) -> where; raises DataNotFoundError
    load: Callable[[str | None, str], ArrayDataset]
    download: Callable[[Path], Path]


DATASETS = {
    "fashion_mnist": Entry("Fashion-MNIST", fashion_mnist.REPO_DIR, fashion_mnist.find_root,
                           fashion_mnist.load_fashion_mnist, download_fashion_mnist),
    "cifar10": Entry("CIFAR-10", cifar10.REPO_DIR, lambda root, origin: cifar10.find_cifar10(root, origin).path,
                     cifar10.load_cifar10, download_cifar10),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgesync.data", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=tuple(DATASETS), default="fashion_mnist",
                        help="which dataset (default: fashion_mnist)")
    parser.add_argument("--root", help="the directory to look in (instead of the usual places)")
    parser.add_argument("--ensure", action="store_true",
                        help="download if not found: into --root, else into <repo>/data/fashion-mnist or "
                        "<repo>/data/cifar-10")
    args = parser.parse_args(argv)
    entry = DATASETS[args.dataset]
    try:
        where = entry.find(args.root, "--root")
    except DataNotFoundError as e:
        if not args.ensure:
            print(e, file=sys.stderr)
            return 1
        dest = Path(args.root) if args.root is not None else entry.repo_dir
        print(f"{entry.title} not found; downloading into {dest} ...", file=sys.stderr)
        try:
            entry.download(dest)
            where = entry.find(args.root, "--root")
        except Exception as e2:  # network errors come in many types; report any of them plainly
            print(f"download into {dest} failed: {type(e2).__name__}: {e2}\n{e}", file=sys.stderr)
            return 2
    ds = entry.load(args.root, "--root")
    print(f"{args.dataset}: {where} (train {len(ds.train_y)}, test {len(ds.test_y)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
