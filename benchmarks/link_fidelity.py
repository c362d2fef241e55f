"""Link emulation fidelity in the live transport: configured vs achieved rate and latency.

    .venv/bin/python benchmarks/link_fidelity.py [--mb 4] [--rates 1,10,100] [--latency-ms 50]

For each rate, a coordinator socket and a client socket on 127.0.0.1 exchange one message of
`--mb` megabytes each way on an otherwise idle emulated link: the coordinator's pacer shapes the
downlink, the client's the uplink (transport/pacing.py). Achieved rate = bits / (arrival − send),
with the configured latency subtracted; then a small message measures the latency itself. The
target (issue 6) is ±5% from 1 to 100 Mbit/s for 4 MB transfers. At 1 Mbit/s one 4 MB transfer
takes 32 s each way.
"""
from __future__ import annotations

import argparse
import time

import torch
import zmq

from edgesync.emulation.links import Link
from edgesync.transport.protocol import Message
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket


def pair(link: Link) -> tuple[CoordinatorSocket, ClientSocket, bytes]:
    ctx = zmq.Context.instance()
    coord = CoordinatorSocket("tcp://127.0.0.1:*", ctx)
    client = ClientSocket(coord.address, ctx)
    client.send(Message("HELLO"))
    peer, _ = coord.recv(5)
    coord.set_link(peer, link)
    client.set_link(link)
    return coord, client, peer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--rates", default="1,10,100", help="Mbit/s, comma-separated")
    ap.add_argument("--latency-ms", type=float, default=50.0)
    args = ap.parse_args()
    nbytes = int(args.mb * 1e6)
    print(f"\nlink fidelity: {args.mb:g} MB one way on an idle link, latency {args.latency_ms:g} ms\n")
    print("| rate (Mbit/s) | direction | expected (s) | measured (s) | achieved rate (Mbit/s) | error |")
    print("|---|---|---|---|---|---|")
    for rate in (float(r) for r in args.rates.split(",")):
        link = Link(rate_mbps=rate, latency_s=args.latency_ms / 1e3)
        coord, client, peer = pair(link)
        try:
            for direction, send, recv, pump in (("down", lambda m: coord.send(peer, m), client.recv, coord.recv),
                                                ("up", client.send, coord.recv, client.recv)):
                size = Message("X", {}, {"data": torch.zeros(nbytes, dtype=torch.uint8)}).wire_size()
                t0 = time.perf_counter()
                send(Message("TRAIN" if direction == "down" else "UPDATE", {},
                             {"data": torch.zeros(nbytes, dtype=torch.uint8)}))
                while recv(0.0005) is None:
                    pump(0.0005)  # the sender releases paced messages while it waits, as the runtimes do
                took = time.perf_counter() - t0
                achieved = size * 8 / (took - link.latency_s) / 1e6
                print(f"| {rate:g} | {direction} | {link.transfer_s(size):.3f} | {took:.3f} | {achieved:.2f} | "
                      f"{100 * (achieved / rate - 1):+.1f}% |", flush=True)
        finally:
            client.close()
            coord.close()
    coord, client, peer = pair(Link(latency_s=args.latency_ms / 1e3))
    rtts = []
    for _ in range(5):
        t0 = time.perf_counter()
        client.send(Message("QUERY", {"k": 0}))
        while coord.recv(0.0005) is None:
            client.recv(0.0005)
        coord.send(peer, Message("REPLY", {"ready": True}))
        while client.recv(0.0005) is None:
            coord.recv(0.0005)
        rtts.append(time.perf_counter() - t0)
    client.close()
    coord.close()
    rtt = sorted(rtts)[len(rtts) // 2]
    print(f"\nsmall-message round trip: {rtt * 1e3:.1f} ms (configured 2 × {args.latency_ms:g} ms; "
          f"error {100 * (rtt / (2 * args.latency_ms / 1e3) - 1):+.1f}%)")


if __name__ == "__main__":
    main()
