"""The Ray backend's channel (runtime/sim/channel.py) over real sockets, without Ray: tensors a worker
holds go by name and come out bit for bit; ipc on one node, CURVE over TCP across nodes."""
from __future__ import annotations

import pytest
import torch
import zmq

from edgesync.runtime.sim.channel import CACHED, SIM, DriverChannel, WorkerChannel
from edgesync.transport.contracts.ray_worker import RayKind
from edgesync.transport.protocol import Message


def never_dies():
    pass


def train(rank: int, **tensors) -> Message:
    return Message(RayKind.TRAIN, {"version": rank, SIM: {"rank": rank}}, tensors)


@pytest.fixture(params=["ipc", "curve"])
def pair(request):
    driver = DriverChannel(1, local=request.param == "ipc", host="127.0.0.1")
    worker = WorkerChannel(0, driver.address, driver.server_key)
    worker.ready()
    assert driver.receive(never_dies)[1].type == RayKind.READY
    yield driver, worker
    worker.close()
    driver.close()


def test_a_tensor_sent_again_goes_by_name_and_arrives_the_same(pair):
    driver, worker = pair
    theta = torch.randn(1000)
    ranks = torch.arange(5)
    sizes = []
    for rank in range(3):  # a round's θ to three clients
        original = driver.sock.send_multipart
        driver.sock.send_multipart = lambda f, **kw: (sizes.append(len(f)), original(f, **kw))
        driver.send(0, train(rank, params=theta, ranks=ranks))
        driver.sock.send_multipart = original
        got = worker.receive()
        assert got.meta["version"] == rank and torch.equal(got.tensors["params"], theta)
        assert torch.equal(got.tensors["ranks"], ranks) and got.tensors["ranks"].dtype == torch.int64
        got.tensors["params"].add_(1.0)  # a client half may change what it is given: the held copy stays
    assert sizes == [4, 2, 2]  # identity + header + two tensors the first time, then names only


def test_what_both_ends_hold_stays_in_step_past_the_cache(pair):
    driver, worker = pair
    versions = [torch.full((10,), float(i)) for i in range(CACHED + 3)]
    order = [0, 1, 0, *range(2, CACHED + 3), 0, CACHED + 2, 3]  # hits, misses, evictions
    for i, v in enumerate(order):
        driver.send(0, train(i, params=versions[v]))
        assert torch.equal(worker.receive().tensors["params"], versions[v])


def test_a_changed_tensor_is_sent_again(pair):
    driver, worker = pair
    theta = torch.zeros(4)
    driver.send(0, train(0, params=theta))
    worker.receive()
    theta.add_(2.0)  # in place: a new version of the same tensor
    driver.send(0, train(1, params=theta))
    assert torch.equal(worker.receive().tensors["params"], torch.full((4,), 2.0))


def test_results_come_back_with_their_meta(pair):
    driver, worker = pair
    worker.send(Message(RayKind.UPDATE, {"steps": 1, SIM: {"rank": 3, "elapsed": 0.1 + 0.2}},
                        {"grad": torch.linspace(0, 1, 7)}))
    index, message = driver.receive(never_dies)
    assert index == 0 and message.meta[SIM] == {"rank": 3, "elapsed": 0.30000000000000004}
    assert torch.equal(message.tensors["grad"], torch.linspace(0, 1, 7))


def test_a_worker_without_the_runs_key_is_not_heard():
    driver = DriverChannel(1, local=False, host="127.0.0.1")
    stranger = WorkerChannel(0, driver.address, zmq.curve_keypair()[0])  # another server's key
    stranger.send(Message(RayKind.READY))
    assert not driver.sock.poll(500)
    stranger.close()
    driver.close()


def test_a_silent_channel_asks_whether_the_workers_live():
    driver = DriverChannel(1, local=True, host="127.0.0.1")

    def gone():
        raise RuntimeError("worker 0 died")

    with pytest.raises(RuntimeError, match="worker 0 died"):
        driver.receive(gone)
    driver.close()


def test_a_worker_of_another_version_is_refused_with_one_line_and_its_serve_call_ends(monkeypatch):
    """The channel's set-up checks the contract (contracts/ray_worker.py): the driver raises with one line naming
    both versions, and the worker is sent REFUSED, so its serve call ends rather than waits for ever."""
    from edgesync.runtime.sim import channel as channel_module
    from edgesync.transport.contracts.version import Contract, ContractMismatch

    driver = DriverChannel(1, local=True, host="127.0.0.1")
    newer = Contract("ray_worker", 2, server="driver", client="Ray worker")
    monkeypatch.setattr(channel_module, "RAY_WORKER", newer)  # the worker's side only: the driver checks below
    worker = WorkerChannel(0, driver.address, None)
    worker.ready()
    monkeypatch.undo()
    line = ("driver speaks edgesync.ray_worker/1, this Ray worker edgesync.ray_worker/2: "
            "use the same EdgeSync version on both")
    try:
        with pytest.raises(ContractMismatch) as refused:
            driver.receive(never_dies)
        assert str(refused.value) == f"Ray worker 0: {line}"
        assert worker.sock.poll(5000), "the worker was not told"
        with pytest.raises(ContractMismatch) as told:
            worker.receive()
        assert str(told.value) == line and "\n" not in line
    finally:
        worker.close()
        driver.close()


def test_a_worker_refuses_a_driver_of_another_version_with_one_line(monkeypatch):
    """The other way round: the driver names its contract in the worker's serve call; a worker of this
    version refuses a newer driver (or one that names none) with REFUSED, and both sides raise the one line."""
    import threading

    import numpy as np

    from edgesync.runtime.sim.worker import SimWorker
    from edgesync.transport.contracts.ray_worker import RAY_WORKER
    from edgesync.transport.contracts.version import ContractMismatch

    worker = SimWorker(np.zeros((2, 1, 28, 28), np.float32), np.zeros(2, np.int64), "cnn", 10, 1)  # as Ray hosts it
    for driver_tag, heard in (("edgesync.ray_worker/2", "edgesync.ray_worker/2"),
                              (None, "no versioned protocol (an EdgeSync from before versioned contracts)")):
        driver = DriverChannel(1, local=True, host="127.0.0.1")
        raised: list[BaseException] = []

        def serve():
            try:
                worker.serve(0, driver.address, None, driver_tag)
            except BaseException as exc:  # noqa: BLE001 - checked below
                raised.append(exc)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        line = f"driver speaks {heard}, this Ray worker {RAY_WORKER.tag}: use the same EdgeSync version on both"
        try:
            with pytest.raises(ContractMismatch) as refused:
                driver.receive(never_dies)
            assert str(refused.value) == f"Ray worker 0: {line}"
            thread.join(10)
            assert len(raised) == 1 and isinstance(raised[0], ContractMismatch) and str(raised[0]) == line
        finally:
            driver.close()


def test_a_worker_serves_a_driver_of_its_own_version():
    import threading

    import numpy as np

    from edgesync.runtime.sim.worker import SimWorker
    from edgesync.transport.contracts.ray_worker import RAY_WORKER

    worker = SimWorker(np.zeros((2, 1, 28, 28), np.float32), np.zeros(2, np.int64), "cnn", 10, 1)
    driver = DriverChannel(1, local=True, host="127.0.0.1")
    thread = threading.Thread(target=worker.serve, args=(0, driver.address, None, RAY_WORKER.tag), daemon=True)
    thread.start()
    try:
        assert driver.receive(never_dies)[1].type == RayKind.READY
        driver.send(0, Message(RayKind.SERVE_END))
        thread.join(10)
        assert not thread.is_alive()
    finally:
        driver.close()
