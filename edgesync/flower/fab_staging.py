"""The files a Flower app's FAB holds, in a folder of their own, for `flwr run` to build from.

`flwr run APP_DIR` builds the FAB by walking APP_DIR and matching each file against `fab-include`; in this
repository that walk meets the virtual environment, run folders and data: about 5 s on 2 cores for a FAB of
288 files in a checkout with its .venv, 23 s with the peers' environments beside it (benchmarks/peers/.venvs),
before every run of `edgesync flower-up`, the lab's tests and benchmarks/flower_overhead.py. `staged_app` copies the files `fab-include` names (and
pyproject.toml) into a temporary folder; the FAB built from it is the same, byte for byte (its hash, which
is in its name, is the same), in about a second. An app without `fab-include`, or with `fab-exclude`, is
built from its own folder as before: the staging would have to reproduce Flower's default rules.
"""
from __future__ import annotations

import glob
import shutil
import tempfile
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def fab_include(app_dir: Path) -> list[str] | None:
    """The app's `fab-include` patterns, or None when it has none (or also has `fab-exclude`)."""
    try:
        app = tomllib.loads((app_dir / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["flwr"]["app"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None
    include = app.get("fab-include")
    if not isinstance(include, list) or "fab-exclude" in app:
        return None
    return [str(p) for p in include]


@contextmanager
def staged_app(app_dir: Path) -> Iterator[Path]:
    """A folder holding the app's FAB files (a temporary copy, removed afterwards), or `app_dir` itself."""
    app_dir = Path(app_dir).resolve()
    patterns = fab_include(app_dir)
    if patterns is None:
        yield app_dir
        return
    with tempfile.TemporaryDirectory(prefix="edgesync-fab-") as tmp:
        stage = Path(tmp) / app_dir.name
        stage.mkdir()
        shutil.copy2(app_dir / "pyproject.toml", stage / "pyproject.toml")
        for pattern in patterns:
            for name in glob.glob(pattern, root_dir=app_dir, recursive=True):
                source = app_dir / name
                if source.is_file():
                    (stage / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, stage / name)
        yield stage
