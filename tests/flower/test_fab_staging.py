"""`flwr run` builds from a folder holding only the app's FAB files (edgesync/flower/fab_staging.py): the FAB
built from it must be the one Flower builds from the app's own folder, byte for byte."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from edgesync.flower.fab_staging import fab_include, staged_app

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "tinyapp"
version = "1.0.0"
dependencies = []

[tool.flwr.app]
publisher = "lab"
fab-include = ["pkg/**/*.py", "conf/*.yaml"]

[tool.flwr.app.components]
serverapp = "pkg.server:app"
clientapp = "pkg.client:app"

[tool.flwr.app.config]
rounds = 2
"""


def build(app: Path) -> tuple[str, dict[str, bytes]]:
    """`flwr build --app APP`: the FAB's file name (it carries the content's hash) and its members."""
    flwr = Path(sys.executable).with_name("flwr")
    done = subprocess.run([str(flwr), "build", "--app", str(app)], cwd=app, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (fab,) = app.glob("*.fab")
    with zipfile.ZipFile(fab) as z:
        members = {n: z.read(n) for n in z.namelist() if not n.startswith(".info/")}
    fab.unlink()
    return fab.name, members


def test_the_staged_folder_builds_the_same_fab(tmp_path):
    app = tmp_path / "tinyapp"
    for name, text in {"pyproject.toml": PYPROJECT, "pkg/__init__.py": "", "pkg/server.py": "app = None\n",
                       "pkg/client.py": "app = None\n", "pkg/sub/util.py": "X = 1\n", "conf/a.yaml": "a: 1\n",
                       "conf/deep/b.yaml": "b: 2\n", "data/big.bin": "x" * 10_000, "notes.md": "not in the FAB\n",
                       ".venv/lib/site.py": "not in the FAB\n"}.items():
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(text)
    with staged_app(app) as stage:
        assert stage != app
        assert sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file()) == [
            "conf/a.yaml", "pkg/__init__.py", "pkg/client.py", "pkg/server.py", "pkg/sub/util.py", "pyproject.toml"]
        staged = build(stage)
    assert not stage.exists()  # removed after the run
    assert staged == build(app)


def test_an_app_without_fab_include_is_built_from_its_own_folder(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace('fab-include = ["pkg/**/*.py", "conf/*.yaml"]\n', ""))
    assert fab_include(tmp_path) is None
    with staged_app(tmp_path) as stage:
        assert stage == tmp_path.resolve()


def test_this_repositorys_app_is_staged():
    assert fab_include(REPO) == ["edgesync/**/*.py", "server/*.py", "clients/*.py", "scenarios/*.yaml"]
