"""`edgesync new algorithm|model|dataset NAME` (edgesync/cli/new.py): the package it writes installs with pip and
its generated tests, which run the conformance kit, pass as generated.

Each package is installed into a throwaway virtual environment, not the project's: the environment has no pip of
its own and sees the project's site-packages through a .pth file (so torch, edgesync, pip, setuptools and pytest
come from there); `pip install --no-deps --no-build-isolation -e` needs no network."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgesync.cli.app import app
from throwaway_venv import throwaway_python as make_throwaway_python

pytestmark = pytest.mark.serial_lane  # pip and a pytest of their own: waiting on subprocesses, beside the Ray tests

# the generated tests run in a pytest of their own: none of this one's settings (an xdist worker's) reach it
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "FLWR_TELEMETRY_ENABLED": "0"}


def edgesync(*args: str):
    return CliRunner().invoke(app, list(args), terminal_width=200)


@pytest.fixture(scope="module")
def throwaway_python(tmp_path_factory) -> Path:
    return make_throwaway_python(tmp_path_factory.mktemp("venv"))


def run(cmd: list, cwd: Path, timeout_s: float) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.parametrize("kind, group, attr", [
    pytest.param("algorithm", "edgesync.algorithms", "MY_ALGORITHM", marks=pytest.mark.slow),  # live runs: ~10 s
    ("model", "edgesync.models", "build"),
    ("dataset", "edgesync.datasets", "load"),
])
def test_a_new_package_installs_and_its_generated_tests_pass(kind, group, attr, tmp_path, throwaway_python):
    name = f"my_{kind}"
    result = edgesync("new", kind, name, "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    package = tmp_path / name
    assert f"Wrote {kind} {name!r} in {package}/" in result.output and f"pytest {package}" in result.output
    assert {str(p.relative_to(package)) for p in package.rglob("*") if p.is_file()} == {
        "pyproject.toml", "README.md", f"src/{name}/__init__.py", f"tests/test_{name}.py", f"{name}.yaml"}

    run([throwaway_python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e",
         name], tmp_path, timeout_s=120)
    found = run([throwaway_python, "-c", f"from importlib.metadata import entry_points as e; "
                                         f"print([p.value for p in e(group={group!r}) if p.name == {name!r}])"],
                tmp_path, timeout_s=60)
    assert found.stdout.strip() == str([f"{name}:{attr}"])
    tests = run([throwaway_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", name], tmp_path, timeout_s=300)
    assert "1 passed" in tests.stdout, tests.stdout


def test_the_generated_scenario_names_the_extension_as_an_installed_one(tmp_path):
    import yaml
    for kind in ("algorithm", "model", "dataset"):
        assert edgesync("new", kind, f"lab_{kind}", "--dir", str(tmp_path)).exit_code == 0
    scenarios = {kind: yaml.safe_load((tmp_path / f"lab_{kind}" / f"lab_{kind}.yaml").read_text())
                 for kind in ("algorithm", "model", "dataset")}
    assert scenarios["algorithm"]["algorithms"][0]["name"] == "lab_algorithm"
    assert scenarios["model"]["model"] == {"name": "lab_model", "args": {"width": 16}}
    assert scenarios["dataset"]["dataset"]["name"] == "lab_dataset"


@pytest.mark.parametrize("args, says", [
    (["algorithm", "9lives"], "'9lives' is not a valid Python identifier"),
    (["model", "class"], "'class' is not a valid Python identifier"),
    (["dataset", "numpy"], "'numpy': a module of that name is already importable here"),
])
def test_a_bad_name_is_refused_in_one_line_and_nothing_is_written(args, says, tmp_path):
    result = edgesync("new", *args, "--dir", str(tmp_path))
    assert result.exit_code == 2 and says in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_a_folder_that_holds_something_is_refused_in_one_line(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept\n")
    result = edgesync("new", "algorithm", "mine", "--dir", str(tmp_path))
    assert result.exit_code == 2 and result.stderr.strip() == f"{tmp_path / 'mine'} already exists and is not an " \
                                                              "empty folder: nothing was written"
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert edgesync("new", "model", "empty", "--dir", str(tmp_path)).exit_code == 0  # an empty folder is used
