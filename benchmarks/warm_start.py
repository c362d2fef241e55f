"""Local client start-up: forked from the warm process (runtime/live/warm_start.py) against a fresh
process per client (`EDGESYNC_WARM_START=0`, how `edgesync run` started them before).

    PYTHONPATH=. .venv/bin/python benchmarks/warm_start.py [--clients 4,16] [--repeats 3] [--write-docs]

For each client count N and each way, `LocalClients` (what `edgesync run` uses) starts N clients towards
a bare ZeroMQ ROUTER socket in this process that only notes when each client's HELLO arrives: the time
from the start to the last HELLO is what starting the clients costs before any set-up. Over that interval
the machine's busy CPU time (/proc/stat, all processes) is what it cost the host; once every HELLO is in,
the clients' proportional set size (PSS: shared pages split between the processes sharing them; the warm
process counted with its children) is what they hold. A warm start is measured with its warm process
already running, as every start after a run's first is (the first start's extra cost, the warm process's
own import, is printed beside). Ways and counts interleave within each repeat; figures are mean ± sample
standard deviation over the repeats. `--write-docs` puts the table in docs/benchmarks.md's
`warm_start:table` block and each repeat's figures in docs/data/warm_start-table.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import psutil
import zmq

from edgesync.docs_data import data_note, write_block
from edgesync.runtime.live import warm_start
from edgesync.runtime.live.launcher import LocalClients

MB = 2 ** 20
ROOT = Path(__file__).resolve().parents[1]
BLOCK = "warm_start:table"
CONNECT_TIMEOUT_S = 120  # the clients wait this long for a WELCOME that never comes; they are stopped first


def busy_cpu_s() -> float:
    """Seconds of CPU time the whole machine has spent busy (not idle or waiting for I/O) since boot."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def start(n: int, warm: bool, folder: Path) -> dict:
    """Seconds to the last HELLO, busy CPU-seconds meanwhile, the clients' PSS in MB then."""
    os.environ[warm_start.WARM_START_ENV] = "1" if warm else "0"
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    t0, cpu0 = time.perf_counter(), busy_cpu_s()
    clients = LocalClients(f"tcp://127.0.0.1:{port}", n, folder,
                           options=[["--connect-timeout", str(CONNECT_TIMEOUT_S)]] * n)
    heard: set[bytes] = set()
    try:
        while len(heard) < n:
            if router.poll(60_000) == 0:
                raise RuntimeError(f"only {len(heard)} of {n} clients said HELLO within 60 s")
            heard.add(router.recv_multipart()[0])
        took, cpu = time.perf_counter() - t0, busy_cpu_s() - cpu0
        pss = sum(psutil.Process(p.pid).memory_full_info().pss for p in clients.procs)
        if warm:
            pss += psutil.Process(warm_start.warm_starter()._proc.pid).memory_full_info().pss
        return {"hello_s": took, "busy_cpu_s": cpu, "pss_mb": pss / MB}
    finally:
        clients.stop(timeout_s=0.1)
        router.close(linger=0)
        ctx.term()


def render(data: list[dict]) -> str:
    """The block's table from each count and way's repeats (as docs/data/warm_start-table.json keeps them)."""
    def ms(xs: list[float], fmt: str) -> str:
        return f"{statistics.mean(xs):{fmt}} ± {statistics.stdev(xs) if len(xs) > 1 else 0.0:{fmt}}"

    table = ["| clients | start | to the last HELLO (s) | busy CPU (s) | clients' PSS (MB) | PSS per client (MB) |",
             "|---:|---|---:|---:|---:|---:|"]
    for entry in data:
        n, repeats = entry["clients"], entry["repeats"]
        took, cpu, pss = ([r[key] for r in repeats] for key in ("hello_s", "busy_cpu_s", "pss_mb"))
        table.append(f"| {n} | {'forked from the warm process' if entry['warm'] else 'a fresh process each'} | "
                     f"{ms(took, '.2f')} | {ms(cpu, '.1f')} | {ms(pss, ',.0f')} | {statistics.mean(pss) / n:,.0f} |")
    return "\n".join(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="4,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    data = [{"clients": n, "warm": warm, "repeats": []} for n in counts for warm in (True, False)]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        os.environ[warm_start.WARM_START_ENV] = "1"
        first = LocalClients("tcp://127.0.0.1:9", 1, Path(tmp) / "first", options=[["--connect-timeout", "1"]])
        first.stop(timeout_s=30)
        print(f"the warm process's own start (imports torch), once per `edgesync run`: "
              f"{time.perf_counter() - t0:.2f} s with one client")
        for r in range(args.repeats):
            for entry in data:  # counts and ways interleave within each repeat
                n, warm = entry["clients"], entry["warm"]
                got = start(n, warm, Path(tmp) / f"r{r}-{n}-{warm}")
                entry["repeats"].append(got)
                print(f"repeat {r + 1}: {n} clients {'warm' if warm else 'fresh'}: {got['hello_s']:.2f} s, "
                      f"{got['busy_cpu_s']:.1f} CPU-s, {got['pss_mb']:.0f} MB", flush=True)
    print("\n" + render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/warm_start.py --write-docs` ({args.repeats} repeats, mean ± sd); "
                f"{data_note(BLOCK)}._")
        write_block(ROOT / "docs/benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
