"""Fixtures of the Flower runtime's tests: the ClientApp on in-process SuperNodes (fake_grid.py)."""
from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower runtime needs flwr (pip install -e '.[flower]')")

from flower_scenario import FAST_SUPEREXEC_POLL  # noqa: E402 - after the flwr check, as the rest


@pytest.fixture
def client_app():
    from clients.flower_client import app
    return app


@pytest.fixture
def fake_grid(client_app):
    from fake_grid import FakeGrid  # beside this file; imported after the flwr check
    grids: list = []

    def make(node_configs, run_config=None):
        grid = FakeGrid(client_app, node_configs, run_config)
        grids.append(grid)
        return grid

    yield make
    for grid in grids:
        grid.close()


@pytest.fixture
def flower_lab(tmp_path):
    """`flower_lab(nodes)`: a started FlowerLab (a real SuperLink and one SuperNode per node config),
    stopped after the test; the test is skipped where Flower's commands are not installed."""
    from edgesync.flower.lab import FlowerLab, LabError, _tool
    labs: list = []

    def make(nodes: list[dict]):
        try:
            _tool("flower-superlink")
        except LabError as exc:
            pytest.skip(str(exc))
        lab = FlowerLab(tmp_path / "flwr-home", nodes)
        lab.env.update(FAST_SUPEREXEC_POLL)
        labs.append(lab)
        return lab.start()

    yield make
    for lab in labs:
        lab.stop()
