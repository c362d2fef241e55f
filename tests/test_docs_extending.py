"""docs/extending.md works as written: its package file, scenario and commands, run from an empty folder —
the tutorial's algorithm in the simulator and live, and `edgesync plugins` finding its entry point."""
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

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def fenced(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(DOC.read_text()) if lang == language]


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """An empty folder with the tutorial's package and scenario, as the page writes them."""
    root = tmp_path_factory.mktemp("lab")
    (code,) = fenced("python")
    first = code.splitlines()[0]
    assert first.startswith("# "), "the tutorial's code block names its file on its first line"
    path = root / first[2:].strip()
    path.parent.mkdir(parents=True)
    (path.parent / "__init__.py").write_text("")
    path.write_text(code)
    (yaml_text,) = fenced("yaml")
    (root / "decay.yaml").write_text(yaml_text)
    return root


def run(command: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           **(env or {})}
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_tutorials_commands_run_as_written(lab):
    (commands,) = fenced("bash")[:1]
    for command in commands.strip().splitlines():
        done = run(command, lab)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        out = Path(lab, shlex.split(command)[shlex.split(command).index("--out") + 1])
        summary = json.loads((out / "summary.json").read_text())
        assert {"fedavg_decay", "local_sgd"} <= set(summary), summary.keys()  # the outside entry, its own name
        assert json.loads((out / "extensions.json").read_text())[0]["name"] == "mylab.algos:FEDAVG_DECAY"


def test_the_tutorials_config_is_checked_like_a_built_in_one(lab):
    done = run("PYTHONPATH=. edgesync validate decay.yaml --set algorithms.0.decay=2 --set algorithms.0.local_step=3",
               lab)
    assert done.returncode != 0
    assert "algorithms.0.decay" in done.stdout + done.stderr and "did you mean 'local_steps'" in done.stdout + done.stderr


def test_the_entry_point_makes_a_plain_name_and_edgesync_plugins_lists_it(lab, tmp_path):
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
    commands = fenced("bash")[1].strip()
    done = run(commands, lab, {"PYTHONPATH": str(lab), "COLUMNS": "200"})
    assert done.returncode == 0 and "fedavg_decay" in done.stdout and "mylab 0.1.0" in done.stdout, done.stdout
    done = run("edgesync validate decay.yaml --set 'algorithms.0.name=fedavg_decay'", lab, {"PYTHONPATH": str(lab)})
    assert done.returncode == 0, done.stdout + done.stderr
