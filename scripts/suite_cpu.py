"""Where the suite's CPU goes, test by test: run a command (the suite) while polling /proc, and charge every
process's CPU time to the test its nearest pytest ancestor was running then (tests/conftest.py names it in a
file while $EDGESYNC_TEST_CPU is set), else to the kind of process it is.

    .venv/bin/python scripts/suite_cpu.py [--out FILE] [--write-docs] -- bash scripts/test.sh
    .venv/bin/python scripts/suite_cpu.py --from FILE --write-docs     # the block from a run --out kept

The suite on 2 cores is CPU-bound (docs/testing.md): its time is its CPU time over the cores, so what shortens
it is less CPU, and this says where the CPU is. A process's CPU is read from /proc/PID/stat (user + system)
every --interval seconds; a process that lives shorter than that between two polls is missed (a fraction of a
second of CPU each). The poller itself takes CPU beside the suite, so the suite's wall time under it is longer
than without it; the CPU-seconds it charges are the suite's own. Prints the tests, the modules and the process
kinds that took the most CPU-seconds; --out writes all of them as JSON; --write-docs puts the modules and process
kinds into docs/testing.md (`suite_cpu`) and the figures into docs/data/suite_cpu.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICK = os.sysconf("SC_CLK_TCK")
BLOCK = "suite_cpu"
SHOWN = {"modules": 25, "kinds": 15}  # rows of each table the block shows; the data file keeps every one


def read_stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds so far) of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid ... utime(12) stime(13)
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK


def kind(pid: str) -> str:
    """A short name of what a process is: its command, without paths and arguments that vary."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return "?"
    names = [os.path.basename(w) for w in words[:4]]
    if names[0].startswith("python") and len(names) > 1:
        names = names[1:]
        if names[0] == "-m" and len(names) > 1:
            names = names[1:]
    return " ".join(names[:2])[:60]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--from", dest="source", type=Path, help="a run's --out file: write its block, run nothing")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.source:
        write_docs(json.loads(args.source.read_text()))
        return
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --, or --from FILE")
    marks = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    before = {pid for pid in os.listdir("/proc") if pid.isdigit()}  # never charged: not the suite's
    proc = subprocess.Popen(command, env={**os.environ, "EDGESYNC_TEST_CPU": str(marks)})
    seen: dict[str, float] = {}  # pid → CPU seconds at the last poll
    kinds: dict[str, str] = {}
    by_test: dict[str, float] = defaultdict(float)
    by_kind: dict[str, float] = defaultdict(float)
    by_test_kind: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    started = time.monotonic()
    while True:
        done = proc.poll() is not None
        tests = {}
        for mark in marks.glob("*.test"):
            try:
                tests[mark.stem] = mark.read_text()
            except OSError:
                pass
        stats = {pid: s for pid in os.listdir("/proc") if pid.isdigit() and (s := read_stat(pid))}
        for pid, (ppid, cpu) in stats.items():
            if pid not in kinds:
                kinds[pid] = kind(pid)
            delta = cpu - seen.get(pid, 0.0)  # a process first seen: all its CPU so far
            seen[pid] = cpu
            if delta <= 0 or pid in before:
                continue
            # a daemon that left the suite's process tree (Ray's, a detached server) is still the suite's
            test = _test_of(pid, stats, tests) if _descends(pid, stats, str(proc.pid)) else "(detached)"
            by_kind[kinds[pid]] += delta
            by_test[test or f"(no test) {kinds[pid]}"] += delta
            if test and test != "(detached)":
                by_test_kind[test][kinds[pid]] += delta
        if done:
            break
        time.sleep(args.interval)
    wall = time.monotonic() - started
    total = sum(by_kind.values())
    print(f"\nsuite_cpu: {total:,.0f} CPU-s in {wall:,.0f} s of wall time ({total / wall:.2f} cores busy on average)")
    modules: dict[str, float] = defaultdict(float)
    for test, cpu in by_test.items():
        modules[test.split("::")[0]] += cpu
    for title, table in (("tests", by_test), ("modules", modules), ("process kinds", by_kind)):
        print(f"\nCPU-s by {title}, the top {args.top}:")
        for name, cpu in sorted(table.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"{cpu:8.1f}  {name}")
    record = {"command": " ".join(command), "wall_s": wall, "cpu_s": total, "returncode": proc.returncode,
              "tests": by_test, "kinds": by_kind, "test_kinds": by_test_kind}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1))
    if args.write_docs:
        write_docs(record)
    sys.exit(proc.returncode)


def label(kind: str) -> str:
    """A process kind as the tables name it: the command and its subcommand, without options, addresses or
    tokens (one row for every flwr-clientapp, whatever its port)."""
    words = kind.split()
    if words[:2] == ["-u", "-c"]:
        return "pytest-xdist worker"
    if words[:1] == ["-c"]:
        return "multiprocessing worker" if "multiprocessing" in kind else "python -c"
    keep = words[:1] + [w for w in words[1:2] if not w.startswith("-") and not any(c in w for c in ":=/")]
    return " ".join(keep) or "?"


def summary(record: dict) -> dict:
    """What the block keeps of a run: its totals, every module's CPU-seconds and every process kind's."""
    modules: dict[str, float] = defaultdict(float)
    for test, cpu in record["tests"].items():
        modules[test.split("::")[0]] += cpu
    kinds: dict[str, float] = defaultdict(float)
    for kind, cpu in record["kinds"].items():
        kinds[label(kind)] += cpu
    ordered = lambda table: {k: round(v, 1) for k, v in sorted(table.items(), key=lambda kv: -kv[1])}  # noqa: E731
    return {"command": record["command"], "wall_s": round(record["wall_s"], 1), "cpu_s": round(record["cpu_s"], 1),
            "modules": ordered(modules), "kinds": ordered(kinds)}


def render(data: dict) -> str:
    total = data["cpu_s"]
    lines = [f"The suite's CPU: {total:,.0f} CPU-seconds in {data['wall_s']:,.0f} s of wall time under the poller. "
             f"By test module (the {SHOWN['modules']} largest; a test's share includes every process it started; "
             "`(no test)`: a process's CPU outside any test, `(detached)`: a process that left the suite's tree):",
             "", "| test module | CPU-s | share |", "|---|---:|---:|"]
    for name, cpu in list(data["modules"].items())[:SHOWN["modules"]]:
        lines.append(f"| `{name}` | {cpu:,.1f} | {100 * cpu / total:.1f} % |")
    lines += ["", f"By process kind (the {SHOWN['kinds']} largest; the tests of the timing and the Ray lane run in "
              "their `pytest` process, the parallel lane's in its xdist workers):", "", "| process | CPU-s | share |", "|---|---:|---:|"]
    for name, cpu in list(data["kinds"].items())[:SHOWN["kinds"]]:
        lines.append(f"| `{name}` | {cpu:,.1f} | {100 * cpu / total:.1f} % |")
    return "\n".join(lines)


def write_docs(record: dict) -> None:
    from edgesync.docs_data import data_note, ran_on, write_block

    note = (f"_Written by `scripts/suite_cpu.py --write-docs -- {record['command']}` on {ran_on()}; "
            f"{data_note(BLOCK)}._")
    write_block(ROOT / "docs" / "testing.md", BLOCK, note, summary(record))


def _descends(pid: str, stats: dict, root: str) -> bool:
    while pid in stats and pid != "1":
        if pid == root:
            return True
        pid = str(stats[pid][0])
    return pid == root


def _test_of(pid: str, stats: dict, tests: dict[str, str]) -> str | None:
    while pid in stats and pid != "1":
        if pid in tests:
            return tests[pid]
        pid = str(stats[pid][0])
    return None


if __name__ == "__main__":
    main()
