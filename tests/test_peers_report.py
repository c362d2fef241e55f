"""The peer harness's report (benchmarks/peers/report.py) on runs whose figures are known: ratios per seed,
the two speed verdicts by the project's one rule, the agreement of curves, and a row for every system that
could not run."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))

import report  # noqa: E402
from systems import SYSTEMS  # noqa: E402


def _run(system, seed, wall, acc_shift=0.0, mem=1000.0):
    curve = [{"round": r, "acc": 0.5 + r / 200 + acc_shift + seed / 1000, "loss": 1.0} for r in (5, 10)]
    return {"system": system, "workload": "W1", "seed": seed, "wall_s": wall, "peak_rss_mb": mem, "rc": 0,
            "version": "1.0", "final_acc": curve[-1]["acc"], "curve": curve, "notes": ""}


def data(runs):
    return {"machine": "test", "date": "2026-11-28", "seeds": [0, 1, 2],
            "workloads": {"W1": {"clients": 100, "per_round": 10, "local_steps": 5, "rounds": 10, "mode": "sync"}},
            "runs": runs}


def test_ratios_verdicts_and_agreement_from_known_runs():
    # EdgeSync 10 s, the bare loop 8 s (×1.25: within 1.5), Flower 30 s (3× EdgeSync: at least 2×), all per seed
    # with a small spread; FLGo's curve 10 points lower than EdgeSync's, far past the seeds' spread
    runs = []
    for s in (0, 1, 2):
        k = 1 + s / 100  # each seed's machine a little slower; the ratios stay exact
        runs += [_run("edgesync-serial", s, 10 * k), _run("bare", s, 8 * k), _run("flower", s, 30 * k),
                 _run("flgo", s, 60.0, acc_shift=-0.1)]
    runs.append({"system": "fedscale", "workload": "W1", "seed": 0, "unavailable": "not installed: `setup.sh`"})
    d = data(runs)
    text = report.render(d)
    flower_row = next(line for line in text.splitlines() if line.startswith("| flower |"))
    assert "| 3.00 ± 0.00 | 3.75 ± 0.00 |" in flower_row  # Flower's wall time ÷ EdgeSync's, × the bare loop
    assert "EdgeSync at least 2× faster than the fastest peer (flower)" in text and ": holds" in text
    assert "EdgeSync within 1.5× of the bare loop, its wall time ÷ the loop's: 1.25 [1.25, 1.25]: holds" in text
    assert "| fedscale | – | could not run: not installed" in text
    agree = report.agreement(d, "W1")
    flower = next(line for line in agree.splitlines() if line.startswith("| flower |"))
    assert "| +0.0 |" in flower and "| yes |" in flower and flower.endswith("| 0 of 2 |")
    flgo = next(line for line in agree.splitlines() if line.startswith("| flgo |"))
    assert "| -10.0 |" in flgo and "| no |" in flgo and flgo.endswith("| 2 of 2 |")


def test_one_seed_is_undecided_and_a_slow_edgesync_does_not_hold():
    runs = [_run("edgesync-serial", 0, 20.0), _run("flower", 0, 30.0), _run("bare", 0, 8.0)]
    text = report.render(data(runs))
    assert "inconclusive (1 seed, at least 3 needed)" in text
    assert "undecided (one seed)" in report.agreement(data(runs), "W1")


def test_every_system_names_its_runner_and_a_missing_environment_is_a_reason():
    for system in SYSTEMS.values():
        assert system.script.startswith("run_")
        for workload in ("W1", "W2", "W3", "W4"):  # a workload it cannot run has its reason
            assert workload in system.workloads or system.why_not.get(workload), (system.name, workload)
        if system.workloads and system.venv is not None and not system.python().exists():
            assert "setup.sh" in system.unavailable(system.workloads[0])
    assert SYSTEMS["bare"].unavailable("W3") == "the floor is a synchronous loop"
    assert "requirements-fedscale.txt" in SYSTEMS["fedscale"].unavailable("W1")
