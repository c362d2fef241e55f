"""One instruction's round trip to a simulator worker: a Ray actor call against the ZeroMQ channel.

    .venv/bin/python benchmarks/sim_round_trip.py [--repeats 3] [--n 300] [--write-docs]

What the Ray backend (runtime/sim/ray_backend.py) pays per instruction besides the training step: the small
CNN's parameters (184,586 float32, 0.74 MB) to a worker process and a gradient of the same size back,
one at a time. Ray: `actor.run.remote(array)` + `ray.get` (the array goes through the object store);
channel: runtime/sim/channel.py's DriverChannel / WorkerChannel over ipc, in EdgeSync's wire format. The
worker copies what it receives and returns a copy of it, for both. Per repeat, the mean over `--n` round
trips after 10 warm-up ones; printed: the mean over repeats and its 95% t-interval. `--write-docs` puts the
table into docs/simulator.md ("On a Ray cluster", `sim_round_trip:table`) and each repeat's figure into
docs/data/sim_round_trip-table.json.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PARAMS = 184_586
BLOCK = "sim_round_trip:table"
WAYS = ("Ray actor call", "ZeroMQ channel (ipc)")


def channel_worker(address: str) -> None:
    import torch

    from edgesync.runtime.sim.channel import WorkerChannel
    from edgesync.transport.contracts.ray_worker import RayKind
    from edgesync.transport.protocol import Message

    torch.set_num_threads(1)  # as a simulator worker (sim/worker.py)
    channel = WorkerChannel(0, address, None)
    channel.ready()
    while (message := channel.receive()).type != RayKind.SERVE_END:
        channel.send(Message(RayKind.UPDATE, {}, {"grad": message.tensors["params"].clone()}))
    channel.close()


def channel_round_trip(n: int) -> float:
    import torch

    from edgesync.runtime.sim.channel import SIM, DriverChannel, owned
    from edgesync.transport.contracts.ray_worker import RayKind
    from edgesync.transport.protocol import Message

    driver = DriverChannel(1, local=True, host="127.0.0.1")
    proc = mp.get_context("spawn").Process(target=channel_worker, args=(driver.address,))
    proc.start()
    driver.receive(lambda: None)
    theta = torch.randn(PARAMS)
    for i in range(n + 10):
        if i == 10:
            t0 = time.perf_counter()
        theta.add_(1.0)  # a new version each time: sent whole, as ASGD's θ
        driver.send(0, Message(RayKind.TRAIN, {SIM: {}}, {"params": theta}))
        owned(driver.receive(lambda: None)[1].tensors)
    mean = (time.perf_counter() - t0) / n
    driver.send(0, Message(RayKind.SERVE_END))
    proc.join()
    driver.close()
    return mean


def ray_round_trip(n: int) -> float:
    import numpy as np
    import ray

    @ray.remote(num_cpus=1)
    class Worker:
        def run(self, params):
            return np.array(params)

    worker = Worker.remote()
    theta = np.random.rand(PARAMS).astype(np.float32)
    for i in range(n + 10):
        if i == 10:
            t0 = time.perf_counter()
        theta = theta + 1.0
        np.array(ray.get(worker.run.remote(theta)))
    mean = (time.perf_counter() - t0) / n
    ray.kill(worker)
    return mean


def render(data: dict) -> str:
    """The block's table from each way's per-repeat means in ms (as docs/data/sim_round_trip-table.json keeps
    them): the mean over the repeats with its 95% t-interval, and the Ray call's time over the channel's."""
    from edgesync.metrics.seeds import interval

    def cell(values: list[float]) -> str:
        iv = interval(values)
        return f"{iv.mean:.2f}" + (f" [{iv.low:.2f}, {iv.high:.2f}]" if iv.low is not None else "")

    lines = ["| way | round trip (ms), mean [95% interval] | per repeat (ms) |", "|---|---:|---|"]
    for way in WAYS:
        values = data["ms"][way]
        lines.append(f"| {way} | {cell(values)} | {', '.join(f'{v:.2f}' for v in values)} |")
    ray, channel = data["ms"][WAYS[0]], data["ms"][WAYS[1]]
    ratios = [r / c for r, c in zip(ray, channel)]
    lines += ["", f"The Ray actor call takes {cell(ratios)}× the channel's time (per repeat, then over the repeats); "
                  f"{data['params'] * 4 / 1e6:.2f} MB each way, {len(ray)} repeats of {data['n']} round trips."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/simulator.md")
    args = ap.parse_args()
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import torch

    from edgesync.docs_data import data_note, write_block
    from edgesync.reproduce import machine

    torch.set_num_threads(1)  # as the simulator (simulator.py)
    ray.init(include_dashboard=False, log_to_driver=False)
    started = time.perf_counter()
    results: dict[str, list[float]] = {way: [] for way in WAYS}
    for i in range(args.repeats):  # interleaved: the VM's speed drifts
        results[WAYS[0]].append(1000 * ray_round_trip(args.n))
        results[WAYS[1]].append(1000 * channel_round_trip(args.n))
        print(f"repeat {i + 1}/{args.repeats}: " + ", ".join(f"{way} {v[-1]:.2f} ms" for way, v in results.items()),
              flush=True)
    took = time.perf_counter() - started
    ray.shutdown()
    data = {"params": PARAMS, "n": args.n, "ms": results}
    print("\n" + render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/sim_round_trip.py --repeats {args.repeats} --n {args.n} --write-docs` on "
                f"{time.strftime('%Y-%m-%d')} ({machine()}; torch {torch.__version__}, Ray {ray.__version__}; "
                f"{took / 60:.1f} min); {data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "simulator.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
