"""`--ray [ADDRESS]` and `--parallel N` on the command line: a lone `--ray` before the scenario is a flag,
an address after it is the address, and both refuse a live scenario before anything runs."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from edgesync.cli import RAY_DEFAULT, ray_flag

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv,expected", [
    (["run", "--ray", "s.yaml"], ["run", f"--ray={RAY_DEFAULT}", "s.yaml"]),
    (["run", "s.yaml", "--ray"], ["run", "s.yaml", f"--ray={RAY_DEFAULT}"]),
    (["run", "s.yaml", "--ray", "-q"], ["run", "s.yaml", f"--ray={RAY_DEFAULT}", "-q"]),
    (["run", "s.yaml", "--ray", "10.0.0.5:6379"], ["run", "s.yaml", "--ray", "10.0.0.5:6379"]),
    (["run", "--ray", "ray://head:10001", "s.yaml"], ["run", "--ray", "ray://head:10001", "s.yaml"]),
    (["run", "s.yaml", "--ray", "auto"], ["run", "s.yaml", "--ray", "auto"]),
    (["run", "s.yaml", "--ray=127.0.0.1:6379"], ["run", "s.yaml", "--ray=127.0.0.1:6379"]),
])
def test_ray_alone_is_a_flag_and_an_address_is_kept(argv, expected):
    assert ray_flag(argv) == expected


@pytest.mark.parametrize("option", [["--ray"], ["--parallel", "2"]])
def test_ray_and_parallel_refuse_a_live_scenario_before_anything_runs(tmp_path, option, monkeypatch, capsys):
    # the command line's own entry point (ray_flag on sys.argv, then the app), in this process: a process of
    # its own would only add a torch import
    from edgesync.cli import main
    out = tmp_path / "run"
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "argv", ["edgesync", "run", "scenarios/quickstart.yaml", *option, "--out", str(out)])
    with pytest.raises(SystemExit) as exited:
        main()
    stderr = capsys.readouterr().err
    assert exited.value.code == 2, stderr
    assert "is for the simulator" in stderr and "--runtime sim" in stderr
    assert not (out / "metrics.jsonl").exists()
