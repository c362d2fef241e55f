"""Every reproduced table in docs/results.md can be traced to the runs behind it: docs/data/ holds their
per-run figures (edgesync/reproduce/audit.py), and the table's figures are recomputed from them here, through
the same code `edgesync reproduce` decides with."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync import reproduce as rp
from edgesync.docs_block import blocks
from edgesync.reproduce.audit import DATA_DIR, data_file
from edgesync.reproduce.verdicts import _figure

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results.md"
UNTRACED = "no per-run data kept"  # what a block written before docs/data/ existed says of itself


def _block_texts() -> dict[str, str]:
    lines = RESULTS.read_text().splitlines()
    return {name: "\n".join(lines[first - 1:last]) for name, first, last in blocks(RESULTS.read_text())
            if name.startswith("reproduce:")}


def _rebuild(record: dict, root: Path) -> None:
    """The summary.json of each experiment, from the rows the claims read: seed-tagged labels, as a run writes."""
    summaries: dict[str, dict] = {}
    for claim in record["claims"]:
        for seed, rows in claim["rows"].items():
            for label, row in rows.items():
                tagged = f"{label},seed={seed}" if "@" in label else f"{label}@seed={seed}"
                summaries.setdefault(claim["experiment"], {})[tagged] = row
    for experiment, summary in summaries.items():
        (root / experiment).mkdir(parents=True, exist_ok=True)
        (root / experiment / "summary.json").write_text(json.dumps(summary))


@pytest.mark.parametrize("name", sorted(_block_texts()))
def test_each_reproduced_table_is_recomputed_from_docs_data(name, tmp_path):
    key, text = name.split(":", 1)[1], _block_texts()[name]
    path = data_file(key)
    if UNTRACED in text.splitlines()[1]:  # written before docs/data/ existed: says so; a re-run traces it
        assert not path.exists(), f"{name} says it has no per-run data, but {path} exists"
        return
    assert path.exists(), f"{name}: no {path.relative_to(DATA_DIR.parents[1])}; rerun its command with --write-docs"
    record = json.loads(path.read_text())
    assert record["block"] == name and f"docs/data/{path.name}" in text.splitlines()[1]
    _rebuild(record, tmp_path)
    recomputed = {r["claim"].text: r for r in rp.evaluate(tmp_path)}
    for claim in record["claims"]:
        r = recomputed[claim["text"]]
        assert r["per_seed"] == pytest.approx({int(s): v for s, v in claim["per_seed"].items()}, nan_ok=True)
        row = next(line for line in text.splitlines() if line.startswith(f"| {claim['text']} |"))
        assert _figure(r) in row, f"{claim['text']}: the table says {row!r}, docs/data gives {_figure(r)!r}"
        assert r["verdict"] in row or r["claim"].by_construction, claim["text"]
        if record.get("earlier"):  # a re-run keeps the figure it replaced beside its own
            assert f"(before: {record['earlier']['figures'].get(claim['text'], 'not in it')})" in row


def test_every_data_file_belongs_to_a_block():
    names = set(_block_texts())
    for path in sorted(DATA_DIR.glob("reproduce-*.json")):
        assert json.loads(path.read_text())["block"] in names, f"{path}: its block is gone from docs/results.md"


# -- the benchmarks' blocks (edgesync/docs_data.py) ------------------------------------------------------------
from edgesync.docs_data import (DATA_DIR as BENCH_DATA, UNTRACED as BENCH_UNTRACED, data_path,  # noqa: E402
                                earlier_section, renderer)

ROOT = RESULTS.parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_MEASURED = ("package_picture",)  # the import picture, drawn from the code: nothing measured to keep


def _benchmark_blocks() -> dict[str, tuple[Path, list[str]]]:
    """Every block but `reproduce`'s, across README.md and docs/*.md: name → (page, its lines)."""
    out = {}
    for page in PAGES:
        text = page.read_text()
        lines = text.splitlines()
        for name, first, last in blocks(text):
            if not name.startswith(("reproduce:", *NOT_MEASURED)):
                out[name] = (page, lines[first:last - 1])  # markers left out
    return out


@pytest.mark.parametrize("name", sorted(_benchmark_blocks()))
def test_each_benchmark_block_is_rendered_from_docs_data_or_says_it_has_none(name):
    page, body = _benchmark_blocks()[name]
    path = data_path(name)
    if BENCH_UNTRACED in body[0]:  # written before its benchmark kept data: says so; a re-run traces it
        assert not path.exists(), f"{page.name}: block {name} says it has no per-run data, but {path} exists"
        return
    render = renderer(name)
    assert render is not None and path.exists(), (
        f"{page.name}: block {name} neither names its per-run data (docs/data/, edgesync/docs_data.py) nor says "
        f"'{BENCH_UNTRACED}'")
    record = json.loads(path.read_text())
    assert record["block"] == name and f"docs/data/{path.name}" in record["note"]
    assert "\n".join(body) == record["note"] + "\n\n" + render(record["data"]) + earlier_section(record), (
        f"{page.name}: block {name} is not what docs/data/{path.name} renders; rerun its command with --write-docs")


def test_every_benchmark_data_file_belongs_to_a_block():
    names = set(_benchmark_blocks())
    for path in sorted(BENCH_DATA.glob("*.json")):
        if not path.name.startswith("reproduce-"):
            assert json.loads(path.read_text())["block"] in names, f"{path}: its block is gone from the docs"


def test_writing_an_empty_block_then_again_keeps_the_page_and_the_earlier_table(tmp_path):
    """A new block is written as "begin\\nend" with nothing between: its first write must keep the rest of the page
    untouched, and its second keeps the first's table beneath the new one."""
    from edgesync.docs_data import EARLIER_HEAD, write_block
    doc = tmp_path / "page.md"
    doc.write_text("# Page\n\n<!-- cross_check:demo:begin -->\n<!-- cross_check:demo:end -->\n\nAfter.\n")
    run = lambda s: [{"seed": 0, "base_step_s": 0.01, "target_acc": 0.8,  # noqa: E731
                      "entries": {"a": {"live_s": 2.0, "sim_s": s, "live_fidelity": 0.0}}}]
    write_block(doc, "cross_check:demo", "_Written by `first`._", run(1.0), folder=tmp_path)
    first = doc.read_text()
    assert first.startswith("# Page\n\n<!-- cross_check:demo:begin -->\n_Written by `first`._")
    assert first.endswith("<!-- cross_check:demo:end -->\n\nAfter.\n") and EARLIER_HEAD not in first
    assert first.count("<!-- cross_check:demo:end -->") == 1
    write_block(doc, "cross_check:demo", "_Written by `second`._", run(3.0), folder=tmp_path)
    second = doc.read_text()
    assert second.count("<!-- cross_check:demo:end -->") == 1 and second.endswith("end -->\n\nAfter.\n")
    assert f"{EARLIER_HEAD} — the table it replaced, as written then (`first`):" in second
    assert "| 0 | 10.0 | a | 2.0 | 1.0 | 0.50 |" in second and "| 0 | 10.0 | a | 2.0 | 3.0 | 1.50 |" in second
