"""Figures written into the docs by the command that measured them: a block between two HTML comments."""
from __future__ import annotations

from pathlib import Path


def replace_block(doc: Path, begin: str, end: str, body: str, missing: str | None = None) -> None:
    """Put `body` between the markers `begin` and `end` in `doc`. Without the markers: append `missing`
    (a heading, say) and the block when `missing` is given, else refuse, saying which markers to add."""
    content = doc.read_text()
    block = f"{begin}\n{body}\n{end}"
    if begin in content and end in content:
        head, rest = content.split(begin, 1)
        content = head + block + rest.split(end, 1)[1]
    elif missing is not None:
        content = content.rstrip("\n") + f"\n\n{missing}\n\n{block}\n"
    else:
        raise SystemExit(f"{doc}: no {begin} … {end} block to write into")
    doc.write_text(content)
