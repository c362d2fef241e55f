"""Top-k selection and the sparse codec: exact vs sampled threshold, and what a message costs.

    .venv/bin/python benchmarks/compression.py [--numel 11000000] [--repeats 5] [--write-docs]

One torch thread (a client process runs with one, and it keeps the comparison fair on a shared
machine). A random normal float32 vector of --numel entries (default 11 M, ResNet-18's size);
at each density, the median time of exact (torch.topk) and sampled-threshold top-k, the density
each achieved against the one requested, their overlap and the speed ratio; then encode + decode
time of the selected entries, add_into (applies a message without a dense copy) and the message
bytes against the dense vector. Under a minute. `--write-docs` puts the table in docs/benchmarks.md's
`compression` block and every timed repeat in docs/data/compression.json.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from edgesync.compression import add_into, decode, encode, k_for, payload_bytes, topk_indices
from edgesync.docs_data import data_note, ran_on, write_block

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "compression"


def _timed(fn, repeats: int) -> tuple[list[float], torch.Tensor]:
    """Each repeat's milliseconds, after one untimed warm-up, and the last result."""
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times, out


def render(data: dict) -> str:
    """The block's table (as docs/data/compression.json keeps the figures): medians of the timed repeats."""
    numel, dense = data["numel"], data["dense_bytes"]
    med = statistics.median
    out = [f"{numel:,} float32 entries, one torch thread, median of {data['repeats']} timed repeats; a dense "
           f"message is {dense:,} bytes:", "",
           "| density | exact top-k ms | sampled ms | speed-up | achieved, exact | achieved, sampled | overlap "
           "| encode + decode ms | add_into ms | bytes (vs dense) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data["rates"]:
        exact, sampled = med(r["exact_ms"]), med(r["sampled_ms"])
        out.append(f"| {r['rate']:.1%} | {exact:.1f} | {sampled:.1f} | {exact / sampled:.1f}× "
                   f"| {r['k_exact'] / numel:.3%} | {r['k_sampled'] / numel:.3%} | {r['overlap'] / r['k']:.1%} "
                   f"| {med(r['codec_ms']):.1f} | {med(r['add_ms']):.2f} "
                   f"| {r['sparse_bytes']:,} ({r['sparse_bytes'] / dense:.2%}) |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=11_000_000)
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per measurement (median)")
    ap.add_argument("--rates", type=float, nargs="+", default=[0.01, 0.001])
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = ap.parse_args()
    torch.set_num_threads(1)
    started = time.perf_counter()
    x = torch.randn(args.numel, generator=torch.Generator().manual_seed(0))  # (n,) float32
    gen = torch.Generator().manual_seed(1)
    data = {"numel": args.numel, "repeats": args.repeats, "dense_bytes": payload_bytes(encode("g", x, None), "g"),
            "rates": []}
    for rate in args.rates:
        k = k_for(args.numel, rate)
        exact_ms, exact = _timed(lambda: topk_indices(x, k, "exact"), args.repeats)
        sampled_ms, sampled = _timed(lambda: topk_indices(x, k, "sampled", generator=gen), args.repeats)
        codec_ms, _ = _timed(lambda: decode(encode("g", x, sampled), "g", args.numel), args.repeats)
        message = encode("g", x, sampled)
        target = torch.zeros(args.numel)
        add_ms, _ = _timed(lambda: add_into(target, message, "g"), args.repeats)
        data["rates"].append({"rate": rate, "k": k, "k_exact": len(exact), "k_sampled": len(sampled),
                              "overlap": int(torch.isin(sampled, exact).sum().item()), "exact_ms": exact_ms,
                              "sampled_ms": sampled_ms, "codec_ms": codec_ms, "add_ms": add_ms,
                              "sparse_bytes": payload_bytes(message, "g")})
    took = time.perf_counter() - started
    print(render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/compression.py --write-docs` on {ran_on(with_torch=True)}, "
                f"{took / 60:.1f} min; `--numel {args.numel} --repeats {args.repeats}`; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
