"""The coordinator's load in summary.json (from coordinator.jsonl), over seeds, and in report.md."""
from __future__ import annotations

import pytest

from edgesync.metrics.recorder import RunRecorder
from edgesync.metrics.report import render_report
from edgesync.metrics.seeds import with_seed_aggregates
from edgesync.metrics.summary import summarize

EVAL = {"time_s": 10.0, "updates": 100, "samples": 3200, "test_acc": 0.5, "test_loss": 1.0, "bytes_up": 1,
        "bytes_down": 1}


def load_row(label: str, utilisation: float, share: float, duration_s: float = 10.0) -> dict:
    return {"algorithm": label, "clock": "wall", "from_s": 0.0, "duration_s": duration_s,
            "busy_s": utilisation * duration_s, "utilisation": utilisation, "events": 100, "updates": 100,
            "updates_served_per_s": 100 / duration_s, "delays": 100, "queue_delay_mean_s": 0.02 * utilisation,
            "queue_delay_p95_s": 0.05 * utilisation, "queue_delay_max_s": 0.1, "saturated_share": share,
            "window_s": 1.0, "saturated_busy": 0.9, "bottleneck_share": 0.25, "bottleneck": share > 0.25,
            "shards": 1}


def test_the_summary_takes_each_entrys_row_over_the_longest_span():
    metrics = [{"algorithm": label, **EVAL} for label in ("dana", "asgd", "ssgd")]
    rows = [load_row("dana", 0.99, 0.9), load_row("dana", 0.2, 0.0, duration_s=0.5),  # a resumed entry's tail
            load_row("asgd", 0.3, 0.1)]
    summary = summarize(metrics, [], None, coordinator=rows)
    dana, asgd, ssgd = summary["dana"], summary["asgd"], summary["ssgd"]
    assert dana["coordinator_utilisation"] == 0.99 and dana["coordinator_saturated_share"] == 0.9
    assert dana["queue_delay_mean_s"] == pytest.approx(0.0198) and dana["queue_delay_p95_s"] == pytest.approx(0.0495)
    assert dana["updates_served_per_s"] == 10.0 and dana["coordinator_bottleneck"] is True
    assert asgd["coordinator_bottleneck"] is False
    # an entry without a row (a folder from before coordinator.jsonl): None, not a guess
    assert ssgd["coordinator_utilisation"] is None and ssgd["coordinator_bottleneck"] is None


def test_seeds_aggregate_the_load_like_every_other_figure():
    metrics = [{"algorithm": f"dana@seed={s}", **EVAL} for s in (0, 1, 2)]
    rows = [load_row("dana@seed=0", 0.9, 0.8), load_row("dana@seed=1", 0.6, 0.1), load_row("dana@seed=2", 0.3, 0.0)]
    aggregate = with_seed_aggregates(summarize(metrics, [], None, coordinator=rows))["dana"]
    assert aggregate["coordinator_utilisation"] == pytest.approx(0.6)
    assert aggregate["stats"]["coordinator_utilisation"]["per_seed"] == {"0": 0.9, "1": 0.6, "2": 0.3}
    assert aggregate["stats"]["coordinator_saturated_share"]["mean"] == pytest.approx(0.3)
    assert aggregate["stats"]["queue_delay_p95_s"]["n"] == 3
    assert aggregate["coordinator_bottleneck_seeds"] == [0]


def test_the_report_shows_the_load_and_warns_by_name(tmp_path):
    with RunRecorder(tmp_path) as rec:
        rec.write_scenario({"name": "load", "runtime": "live", "algorithms": [{"name": "dana"}, {"name": "asgd"}]})
        for label in ("dana", "asgd"):
            rec.log_eval({"algorithm": label, **EVAL})
        rec.log_coordinator(load_row("dana", 0.99, 0.9))
        rec.log_coordinator(load_row("asgd", 0.3, 0.1))
    text = render_report(tmp_path).read_text()
    assert "**Warning: the coordinator was the bottleneck of `dana`**: saturated for 90.0 % of its run" in text
    assert "bottleneck of `asgd`" not in text
    lines = text.splitlines()
    assert "| `dana` | 99.0 % | 19.8 | 49.5 | 10 | 90.0 % | **yes** |" in lines
    assert "| `asgd` | 30.0 % | 6 | 15 | 10 | 10.0 % | no |" in lines


def test_a_folder_without_coordinator_rows_renders_as_before(tmp_path):
    with RunRecorder(tmp_path) as rec:
        rec.write_scenario({"name": "old", "runtime": "live", "algorithms": [{"name": "asgd"}]})
        rec.log_eval({"algorithm": "asgd", **EVAL})
    text = render_report(tmp_path).read_text()
    assert "Coordinator load" not in text and "bottleneck" not in text
