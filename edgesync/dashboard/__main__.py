"""`python -m edgesync.dashboard RUN_DIR --bind HOST:PORT [--live]`: the process a live run starts beside itself
(serve.DashboardProcess); it prints the address to open, then serves until stopped. The token, if any, comes in
$EDGESYNC_DASHBOARD_TOKEN."""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from edgesync.dashboard.serve import BindError, parse_bind, serve


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m edgesync.dashboard")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--bind", default="127.0.0.1:0")
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--parent", type=int, help="exit when this process (the run's) is gone")
    args = parser.parse_args()
    if args.parent:
        threading.Thread(target=follow, args=(args.parent,), daemon=True).start()
    try:
        host, port = parse_bind(args.bind, "--bind")
        serve(args.run_dir, host, port, token=os.environ.get("EDGESYNC_DASHBOARD_TOKEN") or None, live=args.live,
              announce=lambda url: print(url, flush=True))
    except BindError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2
    return 0


def follow(parent: int) -> None:
    """A run killed outright (SIGKILL) cannot stop its dashboard: it notices its parent gone and exits."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
