"""The wire protocol: lossless, zero-copy round trips, and a ProtocolError (never a crash) otherwise."""
import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgesync.constants import PROTOCOL_NAME, PROTOCOL_VERSION
from edgesync.transport.protocol import (
    CLIENT_TYPES, COORDINATOR_TYPES, DTYPES, MAX_HEADER_BYTES, Message, ProtocolError, to_jsonable,
)

SHAPES = [(), (0,), (5,), (2, 0, 3), (2, 3, 4)]


def _header(**fields) -> bytes:
    """A valid header (type UPDATE, no tensors) with `fields` replacing or adding entries."""
    header = {"proto": PROTOCOL_NAME, "v": PROTOCOL_VERSION, "type": "UPDATE", "meta": {}, "tensors": []}
    header.update(fields)
    return json.dumps(header).encode()


def _values(dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    """Deterministic values that use each dtype's range, incl. negative, fractional and extreme ones."""
    n = 1
    for d in shape:
        n *= d
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        pool = [0.0, -0.0, 1.5, -2.25, info.max, info.min, info.tiny, float("inf"), 1 / 3]
    else:
        info = torch.iinfo(dtype)
        pool = [0, 1, info.max, info.min, 7, info.max - 1]
    return torch.tensor([pool[i % len(pool)] for i in range(n)], dtype=dtype).reshape(shape)


def _bits(t: torch.Tensor) -> bytes:
    return t.contiguous().numpy().tobytes()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_round_trip_is_bit_exact(dtype_name, shape):
    # Prepare
    t = _values(DTYPES[dtype_name], shape)
    msg = Message("UPDATE", {"version": 3, "loss": 0.25, "note": "ü"}, {"grad": t, "other": torch.arange(3)})
    # Execute: through bytes, as over a socket
    frames = [bytes(f) for f in msg.to_frames()]
    back = Message.from_frames(frames, CLIENT_TYPES)
    # Assert
    assert back.type == "UPDATE"
    assert back.meta == {"version": 3, "loss": 0.25, "note": "ü"}
    assert list(back.tensors) == ["grad", "other"]
    got = back.tensors["grad"]
    assert got.dtype == t.dtype and tuple(got.shape) == shape
    assert _bits(got) == _bits(t)
    assert torch.equal(back.tensors["other"], torch.arange(3))


def test_round_trip_keeps_nan_payload_bits():
    # Prepare: a NaN with a payload (0x7fc00001) must survive unchanged, not just "some NaN"
    t = torch.tensor([0x7FC00001, 0x3F800000], dtype=torch.int32).view(torch.float32)
    # Execute
    back = Message.from_frames(Message("UPDATE", tensors={"g": t}).to_frames())
    # Assert
    assert _bits(back.tensors["g"]) == _bits(t)


def test_non_contiguous_tensor_is_sent_in_logical_order():
    # Prepare
    t = torch.arange(6, dtype=torch.float32).view(2, 3).T  # (3, 2), not contiguous
    # Execute
    back = Message.from_frames(Message("TRAIN", tensors={"t": t}).to_frames())
    # Assert
    assert torch.equal(back.tensors["t"], torch.tensor([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]))


@pytest.mark.parametrize("make", [
    lambda: torch.tensor([1.0, -2.0, 3.5], requires_grad=True),  # numpy() refuses it
    lambda: torch.arange(8, dtype=torch.float32)[::3],            # strided 1-D: no flat byte view
    lambda: torch.arange(8, dtype=torch.int64)[2:5],              # offset into its storage, contiguous
    lambda: torch.tensor(4.5),                                    # 0-d
], ids=["requires-grad", "strided", "offset-view", "scalar"])
def test_tensors_numpy_cannot_view_directly_are_copied_and_arrive_equal(make):
    # Prepare
    t = make()
    # Execute
    back = Message.from_frames([bytes(f) for f in Message("TRAIN", tensors={"t": t}).to_frames()])
    # Assert
    assert torch.equal(back.tensors["t"], t.detach()) and back.tensors["t"].shape == t.shape


def test_frames_out_share_memory_with_the_tensor():
    # Prepare
    t = torch.tensor([1.0, 2.0])
    # Execute
    frames = Message("TRAIN", tensors={"params": t}).to_frames()
    t[0] = 9.0  # after to_frames: a shared buffer shows it
    # Assert
    assert bytes(frames[1]) == _bits(torch.tensor([9.0, 2.0]))


def test_received_tensors_share_memory_with_the_frame():
    # Prepare
    header = _header(tensors=[{"name": "g", "dtype": "float32", "shape": [2]}])
    data = bytearray(_bits(torch.tensor([1.0, 2.0])))
    # Execute
    t = Message.from_frames([header, data]).tensors["g"]
    data[:4] = _bits(torch.tensor([7.0]))  # change the frame after parsing
    # Assert
    assert torch.equal(t, torch.tensor([7.0, 2.0]))


def test_frame_objects_with_a_buffer_attribute_are_read_without_copy():
    # Prepare: zmq.Frame exposes its memory as `.buffer`
    class Frame:
        def __init__(self, data):
            self.buffer = memoryview(data)

    data = bytearray(_bits(torch.tensor([3, 4], dtype=torch.int64)))
    header = _header(tensors=[{"name": "i", "dtype": "int64", "shape": [2]}])
    # Execute
    t = Message.from_frames([Frame(header), Frame(data)]).tensors["i"]
    data[:8] = _bits(torch.tensor([5], dtype=torch.int64))
    # Assert
    assert torch.equal(t, torch.tensor([5, 4]))


def test_unsendable_dtype_is_refused_by_name():
    with pytest.raises(ProtocolError, match="tensor 'w': dtype torch.float64 cannot be sent"):
        Message("UPDATE", tensors={"w": torch.zeros(2, dtype=torch.float64)}).to_frames()


def test_meta_that_is_not_json_is_refused_by_message_type():
    with pytest.raises(ProtocolError, match="UPDATE meta is not JSON"):
        Message("UPDATE", {"loss": object()}).to_frames()


def test_non_finite_meta_travels_as_null_and_numpy_scalars_as_numbers():
    import numpy as np
    # Execute
    frames = Message("STATS", {"loss": float("nan"), "c": [float("-inf")], "n": np.int64(3),
                               "lr": np.float32(0.5), 7: "rank key"}).to_frames()
    meta = Message.from_frames(frames).meta
    # Assert
    assert meta == {"loss": None, "c": [None], "n": 3, "lr": 0.5, "7": "rank key"}


def test_to_jsonable_turns_numpy_scalars_into_python_numbers():
    import numpy as np
    assert to_jsonable(np.float32(0.5)) == 0.5 and type(to_jsonable(np.float32(0.5))) is float
    assert type(to_jsonable(np.int64(3))) is int
    assert to_jsonable("x") == "x"


def test_message_types_of_each_side():
    assert "UPDATE" in CLIENT_TYPES and "UPDATE" not in COORDINATOR_TYPES
    assert "TRAIN" in COORDINATOR_TYPES and "TRAIN" not in CLIENT_TYPES
    assert "ERROR" in CLIENT_TYPES & COORDINATOR_TYPES


# -- ProtocolError: every check, each naming the problem ------------------------------------------

_F32_2 = [{"name": "g", "dtype": "float32", "shape": [2]}]

BAD = {
    "empty message": ([], None, "empty message"),
    "non-UTF-8 header": ([b"\xff\xfe\x00garbage"], None, "not UTF-8 JSON"),
    "non-JSON header": ([b"{not json"], None, "not UTF-8 JSON"),
    "too deeply nested JSON": ([b"[" * 100_000], None, "not UTF-8 JSON"),
    "integer too long for Python": ([b"1" * 5000], None, "not UTF-8 JSON"),
    "JSON list": ([b"[1, 2]"], None, "not a JSON object"),
    "JSON string": ([b'"UPDATE"'], None, "not a JSON object"),
    "wrong proto": ([_header(proto="zmtp")], None, "not an edgesync message (proto='zmtp')"),
    "missing proto": ([json.dumps({"v": 1, "type": "UPDATE"}).encode()], None, "proto=None"),
    "unknown type for this side": ([_header(type="TRAIN")], CLIENT_TYPES, "unexpected message type 'TRAIN'"),
    "type not a string": ([_header(type=5)], None, "unexpected message type 5"),
    "meta not an object": ([_header(meta=[1])], None, "'meta' must be an object"),
    "tensors not a list": ([_header(tensors={})], None, "'tensors' a list"),
    "more specs than frames": ([_header(tensors=_F32_2)], None, "header lists 1 tensors but 0 data frames came"),
    "more frames than specs": ([_header(), b"xx"], None, "header lists 0 tensors but 1 data frames came"),
    "wrong byte size": ([_header(tensors=_F32_2), b"\x00" * 7], None,
                        "tensor 'g': 7 bytes for float32[2], expected 8"),
    "bad dtype": ([_header(tensors=[{"name": "g", "dtype": "float64", "shape": [1]}]), b"\x00" * 8], None,
                  "'float64'"),
    "missing name": ([_header(tensors=[{"dtype": "uint8", "shape": [1]}]), b"\x00"], None, "needs a name"),
    "spec not an object": ([_header(tensors=["g"]), b""], None, "tensor spec is not an object"),
    "negative dim": ([_header(tensors=[{"name": "g", "dtype": "uint8", "shape": [-1]}]), b""], None,
                     "shape [-1] is not a list of non-negative ints"),
    "bool dim": ([_header(tensors=[{"name": "g", "dtype": "uint8", "shape": [True]}]), b"\x00"], None,
                 "shape [True] is not a list of non-negative ints"),
    "float dim": ([_header(tensors=[{"name": "g", "dtype": "uint8", "shape": [1.0]}]), b"\x00"], None,
                  "shape [1.0] is not a list of non-negative ints"),
    "shape not a list": ([_header(tensors=[{"name": "g", "dtype": "uint8", "shape": 1}]), b"\x00"], None,
                         "shape 1 is not a list"),
    "dim beyond 64 bits": (  # strict JSON reads it as a float
        [_header(tensors=[{"name": "g", "dtype": "uint8", "shape": [0, 10**30]}]), b""], None,
        "is not a list of non-negative ints"),
    "oversized header": ([b" " * (MAX_HEADER_BYTES + 1)], None, f"exceeds {MAX_HEADER_BYTES}"),
    "NaN literal in meta": ([_header().replace(b'"meta": {}', b'"meta": {"loss": NaN}')], None,
                            "header is not UTF-8 JSON"),
    "-Infinity literal": ([_header().replace(b'"meta": {}', b'"meta": {"c": -Infinity}')], None,
                          "header is not UTF-8 JSON"),
    "version true": ([_header(v=True)], None, "protocol version True is not supported"),
    "version 1.0": ([_header(v=1.0)], None, "protocol version 1.0 is not supported"),
    "tensor listed twice": ([_header(tensors=_F32_2 * 2), b"\x00" * 8, b"\x00" * 8], None,
                            "tensor 'g' is listed twice"),
}


@pytest.mark.parametrize("frames, allowed, needle", list(BAD.values()), ids=list(BAD))
def test_bad_messages_raise_protocol_error_naming_the_problem(frames, allowed, needle):
    with pytest.raises(ProtocolError) as info:
        Message.from_frames(frames, allowed)
    assert needle in str(info.value)


def test_other_protocol_version_names_both_versions():
    # Execute
    with pytest.raises(ProtocolError) as info:
        Message.from_frames([_header(v=PROTOCOL_VERSION + 1)])
    # Assert
    text = str(info.value)
    assert f"protocol version {PROTOCOL_VERSION + 1} is not supported" in text
    assert f"speaks version {PROTOCOL_VERSION}" in text


def test_any_type_is_accepted_without_allowed():
    assert Message.from_frames([_header(type="TRAIN")]).type == "TRAIN"


# -- property: arbitrary input never raises anything but ProtocolError ----------------------------

def _parse_or_protocol_error(frames):
    try:
        Message.from_frames(frames, CLIENT_TYPES)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=4))
def test_random_bytes_raise_only_protocol_error(frames):
    _parse_or_protocol_error(frames)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_spec = st.fixed_dictionaries({}, optional={
    "name": st.text(max_size=3) | _json,
    "dtype": st.sampled_from(sorted(DTYPES) + ["float64", "bool"]) | _json,
    "shape": st.lists(st.integers(-2, 4) | st.sampled_from([0, 2**70, True, 1.5]), max_size=3) | _json,
}) | _json


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=st.fixed_dictionaries({}, optional={
        "proto": st.just(PROTOCOL_NAME) | _json, "v": st.just(PROTOCOL_VERSION) | _json,
        "type": st.sampled_from(sorted(CLIENT_TYPES | COORDINATOR_TYPES)) | _json,
        "meta": _json, "tensors": st.lists(_spec, max_size=3) | _json,
    }),
    data=st.lists(st.binary(max_size=24), max_size=4),
)
def test_structured_headers_raise_only_protocol_error(header, data):
    _parse_or_protocol_error([json.dumps(header).encode(), *data])
