"""Transport: our sockets and protocol vs bare pyzmq DEALER/ROUTER, side by side in one run.

    .venv/bin/python benchmarks/transport.py [--sizes 0.4,4,44] [--seconds 6] [--clients 1,16] [--runs 3]
        [--write-docs]

Dense model exchange: a client sends an UPDATE carrying a float32 tensor of SIZE MB and the
coordinator answers with a TRAIN of the same size — the round trip of one ASGD update. "ours" goes
through `CoordinatorSocket`/`ClientSocket` (header JSON, per-tensor frames, validation, byte
counters, zero-copy above 64 kB); "bare" sends the same two frames with `send_multipart` and does
nothing else. The client runs in its own process over tcp://127.0.0.1.

Side by side means interleaved: one coordinator process holds both a CoordinatorSocket and a bare
ROUTER, one client process both a ClientSocket and a bare DEALER, and they take turns in bursts of
about 50 ms (ours, bare, bare, ours, …). Each pair of neighbouring bursts gives one ratio; the figure
is the median over the pairs. On a shared 2-core VM the machine's speed drifts by 20–50% over
seconds, which swamps separate runs; within 100 ms it hardly moves. The client tells the coordinator
to switch sockets with a message sent outside the bursts' clocks.

Each figure is measured twice, in child processes started with and without the allocator settings
the runtime exports (`constants.MALLOC_ENV`: glibc maps fresh memory for every message above 32 MB
otherwise). The scheduler places the processes, as it would in a real run. (Pinning each process to
a core of its own was tried and dropped: each process's three threads — Python, ZeroMQ's I/O thread,
pyzmq's zero-copy collector — then share one core, and the same code measured 0.58–1.00 of bare from
run to run.)

Small messages: ESync's State Server queries (QUERY → REPLY, a few bytes of JSON each) from 1 and
16 clients, each keeping one query outstanding; queries answered per second, ours vs bare.

`--runs N` measures everything N times in a row (each run both children); a figure's verdict is the
median of its runs' ratios, against the target of 0.85 of bare. `--write-docs` puts the tables in
docs/benchmarks.md's `transport` block and every run's figures in docs/data/transport.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import zmq

from edgesync.constants import MALLOC_ENV
from edgesync.docs_data import data_note, ran_on, write_block
from edgesync.transport.protocol import Message
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket

_BURST_S = 0.05  # one side's turn: short enough that the machine's speed does not drift within a pair
_END = b"end"  # client → coordinator, after the last burst; b"ours" or b"bare" names the next turn's side
_WORDS = (b"ours", b"bare", _END)
_TIMEOUT_S = 30.0
ROOT = Path(__file__).resolve().parents[1]
BLOCK = "transport"
TARGET = 0.85  # ours ÷ bare throughput, median of the runs


def _numel(size_mb: float) -> int:
    return int(size_mb * 1e6 / 4)


# -- the client process: both kinds of socket, taking turns ----------------------------------------
class _OursClient:
    def __init__(self, address: str, n: int, size_mb: float):
        self.socks = [ClientSocket(address) for _ in range(n)]
        self.update = Message("UPDATE", {"steps": 1, "samples": 32}, {"grad": torch.ones(_numel(size_mb))})
        self.query = Message("QUERY", {"kind": "state", "step": 1})
        self.raw = [s.sock for s in self.socks]

    def round_trip(self) -> None:
        self.socks[0].send(self.update)
        assert self.socks[0].recv(_TIMEOUT_S) is not None

    def ask(self, i: int) -> None:
        self.socks[i].send(self.query)

    def answer(self, i: int) -> None:
        self.socks[i].recv(0)

    def tell(self, word: bytes) -> None:
        self.socks[0].send(Message("QUERY", {"bench": word.decode()}))


class _BareClient:
    def __init__(self, address: str, n: int, size_mb: float):
        self.raw = [zmq.Context.instance().socket(zmq.DEALER) for _ in range(n)]
        for s in self.raw:
            s.connect(address)
        self.frames = [json.dumps({"type": "UPDATE", "n": _numel(size_mb)}).encode(),
                       np.ones(_numel(size_mb), dtype=np.float32)]
        self.query = json.dumps({"type": "QUERY", "meta": {"kind": "state", "step": 1}}).encode()

    def round_trip(self) -> None:
        self.raw[0].send_multipart(self.frames, copy=False)
        self.raw[0].recv_multipart(copy=False)

    def ask(self, i: int) -> None:
        self.raw[i].send(self.query)

    def answer(self, i: int) -> None:
        self.raw[i].recv(zmq.NOBLOCK)

    def tell(self, word: bytes) -> None:
        self.raw[0].send(word)


def _dense_burst(side, count: int) -> float:
    t0 = time.perf_counter()
    for _ in range(count):
        side.round_trip()
    return time.perf_counter() - t0


def _query_burst(side, count: int) -> float:
    """`count` queries answered, one outstanding per socket; none is left outstanding at the end."""
    poller = zmq.Poller()
    for r in side.raw:
        poller.register(r, zmq.POLLIN)
    index = {r: i for i, r in enumerate(side.raw)}
    t0 = time.perf_counter()
    asked = min(count, len(side.raw))
    for i in range(asked):
        side.ask(i)
    answered = 0
    while answered < count:
        ready = poller.poll(_TIMEOUT_S * 1000)
        assert ready, "no answer from the coordinator"
        for r, _ in ready:
            i = index[r]
            side.answer(i)
            answered += 1
            if asked < count:
                side.ask(i)
                asked += 1
    return time.perf_counter() - t0


class _Turns:
    """Bursts on either side; before a burst on the other side than the last, the last side's socket
    carries the word naming the next (the coordinator serves one socket at a time)."""

    def __init__(self, sides: dict, burst):
        self.sides, self.burst, self.current = sides, burst, "ours"  # the coordinator starts on ours

    def run(self, kind: str, count: int) -> float:
        if kind != self.current:
            self.sides[self.current].tell(kind.encode())
            self.current = kind
        return self.burst(self.sides[kind], count)

    def end(self) -> None:
        self.sides[self.current].tell(_END)


def client_main(mode: str, ours_address: str, bare_address: str, size_mb: float, seconds: float,
                clients: int) -> None:
    torch.set_num_threads(1)
    sides = {"ours": _OursClient(ours_address, clients, size_mb), "bare": _BareClient(bare_address, clients, size_mb)}
    turns = _Turns(sides, _dense_burst if mode == "dense" else _query_burst)
    # Warm up both, then size a burst to take about _BURST_S on our side.
    for kind in ("ours", "bare"):
        turns.run(kind, 3)
    count = 1
    while True:
        took = turns.run("ours", count)
        turns.run("bare", count)
        if took >= _BURST_S / 4 or count >= 1 << 20:
            count = max(1, round(count * _BURST_S / took))
            break
        count *= 4
    times: dict = {"ours": [], "bare": []}
    for p in range(max(3, round(seconds / (2 * _BURST_S)))):
        for kind in (("ours", "bare") if p % 2 == 0 else ("bare", "ours")):
            times[kind].append(turns.run(kind, count))
    turns.end()
    print(json.dumps({"count": count, **times}), flush=True)


# -- the coordinator side (this process) ------------------------------------------------------------
class _OursServer:
    def __init__(self, mode: str, size_mb: float):
        self.sock = CoordinatorSocket("tcp://127.0.0.1:*")
        self.address = self.sock.address
        self.reply = (Message("TRAIN", {"version": 1}, {"params": torch.ones(_numel(size_mb))}) if mode == "dense"
                      else Message("REPLY", {"ready": False}))

    def serve_one(self) -> bytes | None:
        """Answer one message; returns the control word instead if it was one, None on timeout."""
        item = self.sock.recv(1.0)
        if item is None:
            return None
        peer, msg = item
        word = msg.meta.get("bench") if isinstance(msg, Message) else None
        if word is not None:
            return word.encode()
        self.sock.send(peer, self.reply)
        return b""

    def close(self) -> None:
        self.sock.close()


class _BareServer:
    def __init__(self, mode: str, size_mb: float):
        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.bind("tcp://127.0.0.1:*")
        self.address = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        header = json.dumps({"type": "TRAIN" if mode == "dense" else "REPLY"}).encode()
        self.reply = [header] + ([np.ones(_numel(size_mb), dtype=np.float32)] if mode == "dense" else [])

    def serve_one(self) -> bytes | None:
        if not self.sock.poll(1000):
            return None
        frames = self.sock.recv_multipart(copy=False)
        if len(frames) == 2 and frames[1].bytes in _WORDS:
            return frames[1].bytes
        self.sock.send_multipart([frames[0], *self.reply], copy=False)
        return b""

    def close(self) -> None:
        self.sock.close(linger=0)


def serve(mode: str, size_mb: float, seconds: float, clients: int) -> dict:
    """Start the client process and answer it, on whichever socket's turn it is, until it is done;
    returns each side's median rate (round trips or queries per second) and the median pair ratio."""
    sides = {"ours": _OursServer(mode, size_mb), "bare": _BareServer(mode, size_mb)}
    child = subprocess.Popen([sys.executable, __file__, "--client", mode, sides["ours"].address,
                              sides["bare"].address, str(size_mb), str(seconds), str(clients)],
                             stdout=subprocess.PIPE, text=True)
    try:
        turn = "ours"
        while True:
            word = sides[turn].serve_one()
            if word in (b"ours", b"bare"):
                turn = word.decode()
            elif word == _END:
                break
            elif word is None and child.poll() is not None:
                raise RuntimeError(f"the client process ended ({child.returncode}) before it was done")
        result = json.loads(child.stdout.read().strip().splitlines()[-1])
        child.wait(_TIMEOUT_S)
    finally:
        child.kill()
        for side in sides.values():
            side.close()
    count, ours, bare = result["count"], result["ours"], result["bare"]
    return {"ours": count / statistics.median(ours), "bare": count / statistics.median(bare),
            "ratio": statistics.median(b / o for o, b in zip(ours, bare)), "pairs": len(ours)}


def run_child(args: argparse.Namespace, malloc: bool) -> dict:
    """Every figure, measured in a child process whose allocator is (or is not) tuned."""
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_ENV}
    if malloc:
        env.update(MALLOC_ENV)
    cmd = [sys.executable, __file__, "--measure", "--sizes", args.sizes, "--seconds", str(args.seconds),
           "--clients", args.clients]
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout  # progress on stderr
    return json.loads(out.strip().splitlines()[-1])


def measure(args: argparse.Namespace) -> dict:
    out: dict = {"dense": {}, "queries": {}}
    for size in [float(s) for s in args.sizes.split(",")]:
        out["dense"][str(size)] = serve("dense", size, args.seconds, 1)
        print(f"  dense {size:g} MB: ours ÷ bare {out['dense'][str(size)]['ratio']:.2f}", file=sys.stderr, flush=True)
    for n in [int(c) for c in args.clients.split(",")]:
        out["queries"][str(n)] = serve("queries", 0, args.seconds, n)
        print(f"  queries, {n} clients: ours ÷ bare {out['queries'][str(n)]['ratio']:.2f}", file=sys.stderr,
              flush=True)
    return out


def render(data: dict) -> str:
    """The block's tables from every run's figures (as docs/data/transport.json keeps them): per payload and
    per query count, the median over the runs of each side's time or rate, each run's ratio and their median;
    then the verdict against TARGET."""
    runs = data["runs"]

    def median(xs) -> float:
        return statistics.median(list(xs))

    def ratios(allocator: str, kind: str, key: str) -> list[float]:
        return [run[allocator][kind][key]["ratio"] for run in runs]

    def ms(allocator: str, size: str, side: str) -> str:  # per round trip
        return f"{median(1000 / run[allocator]['dense'][size][side] for run in runs):.2f}"

    def rate(n: str, side: str) -> str:  # queries per second
        return f"{median(run['tuned']['queries'][n][side] for run in runs):,.0f}"

    def each(xs: list[float]) -> str:
        return ", ".join(f"{x:.2f}" for x in xs)

    out = ["Dense model exchange (UPDATE up, TRAIN down, one client); a time is the median over the runs of each "
           "run's median burst:", "",
           "| payload | ours ms / round trip | bare ms / round trip | ours ÷ bare throughput, each run | median "
           "| ours ms, no MALLOC_ENV | bare ms, no MALLOC_ENV | ours ÷ bare, no MALLOC_ENV, median |",
           "|---|---:|---:|---|---:|---:|---:|---:|"]
    medians = {}
    for size in runs[0]["tuned"]["dense"]:
        tuned, plain = ratios("tuned", "dense", size), ratios("plain", "dense", size)
        medians[f"{float(size):g} MB"] = median(tuned)
        out.append(f"| {float(size):g} MB | {ms('tuned', size, 'ours')} | {ms('tuned', size, 'bare')} | {each(tuned)} "
                   f"| **{median(tuned):.2f}** | {ms('plain', size, 'ours')} | {ms('plain', size, 'bare')} "
                   f"| {median(plain):.2f} |")
    out += ["", "State queries (QUERY → REPLY, a few bytes of JSON), one outstanding per client, with MALLOC_ENV:", "",
            "| clients | ours queries/s | bare queries/s | ours ÷ bare, each run | median |",
            "|---:|---:|---:|---|---:|"]
    for n in runs[0]["tuned"]["queries"]:
        tuned = ratios("tuned", "queries", n)
        medians[f"queries from {n} client{'s' if int(n) > 1 else ''}"] = median(tuned)
        out.append(f"| {n} | {rate(n, 'ours')} | {rate(n, 'bare')} | {each(tuned)} | **{median(tuned):.2f}** |")
    lowest = min(medians, key=medians.get)
    missed = [name for name, ratio in medians.items() if ratio < TARGET]
    verdict = "**holds** for every figure" if not missed else f"**does not hold** for {', '.join(missed)}"
    out += ["", f"Target ≥ {TARGET:.2f} of bare (the median of {len(runs)} run{'s' if len(runs) > 1 else ''}, with "
            f"MALLOC_ENV): {verdict}; the lowest is {lowest}, at {medians[lowest]:.2f}."]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.4,4,44", help="payload sizes in MB")
    ap.add_argument("--seconds", type=float, default=6.0,
                    help="timed seconds per figure, both sides together, in bursts of ~50 ms each")
    ap.add_argument("--clients", default="1,16", help="query clients")
    ap.add_argument("--runs", type=int, default=1, help="measure everything this many times in a row")
    ap.add_argument("--write-docs", action="store_true", help="write the tables into docs/benchmarks.md")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--client", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        mode, ours, bare, size, seconds, clients = args.client
        return client_main(mode, ours, bare, float(size), float(seconds), int(clients))
    if args.measure:
        print(json.dumps(measure(args)))
        return
    started, runs = time.perf_counter(), []
    for r in range(args.runs):
        run = {}
        for malloc, name in ((True, "tuned"), (False, "plain")):
            print(f"run {r + 1} of {args.runs}: measuring {'with' if malloc else 'without'} MALLOC_ENV …",
                  file=sys.stderr, flush=True)
            run[name] = run_child(args, malloc)
        runs.append(run)
    took = time.perf_counter() - started
    data = {"sizes_mb": [float(s) for s in args.sizes.split(",")], "clients": [int(c) for c in args.clients.split(",")],
            "seconds": args.seconds, "runs": runs}
    print("\n" + render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/transport.py --runs {args.runs} --write-docs` on "
                f"{ran_on(with_torch=True)}, {took / 60:.1f} min; `--sizes {args.sizes} --seconds {args.seconds:g} "
                f"--clients {args.clients}`, tcp://127.0.0.1; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
