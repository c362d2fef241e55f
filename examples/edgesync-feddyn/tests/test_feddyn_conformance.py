"""The conformance kit (`edgesync.testing`) on this package, by the names a scenario uses once it is installed:
FedDyn in the simulator and on live loopback (replay determinism, rows of the same keys in both runtimes, a lost
client that returns, resume from a checkpoint), WidthNet at width 8. A broken rule fails with its name."""
from __future__ import annotations

import pytest

from edgesync.testing import check_algorithm, check_model


@pytest.mark.slow
def test_feddyn_keeps_the_contract_in_both_runtimes(tmp_path):
    report = check_algorithm("feddyn", config={"alpha": 0.1, "local_steps": 2}, workdir=tmp_path)
    assert report["skipped"] == {}, report  # every rule, the live ones included, was checked


def test_widenet_builds_a_model_the_runtimes_can_train():
    check_model("widenet", args={"width": 8})
