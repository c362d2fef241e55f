"""Kernel link fidelity: does a NetnsLab link deliver the rate it was configured with?

    sudo .venv/bin/python benchmarks/netns_links.py [--mbytes 4] [--rates 1 10 100]

Needs root. One lab, one host per configured rate (each link shaped to the same rate both ways by
htb); for each, one TCP transfer of --mbytes down (coordinator → host) and one up, timed at the
receiver, and a markdown table of configured vs achieved goodput and the error. At 1 Mbit/s it
sends a quarter of --mbytes (4 MB would take 32 s each way). htb counts whole Ethernet frames, so
TCP payload can get at most 1448/1514 ≈ 95.6% of the rate (MSS 1448 with timestamps, MTU 1500):
the "vs frames" column corrects for that. Also prints whether the kernel has netem.
"""
from __future__ import annotations

import argparse
import time

from edgesync.emulation.netns import (
    DirectionShape, NetnsLab, available, measure_rate, netem_available,
)

PAYLOAD_PER_FRAME = 1448 / 1514  # TCP payload per full frame at MTU 1500 with TCP timestamps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mbytes", type=float, default=4.0, help="MB (10^6 bytes) per transfer")
    ap.add_argument("--rates", type=float, nargs="+", default=[1.0, 10.0, 100.0], help="Mbit/s")
    args = ap.parse_args()
    ok, reason = available()
    if not ok:
        raise SystemExit(f"kernel shaping unavailable: {reason}")
    print(f"netem available: {netem_available()} ({reason})")
    started = time.perf_counter()
    shapes = [DirectionShape(rate_mbps=r) for r in args.rates]
    with NetnsLab(len(shapes), up=shapes, down=shapes) as lab:
        print(lab.describe())
        print()
        print("| configured Mbit/s | direction | MB | achieved Mbit/s | error | vs frames | seconds |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        worst = 0.0
        for i, rate in enumerate(args.rates):
            # 1 MB at 1 Mbit/s (8 s each way) keeps the whole run under two minutes
            mbytes = args.mbytes / 4 if rate <= 1 else args.mbytes
            for direction in ("down", "up"):
                t0 = time.perf_counter()
                achieved = measure_rate(lab, i, direction, int(mbytes * 1e6), timeout_s=60)
                secs = time.perf_counter() - t0
                err = achieved / rate - 1
                worst = max(worst, abs(err))
                print(f"| {rate:g} | {direction} | {mbytes:g} | {achieved:.3f} | {err:+.1%} | "
                      f"{achieved / (rate * PAYLOAD_PER_FRAME) - 1:+.1%} | {secs:.1f} |")
    print()
    print(f"worst error vs configured: {worst:.1%} ({'within' if worst <= 0.10 else 'OUTSIDE'} ±10%); "
          f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
