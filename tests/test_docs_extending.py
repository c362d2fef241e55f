"""docs/extending.md works as written: every file it shows is written into an empty folder, and every command it
shows is run — the tutorial's algorithm in the simulator and live, its entry point in `edgesync plugins`, the
conformance kit on it, `edgesync new` then `pip install` and `pytest` of what it wrote, the example package's
commands, and the outside device-profile kind. Commands that install something run in a throwaway environment
(tests/throwaway_venv.py), never the project's."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from throwaway_venv import environment, throwaway_python

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)

# Each bash block of the page, by a line it holds, and the test below that runs it.
COMMANDS = {
    "edgesync run decay.yaml --out runs/decay-sim": "test_the_tutorials_commands_run_as_written",
    "edgesync plugins": "test_the_entry_point_makes_a_plain_name_and_edgesync_plugins_lists_it",
    "pytest test_mylab.py": "test_the_conformance_kit_passes_on_the_tutorials_algorithm",
    "edgesync new algorithm foo": "test_edgesync_new_then_pip_install_and_pytest_pass",
    "pip install -e examples/edgesync-feddyn": "test_the_worked_examples_commands_run_as_written",
    "edgesync run examples/edgesync-feddyn/feddyn.yaml --out": "test_the_worked_examples_commands_run_as_written",
    "pytest examples/edgesync-feddyn/tests": "test_the_worked_examples_commands_run_as_written",
    "mylab.devices:Burst": "test_the_outside_profile_kind_runs_as_written",
}


def fenced(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == language]


def block(holding: str) -> str:
    (found,) = [body for body in fenced("bash") if holding in body]
    return found


def commands(holding: str) -> list[str]:
    return block(holding).strip().splitlines()


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """An empty folder with every file the page shows, as it names them (the first line: `# path`)."""
    root = tmp_path_factory.mktemp("lab")
    for code in fenced("python"):
        first = code.splitlines()[0]
        assert first.startswith("# "), f"a code block names its file on its first line: {first!r}"
        path = root / first[2:].strip()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root:
            (path.parent / "__init__.py").touch()
        path.write_text(code)
    (yaml_text,) = fenced("yaml")
    (root / "decay.yaml").write_text(yaml_text)
    return root


def run(command: str, cwd: Path, env: dict | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess:
    env = env or {**os.environ, "FLWR_TELEMETRY_ENABLED": "0",
                  "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    return done


def ran(command: str, cwd: Path, env: dict | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess:
    done = run(command, cwd, env, timeout_s)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


def out_folder(command: str, cwd: Path) -> Path:
    words = shlex.split(command)
    return Path(cwd, words[words.index("--out") + 1])


def test_every_command_on_the_page_is_run_by_a_test():
    tests = {name for name in globals() if name.startswith("test_")}
    for body in fenced("bash"):
        runners = {test for holding, test in COMMANDS.items() if holding in body}
        assert runners and runners <= tests, f"no test runs this block of docs/extending.md:\n{body}"


@pytest.mark.slow
@pytest.mark.serial_lane
def test_the_tutorials_commands_run_as_written(lab):
    for command in commands("edgesync run decay.yaml --out runs/decay-sim"):
        ran(command, lab)
        out = out_folder(command, lab)
        summary = json.loads((out / "summary.json").read_text())
        assert {"fedavg_decay", "local_sgd"} <= set(summary), summary.keys()  # the outside entry, its own name
        assert json.loads((out / "extensions.json").read_text())[0]["name"] == "mylab.algos:FEDAVG_DECAY"


def test_the_tutorials_config_is_checked_like_a_built_in_one(lab):
    done = run("PYTHONPATH=. edgesync validate decay.yaml --set algorithms.0.decay=2 --set algorithms.0.local_step=3",
               lab)
    assert done.returncode != 0
    assert "algorithms.0.decay" in done.stdout + done.stderr and "did you mean 'local_steps'" in done.stdout + done.stderr


def test_the_entry_point_makes_a_plain_name_and_edgesync_plugins_lists_it(lab):
    """`pip install -e .` of a package with the page's entry point, as importlib.metadata sees it: a dist-info
    folder beside the package (what pip writes), found on the path."""
    (toml_text,) = fenced("toml")
    groups = tomllib.loads(toml_text)["project"]["entry-points"]
    dist = lab / "mylab-0.1.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mylab\nVersion: 0.1.0\n")
    (dist / "top_level.txt").write_text("mylab\n")
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in groups.items()))
    env = {**os.environ, "PYTHONPATH": str(lab), "COLUMNS": "200",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for body in fenced("bash"):
        if body.strip() == "edgesync plugins":  # the page shows it twice: installing, and checking a lab machine
            done = ran(body.strip(), lab, env)
            assert "fedavg_decay" in done.stdout and "mylab 0.1.0" in done.stdout, done.stdout
    ran("edgesync validate decay.yaml --set 'algorithms.0.name=fedavg_decay'", lab, env)


@pytest.mark.slow
@pytest.mark.serial_lane
def test_the_conformance_kit_passes_on_the_tutorials_algorithm(lab):
    (command,) = commands("pytest test_mylab.py")
    done = ran(command, lab, environment(Path(sys.executable)))
    assert "1 passed" in done.stdout, done.stdout


@pytest.fixture(scope="module")
def throwaway(tmp_path_factory) -> dict[str, str]:
    return environment(throwaway_python(tmp_path_factory.mktemp("venv")))


@pytest.mark.slow
@pytest.mark.serial_lane
def test_edgesync_new_then_pip_install_and_pytest_pass(tmp_path, throwaway):
    for command in commands("edgesync new algorithm foo"):
        ran(command, tmp_path, throwaway)
    assert (tmp_path / "foo" / "pyproject.toml").exists()


@pytest.mark.slow
@pytest.mark.serial_lane
def test_the_worked_examples_commands_run_as_written(tmp_path, throwaway):
    """From a folder that has the repository's examples/ (the page's commands name it relative), so that run
    folders go there and not into the checkout."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    install = commands("pip install -e examples/edgesync-feddyn")
    for command in install:
        done = ran(command, tmp_path, throwaway)
    assert "feddyn" in done.stdout and "widenet" in done.stdout, done.stdout  # `edgesync plugins`, after it
    for command in commands("edgesync run examples/edgesync-feddyn/feddyn.yaml --out"):
        ran(command, tmp_path, throwaway, timeout_s=400)
        summary = json.loads((out_folder(command, tmp_path) / "summary.json").read_text())
        assert {"feddyn", "fedavg"} <= set(summary), summary.keys()
    (command,) = commands("pytest examples/edgesync-feddyn/tests")
    assert " passed" in ran(command, tmp_path, throwaway).stdout


def test_the_outside_profile_kind_runs_as_written(lab):
    (command,) = commands("mylab.devices:Burst")
    ran(command, lab)
    rows = [json.loads(line) for line in (out_folder(command, lab) / "clients.jsonl").read_text().splitlines()]
    assert {r["profile"] for r in rows if r["client"] == 3} == {"burst(x8/4)"}
