"""The sparse codec: encode/decode round trips, add_into, byte counts, and bad payloads."""
from __future__ import annotations

import pytest
import torch

from edgesync.compression import add_into, decode, encode, index_dtype, payload_bytes

X = torch.tensor([0.5, -2.0, 0.0, 3.25, 1.0])


def test_index_dtype():
    assert index_dtype(10) == torch.int32
    assert index_dtype(2**31 - 1) == torch.int32
    assert index_dtype(2**31) == torch.int64


@pytest.mark.parametrize("value_dtype", [torch.float32, torch.float16])
def test_sparse_round_trip(value_dtype):
    msg = encode("g", X, torch.tensor([1, 3]), value_dtype)
    assert set(msg) == {"g.idx", "g.val"}
    assert msg["g.idx"].dtype == torch.int32
    assert msg["g.val"].dtype == value_dtype
    assert msg["g.idx"].tolist() == [1, 3]
    assert msg["g.val"].tolist() == [-2.0, 3.25]   # exact in float16 too
    out = decode(msg, "g", 5)
    assert out.dtype == torch.float32
    assert out.tolist() == [0.0, -2.0, 0.0, 3.25, 0.0]


def test_dense_round_trip_is_a_copy():
    x = X.clone()
    msg = encode("g", x, None)
    assert set(msg) == {"g"}
    x.zero_()                                     # the message is a snapshot
    assert decode(msg, "g", 5).tolist() == X.tolist()
    assert decode(encode("g", X, None, torch.float16), "g", 5).dtype == torch.float32


def test_add_into_equals_dense_addition():
    target = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0])
    msg = encode("d", X, torch.tensor([0, 3, 4]))
    expected = target + 0.5 * decode(msg, "d", 5)
    out = add_into(target, msg, "d", alpha=0.5)
    assert out is target
    assert target.tolist() == expected.tolist() == [1.25, 1.0, 1.0, 2.625, 1.5]
    add_into(target, encode("d", X, None), "d", alpha=-1.0)
    assert target.tolist() == [0.75, 3.0, 1.0, -0.625, 0.5]


def test_duplicate_indices_accumulate():
    msg = {"d.idx": torch.tensor([2, 2, 0], dtype=torch.int32), "d.val": torch.tensor([1.0, 2.0, 5.0])}
    assert add_into(torch.zeros(3), msg, "d").tolist() == [5.0, 0.0, 3.0]
    assert decode(msg, "d", 3).tolist() == [5.0, 0.0, 3.0]


def test_empty_sparse_payload():
    msg = encode("d", X, torch.tensor([], dtype=torch.int64))
    assert decode(msg, "d", 5).tolist() == [0.0] * 5


def test_payload_bytes():
    assert payload_bytes(encode("g", X, torch.tensor([1, 3])), "g") == 2 * 4 + 2 * 4
    assert payload_bytes(encode("g", X, torch.tensor([1, 3]), torch.float16), "g") == 2 * 4 + 2 * 2
    assert payload_bytes(encode("g", X, None), "g") == 5 * 4
    with pytest.raises(ValueError, match="'g'"):
        payload_bytes({}, "g")


@pytest.mark.parametrize("tensors, numel, problem", [
    ({"g.idx": torch.tensor([0, 5]), "g.val": torch.ones(2)}, 5, "out of range"),
    ({"g.idx": torch.tensor([-1]), "g.val": torch.ones(1)}, 5, "out of range"),
    ({"g.idx": torch.tensor([0, 1]), "g.val": torch.ones(3)}, 5, "length mismatch"),
    ({"g": torch.ones(4)}, 5, "dense length"),
    ({"g.idx": torch.tensor([0])}, 5, "missing entry 'g.val'"),
    ({"other": torch.ones(5)}, 5, "missing entries"),
    ({"g.idx": torch.tensor([0.0]), "g.val": torch.ones(1)}, 5, "integer"),
    ({"g.idx": torch.tensor([0]), "g.val": torch.tensor([1])}, 5, "floating point"),
    ({"g": torch.ones(5), "g.idx": torch.tensor([0]), "g.val": torch.ones(1)}, 5, "both"),
])
def test_bad_payloads_raise_value_error(tensors, numel, problem):
    with pytest.raises(ValueError, match=problem) as err:
        decode(tensors, "g", numel)
    assert "'g'" in str(err.value)
    with pytest.raises(ValueError, match=problem):
        add_into(torch.zeros(numel), tensors, "g")
