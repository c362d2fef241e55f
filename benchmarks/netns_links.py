"""Kernel link fidelity: does a NetnsLab link deliver the rate it was configured with?

    sudo .venv/bin/python benchmarks/netns_links.py [--mbytes 4] [--rates 1 10 100] [--repeats 3] [--write-docs]

Needs root. One lab, one host per configured rate (each link shaped to the same rate both ways by
htb); for each, `--repeats` times one TCP transfer of --mbytes down (coordinator → host) and one up,
timed at the receiver, and a markdown table of configured vs achieved goodput (mean ± sd over the
repeats) and the error. At 1 Mbit/s it sends a quarter of --mbytes (4 MB would take 32 s each way).
htb counts whole Ethernet frames, so TCP payload can get at most 1448/1514 ≈ 95.6% of the rate (MSS
1448 with timestamps, MTU 1500): the "vs the frame ceiling" column corrects for that. Also prints
whether the kernel has netem. `--write-docs` writes the table into docs/links.md and the transfers'
figures into docs/data/netns_links.json.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgesync.docs_data import data_note, write_block  # noqa: E402
from edgesync.emulation.netns import (  # noqa: E402
    DirectionShape, NetnsLab, available, measure_rate, netem_available,
)

BLOCK = "netns_links"
PAYLOAD_PER_FRAME = 1448 / 1514  # TCP payload per full frame at MTU 1500 with TCP timestamps
TOLERANCE = 0.10  # the worst error vs configured this benchmark accepts
# The table docs/links.md held before its figures were kept (one transfer per rate and direction).
EARLIER = {
    "source": "hand-written before docs/data/ (git 7fecd80)",
    "why": "one transfer per rate and direction, and no per-run figures kept; replaced by the repeats above",
    "rows": [
        {"rate (Mbit/s)": rate, "direction": direction, "achieved goodput (Mbit/s)": goodput,
         "vs configured": configured, "vs the frame ceiling (1448/1514)": ceiling}
        for rate, direction, goodput, configured, ceiling in (
            ("1", "down", "0.957", "−4.3%", "+0.0%"), ("1", "up", "0.957", "−4.3%", "+0.1%"),
            ("10", "down", "9.564", "−4.4%", "+0.0%"), ("10", "up", "9.563", "−4.4%", "−0.0%"),
            ("100", "down", "96.98", "−3.0%", "+1.4%"), ("100", "up", "95.73", "−4.3%", "+0.1%"))],
}


def spread(values: list[float], fmt: str) -> str:
    """'mean ± sd' over the repeats (sd 0 for one), each formatted with `fmt`, minus signs as −."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{format(statistics.mean(values), fmt)} ± {format(sd, fmt.lstrip('+'))}".replace("-", "−")


def earlier_table(earlier: dict) -> list[str]:
    """The hand-written figures this block replaced, kept beside it with the reason."""
    columns = list(earlier["rows"][0])
    return ["", f"Earlier, {earlier['source']}: {earlier['why']}.", "",
            "| " + " | ".join(columns) + " |", "|---|---|" + "---:|" * (len(columns) - 2),
            *("| " + " | ".join(row[c] for c in columns) + " |" for row in earlier["rows"])]


def render(data: dict) -> str:
    """The block's table from the transfers' goodputs (as docs/data/netns_links.json keeps them)."""
    lines = ["| rate (Mbit/s) | direction | MB | achieved goodput (Mbit/s) | vs configured "
             "| vs the frame ceiling (1448/1514) |", "|---|---|---:|---:|---:|---:|"]
    errors = []
    for t in data["transfers"]:
        rate, goodput = t["rate_mbps"], t["goodput_mbps"]
        error = [100 * (g / rate - 1) for g in goodput]
        vs_frames = [100 * (g / (rate * PAYLOAD_PER_FRAME) - 1) for g in goodput]
        errors += error
        lines.append(f"| {rate:g} | {t['direction']} | {t['mbytes']:g} | {spread(goodput, '.3f')} | "
                     f"{spread(error, '+.1f')}% | {spread(vs_frames, '+.1f')}% |")
    worst = max(errors, key=abs)
    lines += ["", f"Mean ± sd over {data['repeats']} transfers per rate and direction; the kernel "
              f"{'has' if data['netem'] else 'has no'} netem. Worst single transfer vs configured: "
              f"{format(worst, '+.1f').replace('-', '−')}% ({'within' if abs(worst) <= 100 * TOLERANCE else 'OUTSIDE'} "
              f"±{100 * TOLERANCE:g}%)."]
    if data.get("earlier"):
        lines += earlier_table(data["earlier"])
    return "\n".join(lines)


def measure(lab: NetnsLab, rates: list[float], mbytes: float, repeats: int) -> list[dict]:
    """Each rate's and direction's goodputs, one per repeat: host i is shaped to rates[i]."""
    transfers = []
    for i, rate in enumerate(rates):
        # 1 MB at 1 Mbit/s (8 s each way) keeps the whole run short
        size = mbytes / 4 if rate <= 1 else mbytes
        rows = {d: {"rate_mbps": rate, "direction": d, "mbytes": size, "goodput_mbps": []} for d in ("down", "up")}
        for repeat in range(repeats):
            for direction in ("down", "up"):
                t0 = time.perf_counter()
                achieved = measure_rate(lab, i, direction, int(size * 1e6), timeout_s=60)
                rows[direction]["goodput_mbps"].append(achieved)
                print(f"{rate:g} Mbit/s {direction}, repeat {repeat + 1}/{repeats}: {achieved:.3f} Mbit/s "
                      f"({time.perf_counter() - t0:.1f} s)", flush=True)
        transfers += rows.values()
    return transfers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mbytes", type=float, default=4.0, help="MB (10^6 bytes) per transfer")
    ap.add_argument("--rates", type=float, nargs="+", default=[1.0, 10.0, 100.0], help="Mbit/s")
    ap.add_argument("--repeats", type=int, default=3, help="transfers per rate and direction")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    ok, reason = available()
    if not ok:
        raise SystemExit(f"kernel shaping unavailable: {reason}")
    netem = netem_available()
    print(f"netem available: {netem} ({reason})")
    started = time.perf_counter()
    shapes = [DirectionShape(rate_mbps=r) for r in args.rates]
    with NetnsLab(len(shapes), up=shapes, down=shapes) as lab:
        print(lab.describe() + "\n")
        transfers = measure(lab, args.rates, args.mbytes, args.repeats)
    data = {"mbytes": args.mbytes, "repeats": args.repeats, "netem": netem, "transfers": transfers, "earlier": EARLIER}
    print("\n" + render(data) + f"\n\ntotal {time.perf_counter() - started:.0f} s")
    if args.write_docs:
        rates = " ".join(f"{r:g}" for r in args.rates)
        note = (f"_Written by `benchmarks/netns_links.py --mbytes {args.mbytes:g} --rates {rates} --repeats "
                f"{args.repeats} --write-docs` on {platform.node()} ({platform.machine()}, {platform.release()}), "
                f"{time.strftime('%Y-%m-%d')}, {time.perf_counter() - started:.0f} s; {data_note(BLOCK)}._")
        write_block(ROOT / "docs" / "links.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
