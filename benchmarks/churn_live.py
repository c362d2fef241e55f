"""200 devices with churn, live: scenarios/fl_churn.yaml under the live runtime, and what its run folder says.

    PYTHONPATH=. .venv/bin/python benchmarks/churn_live.py [--set KEY=VALUE …] [--keep DIR] [--write-docs]

Runs `edgesync run scenarios/fl_churn.yaml --set runtime=live` (benchmarks/timed_run.py; `--set` adds more,
for a scaled-down try), timed with its set-up, then reads the run folder:

- logs/coordinator.log: how the launcher laid the clients out (processes of slots) and, per entry, the
  emulation plan it calibrated: the shared base step, the clients it was planned for and, where fewer can
  compute at once (a round's sample), how many;
- clients.jsonl: the undisturbed step each client measured, beside which the base step is read;
- updates.jsonl (through metrics/churn.py): each entry's presence rows (devices leaving and returning), its
  rounds' draws (participants, devices online) and closes (contributors), the updates an asynchronous entry
  applied (FedBuff's: contributions, and the buffers it flushed); and, as tests/runtime/test_live_churn.py
  checks its smaller run, whether any contribution came from a device that was offline by the presence rows:
  a round's contributor must be online from the draw to its report (each end moved in by TOLERANCE_S, a
  client's view of the clock running behind the coordinator's by a message's latency), an asynchronous
  update's sender online when the coordinator applied it;
- summary.json: each entry's final accuracy.

`--write-docs` puts the figures in docs/benchmarks.md's `churn_live` block and these facts of the run in
docs/data/churn_live.json.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timed_run import timed_run  # noqa: E402

from edgesync.docs_data import data_note, ran_on, write_block  # noqa: E402
from edgesync.metrics.churn import ChurnRecords  # noqa: E402
from edgesync.metrics.report import load_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "churn_live"
SCENARIO = "scenarios/fl_churn.yaml"
TOLERANCE_S = 0.05  # as tests/runtime/test_live_churn.py: a client acts on its own view of the entry's clock
_LAYOUT = re.compile(r"launcher: \d+ clients in (\d+ process(?:es)? of \d+ slots?)")
_PLAN = re.compile(r"emulation: shared base step ([\d.]+) ms .*?: (\d+) clients in \d+ process(?:es)?"
                   r"(?:; at most (\d+) computing at once)?")
_BUDGET = re.compile(r"coordinator: (\S+): time budget")


def _plans(log: str) -> dict[str, dict]:
    """label → the emulation plan calibrated before it: base step (s), clients planned for, at most at once."""
    plans, last = {}, None
    for line in log.splitlines():
        if m := _PLAN.search(line):
            last = {"base_step_s": float(m[1]) / 1e3, "planned_clients": int(m[2]),
                    "at_most": int(m[3]) if m[3] else None}
        elif (m := _BUDGET.search(line)) and last is not None:
            plans[m[1]] = last
    return plans


def _online(intervals: list[tuple[float, float]], start: float, end: float) -> bool:
    return any(s <= start + 1e-9 and end <= e + 1e-9 for s, e in intervals)


def facts(run_dir: Path) -> dict:
    """What the run folder says of each entry (see the module docstring)."""
    log = (run_dir / "logs" / "coordinator.log").read_text()
    run = load_run(run_dir)
    churn, plans = ChurnRecords(run), _plans(log)
    layout = _LAYOUT.search(log)
    entries = []
    for label in run.labels:
        rows = [r for r in run.updates if r.get("algorithm") == label]
        intervals = churn.online_intervals(label, churn.end(label) or 0.0)
        presence = [r for r in rows if r.get("presence") in ("online", "offline")]
        draws = [r for r in rows if isinstance(r.get("participants"), list)]
        closes = [r for r in rows if isinstance(r.get("contributors"), list)]
        applied = [r for r in rows if "lag" in r]  # an asynchronous entry's applied updates
        starts = {d["round"]: d["time_s"] for d in draws}  # a redraw's time replaces the try before it
        from_offline = sum(not _online(intervals.get(c, []), starts[close["round"]] + TOLERANCE_S, t - TOLERANCE_S)
                           for close in closes for c, t in zip(close["contributors"], close["reported_s"]))
        from_offline += sum(not _online(intervals.get(r["client"], []), r["time_s"], r["time_s"]) for r in applied)
        steps = [c["reference_step_s"] for c in run.clients
                 if c.get("algorithm") == label and c.get("reference_step_s")]
        entries.append({
            "label": label, "algorithm": run.summary[label].get("algorithm"), **plans.get(label, {}),
            "undisturbed_step_s": statistics.median(steps) if steps else None,
            "presence_rows": len(presence), "offline_rows": sum(r["presence"] == "offline" for r in presence),
            "draws": [[len(d["participants"]), d.get("online")] for d in draws],
            "closes": [[len(c["contributors"]), len(c["reported_s"])] for c in closes],
            "applied": len(applied), "flushed": sum(bool(r.get("flushed")) for r in applied),
            "from_offline": from_offline, "final_acc": run.summary[label].get("final_acc"),
        })
    return {"layout": layout[1] if layout else None, "clients": len(run.clients) // max(1, len(run.labels)),
            "budget_s": (run.scenario.get("stop") or {}).get("time_budget_s"), "entries": entries}


def _applied(entry: dict) -> str:
    """What an entry applied, in a few words: rounds closed, buffers flushed, or updates."""
    if entry["draws"]:
        closed = ", ".join(f"{n}" for n, _ in entry["closes"]) or "none"
        drawn = sorted({n for n, _ in entry["draws"]})
        online = [o for _, o in entry["draws"] if o is not None]
        return (f"{len(entry['closes'])} round{'s' if len(entry['closes']) != 1 else ''} closed (contributors: "
                f"{closed}; {', '.join(map(str, drawn))} drawn at each of {len(entry['draws'])} draws, from "
                f"{min(online)}–{max(online)} online)" if online else f"{len(entry['closes'])} rounds closed")
    if entry["flushed"]:
        return f"{entry['applied']:,} contributions in {entry['flushed']:,} buffers"
    return f"{entry['applied']:,} updates"


def render(data: dict) -> str:
    """The block's figures from the run's facts (as docs/data/churn_live.json keeps them)."""
    out = [f"`edgesync run` put the {data['clients']} clients in {data['layout'] or 'one process each'}; "
           f"each entry ran {data['budget_s']:g} s; the whole run took {data['took_s'] / 60:.1f} min with set-up.", "",
           "| entry | shared base step (s) | × the undisturbed step | planned for | presence rows (offline) "
           "| what it applied | from an offline device | final accuracy |",
           "|---|---:|---:|---|---:|---|---:|---:|"]
    for e in data["entries"]:
        base, undisturbed = e.get("base_step_s"), e.get("undisturbed_step_s")
        ratio = f"{base / undisturbed:.0f}" if base and undisturbed else "–"
        planned = ("–" if e.get("planned_clients") is None else f"at most {e['at_most']} computing at once"
                   if e.get("at_most") else f"the {e['planned_clients']} devices online at its start")
        acc = "–" if e["final_acc"] is None else f"{e['final_acc']:.3f}"
        out.append(f"| {e['label']} | {'–' if base is None else f'{base:.2f}'} | {ratio} | {planned} "
                   f"| {e['presence_rows']:,} ({e['offline_rows']:,}) | {_applied(e)} | {e['from_offline']} | {acc} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more overrides (a smaller try)")
    ap.add_argument("--keep", type=Path, help="keep the run folder here (default: a temporary one)")
    ap.add_argument("--write-docs", action="store_true", help="write the figures into docs/benchmarks.md")
    args = ap.parse_args()
    if args.write_docs and args.set:
        sys.exit("--write-docs writes the scenario's own run: leave out --set")
    with tempfile.TemporaryDirectory(prefix="churn-live-") as tmp:
        run_dir = (args.keep or Path(tmp)).resolve() / "run"
        sets = [x for s in ["runtime=live", *args.set] for x in ("--set", s)]
        took = timed_run("fl_churn live", [SCENARIO, *sets, "--out", str(run_dir), "-q"])
        data = {**facts(run_dir), "took_s": took}
    print(render(data))
    if args.write_docs:
        note = (f"_Written by `benchmarks/churn_live.py --write-docs` (`edgesync run {SCENARIO} --set runtime=live`) "
                f"on {ran_on()}, one run; {data_note(BLOCK)}._")
        write_block(ROOT / "docs/benchmarks.md", BLOCK, note, data)


if __name__ == "__main__":
    main()
