"""Say where Fashion-MNIST is, or fetch it.

    python -m edgesync.data            # print where the files are found; exit 1 if nowhere
    python -m edgesync.data --ensure   # if nowhere, download into <repo>/data/fashion-mnist (needs internet)
    python -m edgesync.data --root DIR # look only in DIR ($EDGESYNC_DATA still wins); --ensure downloads there
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgesync.data.datasets import download_fashion_mnist
from edgesync.data.fashion_mnist import REPO_DIR, DataNotFoundError, find_root, load_fashion_mnist


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgesync.data", description=__doc__.splitlines()[0])
    parser.add_argument("--root", help="the directory to look in (instead of the usual places)")
    parser.add_argument("--ensure", action="store_true",
                        help=f"download if not found: into --root, else into {REPO_DIR}")
    args = parser.parse_args(argv)
    try:
        where = find_root(args.root, "--root")
    except DataNotFoundError as e:
        if not args.ensure:
            print(e, file=sys.stderr)
            return 1
        dest = Path(args.root) if args.root is not None else REPO_DIR
        print(f"Fashion-MNIST not found; downloading into {dest} ...", file=sys.stderr)
        try:
            download_fashion_mnist(dest)
            where = find_root(args.root, "--root")
        except Exception as e2:  # network errors come in many types; report any of them plainly
            print(f"download into {dest} failed: {type(e2).__name__}: {e2}\n{e}", file=sys.stderr)
            return 2
    ds = load_fashion_mnist(where)
    print(f"fashion_mnist: {where} (train {len(ds.train_y)}, test {len(ds.test_y)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
