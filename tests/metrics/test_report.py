"""render_report(): a fabricated run folder becomes report.md plus four valid PNGs."""

import struct

import pytest

from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.metrics.report import render_report
from edgesync.metrics.summary import GAP_FIRST_N, summarize

pytestmark = pytest.mark.usefixtures("plots")  # these tests read the plots (conftest.py)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOTS = ["accuracy_vs_time.png", "accuracy_vs_updates.png", "bytes_vs_time.png", "compute_ratio.png"]
SCENARIO = {
    "name": "fmnist-two", "seed": 3, "runtime": "live", "dataset": "fashion_mnist", "model": "cnn",
    "partition": {"kind": "dirichlet", "alpha": 0.5}, "stop": {"target_acc": 0.85},
    "clients": [{"profile": "x1"}, {"profile": "x10"}],
    "algorithms": [{"name": "ssgd"}, {"name": "asgd", "label": "asgd-lr0.1"}],
}
# label -> [(time_s, test_acc, updates, samples, bytes_up, bytes_down)]
EVALS = {
    "ssgd": [(0.0, 0.10, 0, 0, 0, 0), (10.0, 0.60, 5, 640, 1_000_000, 2_000_000),
             (20.0, 0.85, 10, 1280, 2_000_000, 4_000_000), (30.0, 0.80, 15, 1920, 3_000_000, 6_000_000)],
    "asgd-lr0.1": [(0.0, 0.10, 0, 0, 0, 0), (5.0, 0.90, 20, 1280, 4_000_000, 4_000_000),
                   (8.0, 0.88, 32, 2048, 6_400_000, 6_400_000)],
}
# label -> [(client, profile, compute_s, wait_s, wall_s)]
CLIENTS = {
    "ssgd": [(0, "x1", 24.0, 6.0, 30.0), (1, "x10", 6.0, 24.0, 30.0)],
    "asgd-lr0.1": [(0, "x1", 8.0, 0.0, 8.0), (1, "x10", 2.0, 6.0, 8.0)],
}


def _fabricate(run_dir, scenario=SCENARIO, with_summary=True, evals=EVALS, clients=CLIENTS):
    with RunRecorder(run_dir) as rec:
        rec.write_scenario(scenario)
        for label, rows in evals.items():
            for t, acc, updates, samples, up, down in rows:
                rec.log_eval({"algorithm": label, "time_s": t, "updates": updates, "samples": samples,
                              "test_acc": acc, "test_loss": 1 - acc, "bytes_up": up, "bytes_down": down,
                              "wall_clock": 1.79e9 + t})
        for label, rows in clients.items():
            for rank, profile, compute_s, wait_s, wall_s in rows:
                rec.log_client({"algorithm": label, "client": rank, "profile": profile, "host": f"pc{rank}",
                                "device": "cpu", "compute_s": compute_s, "wait_s": wait_s, "wall_s": wall_s,
                                "steps": 100 + rank, "samples": 3200 + rank, "bytes_up": 0, "bytes_down": 0})
        if with_summary:
            rec.write_summary(summarize(read_jsonl(run_dir / "metrics.jsonl"),
                                        read_jsonl(run_dir / "clients.jsonl"), 0.85,
                                        {"asgd-lr0.1": "asgd"}, baseline="ssgd"))


def _assert_valid_png(path, min_bytes=10_000):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert len(data) > min_bytes, f"{path} is only {len(data)} bytes"
    width, height = struct.unpack(">II", data[16:24])       # the IHDR chunk
    assert width >= 600 and height >= 400


@pytest.fixture
def rendered(tmp_path):
    _fabricate(tmp_path)
    return render_report(tmp_path)


def test_report_has_title_setup_tables_and_plots(rendered, tmp_path):
    text = rendered.read_text()

    assert rendered == tmp_path / "report.md"
    assert text.startswith("# fmnist-two\n")
    for fact in ["2 clients (1 × x1, 1 × x10)", "dataset fashion_mnist", "model cnn",
                 "partition dirichlet (alpha=0.5)", "seed 3", "`asgd-lr0.1` (asgd)", "85.00 %"]:
        assert fact in text, fact
    lines = text.splitlines()
    # label | final | best | time to target | speedup vs first | updates | samples/s | MB up | MB down | ratio
    assert ("| `ssgd` | 80.00 % | 85.00 % | 20.0 | 1.00× | 15 | 64.0 | 3.00 | 6.00 | 0.50 |") in lines
    assert ("| `asgd-lr0.1` | 88.00 % | 90.00 % | 5.0 | 4.00× | 32 | 256 | 6.40 | 6.40 | 0.62 |") in lines
    # entry | client | profile | host | device | compute s | wait s | ratio | steps | samples
    assert "| `ssgd` | 1 | x10 | pc1 | cpu | 6.0 | 24.0 | 0.20 | 101 | 3,201 |" in lines
    assert "| `asgd-lr0.1` | 0 | x1 | pc0 | cpu | 8.0 | 0.0 | 1.00 | 100 | 3,200 |" in lines
    assert "wall-clock seconds" in text
    for name in PLOTS:
        assert f"](plots/{name})" in text


def test_plots_are_valid_pngs(rendered, tmp_path):
    for name in PLOTS:
        _assert_valid_png(tmp_path / "plots" / name)


def test_with_plots_off_the_report_has_no_images_and_edgesync_report_draws_them(tmp_path, monkeypatch):
    """$EDGESYNC_PLOTS=0 (the suite's setting, a batch's choice): report.md without images and a line saying how
    to draw them; `edgesync report RUN_DIR` then draws every plot, whatever the variable says."""
    from typer.testing import CliRunner

    from edgesync.cli import app
    monkeypatch.setenv("EDGESYNC_PLOTS", "0")
    _fabricate(tmp_path)
    text = render_report(tmp_path).read_text()
    assert "![" not in text and not list(tmp_path.glob("plots/*.png"))
    assert "Not drawn ($EDGESYNC_PLOTS is 0): `edgesync report RUN_DIR` draws them" in text
    assert "## Clients" in text and "## Plots" in text  # every section but the images
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in PLOTS:
        _assert_valid_png(tmp_path / "plots" / name)
    assert all(f"plots/{name}" in (tmp_path / "report.md").read_text() for name in PLOTS)


def test_summary_is_recomputed_when_missing(tmp_path):
    # Prepare: a simulated run that crashed before summary.json; a third entry never evaluated
    scenario = {**SCENARIO, "runtime": "sim",
                "algorithms": [*SCENARIO["algorithms"], {"name": "dc_asgd"}]}
    _fabricate(tmp_path, scenario=scenario, with_summary=False)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"algorithm": "ssgd", "time_s": 40.0, "test_a')             # the crash, mid-line
    # Execute
    with pytest.warns(RuntimeWarning, match="truncated"):
        text = render_report(tmp_path).read_text()
    # Assert: the same numbers as from summary.json, the target from scenario's stop.target_acc
    lines = text.splitlines()
    assert "| `asgd-lr0.1` | 88.00 % | 90.00 % | 5.0 | 4.00× | 32 | 256 | 6.40 | 6.40 | 0.62 |" in lines
    assert any(line.startswith("| `dc_asgd` (no evaluations) |") for line in lines)
    assert "virtual seconds" in text
    assert not (tmp_path / "summary.json").exists()                           # the report only reads
    for name in PLOTS:
        _assert_valid_png(tmp_path / "plots" / name)


def test_target_not_reached_is_said_so(tmp_path):
    _fabricate(tmp_path, scenario={**SCENARIO, "stop": {"target_acc": 0.95}}, with_summary=False)

    lines = render_report(tmp_path).read_text().splitlines()

    assert "| `ssgd` | 80.00 % | 85.00 % | not reached | — | 15 | 64.0 | 3.00 | 6.00 | 0.50 |" in lines


def test_an_empty_folder_still_renders(tmp_path):
    text = render_report(tmp_path).read_text()

    assert text.startswith(f"# {tmp_path.name}\n")
    assert "No client records" in text
    for name in PLOTS:
        _assert_valid_png(tmp_path / "plots" / name, min_bytes=3_000)


def test_staleness_plot_only_for_runs_that_log_lag_and_gap(tmp_path):
    import json as _json
    for name, logs in (("async", True), ("sync", False)):
        run = tmp_path / name
        run.mkdir()
        (run / "scenario.yaml").write_text(f"name: {name}\nstop: {{target_acc: 0.5}}\n")
        (run / "metrics.jsonl").write_text("".join(_json.dumps(
            {"algorithm": "asgd", "time_s": t, "updates": 10 * t, "samples": 320 * t, "test_acc": 0.1 * t,
             "test_loss": 1.0, "bytes_up": 1000 * t, "bytes_down": 1000 * t}) + "\n" for t in range(5)))
        (run / "clients.jsonl").write_text("")
        if logs:
            (run / "updates.jsonl").write_text("".join(_json.dumps(
                {"algorithm": "asgd", "time_s": i / 10, "client": i % 2, "update": i, "lag": i % 3,
                 "gap": 0.001 * (i % 4), "gap_normalized": 0.5}) + "\n" for i in range(40)))
        text = render_report(run).read_text()
        png = run / "plots" / "staleness_vs_time.png"
        assert png.exists() is logs
        assert ("staleness_vs_time.png" in text) is logs
        if logs:
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_staleness_section_shows_whole_run_and_first_n_means(tmp_path):
    # Prepare: asgd-lr0.1 applied N + 50 updates, gap 0.001 (normalised 1) for the first N, then 0.004 (4)
    _fabricate(tmp_path)
    n = GAP_FIRST_N
    rows = [{"algorithm": "asgd-lr0.1", "time_s": i / 100, "client": i % 2, "update": i, "lag": 2,
             "gap": 0.001 if i < n else 0.004, "gap_normalized": 1.0 if i < n else 4.0} for i in range(n + 50)]
    with RunRecorder(tmp_path) as rec:
        rec.log_updates(rows)
    # Execute
    lines = render_report(tmp_path).read_text().splitlines()
    # Assert: ssgd logged no gaps, so it has no row; whole-run means (n·0.001 + 50·0.004)/(n + 50) …
    whole = (n * 0.001 + 50 * 0.004) / (n + 50)
    whole_normalized = (n * 1.0 + 50 * 4.0) / (n + 50)
    start = lines.index("## Staleness")
    table = [line for line in lines[start:] if line.startswith("|")][:3]
    assert table == [
        "| Entry | Updates | Mean lag | Mean gap G | Mean G / RMS(g) | First N | Mean G, first N "
        "| Mean G / RMS(g), first N |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| `asgd-lr0.1` | {n + 50:,} | 2.00 | {whole:.3g} | {whole_normalized:.3g} | {n:,} | 0.001 | 1 |",
    ]
    assert lines[lines.index(table[-1]) + 2].startswith("![Staleness")  # the table sits with the plot
