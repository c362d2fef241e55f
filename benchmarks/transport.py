"""Transport: our sockets and protocol vs bare pyzmq DEALER/ROUTER, side by side in one run.

    .venv/bin/python benchmarks/transport.py [--sizes 0.4,4,44] [--seconds 3] [--clients 1,16]

Dense model exchange: a client sends an UPDATE carrying a float32 tensor of SIZE MB and the
coordinator answers with a TRAIN of the same size — the round trip of one ASGD update. "ours" goes
through `CoordinatorSocket`/`ClientSocket` (header JSON, per-tensor frames, validation, byte
counters, zero-copy above 64 kB); "bare" sends the same two frames with `send_multipart` and does
nothing else. The client runs in its own process over tcp://127.0.0.1. Each figure is measured
twice, in child processes started with and without the allocator settings the runtime exports
(`constants.MALLOC_ENV`: glibc maps fresh memory for every message above 32 MB otherwise), as the
median of several short runs of each side in alternating order.

`--pin` keeps the coordinator side on one core and the client on another (with two or more cores);
by default the scheduler places them, as it would a real run.

Small messages: ESync's State Server queries (QUERY → REPLY, a few bytes of JSON each) from 1 and
16 clients, each keeping one query outstanding; queries answered per second, ours vs bare.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import zmq

from edgesync.constants import MALLOC_ENV
from edgesync.transport.protocol import Message
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket


_PIN_ENV = "EDGESYNC_TRANSPORT_BENCH_PIN"  # set for the children: pin to separate cores


def _pin(core: int) -> None:
    """Keep this process (and the threads it starts) on one core, if asked and there are two."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if os.environ.get(_PIN_ENV) == "1" and len(cores) >= 2:
        os.sched_setaffinity(0, {cores[core]})


def _numel(size_mb: float) -> int:
    return int(size_mb * 1e6 / 4)


# -- the client process -----------------------------------------------------------------------------
def client_main(kind: str, mode: str, address: str, size_mb: float, seconds: float, clients: int) -> None:
    _pin(1)
    torch.set_num_threads(1)
    if mode == "dense":
        tensor = torch.ones(_numel(size_mb))
        count, t_end = 0, None
        if kind == "ours":
            sock = ClientSocket(address)
            msg = Message("UPDATE", {"steps": 1, "samples": 32}, {"grad": tensor})
            sock.send(msg)  # warm-up round trip
            sock.recv(30)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                sock.send(msg)
                assert sock.recv(30) is not None
                count += 1
        else:
            sock = zmq.Context.instance().socket(zmq.DEALER)
            sock.connect(address)
            header = json.dumps({"type": "UPDATE", "n": tensor.numel()}).encode()
            payload = tensor.numpy()
            sock.send_multipart([header, payload], copy=False)
            sock.recv_multipart(copy=False)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                sock.send_multipart([header, payload], copy=False)
                sock.recv_multipart(copy=False)
                count += 1
        t_end = time.perf_counter() - t0
    else:  # queries from `clients` sockets, one outstanding each
        if kind == "ours":
            socks = [ClientSocket(address) for _ in range(clients)]
            send = lambda s: s.send(Message("QUERY", {"kind": "state", "step": 1}))
            recv = lambda s: s.recv(0)
            raw = [s.sock for s in socks]
        else:
            raw = socks = [zmq.Context.instance().socket(zmq.DEALER) for _ in range(clients)]
            for s in socks:
                s.connect(address)
            header = json.dumps({"type": "QUERY", "meta": {"kind": "state", "step": 1}}).encode()
            send = lambda s: s.send(header)
            recv = lambda s: s.recv(zmq.NOBLOCK)
        poller = zmq.Poller()
        for r in raw:
            poller.register(r, zmq.POLLIN)
        by_raw = dict(zip(raw, socks))
        for s in socks:
            send(s)
        count, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for r, _ in poller.poll(1000):
                s = by_raw[r]
                recv(s)
                count += 1
                send(s)
        t_end = time.perf_counter() - t0
    print(json.dumps({"count": count, "seconds": t_end}), flush=True)


# -- the coordinator side (this process) ------------------------------------------------------------
def serve(kind: str, mode: str, size_mb: float, seconds: float, clients: int, env: dict) -> float:
    """Start the client process, answer it until it is done; returns round trips (or queries) per second."""
    if kind == "ours":
        sock = CoordinatorSocket("tcp://127.0.0.1:*")
        address = sock.address
        reply = (Message("TRAIN", {"version": 1}, {"params": torch.ones(_numel(size_mb))}) if mode == "dense"
                 else Message("REPLY", {"ready": False}))
    else:
        sock = zmq.Context.instance().socket(zmq.ROUTER)
        sock.bind("tcp://127.0.0.1:*")
        address = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        payload = np.ones(_numel(size_mb), dtype=np.float32)
        header = json.dumps({"type": "TRAIN" if mode == "dense" else "REPLY"}).encode()
    child = subprocess.Popen([sys.executable, __file__, "--client", kind, mode, address, str(size_mb), str(seconds),
                              str(clients)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        while child.poll() is None:
            if kind == "ours":
                item = sock.recv(0.2)
                if item is not None:
                    sock.send(item[0], reply)
            elif sock.poll(200):
                frames = sock.recv_multipart(copy=False)
                out = [frames[0], header] + ([payload] if mode == "dense" else [])
                sock.send_multipart(out, copy=False)
        result = json.loads(child.stdout.read().strip().splitlines()[-1])
    finally:
        child.kill()
        sock.close() if kind == "ours" else sock.close(linger=0)
    return result["count"] / result["seconds"]


def run_child(args: argparse.Namespace, malloc: bool) -> dict:
    """Every figure, measured in a child process whose allocator is (or is not) tuned."""
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_ENV}
    if malloc:
        env.update(MALLOC_ENV)
    env[_PIN_ENV] = "1" if args.pin else "0"
    cmd = [sys.executable, __file__, "--measure", "--sizes", args.sizes, "--seconds", str(args.seconds),
           "--clients", args.clients, "--rounds", str(args.rounds)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def side_by_side(mode: str, size_mb: float, clients: int, args: argparse.Namespace) -> dict:
    """`args.rounds` pairs of runs, one of each side back to back, in alternating order (ours, bare,
    bare, ours, …). Returns each side's median rate and the median of the pairs' ratios: a pair shares
    the machine's state of the moment (CPU clocks, the host's other guests), which drifts between
    pairs by more than the difference being measured."""
    rates: dict = {"ours": [], "bare": []}
    for r in range(args.rounds):
        for kind in (("ours", "bare") if r % 2 == 0 else ("bare", "ours")):
            rates[kind].append(serve(kind, mode, size_mb, args.seconds / args.rounds, clients, dict(os.environ)))
    ratios = [o / b for o, b in zip(rates["ours"], rates["bare"])]
    return {"ours": statistics.median(rates["ours"]), "bare": statistics.median(rates["bare"]),
            "ratio": statistics.median(ratios)}


def measure(args: argparse.Namespace) -> dict:
    out: dict = {"dense": {}, "queries": {}}
    for size in [float(s) for s in args.sizes.split(",")]:
        out["dense"][str(size)] = side_by_side("dense", size, 1, args)
    for n in [int(c) for c in args.clients.split(",")]:
        out["queries"][str(n)] = side_by_side("queries", 0, n, args)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.4,4,44", help="payload sizes in MB")
    ap.add_argument("--seconds", type=float, default=4.0, help="per figure, split over its rounds")
    ap.add_argument("--rounds", type=int, default=8, help="pairs of runs (ours, bare) per figure, in alternating order")
    ap.add_argument("--clients", default="1,16", help="query clients")
    ap.add_argument("--pin", action="store_true", help="coordinator side on one core, client on another")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--client", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        kind, mode, address, size, seconds, clients = args.client
        return client_main(kind, mode, address, float(size), float(seconds), int(clients))
    if args.measure:
        _pin(0)
        print(json.dumps(measure(args)))
        return
    results = {m: run_child(args, malloc=m) for m in (True, False)}
    tuned, plain = results[True], results[False]
    print("\nDense model exchange (UPDATE up, TRAIN down, one client over tcp://127.0.0.1)\n")
    print("| payload | ours ms/round trip | bare ms/round trip | ours ÷ bare throughput | "
          "ours without MALLOC_ENV ms | bare without MALLOC_ENV ms |")
    print("|---|---|---|---|---|---|")
    for size, r in tuned["dense"].items():
        p = plain["dense"][size]
        print(f"| {float(size):g} MB | {1000 / r['ours']:.2f} | {1000 / r['bare']:.2f} | {r['ratio']:.2f} | "
              f"{1000 / p['ours']:.2f} | {1000 / p['bare']:.2f} |")
    print("\nState queries (QUERY → REPLY), one outstanding per client, runtime allocator settings\n")
    print("| clients | ours queries/s | bare queries/s | ours ÷ bare |\n|---|---|---|---|")
    for n, r in tuned["queries"].items():
        print(f"| {n} | {r['ours']:,.0f} | {r['bare']:,.0f} | {r['ratio']:.2f} |")


if __name__ == "__main__":
    main()
