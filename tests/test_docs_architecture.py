"""docs/architecture.md's package map names every module of `edgesync/`, and nothing that is not there.

How the table names files: a row's first cell names paths (`edgesync/runtime/live/client.py`, a folder
`edgesync/compression/`) and may add bare names beside them (`edgesync/algorithms/ssgd.py`, `asgd.py`);
its text may name more (`gradient_client.py` is their shared client half). A backticked `*.py` anywhere
in a row is read from the repository root, from `edgesync/`, or from a folder the row's first cell
names, the first that exists. So a module counts as mapped when its path, or its file name in a row of
its folder, appears in the table; a `*.py` (or a first-cell folder) that resolves to nothing fails.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
TICKED = re.compile(r"`([^`\s]+)`")


def _rows() -> list[str]:
    """The table rows of the "Package map" section, header and separator left out."""
    text = DOC.read_text(encoding="utf-8")
    section = re.search(r"^## Package map\s*$(.*?)(?=^#{1,2} |\Z)", text, re.MULTILINE | re.DOTALL)
    assert section, "docs/architecture.md has no '## Package map' section"
    rows = [line for line in section.group(1).splitlines() if line.startswith("|")]
    return [row for row in rows[2:] if not set(row) <= set("|-: ")]


def _first_cell(row: str) -> str:
    return row.split("|")[1]


def _folders(row: str) -> list[Path]:
    """The folders a row is about: each path in its first cell, or the folder holding it."""
    out = []
    for token in TICKED.findall(_first_cell(row)):
        if "/" in token:
            out.append(ROOT / token if token.endswith("/") else (ROOT / token).parent)
    return out


def _resolve(token: str, folders: list[Path]) -> Path | None:
    for base in [ROOT, ROOT / "edgesync", *folders]:
        if (base / token).is_file():
            return (base / token).resolve()
    return None


def _modules() -> list[Path]:
    return sorted(p.resolve() for p in (ROOT / "edgesync").rglob("*.py") if p.name != "__init__.py")


def test_the_map_has_rows():
    assert len(_rows()) > 20


def test_every_module_is_in_the_package_map():
    mapped = set()
    for row in _rows():
        folders = _folders(row)
        mapped |= {_resolve(t, folders) for t in TICKED.findall(row) if t.endswith(".py")}
    missing = [str(p.relative_to(ROOT)) for p in _modules() if p not in mapped]
    assert not missing, ("modules docs/architecture.md's package map does not name (add each to the row of "
                         f"its folder, as a path or a file name): {missing}")


def test_every_file_and_folder_the_map_names_exists():
    dangling = []
    for row in _rows():
        folders = _folders(row)
        dangling += [t for t in TICKED.findall(row) if t.endswith(".py") and _resolve(t, folders) is None]
        dangling += [t for t in TICKED.findall(_first_cell(row)) if t.endswith("/") and not (ROOT / t).is_dir()]
    assert not dangling, f"docs/architecture.md's package map names what is not in the repository: {dangling}"


def test_the_package_picture_is_the_code_as_it_is():
    # Prepare: the picture scripts/package_picture.py draws of this checkout, and the one in the docs
    sys.path.insert(0, str(ROOT / "scripts"))
    import package_picture
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    # Execute
    written = text.split("<!-- package_picture:now:begin -->\n", 1)[1].split("\n<!-- package_picture:now:end -->")[0]
    # Assert
    assert written.split("\n\n", 1)[1] == package_picture.pictures(ROOT, keep_all=False), (
        "docs/architecture.md's package picture is out of date: run scripts/package_picture.py --write-docs")
