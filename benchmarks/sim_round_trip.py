"""One instruction's round trip to a simulator worker: a Ray actor call against the ZeroMQ channel.

    .venv/bin/python benchmarks/sim_round_trip.py [--repeats 3] [--n 300]

What the Ray backend (runtime/sim/ray_backend.py) pays per instruction besides the training step: the small
CNN's parameters (184,586 float32, 0.74 MB) to a worker process and a gradient of the same size back,
one at a time. Ray: `actor.run.remote(array)` + `ray.get` (the array goes through the object store);
channel: runtime/sim/channel.py's DriverChannel / WorkerChannel over ipc, in EdgeSync's wire format. The
worker copies what it receives and returns a copy of it, for both. Per repeat, the mean over `--n` round
trips after 10 warm-up ones; printed: the mean over repeats and its 95% t-interval.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    import ray

    from edgesync.metrics.seeds import interval

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import torch

    torch.set_num_threads(1)  # as the simulator (simulator.py)
    ray.init(include_dashboard=False, log_to_driver=False)
    results = {"Ray actor call": [], "ZeroMQ channel (ipc)": []}
    for _ in range(args.repeats):  # interleaved: the VM's speed drifts
        results["Ray actor call"].append(ray_round_trip(args.n))
        results["ZeroMQ channel (ipc)"].append(channel_round_trip(args.n))
    print(f"round trip, {PARAMS * 4 / 1e6:.2f} MB each way, {args.repeats} repeats of {args.n}:")
    for name, values in results.items():
        print(f"  {name}: per repeat " + ", ".join(f"{1000 * v:.2f}" for v in values) + " ms")
        iv = interval([1000 * v for v in values])
        spread = f" [{iv.low:.2f}, {iv.high:.2f}]" if iv.low is not None else ""
        print(f"  {name:22} {iv.mean:.2f} ms{spread}")


if __name__ == "__main__":
    main()
