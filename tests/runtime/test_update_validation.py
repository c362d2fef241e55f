"""Every UPDATE is checked against the model and the algorithm before it is applied; bad ones are refused."""
from __future__ import annotations

import threading

import pytest
import torch
from raw_client import GatedClient, RawClient

from edgesync import algorithms, buffer_checks
from edgesync.algorithms.machinery.base import ModelState
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from edgesync.transport.fields import check_client_fields
from edgesync.transport import protocol
from edgesync.transport.protocol import Message, ProtocolError

P, B = 10, 3  # a toy model: 10 parameters, 3 buffer entries


def check_for(name: str, **config) -> UpdateCheck:
    spec = algorithms.get(name)
    initial = ModelState(torch.zeros(P), torch.zeros(B))
    server = spec.server(spec.config(name=name, **config), initial, [0, 1])
    return UpdateCheck.for_server(server, initial)


@pytest.fixture(params=["tensors", "frames", "torch"])
def way(request, monkeypatch):
    """How the values are checked (buffer_checks.py): over the tensors' memory, over the frames they arrived in
    (the coordinator's way), or in torch (a machine where the C extension is not built)."""
    if request.param != "torch" and not buffer_checks.NATIVE:
        pytest.skip("the C extension is not built here (no C compiler at install)")
    monkeypatch.setattr(buffer_checks, "NATIVE", request.param != "torch")
    return request.param


def run_check(check: UpdateCheck, tensors: dict[str, torch.Tensor], way: str) -> None:
    if way == "frames":  # sent and received as the coordinator receives it
        msg = Message.from_frames(protocol.update({}, tensors).to_frames(), protocol.CLIENT_TYPES)
        return check.check(msg.tensors, raw=msg.raw)
    return check.check(tensors)


def good(**extra) -> dict[str, torch.Tensor]:
    return {"grad": torch.ones(P), "buffers": torch.ones(B), **extra}


def with_value(t: torch.Tensor, i: int, v: float) -> torch.Tensor:
    t = t.clone()
    t[i] = v
    return t


REFUSED = [
    ({"grad": with_value(torch.ones(P), 3, float("nan"))}, "'grad': 1 of 10 values are NaN or Inf"),
    ({"grad": with_value(torch.ones(P), 0, float("inf"))}, "NaN or Inf"),
    ({"grad": with_value(torch.ones(P), 9, float("-inf"))}, "NaN or Inf"),
    (good(buffers=with_value(torch.ones(B), 1, float("nan"))), "'buffers': 1 of 3 values are NaN or Inf"),
    ({"grad": torch.ones(P - 1)}, "tensor 'grad': shape [9], expected [10] (the model's parameters)"),
    ({"grad": torch.ones(P + 1)}, "shape [11], expected [10]"),
    ({"grad": torch.ones(P, 1)}, "shape [10, 1], expected [10]"),
    ({"grad": torch.ones(P, dtype=torch.float16)}, "tensor 'grad': dtype float16, expected float32"),
    ({"grad": torch.ones(P, dtype=torch.int32)}, "dtype int32, expected float32"),
    (good(buffers=torch.ones(B + 2)), "tensor 'buffers': shape [5], expected [3] (the model's buffers)"),
    (good(extra=torch.ones(1)), "tensor 'extra' is not part of a asgd update"),
    ({"buffers": torch.ones(B)}, "a asgd update carries 'grad'"),
    ({}, "a asgd update carries 'grad'"),
    ({"grad.idx": torch.tensor([1], dtype=torch.int32), "grad.val": torch.ones(1)}, "'grad.idx' is not part"),
]


@pytest.mark.parametrize("tensors,reason", REFUSED, ids=[r for _, r in REFUSED])
def test_bad_asgd_update_is_refused_with_the_reason(tensors, reason, way):
    with pytest.raises(UpdateRefused) as info:
        run_check(check_for("asgd"), tensors, way)
    assert reason in str(info.value)


def test_good_updates_pass(way):
    run_check(check_for("asgd"), good(), way)
    run_check(check_for("asgd"), {"grad": torch.zeros(P)}, way)  # no buffers: a model without BatchNorm
    run_check(check_for("local_sgd"), {"delta": torch.ones(P)}, way)
    run_check(check_for("easgd"), {"params": torch.ones(P)}, way)


def test_the_finite_check_is_exact_where_a_sum_is_not_finite(way):
    """Torch's fast path is one sum; finite values whose sum overflows still pass (the exact test decides), and
    +Inf beside −Inf (a NaN sum) is still refused. The C path counts exponents: the same answers."""
    run_check(check_for("asgd"), {"grad": torch.full((P,), 3e38)}, way)  # Σ = inf, every value finite
    with pytest.raises(UpdateRefused, match="2 of 10 values"):
        run_check(check_for("asgd"), {"grad": with_value(with_value(torch.ones(P), 0, float("inf")), 1,
                                                         float("-inf"))}, way)
    with pytest.raises(UpdateRefused, match="1 of 10 values"):
        run_check(check_for("asgd"), {"grad": with_value(torch.full((P,), -3e38), 4, float("nan"))}, way)


def sparse(idx, val, idx_dtype=torch.int32, val_dtype=torch.float32) -> dict[str, torch.Tensor]:
    return {"delta.idx": torch.tensor(idx, dtype=idx_dtype), "delta.val": torch.tensor(val, dtype=val_dtype)}


SPARSE_REFUSED = [
    (sparse([0, 10], [1.0, 2.0]), "tensor 'delta.idx': indices from 0 to 10, expected [0, 10)"),
    (sparse([-1], [1.0]), "indices from -1 to -1"),
    (sparse([1, 2], [1.0]), "sparse 'delta': shapes [2] and [1], expected two 1-D tensors of the same length"),
    (sparse([1], [float("nan")]), "'delta.val': 1 of 1 values are NaN or Inf"),
    (sparse([1], [1.0], idx_dtype=torch.uint8), "tensor 'delta.idx': dtype uint8, expected int32/int64"),
    (sparse([1], [1.0], val_dtype=torch.int32), "tensor 'delta.val': dtype int32, expected float16/float32"),
    ({"delta.idx": torch.tensor([1], dtype=torch.int32)}, "'delta.val' is missing"),
    ({**sparse([1], [1.0]), "delta": torch.ones(P)}, "carries 'delta'"),  # both dense and sparse
    (sparse(list(range(10)) + [0], [1.0] * 11), "11 entries, expected at most 10"),
]


@pytest.mark.parametrize("tensors,reason", SPARSE_REFUSED, ids=[r for _, r in SPARSE_REFUSED])
def test_bad_sparse_update_is_refused_with_the_reason(tensors, reason, way):
    with pytest.raises(UpdateRefused) as info:
        run_check(check_for("dgs", value_dtype="float16"), tensors, way)
    assert reason in str(info.value)


def test_good_sparse_and_dense_dgs_updates_pass(way):
    check = check_for("dgs", value_dtype="float16")
    run_check(check, sparse([0, 9], [1.0, -1.0], idx_dtype=torch.int64, val_dtype=torch.float16), way)
    run_check(check, {"delta": torch.ones(P, dtype=torch.float16), "buffers": torch.ones(B)}, way)
    run_check(check, sparse([], []), way)  # nothing worth sending this time


FIELDS_REFUSED = [
    (Message("UPDATE", {"version": -1}), "UPDATE field 'version' is -1, expected an integer in [0, 2**53)"),
    (Message("UPDATE", {"samples": "32"}), "field 'samples' is '32'"),
    (Message("UPDATE", {"steps": True}), "field 'steps' is True"),
    (Message("UPDATE", {"steps": 2**60}), "field 'steps'"),
    (Message("UPDATE", {"version": None}), "field 'version' is None"),
    (Message("UPDATE", {"data_size": 0}), "field 'data_size' is 0, expected a finite number > 0 or null"),
    (Message("UPDATE", {"loss": "low"}), "field 'loss'"),
    (Message("UPDATE", {"grad_rms": -0.5}), "field 'grad_rms' is -0.5, expected a finite number ≥ 0 or null"),
    (Message("QUERY", {"k": 1.5}), "QUERY field 'k' is 1.5"),
    (Message("HELLO", {"rank": "0"}), "HELLO field 'rank'"),
    (Message("HELLO", {"info": [1]}), "HELLO field 'info' is [1], expected an object or null"),
    (Message("STATS", {"compute_s": -1.0}), "STATS field 'compute_s'"),
    (Message("CALIBRATED", {"reference_s": 0}), "CALIBRATED field 'reference_s'"),
]


@pytest.mark.parametrize("msg,reason", FIELDS_REFUSED, ids=[r for _, r in FIELDS_REFUSED])
def test_bad_meta_fields_are_protocol_errors(msg, reason):
    with pytest.raises(ProtocolError) as info:
        check_client_fields(msg)
    assert reason in str(info.value)


def test_what_real_clients_send_passes_the_field_checks():
    check_client_fields(Message("UPDATE", {"loss": None, "steps": 1, "samples": 32, "data_size": 500, "version": 0,
                                           "aborted_steps": 0, "grad_rms": 0.02, "anything": "else"}))
    check_client_fields(Message("HELLO", {"rank": None, "profile": None, "info": {"host": "h"}}))
    check_client_fields(Message("STATS", {}))
    check_client_fields(Message("QUERY", {"round": 0, "k": 3, "c": None}))


def test_nan_and_misfit_updates_never_touch_the_global_model(loopback):
    # Prepare: a hand-driven client 0 and a real client 1 held back, so nothing else changes θ meanwhile
    run = loopback(clients=["x1", "x1"], algorithms=[{"name": "asgd", "lr": 0.05}],
                   stop={"time_budget_s": 240, "max_updates": 6}, eval={"every_s": 5, "test_size": 200})
    gate = threading.Event()
    run.start(clients=0)
    raw = RawClient(run.coordinator.address)
    run.add_client(GatedClient, rank=1, gate=gate)
    try:
        train = raw.join(rank=0)
        theta = train.tensors["params"].clone()
        n = theta.numel()
        initial_bits = run.coordinator.workload.initial.params.view(torch.int32).clone()
        bad = [
            ({"grad": torch.full((n,), float("nan"))}, "NaN or Inf"),
            ({"grad": with_value(torch.zeros(n), n - 1, float("inf"))}, "1 of %d values are NaN or Inf" % n),
            ({"grad": torch.zeros(n - 1)}, f"shape [{n - 1}], expected [{n}]"),
            ({"grad": torch.zeros(n, dtype=torch.float16)}, "dtype float16, expected float32"),
        ]
        # Execute
        replies = []
        for tensors, _ in bad:
            raw.send(Message("UPDATE", {"version": 0, "steps": 1, "samples": 32}, tensors))
            replies.append(raw.expect("ERROR"))
            fresh = raw.expect("TRAIN")  # not left waiting: a fresh start from the (unchanged) global model
            assert torch.equal(fresh.tensors["params"], theta)
        # Assert: each refused with its reason, and θ is bit-identical to θ₀
        for reply, (_, reason) in zip(replies, bad):
            assert reply.meta["reason"].startswith("UPDATE refused: tensor 'grad'")
            assert reason in reply.meta["reason"]
            assert reply.meta["fatal"] is False
        server = run.coordinator.server
        assert server.updates == 0
        assert torch.equal(server.params.view(torch.int32), initial_bits)
        assert torch.equal(theta, run.coordinator.workload.initial.params)
    finally:
        gate.set()  # the real client now trains the run to its end
        raw.finish_in_background()
    run.join()
    raw.close()
    assert run.error is None, run.error
    rows = {c["client"]: c for c in read_jsonl(run.run_dir / "clients.jsonl")}
    assert rows[0]["refused"] == len(bad)
    assert rows[1]["refused"] == 0
    assert read_jsonl(run.run_dir / "metrics.jsonl")[-1]["updates"] == 6


def test_nan_updates_from_every_client_mark_the_algorithm_diverged(loopback):
    """Refused NaN updates never reach the model, so evaluation cannot see the divergence: after
    NONFINITE_UPDATES_DIVERGED per client the coordinator stops the algorithm and marks it diverged."""
    from edgesync.constants import NONFINITE_UPDATES_DIVERGED
    run = loopback(clients=["x1"], algorithms=[{"name": "asgd", "lr": 0.05}],
                   stop={"time_budget_s": 240, "max_updates": 50}, eval={"every_s": 5, "test_size": 200})
    run.start(clients=0)
    raw = RawClient(run.coordinator.address)
    try:
        n = raw.join(rank=0).tensors["params"].numel()
        for i in range(NONFINITE_UPDATES_DIVERGED):
            raw.send(Message("UPDATE", {"version": 0, "steps": 1, "samples": 32}, {"grad": torch.full((n,), float("nan"))}))
            assert "NaN or Inf" in raw.expect("ERROR").meta["reason"]
            if i < NONFINITE_UPDATES_DIVERGED - 1:
                raw.expect("TRAIN")
    finally:
        raw.finish_in_background()
    run.join()
    raw.close()
    assert run.error is None, run.error
    final = read_jsonl(run.run_dir / "metrics.jsonl")[-1]
    assert final["diverged"] is True and final["updates"] == 0


def test_each_server_half_declares_its_update_format():
    from edgesync.algorithms.machinery.base import UpdateFormat
    initial = ModelState(torch.zeros(P), torch.zeros(B))
    formats = {name: algorithms.get(name).server(algorithms.get(name).config(name=name, **config), initial, [0, 1])
               .update_format() for name, config in [("asgd", {}), ("local_sgd", {}), ("easgd", {}),
                                                      ("dgs", {"value_dtype": "float16"}), ("gd_async", {})]}
    assert formats["asgd"] == UpdateFormat("grad", False, frozenset({torch.float32}))
    assert formats["local_sgd"] == UpdateFormat("delta", False, frozenset({torch.float32}))
    assert formats["easgd"] == UpdateFormat("params", False, frozenset({torch.float32}))
    assert formats["dgs"] == UpdateFormat("delta", True, frozenset({torch.float32, torch.float16}))
    assert formats["gd_async"] == UpdateFormat("delta", True, frozenset({torch.float32}))


def test_the_check_follows_the_declared_format_alone():
    # Prepare: an ASGD half that declares sparse bfloat16 gradients (no DGS class involved)
    from edgesync.algorithms.asgd import ASGDConfig, ASGDServer
    from edgesync.algorithms.machinery.base import UpdateFormat

    class SparseASGD(ASGDServer):
        def update_format(self):
            return UpdateFormat("grad", True, frozenset({torch.bfloat16}))

    initial = ModelState(torch.zeros(P), torch.zeros(B))
    check = UpdateCheck.for_server(SparseASGD(ASGDConfig(), initial, [0]), initial)
    # Execute / Assert
    check.check({"grad.idx": torch.tensor([0, 9]), "grad.val": torch.ones(2, dtype=torch.bfloat16)})
    with pytest.raises(UpdateRefused, match="dtype float32, expected bfloat16"):
        check.check({"grad": torch.ones(P)})
