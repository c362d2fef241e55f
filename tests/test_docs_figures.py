"""Measured figures live in blocks their command regenerates (edgesync/docs_block.py), in README.md and every
docs/*.md: a measured-looking figure outside a block — a decimal with a unit of time, size, rate or share, or a
number with × or pt, outside a `code span` (a setting) — fails here.

README.md, docs/results.md and docs/algorithms.md hold none. The other pages still carry figures measured by
hand before the blocks existed; each page may hold at most the number it held when this check arrived
(HAND_WRITTEN), so none is added, and the number only goes down as they move into blocks or are re-run."""
from __future__ import annotations

from pathlib import Path

import pytest

from edgesync.docs_block import WRITERS, blocks, measured_lines

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Lines with hand-written measured figures, per page, when this check arrived (2026-11-27): only to go down.
HAND_WRITTEN = {
    "docs/architecture.md": 0,
    "docs/benchmarks.md": 0,
    "docs/flower.md": 0,
    "docs/lab.md": 0,
    "docs/links.md": 0,
    "docs/scenarios.md": 0,
    "docs/simulator.md": 0,
    "docs/testing.md": 0,
}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_measured_figure_is_added_outside_a_regenerated_block(page):
    name = str(page.relative_to(ROOT))
    found = measured_lines(page.read_text())
    allowed = HAND_WRITTEN.get(name, 0)
    shown = "\n".join(f"  line {n}: {line.strip()[:120]}" for n, line in found)
    assert len(found) <= allowed, (
        f"{name}: {len(found)} lines with a measured-looking figure outside a regenerated block (at most "
        f"{allowed}):\n{shown}\nPut a measured figure into a block its command writes (edgesync/docs_block.py), "
        "write a setting as `code`, or say it in words")


def test_the_hand_written_counts_are_not_stale():
    """A page that lost figures lowers its allowance with it, so that they cannot come back unnoticed."""
    for name, allowed in HAND_WRITTEN.items():
        assert len(measured_lines((ROOT / name).read_text())) == allowed, f"{name}: update HAND_WRITTEN"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_names_the_command_that_writes_it(page):
    lines = page.read_text().splitlines()
    for name, first, _ in blocks(page.read_text()):
        assert name.split(":")[0] in WRITERS, f"{page.name}: block {name}: no command writes it (docs_block.WRITERS)"
        assert lines[first].startswith("_Written by"), f"{page.name}: block {name} does not say what wrote it"


def test_the_check_tells_settings_and_shapes_from_figures():
    text = "a ×10 client every 30 s on 10 Mbit/s links, 28×28 images, `slack_s: 0.5` s\n"
    assert measured_lines(text) == []
    for figure in ("it took 21.6 ms", "0.74 MB messages", "5.9 % long", "2.2× slower", "−1.8 pt"):
        assert measured_lines(figure + "\n"), figure
    fenced = "```\nspeedup 5.8×\n```\n<!-- quickstart:begin -->\n_Written by x_\n| a | 5.8× |\n<!-- quickstart:end -->\n"
    assert measured_lines(fenced) == []
