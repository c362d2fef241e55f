"""Top-k selection and the sparse codec: exact vs sampled threshold, and what a message costs.

    .venv/bin/python benchmarks/compression.py [--numel 11000000] [--repeats 5]

One torch thread (a client process runs with one, and it keeps the comparison fair on a shared
machine). A random normal float32 vector of --numel entries (default 11 M, ResNet-18's size);
at each density, the median time of exact (torch.topk) and sampled-threshold top-k, the density
each achieved against the one requested, their overlap and the speed ratio; then encode + decode
time of the selected entries, add_into (applies a message without a dense copy) and the message
bytes against the dense vector. Under a minute.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from edgesync.compression import add_into, decode, encode, k_for, payload_bytes, topk_indices


def _median_ms(fn, repeats: int) -> tuple[float, torch.Tensor]:
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=11_000_000)
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per measurement (median)")
    ap.add_argument("--rates", type=float, nargs="+", default=[0.01, 0.001])
    args = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(args.numel, generator=torch.Generator().manual_seed(0))  # (n,) float32
    gen = torch.Generator().manual_seed(1)
    dense_bytes = payload_bytes(encode("g", x, None), "g")
    print(f"{args.numel:,} float32 entries, 1 torch thread, median of {args.repeats}\n")
    print("| density | exact ms | sampled ms | speed-up | achieved exact | achieved sampled "
          "| overlap | encode+decode ms | add_into ms | bytes | vs dense |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate in args.rates:
        k = k_for(args.numel, rate)
        exact_ms, exact = _median_ms(lambda: topk_indices(x, k, "exact"), args.repeats)
        sampled_ms, sampled = _median_ms(
            lambda: topk_indices(x, k, "sampled", generator=gen), args.repeats)
        overlap = torch.isin(sampled, exact).sum().item() / k
        codec_ms, _ = _median_ms(lambda: decode(encode("g", x, sampled), "g", args.numel),
                                 args.repeats)
        message = encode("g", x, sampled)
        target = torch.zeros(args.numel)
        add_ms, _ = _median_ms(lambda: add_into(target, message, "g"), args.repeats)
        sparse_bytes = payload_bytes(message, "g")
        print(f"| {rate:.1%} | {exact_ms:.1f} | {sampled_ms:.1f} | {exact_ms / sampled_ms:.1f}× "
              f"| {len(exact) / args.numel:.3%} | {len(sampled) / args.numel:.3%} | {overlap:.1%} "
              f"| {codec_ms:.1f} | {add_ms:.2f} | {sparse_bytes:,} | {sparse_bytes / dense_bytes:.2%} |")
    print(f"\ndense message: {dense_bytes:,} bytes")


if __name__ == "__main__":
    main()
