"""The package's shape: no import cycles between edgesync's modules, and small runtime files.

The import graph is read from the source with `ast`, not by importing: every `import` and `from … import`
anywhere in a module counts (at the top, inside functions, under `if TYPE_CHECKING:`), since each one is a
dependency someone has to understand, and a function-level import is where a cycle usually hides.

An edge goes to the module named: `import a.b.c` and `from a.b import c` (c a module) are edges to a.b.c,
`from a.b import name` (a name defined in a/b/__init__.py) to a.b. The packages whose `__init__` Python
runs on the way are not edges, as in import-linter: a package that imports its own submodules is the
usual layout, not a cycle.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "edgesync"
ROOT = Path(__file__).resolve().parents[1]
MAX_RUNTIME_FILE_LINES = 400


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Module name → file, for every module of the package under root."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The package's modules one import statement names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the module's own package, one level up per extra dot
            package = module.split(".") if is_package else module.split(".")[:-1]
            anchor = package[: len(package) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out = []
    for name in names:
        while name and name not in known:  # a name inside a module: that module
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, dict[str, str]]:
    """module → {imported module → where ("file:line")}, over the package's own modules."""
    modules = _modules(root, package)
    known = set(modules)
    graph: dict[str, dict[str, str]] = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, module, path.name == "__init__.py", known):
                    edges.setdefault(target, f"{path.relative_to(root)}:{node.lineno}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle (first module repeated at the end) per strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(group, graph) for group in groups]


def _cycle_in(group: list[str], graph: dict[str, dict[str, str]]) -> list[str]:
    """A shortest cycle through the group's first module, by breadth-first search inside the group."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w in members and w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {group}")


def _describe(cycle: list[str], graph: dict[str, dict[str, str]]) -> str:
    steps = [f"{a} → {b}  ({graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
    return " → ".join(cycle) + "\n    " + "\n    ".join(steps)


def test_the_package_has_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n  " + "\n  ".join(_describe(c, graph) for c in found)


def test_the_graph_sees_every_kind_of_import(tmp_path):
    # Prepare: a small package with each kind of import statement
    files = {
        "pkg/__init__.py": "from pkg import a  # its own submodule\n",
        "pkg/a.py": "import os\nimport pkg.sub.b\n",
        "pkg/sub/__init__.py": "NAME = 1\n",
        "pkg/sub/b.py": "def f():\n    from ..c import g  # inside a function, relative\n",
        "pkg/sub/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n"
                        "from pkg.sub import NAME\nfrom pkg.c import g as h\n",
        "pkg/c.py": "from pkg.sub.b import f\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    # Execute
    graph = import_graph(tmp_path, "pkg")
    # Assert
    assert {m: sorted(edges) for m, edges in graph.items()} == {
        "pkg": ["pkg.a"],
        "pkg.a": ["pkg.sub.b"],                    # os is not the package's
        "pkg.c": ["pkg.sub.b"],
        "pkg.sub": [],
        "pkg.sub.b": ["pkg.c"],                    # function-level, relative
        "pkg.sub.d": ["pkg.c", "pkg.sub", "pkg.sub.b"],  # TYPE_CHECKING; a package's name; a module's name
    }
    assert graph["pkg.sub.b"]["pkg.c"] == "pkg/sub/b.py:2"
    assert cycles(graph) == [["pkg.c", "pkg.sub.b", "pkg.c"]]


def test_cycles_are_found_at_any_length_and_named():
    # Prepare: a hand-made graph, a → b → c → a plus a self-contained d ⇄ e, f acyclic
    graph = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:2"}, "c": {"a": "c.py:3", "f": "c.py:4"},
             "d": {"e": "d.py:1"}, "e": {"d": "e.py:9"}, "f": {}}
    # Execute
    found = cycles(graph)
    # Assert
    assert found == [["a", "b", "c", "a"], ["d", "e", "d"]]
    assert "a → b → c → a" in _describe(found[0], graph) and "(c.py:3)" in _describe(found[0], graph)
    assert cycles({"a": {"b": ""}, "b": {}}) == []


def test_no_runtime_file_is_longer_than_400_lines():
    long = {}
    for path in sorted((ROOT / PACKAGE / "runtime").rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_RUNTIME_FILE_LINES:
            long[str(path.relative_to(ROOT))] = lines
    assert not long, f"over {MAX_RUNTIME_FILE_LINES} lines: " + ", ".join(f"{p} ({n})" for p, n in long.items())
