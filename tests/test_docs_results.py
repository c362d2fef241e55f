"""docs/results.md is written by the runs: every table of figures inside a block its command regenerates."""
from __future__ import annotations

from pathlib import Path

from edgesync.docs_block import WRITERS, blocks, stray_figures

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results.md"

SYNTHETIC = """# Results

Prose that explains the setup: 4 clients, one ×10 straggler, lr 0.05, 10 Mbit/s links.

<!-- reproduce:quick-sim:begin -->
_Written by `edgesync reproduce` (quick-sim)._

| claim | ours |
|---|---|
| speedup | 5.8× |
<!-- reproduce:quick-sim:end -->

```bash
| this is a shell pipe in a code fence, not a table |
```
"""


def test_the_check_accepts_tables_in_blocks_and_numbers_that_are_settings():
    assert stray_figures(SYNTHETIC) == []
    assert blocks(SYNTHETIC) == [("reproduce:quick-sim", 5, 11)]


def test_the_check_finds_a_table_outside_a_block():
    text = SYNTHETIC + "\n| entry | final acc |\n|---|---|\n| esync | 83.1 % |\n"
    found = stray_figures(text)
    assert [f.split(":")[0] for f in found] == ["line 17", "line 18", "line 19"]
    assert all("table row outside a regenerated block" in f for f in found)


def test_the_check_finds_measured_figures_in_prose():
    for prose in ("ESync is 5.8× faster", "DGS ends −1.8 pt below ASGD", "accuracy 83.1 %", "+0.25 pt"):
        (found,) = stray_figures(SYNTHETIC + "\n" + prose + "\n")
        assert "a measured figure in prose" in found, prose
    assert stray_figures(SYNTHETIC + "\none ×100 straggler and a ×10 one\n") == []  # a profile, not a figure
    assert stray_figures(SYNTHETIC + "\na 95% interval at 99% sparsity\n") == []  # settings, not figures


def test_a_block_left_open_does_not_count_as_a_block():
    text = SYNTHETIC.replace("<!-- reproduce:quick-sim:end -->", "")
    assert blocks(text) == [] and any("table row" in f for f in stray_figures(text))


def test_results_md_holds_figures_only_in_regenerated_blocks():
    text = RESULTS.read_text()
    assert stray_figures(text) == []


def test_every_block_of_results_md_is_written_by_a_known_command_and_says_how():
    text = RESULTS.read_text()
    lines = text.splitlines()
    assert blocks(text), "docs/results.md has no regenerated block"
    for name, first, _ in blocks(text):
        assert name.split(":")[0] in WRITERS, f"block {name}: no command writes it (docs_block.WRITERS)"
        assert lines[first].startswith("_Written by"), f"block {name} does not say what wrote it"
        if name.startswith("reproduce:"):
            note = lines[first]
            assert "machine:" in note and "base step" in note and "seeds" in note, f"block {name}: {note}"
