"""A Flower user's own app (tests/flower/user_app: its pyproject names a stock-strategy ServerApp of its
own and `edgesync.flower.apps:clientapp`) on a real SuperLink with a ×1 and a ×10 SuperNode.

Stock `FedAvg` for 3 rounds (weights move every round, the ×10 node's compute time ≈ 10× the other's,
accuracy rises), then stock `FedAdam` for a round on the same lab. About a minute and a half on 2 cores,
four under heavy load (a SuperNode starts a process per message and polls every 3 s).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


pytestmark = pytest.mark.slow

USER_APP = Path(__file__).resolve().parent / "user_app"
RUN_TIMEOUT_S = 420  # a hang guard, not a measure: one run took over 240 s beside the parallel tests at their heaviest
NODES = [{"partition-id": 0, "num-partitions": 2, "profile": "x1", "test-size": 500},
         {"partition-id": 1, "num-partitions": 2, "profile": "x10", "test-size": 500}]


@pytest.fixture
def lab(flower_lab):
    return flower_lab(NODES)


def _run(lab, app: Path, out: Path, **config) -> dict:
    out.mkdir()
    result = lab.run_app(app, {"out": str(out), **config}, timeout_s=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert (out / "result.json").exists(), result.stdout[-4000:] + result.stderr[-2000:]
    return json.loads((out / "result.json").read_text())


@pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)  # two runs, each with its own bound, and the lab's start
@pytest.mark.timing  # the nodes' compute-time ratio: at nice 19 beside the parallel lane the x1 node's steps
# overran its base (CI saw 4.0 for a bound of 5 x the bases' ratio, with the dashboard's browser tests beside it)
def test_stock_fedavg_and_fedadam_drive_edgesyncs_clientapp_on_a_superlink(lab, tmp_path):
    app = tmp_path / "user_app"
    shutil.copytree(USER_APP, app, ignore=shutil.ignore_patterns("__pycache__"))
    lab.wait_for_nodes()

    fedavg = _run(lab, app, tmp_path / "fedavg", strategy="fedavg")
    norms = fedavg["norms"]
    assert len(norms) == 4 and all(a != b for a, b in zip(norms, norms[1:])), norms  # moved every round
    fast = [m for m in fedavg["train"] if m["factor"] == 1.0]
    slow = [m for m in fedavg["train"] if m["factor"] == 10.0]
    assert len(fast) == len(slow) == 3, fedavg["train"]
    # Each node paces against the ×1 step it measured itself (base_s): the ×10 node's steps take ten of
    # its own, the ×1 node's never beat its own. Their ratio is ≈ 10 on a quiet host, less where the ×1
    # node's steps overran its base (CI saw 7.1 with the whole lab on 2 cores; `base-s` is the remedy).
    for m in slow:
        assert 9.0 * m["base_s"] <= m["compute_s"] / m["steps"] <= 13.0 * m["base_s"], m
    assert all(m["compute_s"] / m["steps"] >= 0.95 * m["base_s"] for m in fast), fast
    # Across nodes the ratio is 10 × base_slow / base_fast: each node measured its base on a loaded host
    # (CI once saw bases 1.7× apart, a raw ratio of 17.4). Judge it against what the bases say.
    ratio = sum(m["compute_s"] for m in slow) / sum(m["compute_s"] for m in fast)
    bases = sum(m["base_s"] for m in slow) / sum(m["base_s"] for m in fast)
    assert 5.0 * bases < ratio < 13.0 * bases, (ratio, bases, fedavg["train"])
    acc = [fedavg["accuracy"][str(r)] for r in (1, 2, 3)]
    assert acc[2] > acc[0] and acc[2] > 0.25, acc  # 18 steps of 32 samples: well above chance (0.1)

    fedadam = _run(lab, app, tmp_path / "fedadam", strategy="fedadam", **{"num-server-rounds": 1})
    assert len(fedadam["train"]) == 2 and len(set(fedadam["norms"])) == 2, fedadam  # both nodes; the model moved
