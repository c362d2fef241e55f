"""The update checks' two passes over a tensor's memory (edgesync/buffer_checks.py): in C over a received frame or
a tensor's memory, and in torch where the C extension is not built; the same answers every way."""
from __future__ import annotations

import shutil
import struct
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesync import buffer_checks

NAN, INF = float("nan"), float("inf")
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def test_the_c_extension_is_built_where_a_compiler_is():
    """`pip install` builds edgesync/_buffer_checks.c (setup.py); only a machine without a C compiler or without
    Python's headers may lack it."""
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    assert buffer_checks.NATIVE or shutil.which("cc") is None or not headers.exists()


@pytest.fixture(params=["native", "torch"])
def way(request, monkeypatch):
    if request.param == "native" and not buffer_checks.NATIVE:
        pytest.skip("the C extension is not built here (no C compiler at install)")
    monkeypatch.setattr(buffer_checks, "NATIVE", request.param == "native")
    return request.param


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_non_finite_values_are_counted_in_every_float_dtype(way, dtype):
    t = torch.tensor([1.0, NAN, -INF, 0.0, INF, -2.5, 65504.0], dtype=dtype)
    assert buffer_checks.nonfinite_count(t) == 3
    assert not buffer_checks.all_finite(t)
    finite = torch.tensor([1.0, -0.0, 1e-3, 65504.0], dtype=dtype)
    assert buffer_checks.nonfinite_count(finite) == 0 and buffer_checks.all_finite(finite)


def test_finite_values_whose_sum_overflows_are_finite(way):
    t = torch.full((10,), 3e38)
    assert buffer_checks.all_finite(t) and buffer_checks.nonfinite_count(t) == 0


def test_integer_and_empty_tensors_have_no_non_finite_values(way):
    assert buffer_checks.all_finite(torch.arange(5)) and buffer_checks.nonfinite_count(torch.arange(5)) == 0
    assert buffer_checks.all_finite(torch.zeros(0)) and buffer_checks.nonfinite_count(torch.zeros(0)) == 0


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_the_index_range_is_the_smallest_and_largest_index(way, dtype):
    big = 2**40 if dtype == torch.int64 else 2**31 - 1
    assert buffer_checks.index_range(torch.tensor([7, -3, big, 0], dtype=dtype)) == (-3, big)
    assert buffer_checks.index_range(torch.tensor([5], dtype=dtype)) == (5, 5)
    with pytest.raises(ValueError, match="at least one index"):
        buffer_checks.index_range(torch.zeros(0, dtype=dtype))


def test_a_strided_view_is_read_in_its_own_order(way):
    """A non-contiguous tensor takes the torch path: the C loop reads memory in order, which a view skips through."""
    base = torch.tensor([[1.0, NAN], [2.0, 3.0]])
    assert buffer_checks.nonfinite_count(base[:, 0]) == 0 and buffer_checks.nonfinite_count(base[:, 1]) == 1
    idx = torch.tensor([[4, 100], [-1, 7]], dtype=torch.int64)
    assert buffer_checks.index_range(idx[:, 0]) == (-1, 4)


def test_a_frame_is_read_where_it_lies_even_unaligned(way):
    """The raw path reads a received frame; zmq does not promise that its memory is aligned to the values'."""
    values = struct.pack("<4f", 1.0, NAN, 2.0, INF)
    frame = memoryview(b"\x00" + values)[1:]  # one byte off any 4-byte boundary
    t = torch.frombuffer(bytearray(values), dtype=torch.float32)
    assert buffer_checks.nonfinite_count(t, frame) == 2 and not buffer_checks.all_finite(t, frame)
    indices = struct.pack("<3q", 9, -4, 2**33)
    frame = memoryview(b"\x00\x00\x00" + indices)[3:]
    assert buffer_checks.index_range(torch.frombuffer(bytearray(indices), dtype=torch.int64), frame) == (-4, 2**33)


@pytest.mark.skipif(not buffer_checks.NATIVE, reason="the C extension is not built here")
def test_the_c_functions_refuse_what_they_cannot_read():
    native = buffer_checks._native
    with pytest.raises(ValueError, match="not a whole number of 4-byte values"):
        native.count_nonfinite(b"\x00" * 6, "float32")
    with pytest.raises(ValueError, match="kind int8: expected float16"):
        native.count_nonfinite(b"\x00" * 4, "int8")
    with pytest.raises(ValueError, match="kind float32: expected int32 or int64"):
        native.index_range(b"\x00" * 4, "float32")
    with pytest.raises(TypeError, match="an address needs numel"):
        native.count_nonfinite(1234, "float32")
    with pytest.raises(ValueError, match="at least one index"):
        native.index_range(b"", "int32")


@pytest.mark.skipif(not buffer_checks.NATIVE, reason="the C extension is not built here")
@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 3000), bad=st.sets(st.integers(0, 2999), max_size=20), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(FLOATS))
def test_the_c_count_matches_torch_on_random_tensors(n, bad, seed, dtype):
    """Also past the size at which the C loop lets go of the GIL (256 KB: 3,000 float64 values are 24 KB, so one
    large tensor is checked below)."""
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(n, generator=g) * 1e4).to(dtype)
    for i, pos in enumerate(sorted(p for p in bad if p < n)):
        t[pos] = (NAN, INF, -INF)[i % 3]
    expected = int((~torch.isfinite(t)).sum())
    assert buffer_checks.nonfinite_count(t) == expected
    assert buffer_checks.all_finite(t) == (expected == 0)
    if dtype != torch.bfloat16 and n:  # numpy has no bfloat16: a frame of the others
        assert buffer_checks.nonfinite_count(t, memoryview(t.numpy()).cast("B")) == expected


@pytest.mark.skipif(not buffer_checks.NATIVE, reason="the C extension is not built here")
def test_a_large_tensor_is_checked_whole():
    t = torch.ones(1 << 20)
    t[-1] = NAN
    idx = torch.from_numpy(np.arange(1 << 20, dtype=np.int64) - 5)
    assert buffer_checks.nonfinite_count(t) == 1 and buffer_checks.index_range(idx) == (-5, (1 << 20) - 6)
