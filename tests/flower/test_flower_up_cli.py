"""`edgesync flower-up` stops the lab it started whenever it gives up before the run (no Flower processes
here: FlowerLab is replaced by a recorder of calls)."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from edgesync.cli import app
from edgesync.flower import lab as lab_module
from edgesync.flower.lab import LabError

from flower_scenario import ROOT


class RecordingLab:
    instances: list["RecordingLab"] = []
    fail_in = "wait_for_nodes"
    error: type[BaseException] = LabError

    def __init__(self, home, nodes, port=None):
        self.home, self.nodes, self.calls = home, nodes, []
        RecordingLab.instances.append(self)

    def start(self):
        self.calls.append("start")
        return self

    def wait_for_nodes(self, count=None, timeout_s=0.0):
        self.calls.append("wait_for_nodes")
        if self.fail_in == "wait_for_nodes":
            raise self.error("fewer than 2 SuperNodes registered within 60 s")

    def stop(self):
        self.calls.append("stop")


@pytest.fixture
def recording_lab(monkeypatch):
    RecordingLab.instances = []
    monkeypatch.setattr(lab_module, "FlowerLab", RecordingLab)
    return RecordingLab


@pytest.mark.parametrize("error, code", [(LabError, 1), (KeyboardInterrupt, 130)])
def test_flower_up_stops_the_lab_when_the_nodes_do_not_register(recording_lab, tmp_path, error, code):
    recording_lab.error = error
    result = CliRunner().invoke(app, ["flower-up", "--nodes", "2", "--home", str(tmp_path / "home"),
                                      "--run", str(ROOT / "scenarios" / "flower_async.yaml")])
    assert result.exit_code == code, result.output
    (lab,) = recording_lab.instances
    assert lab.calls == ["start", "wait_for_nodes", "stop"]
