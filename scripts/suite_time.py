"""The test suite's wall time, lane by lane: `bash scripts/test.sh` run whole, each run's lane times kept.

    .venv/bin/python scripts/suite_time.py [--fast] [--repeats N] [--label TEXT] [--write-docs]
    .venv/bin/python scripts/suite_time.py --from-log FILE [--fast] [--label TEXT] [--write-docs]
    .venv/bin/python scripts/suite_time.py -- tests/test_docs_figures.py     # a check of this script: no docs

Each run is `bash scripts/test.sh` (`make test` after its set-up; `--fast`: with `-m "not slow"`, as
`make test-fast`), one after another. From what it prints the script keeps the suite's wall time and the
timing and Ray lanes' (from the start to each lane's end: the last line of test.sh), the parallel lane's
own time (its pytest summary line) and the tests' counts; beside them the commit and whether the checkout
had changes, whether bytecode was cached before the run (a fresh clone has none, and its first run
compiles every module and rewrites every test file's asserts), the machine and its load average at the
start. A figure of a busy machine is not the suite's: run it with nothing else running; before each run the
script waits, up to 5 minutes, for the load left by the one before to fall, and the table marks a run that
started busy. `--from-log FILE` reads a saved output of test.sh instead (`bash scripts/test.sh | tee FILE`),
with the checkout's commit now.

`--write-docs` adds the runs to docs/data/suite_time-history.json (`--fast`: suite_time-fast.json) and
writes the table of every run kept there into docs/testing.md's `suite_time:history` (`suite_time:fast`)
block; the table the block held before its first traced run (the suite's hand-written history) stays under
it, as "Before this run". Extra arguments after `--` go to test.sh: such a run is not the suite's time and
is never written into the docs.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the package next to it, without PYTHONPATH
    sys.path.insert(0, str(ROOT))

from edgesync.docs_data import EARLIER_HEAD, data_note, data_path, write_block  # noqa: E402

DOC = ROOT / "docs" / "testing.md"
BLOCKS = {False: "suite_time:history", True: "suite_time:fast"}
FAST = ["-m", "not slow"]  # make test-fast's selection
TARGET_S = 12 * 60  # README.md: the whole suite in about 10-12 minutes on 2 cores
BUSY_LOAD = 0.5  # a 1-minute load average above this at the start: the machine is not quiet

# test.sh's last line: "suite: 1735 passed, 7 skipped, 0 failed, 0 errors in 683 s (3 workers; beside them the
# timing tests took 353 s, the Ray tests 421 s)"
SUITE_LINE = re.compile(r"^suite: (?P<passed>\d+) passed, (?P<skipped>\d+) skipped, (?P<failed>\d+) failed, "
                        r"(?P<errors>\d+) errors in (?P<suite>\d+) s \((?P<workers>\d+) workers; beside them the "
                        r"timing tests took (?P<timing>\d+) s, the Ray tests (?P<ray>\d+) s\)$")
# A lane's pytest summary ("1690 passed, 7 skipped in 512.34s (0:08:32)"), as test.sh's count() finds it. The
# parallel lane's is the last one before the suite line: test.sh prints that lane's output last.
PYTEST_LINE = re.compile(r" in (?P<s>[0-9.]+)s( \(.*\))?$")


def parse(output: str) -> dict:
    """The lanes' times (s) and the tests' counts from test.sh's output; ValueError without its last line."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = next((i for i in range(len(lines) - 1, -1, -1) if SUITE_LINE.match(lines[i])), None)
    if at is None:
        raise ValueError("no 'suite: …' line: not the whole output of scripts/test.sh")
    m = SUITE_LINE.match(lines[at])
    parallel = next((float(p["s"]) for line in reversed(lines[:at]) if (p := PYTEST_LINE.search(line))), None)
    return {"suite_s": int(m["suite"]), "timing_s": int(m["timing"]), "ray_s": int(m["ray"]),
            "parallel_s": parallel, "workers": int(m["workers"]),
            "counts": {k: int(m[k]) for k in ("passed", "skipped", "failed", "errors")}}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def bytecode_cached() -> bool:
    """Whether this checkout holds compiled bytecode of the package (a fresh clone does not)."""
    return any((ROOT / "edgesync").glob("**/__pycache__/*.pyc"))


def context() -> dict:
    """What a run's figures depend on besides the code's commit."""
    from edgesync.reproduce.suite import machine  # CPU model, usable cores, OS

    return {"commit": git("rev-parse", "--short=10", "HEAD"), "changed": bool(git("status", "--porcelain", "-uno")),
            "bytecode_cached": bytecode_cached(), "machine": machine(),
            "load_1min": round(os.getloadavg()[0], 2),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def settle(limit_s: float = 300.0) -> None:
    """Wait, up to `limit_s`, for the 1-minute load average to fall below BUSY_LOAD: after a run (or any other
    work) it decays over minutes, and a run started at once would be marked busy for the previous one."""
    deadline = time.monotonic() + limit_s
    while os.getloadavg()[0] > BUSY_LOAD and time.monotonic() < deadline:
        time.sleep(10)


def run_once(args: list[str], wait: bool = True) -> dict:
    """One whole `bash scripts/test.sh ARGS`, its output shown as it goes (first, with `wait`, the load settled);
    its record."""
    if wait:
        settle()
    before = context()
    if before["load_1min"] > BUSY_LOAD:
        print(f"suite_time: the load average is {before['load_1min']} at the start; the times will be a busy "
              f"machine's", file=sys.stderr)
    proc = subprocess.Popen(["bash", "scripts/test.sh", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = []
    for line in proc.stdout:
        sys.stdout.write(line)
        out.append(line)
    status = proc.wait()
    return {**before, **parse("".join(out)), "exit": status}


def render(data: dict) -> str:
    """The block's table from every run kept (as docs/data/suite_time-*.json holds them): {"runs": [{"date",
    "commit", "changed", "label", "bytecode_cached", "workers", "load_1min", "parallel_s", "timing_s", "ray_s",
    "suite_s", "counts", "exit"}], "fast": whether without the slow tests, "earlier": the block before its first
    traced run, {"note", "table"} or None}; None where a log did not say. The last line: the runs of the last
    commit, mean ± sd, and for the whole suite against its target."""
    def s(x: float | None) -> str:
        return "–" if x is None else f"{x:,.0f} s"

    runs, machine = data["runs"], data["runs"][-1]["machine"]
    rows = [f"Machine: {machine} (every run's, unless its row names another).", "",
            "| run | commit | workers | parallel lane | timing lane | Ray lane | suite | tests |",
            "|---|---|---:|---:|---:|---:|---:|---|"]
    for run in runs:
        load = run["load_1min"]
        what = ", ".join(x for x in (run["date"], run.get("label") or "",
                                     "no bytecode cached (a fresh clone)" if run["bytecode_cached"] is False else "",
                                     f"load {load} at the start" if load is not None and load > BUSY_LOAD else "",
                                     run["machine"] if run["machine"] != machine else "",
                                     "from a log" if run.get("from_log") else "") if x)
        c = run["counts"]
        tests = f"{c['passed']:,} passed, {c['skipped']} skipped, {c['failed']} failed" + (
            f", {c['errors']} errors" if c["errors"] else "")
        rows.append(f"| {what} | `{run['commit']}`{' with changes' if run['changed'] else ''} | {run['workers']} | "
                    f"{s(run['parallel_s'])} | {s(run['timing_s'])} | {s(run['ray_s'])} | {s(run['suite_s'])} | "
                    f"{tests} |")
    last = (runs[-1]["commit"], runs[-1]["changed"])
    suites = [r["suite_s"] for r in runs if (r["commit"], r["changed"]) == last]
    spread = f" ± {statistics.stdev(suites):,.0f} s (sd)" if len(suites) > 1 else ""
    target = "" if data.get("fast") else (f", {'within' if statistics.mean(suites) <= TARGET_S else 'over'} the "
                                          f"target of {TARGET_S // 60} minutes")
    rows += ["", f"The suite at `{last[0]}`{' with changes' if last[1] else ''}: {statistics.mean(suites):,.0f} s"
             f"{spread} over {len(suites)} run{'s' if len(suites) > 1 else ''}{target}."]
    if data.get("earlier"):  # the hand-written history, kept across every later run (not only the first)
        old = data["earlier"]
        rows += ["", f"{EARLIER_HEAD} — the table it replaced, as written then ({old['note']}):", "", old["table"]]
    return "\n".join(rows)


def current_block(block: str) -> dict | None:
    """The note and table `block` holds in docs/testing.md now, as write_block would keep them."""
    from edgesync import docs_data

    return docs_data.current_block(DOC, block)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help='without the slow tests (-m "not slow"), as make test-fast')
    ap.add_argument("--repeats", type=int, default=1, help="whole runs, one after another")
    ap.add_argument("--label", default="", help="what the run is of (what changed), for the table's first column")
    ap.add_argument("--from-log", type=Path, help="read a saved output of scripts/test.sh instead of running it")
    ap.add_argument("--write-docs", action="store_true", help="keep the runs and write the table into docs/testing.md")
    ap.add_argument("extra", nargs="*", help="after --: arguments for test.sh (a check of this script; never written)")
    args = ap.parse_args()
    if args.write_docs and args.extra:
        ap.error("--write-docs times the whole suite: no extra arguments for test.sh")
    block = BLOCKS[args.fast]
    if args.from_log:
        # a log's load and bytecode cache at its start are unknown (now says nothing of them); its commit is assumed
        runs = [{**context(), **parse(args.from_log.read_text()), "exit": None, "from_log": True,
                 "load_1min": None, "bytecode_cached": None, "date": datetime.datetime.fromtimestamp(
                     args.from_log.stat().st_mtime, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}]
    else:
        runs = [run_once([*(FAST if args.fast else []), *args.extra], wait=not args.extra) for _ in range(args.repeats)]
    for run in runs:
        run["label"] = args.label
    data = {"runs": runs, "fast": args.fast, "earlier": None}
    if args.write_docs:
        path = data_path(block)
        if path.exists():  # every earlier traced run stays, and the hand-written history under them
            kept = json.loads(path.read_text())["data"]
            data = {"runs": kept["runs"] + runs, "fast": args.fast, "earlier": kept.get("earlier")}
        else:
            data["earlier"] = current_block(block)
    print("\n" + render(data))
    if args.write_docs:
        what = 'bash scripts/test.sh -m "not slow"' if args.fast else "bash scripts/test.sh"
        flag = " --fast" if args.fast else ""
        note = (f"_Written by `scripts/suite_time.py{flag} --write-docs`: whole runs of `{what}`, one row each, "
                f"every run kept so far; lanes from the suite's start to their end (the parallel lane: its "
                f"pytest's own time); {data_note(block)}._")
        write_block(DOC, block, note, data)
    sys.exit(max((r["exit"] or 0) for r in runs))


if __name__ == "__main__":
    main()
