"""The package's shape: no import cycles between edgesync's modules or between its folders, no import against
the layering docs/architecture.md documents ("Layers"), the runtime's subsystems in their order
(RUNTIME_LAYERS), and no file over 400 lines.

The import graph is read from the source with `ast`, not by importing: every `import` and `from … import`
anywhere in a module counts (at the top, inside functions, under `if TYPE_CHECKING:`), since each one is a
dependency someone has to understand, and a function-level import is where a cycle usually hides.

An edge goes to the module named: `import a.b.c` and `from a.b import c` (c a module) are edges to a.b.c,
`from a.b import name` (a name defined in a/b/__init__.py) to a.b. The packages whose `__init__` Python
runs on the way are not edges, as in import-linter: a package that imports its own submodules is the
usual layout, not a cycle.

Folders: inside each package, its direct children (subpackages and modules) import one another when a module
inside one imports a module inside the other. A loop there is a loop between folders, even when the files
form none (runtime/runs.py → tune.py → runtime/bookkeeping/checkpoint.py, before tune.py moved into runtime: no file
repeated, yet runtime and tune needed each other). At the top, `edgesync`'s children are its folders (`edgesync.runtime`) and its top-level modules
(`edgesync.constants`), each a folder of its own; LAYERS orders them.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "edgesync"
ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 400
SHOWN_LOCATIONS = 3  # a folder edge names this many of the imports that make it, then counts the rest


@dataclass(frozen=True)
class Layer:
    name: str
    folders: tuple[str, ...]  # edgesync's children, without the "edgesync." prefix
    linked: bool = False      # whether its folders may import one another (the cycle test still holds)


# edgesync's folders, lowest layer first: a folder imports only from the layers below its own, and from its own
# layer's folders where the layer is linked. docs/architecture.md ("Layers") gives the picture and the reasons.
LAYERS = (
    Layer("core", ("constants", "params", "buffer_checks", "model_passes", "trainer", "models", "data", "compression",
                   "docs_block", "docs_data", "extensions"), linked=True),
    Layer("emulation", ("emulation",)),
    Layer("wire and algorithms", ("transport", "algorithms")),  # the wire knows no algorithm, an algorithm no wire
    Layer("metrics", ("metrics",)),
    Layer("config", ("config",)),
    Layer("runtime", ("runtime",)),
    Layer("front ends", ("flower", "reproduce", "api", "testing", "dashboard")),
    Layer("cli", ("cli",)),
)
# Inside runtime/, lowest first: what every runtime records about a run; the two ways to spread the server's
# work; the two runtimes, which never import each other; running a scenario in either (docs/architecture.md).
RUNTIME_LAYERS = (
    Layer("bookkeeping", ("bookkeeping",)),
    Layer("spreading the server", ("sharding", "allreduce")),
    Layer("runtimes", ("live", "sim")),
    Layer("running a scenario", ("tuning", "tuning_edges", "runs"), linked=True),
)


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


def packages(root: Path = ROOT, package: str = PACKAGE) -> list[str]:
    """The package and every subpackage under it (the modules that are an `__init__.py`)."""
    return [m for m, path in _modules(root, package).items() if path.name == "__init__.py"]


def _child(module: str, package: str) -> str | None:
    """The direct child of `package` that holds `module` (edgesync.runtime.runs → edgesync.runtime), or None
    when `module` is not inside `package` (the package's own `__init__` included)."""
    if not module.startswith(package + "."):
        return None
    return f"{package}.{module[len(package) + 1:].split('.')[0]}"


def folder_graph(graph: dict[str, dict[str, str]], package: str = PACKAGE) -> dict[str, dict[str, str]]:
    """`package`'s direct children → {child it imports → where ("file:line" of the imports that make the
    edge)}: child A imports child B when a module inside A imports a module inside B."""
    found: dict[str, dict[str, list[str]]] = {}
    for module, edges in graph.items():
        a = _child(module, package)
        if a is None:
            continue
        row = found.setdefault(a, {})
        for target, where in edges.items():
            b = _child(target, package)
            if b is not None and b != a:
                row.setdefault(b, []).append(where)
    return {a: {b: _locations(wheres) for b, wheres in row.items()} for a, row in found.items()}


def _locations(wheres: list[str]) -> str:
    shown = sorted(wheres, key=lambda w: (w.rpartition(":")[0], int(w.rpartition(":")[2])))[:SHOWN_LOCATIONS]
    more = len(wheres) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def layering_violations(folders: dict[str, dict[str, str]], layers: tuple[Layer, ...] = LAYERS,
                        package: str = PACKAGE) -> list[str]:
    """Each import of a folder from a higher layer, or from a sibling in an unlinked layer, named."""
    rank = {f"{package}.{folder}": i for i, layer in enumerate(layers) for folder in layer.folders}
    out = []
    for a, edges in sorted(folders.items()):
        for b, where in sorted(edges.items()):
            low, high = layers[rank[a]], layers[rank[b]]
            if rank[b] > rank[a] or (rank[b] == rank[a] and not low.linked):
                out.append(f"{a} ({low.name}) imports {b} ({high.name}): {where}")
    return out


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


def test_no_folders_import_each_other_in_a_loop_at_any_level():
    graph = import_graph()
    found = []
    for package in packages():
        folders = folder_graph(graph, package)
        found += [_describe(c, folders) for c in cycles(folders)]
    assert not found, "import cycles between folders:\n  " + "\n  ".join(found)


def test_no_folder_imports_against_the_layering():
    violations = layering_violations(folder_graph(import_graph()))
    assert not violations, ("imports against the layering (LAYERS; docs/architecture.md, Layers):\n  "
                            + "\n  ".join(violations))


def test_every_folder_has_one_layer():
    # Prepare
    placed = [f"{PACKAGE}.{folder}" for layer in LAYERS for folder in layer.folders]
    children = {_child(m, PACKAGE) for m in _modules(ROOT, PACKAGE) if m != PACKAGE}
    # Assert: a new folder or top-level module is placed on purpose; a name that left the package goes too
    assert len(placed) == len(set(placed)), f"a folder in two layers: {sorted(placed)}"
    assert sorted(children - set(placed)) == [], "folders in no layer: add each to LAYERS and docs/architecture.md"
    assert sorted(set(placed) - children) == [], "layers name what edgesync does not hold"


def test_the_docs_show_the_layers_in_order():
    # Prepare: the Layers section of docs/architecture.md, its table's rows from the highest layer down
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = re.search(r"^## Layers\s*$(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert section, "docs/architecture.md has no '## Layers' section"
    rows = [line for line in section.group(1).splitlines() if line.startswith("| ") and "`" in line]
    # Execute
    documented = [(cells[1].strip(), re.findall(r"`([^`]+)`", cells[2]), cells[3].strip())
                  for cells in (row.split("|") for row in rows)]
    # Assert
    assert documented == [(layer.name, [f + "/" if (ROOT / PACKAGE / f).is_dir() else f + ".py" for f in layer.folders],
                           "yes" if layer.linked else "no" if len(layer.folders) > 1 else "—")
                          for layer in reversed(LAYERS)]


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


def test_folder_edges_gather_their_imports_and_loops_between_folders_are_found():
    # Prepare: modules whose files form no loop, while their folders a and b import each other
    graph = {"p": {}, "p.a": {}, "p.a.x": {"p.b.y": "p/a/x.py:3"}, "p.a.z": {"p.a.x": "p/a/z.py:1"},
             "p.b": {}, "p.b.y": {"p.c": "p/b/y.py:2"}, "p.b.w": {"p.a.z": "p/b/w.py:7"}, "p.c": {"p": "p/c.py:1"}}
    # Execute
    folders = folder_graph(graph, "p")
    inside_a = folder_graph(graph, "p.a")
    # Assert
    assert cycles(graph) == []
    assert folders == {"p.a": {"p.b": "p/a/x.py:3"}, "p.b": {"p.a": "p/b/w.py:7", "p.c": "p/b/y.py:2"}, "p.c": {}}
    assert cycles(folders) == [["p.a", "p.b", "p.a"]]
    assert "(p/b/w.py:7)" in _describe(cycles(folders)[0], folders)
    assert inside_a == {"p.a.x": {}, "p.a.z": {"p.a.x": "p/a/z.py:1"}}  # one level down: its own children
    assert _locations([f"f.py:{i}" for i in (10, 9, 2, 1, 3)]) == "f.py:1, f.py:2, f.py:3 and 2 more"


def test_an_import_against_the_layering_is_named():
    # Prepare: low < mid (unlinked: m1, m2 independent) < top (linked)
    layers = (Layer("low", ("l",)), Layer("mid", ("m1", "m2")), Layer("top", ("t1", "t2"), linked=True))
    folders = {"p.l": {"p.m1": "p/l.py:4"}, "p.m1": {"p.l": "p/m1.py:1", "p.m2": "p/m1.py:2"}, "p.m2": {},
               "p.t1": {"p.t2": "p/t1.py:1", "p.l": "p/t1.py:2"}, "p.t2": {}}
    # Execute
    found = layering_violations(folders, layers, "p")
    # Assert: upwards and between independent siblings are refused; down and between linked siblings are not
    assert found == ["p.l (low) imports p.m1 (mid): p/l.py:4", "p.m1 (mid) imports p.m2 (mid): p/m1.py:2"]


def test_no_file_is_longer_than_400_lines():
    long = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_FILE_LINES:
            long[str(path.relative_to(ROOT))] = lines
    assert not long, f"over {MAX_FILE_LINES} lines: " + ", ".join(f"{p} ({n})" for p, n in long.items())


def test_the_runtime_subsystems_import_only_down_their_layers():
    # Prepare: runtime's children and the imports between them
    package = f"{PACKAGE}.runtime"
    folders = folder_graph(import_graph(), package)
    placed = [f"{package}.{folder}" for layer in RUNTIME_LAYERS for folder in layer.folders]
    children = {_child(m, package) for m in _modules(ROOT, PACKAGE) if _child(m, package)}
    # Assert: every subsystem placed, none imports against the order (live and sim never import each other)
    assert sorted(children ^ set(placed)) == [], "runtime's children and RUNTIME_LAYERS differ"
    violations = layering_violations(folders, RUNTIME_LAYERS, package)
    assert not violations, "imports against RUNTIME_LAYERS:\n  " + "\n  ".join(violations)
