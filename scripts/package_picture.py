"""The packages of edgesync and their imports, as Mermaid flowcharts for docs/architecture.md.

    .venv/bin/python scripts/package_picture.py                 # print the pictures
    .venv/bin/python scripts/package_picture.py --write-docs    # write them into docs/architecture.md
    .venv/bin/python scripts/package_picture.py --root OLD_CHECKOUT --name before --write-docs

The import graph is the one tests/test_structure.py checks (read from the source with `ast`): folder A has
an arrow to folder B when a module inside A imports one inside B. An arrow that a longer path already implies
is left out (A → C when A → B → C), so the picture shows the layering, not every import; `--all` keeps them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import test_structure as structure  # noqa: E402  (the graph the structure tests hold the code to)

sys.path.insert(0, str(ROOT))
from edgesync.docs_block import replace_block  # noqa: E402

DOC = ROOT / "docs" / "architecture.md"
# The packages whose insides are drawn too, below the top level.
INSIDE = ("edgesync.runtime", "edgesync.algorithms")


def reachable(edges: dict[str, set[str]], start: str, skip: tuple[str, str] | None = None) -> set[str]:
    """Where `start` leads, without the edge `skip`."""
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        for w in edges.get(v, ()):
            if (v, w) != skip and w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def in_loops(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The edges on an import loop: A → B where B leads back to A."""
    return {(a, b) for a, bs in edges.items() for b in bs if a in reachable(edges, b)}


def reduced(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """An edge is kept when no other path joins its ends, or when it is on a loop (drawn red)."""
    loops = in_loops(edges)
    return {a: {b for b in bs if (a, b) in loops or b not in reachable(edges, a, (a, b))} for a, bs in edges.items()}


def short(name: str, package: str) -> str:
    return name[len(package) + 1:]


def flowchart(root: Path, package: str, keep_all: bool) -> str:
    graph = structure.import_graph(root, structure.PACKAGE)
    folders = structure.folder_graph(graph, package)
    children = sorted({structure._child(m, package) for m in graph if structure._child(m, package)})
    edges = {a: set(folders.get(a, {})) for a in children}
    loops = in_loops(edges)
    if not keep_all:
        edges = reduced(edges)
    is_dir = lambda child: (root / Path(*child.split("."))).is_dir()  # noqa: E731
    label = lambda child: short(child, package) + ("/" if is_dir(child) else ".py")  # noqa: E731
    ident = lambda child: short(child, package).replace(".", "_")  # noqa: E731
    lines = ["flowchart BT"]
    lines += [f'    {ident(c)}["{label(c)}"]' for c in children]
    drawn = [(a, b) for a in children for b in sorted(edges[a])]
    lines += [f"    {ident(a)} --> {ident(b)}" for a, b in drawn]
    lines += [f"    linkStyle {i} stroke:red,stroke-width:2px" for i, edge in enumerate(drawn) if edge in loops]
    return "\n".join(lines)


def pictures(root: Path, keep_all: bool) -> str:
    parts = []
    for package in (structure.PACKAGE, *INSIDE):
        if not (root / Path(*package.split("."))).is_dir():
            continue
        parts.append(f"`{package.replace('.', '/')}/`:\n\n```mermaid\n{flowchart(root, package, keep_all)}\n```")
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to draw (default: this one)")
    parser.add_argument("--name", default="now", help="the block of docs/architecture.md to write: now or before")
    parser.add_argument("--all", action="store_true", help="every arrow, not only those no longer path implies")
    parser.add_argument("--write-docs", action="store_true", help="write the pictures into docs/architecture.md")
    args = parser.parse_args()
    body = pictures(args.root.resolve(), args.all)
    if args.write_docs:
        replace_block(DOC, f"<!-- package_picture:{args.name}:begin -->", f"<!-- package_picture:{args.name}:end -->",
                      f"_Written by `scripts/package_picture.py{' --root DIR' if args.root.resolve() != ROOT else ''}"
                      f"{' --name ' + args.name if args.name != 'now' else ''} --write-docs`._\n\n{body}")
    print(body)


if __name__ == "__main__":
    main()
