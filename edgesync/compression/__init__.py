"""Gradient/model-difference compression shared by DGS, GD-async and DGC-async.

`topk` picks the coordinates to send (exact top-k, or DGC's sampled threshold); `codec` turns a
flat vector plus those indices into message tensors (int32/int64 indices, float32/float16 values,
or one dense tensor at rate 1.0), and validates and applies them on receipt.
"""
from edgesync.compression.codec import add_into, decode, encode, index_dtype, payload_bytes
from edgesync.compression.topk import k_for, select, topk_indices

__all__ = ["add_into", "decode", "encode", "index_dtype", "k_for", "payload_bytes", "select",
           "topk_indices"]
