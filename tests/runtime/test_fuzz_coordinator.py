"""Fuzzing a live coordinator: random, truncated and subtly broken frames over a real ROUTER socket.

One joined client (driven by hand) and one stranger throw hypothesis-made messages at a coordinator
in the middle of training, while the run's real client waits at its first instruction. Every
message must get an ERROR back (the loop is alive and refused it), the global model must stay
bit-identical to θ₀, and afterwards the real client trains the run to its end.
"""
from __future__ import annotations

import json
import threading

import torch
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_client import GatedClient, RawClient

from edgesync import algorithms
from edgesync.algorithms.machinery.base import ModelState
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from edgesync.transport.fields import check_client_fields
from edgesync.transport.protocol import CLIENT_TYPES, Message, ProtocolError

REPLY_WITHIN_S = 30.0  # generous for a busy machine
GOOD_META = {"loss": 0.5, "steps": 1, "samples": 32, "data_size": 500, "version": 0}
BAD_VALUES = [-1, "7", 1.5, True, None, 2**60, [0], {"a": 1}]
BAD_META = {"version": BAD_VALUES, "steps": BAD_VALUES, "samples": BAD_VALUES,
            "data_size": [0, -5, "500", True, 2**60, [1]], "loss": ["low", True, [1], {"a": 1}],
            "grad_rms": [-0.5, "0.5", True, 2**60, [1]]}
BAD_HEADER = {"proto": ["EdgeSync", "", None, 1], "v": [0, 2, "1", None, 1.0, True],
              "meta": [[], "x", 1, None], "tensors": [{}, "x", None, [1]]}
BAD_SPEC = {"dtype": ["float64", "bfloat16", "", None, "FLOAT32"], "shape": [[-1], "n", [1.5], None, [True]]}
OTHER_TYPES = st.one_of(st.sampled_from(["HELLO", "READY", "QUERY", "STATS", "CALIBRATED", "TRAIN", "SHUTDOWN",
                                         "update", ""]),
                        st.text(max_size=12)).filter(lambda t: t not in ("UPDATE", "ERROR"))


def header(tensors: dict[str, torch.Tensor] | list, meta: dict | None = None, **fields) -> dict:
    specs = tensors if isinstance(tensors, list) else [
        {"name": n, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for n, t in tensors.items()]
    return {"proto": "edgesync", "v": 1, "type": "UPDATE", "meta": dict(GOOD_META if meta is None else meta),
            "tensors": specs, **fields}


def frames(head: dict | bytes, tensors: dict[str, torch.Tensor] | list[bytes]) -> list[bytes]:
    raw = head if isinstance(head, bytes) else json.dumps(head).encode()
    data = tensors if isinstance(tensors, list) else [t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
                                                      for t in tensors.values()]
    return [raw, *data]


def broken_updates(grad: torch.Tensor, buffers: torch.Tensor) -> st.SearchStrategy[list[bytes]]:
    """Messages that are all wrong in some way, from plain noise to one bad value in a good update."""
    n = grad.numel()
    good = {"grad": grad, **({"buffers": buffers} if buffers.numel() else {})}
    good_frames = frames(header(good), good)

    def with_grad(t: torch.Tensor) -> list[bytes]:
        tensors = {**good, "grad": t}
        return frames(header(tensors), tensors)

    def non_finite(positions: list[int], value: float) -> list[bytes]:
        t = grad.clone()
        t[positions] = value
        return with_grad(t)

    def bad_field(key: str, value) -> list[bytes]:
        return frames({**header(good), key: value}, good)

    def bad_spec(key: str, value) -> list[bytes]:
        head = header(good)
        head["tensors"][0][key] = value
        return frames(head, good)

    def literal(constant: str) -> list[bytes]:  # NaN/Infinity are not JSON, but Python's json reads them
        text = json.dumps(header(good)).replace('"loss": 0.5', f'"loss": {constant}')
        return frames(text.encode(), good)

    size_change = st.integers(1, 5).flatmap(lambda d: st.sampled_from([n - d, n + d]))
    return st.one_of(
        st.lists(st.binary(max_size=300), min_size=1, max_size=4),  # noise
        st.integers(0, len(good_frames[0]) - 1).map(lambda k: [good_frames[0][:k], *good_frames[1:]]),
        st.integers(0, len(good_frames[1]) - 1).map(lambda k: [good_frames[0], good_frames[1][:k], *good_frames[2:]]),
        st.just(good_frames[:1]),  # the data frames dropped
        st.binary(max_size=64).map(lambda extra: [*good_frames, extra]),  # one frame too many
        size_change.map(lambda m: with_grad(torch.zeros(m))),
        st.sampled_from([torch.float16, torch.int32, torch.int64, torch.uint8]).map(
            lambda d: with_grad(torch.zeros(n, dtype=d))),
        st.sampled_from([(n, 1), (1, n), ()]).map(lambda shape: with_grad(torch.zeros(shape))),
        st.tuples(st.lists(st.integers(0, n - 1), min_size=1, max_size=5),
                  st.sampled_from([float("nan"), float("inf"), float("-inf")])).map(lambda a: non_finite(*a)),
        st.text(min_size=1, max_size=12).filter(lambda s: s not in ("grad", "buffers")).map(
            lambda name: frames(header({**good, name: torch.ones(3)}), {**good, name: torch.ones(3)})),
        st.just(frames(header({}), {})),  # no gradient at all
        st.sampled_from(sorted(BAD_META)).flatmap(lambda k: st.sampled_from(BAD_META[k]).map(
            lambda v: frames(header(good, {**GOOD_META, k: v}), good))),
        st.sampled_from(sorted(BAD_HEADER)).flatmap(lambda k: st.sampled_from(BAD_HEADER[k]).map(
            lambda v: bad_field(k, v))),
        OTHER_TYPES.map(lambda kind: bad_field("type", kind)),
        st.sampled_from(sorted(BAD_SPEC)).flatmap(lambda k: st.sampled_from(BAD_SPEC[k]).map(
            lambda v: bad_spec(k, v))),
        st.sampled_from(["NaN", "Infinity", "-Infinity"]).map(literal),
        st.just(frames(header([header(good)["tensors"][0]] * 2), [good_frames[1]] * 2)),  # "grad" listed twice
    )


def test_fuzzed_frames_never_crash_the_coordinator_or_touch_the_model(loopback, monkeypatch):
    # Prepare: a training coordinator, a hand-driven member (rank 0), a stranger, a real client held back.
    # NaN updates would count towards divergence (the algorithm would stop): not what this test is about.
    monkeypatch.setattr("edgesync.runtime.live.coordinator.NONFINITE_UPDATES_DIVERGED", 10**9)
    run = loopback(clients=["x1", "x1"], algorithms=[{"name": "asgd", "lr": 0.05}],
                   stop={"time_budget_s": 300, "max_updates": 8}, eval={"every_s": 2, "test_size": 200})
    gate = threading.Event()
    run.start(clients=0)
    member = RawClient(run.coordinator.address)
    run.add_client(GatedClient, rank=1, gate=gate)
    stranger = zmq.Context.instance().socket(zmq.DEALER)
    stranger.setsockopt(zmq.LINGER, 0)
    stranger.connect(run.coordinator.address)
    counts = {"member": 0, "stranger": 0}
    try:
        train = member.join(rank=0)
        grad = torch.randn(train.tensors["params"].numel(), generator=torch.Generator().manual_seed(0)) * 1e-3
        buffers = train.tensors.get("buffers", torch.zeros(0))
        initial_bits = run.coordinator.workload.initial.params.view(torch.int32).clone()

        @settings(max_examples=150, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(message=broken_updates(grad, buffers), sender=st.sampled_from(["member", "stranger"]))
        def throw(message, sender):
            # Execute
            if sender == "member":
                member.send(message)
                reply = member.recv(REPLY_WITHIN_S)
                while reply.type == "TRAIN":  # the fresh start that follows a refused update
                    reply = member.recv(REPLY_WITHIN_S)
            else:
                stranger.send_multipart(message)
                assert stranger.poll(int(REPLY_WITHIN_S * 1000)), "the coordinator did not answer the stranger"
                reply = Message.from_frames(stranger.recv_multipart())
            counts[sender] += 1
            # Assert: refused, with a reason; a member is not thrown out for it, unless it said HELLO without
            # the client-coordinator contract: that is a peer of another EdgeSync, told to stop (contracts/)
            assert reply.type == "ERROR", (reply.type, reply.meta)
            assert reply.meta["reason"]
            if sender == "member":
                of_another_version = "no versioned protocol" in reply.meta["reason"]
                assert reply.meta["fatal"] is of_another_version, reply.meta

        throw()
        # Assert: nothing was applied
        server = run.coordinator.server
        assert server.updates == 0
        assert torch.equal(server.params.view(torch.int32), initial_bits)
        assert counts["member"] and counts["stranger"]
    finally:
        gate.set()  # the real client now trains the run to its end
        member.finish_in_background()
    run.join()
    member.close()
    stranger.close()
    assert run.error is None, run.error
    assert not run.client_errors
    assert read_jsonl(run.run_dir / "metrics.jsonl")[-1]["updates"] == 8
    rows = {c["client"]: c for c in read_jsonl(run.run_dir / "clients.jsonl")}
    assert rows[0]["refused"] >= 1 and rows[1]["refused"] == 0
    assert rows[1]["steps"] >= 4  # the real client did the training


def test_the_fuzzer_only_makes_messages_the_protocol_or_the_checks_refuse():
    """The fuzzer's own check: every message it makes fails somewhere (else the live test would be wrong)."""
    n = 50
    spec = algorithms.get("asgd")
    initial = ModelState(torch.zeros(n), torch.zeros(0))
    check = UpdateCheck.for_server(spec.server(spec.config(name="asgd"), initial, [0]), initial)

    @settings(max_examples=200, deadline=None, database=None)
    @given(message=broken_updates(torch.zeros(n), torch.zeros(0)))
    def refused(message):
        try:
            msg = Message.from_frames(message, CLIENT_TYPES)
            check_client_fields(msg)
            if msg.type == "UPDATE":
                check.check(msg.tensors)
            else:
                assert msg.type != "ERROR"  # a member's other types are refused as "not expected"
                return
        except (ProtocolError, UpdateRefused):
            return
        raise AssertionError(f"accepted: {message[0][:200]!r}")

    refused()
