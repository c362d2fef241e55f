"""The sparse codec: a flat vector as message tensors, and back.

A message field `name` travels either sparse, as two tensors

    f"{name}.idx"   indices, int32 when numel < 2**31 else int64 (1-D)
    f"{name}.val"   the values at those indices, float32 (float16 optional) (1-D, same length)

or dense (the rate 1.0 path), as one tensor `name` of length numel. A receiver validates every
payload (ValueError naming the field and the problem, never a crash or an assert) and converts
int32 indices to int64 before indexing. Duplicate indices accumulate, in `decode` and `add_into`.
"""
from __future__ import annotations

import torch

from edgesync.buffer_checks import index_range

VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
INDEX_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)


def index_dtype(numel: int) -> torch.dtype:
    """int32 when numel < 2**31, else int64."""
    return torch.int32 if numel < 2**31 else torch.int64


def encode(name: str, x: torch.Tensor, indices: torch.Tensor | None,
           value_dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Tensors for a message: sparse → {f"{name}.idx": indices as index_dtype(x.numel()), f"{name}.val": x[indices] as value_dtype};
    indices None (the dense path, rate 1.0) → {name: x as value_dtype}. x is flat.

    Always copies, so the message is a snapshot even if x (a momentum buffer, say) changes later.
    """
    if x.dim() != 1:
        raise ValueError(f"encode {name!r}: x must be flat (1-D), got shape {tuple(x.shape)}")
    if value_dtype not in VALUE_DTYPES:
        raise ValueError(f"encode {name!r}: value_dtype must be a float dtype, got {value_dtype}")
    x = x.detach()
    if indices is None:
        return {name: x.to(value_dtype, copy=True)}
    positions = indices.long()
    return {f"{name}.idx": positions.to(index_dtype(x.numel())),
            f"{name}.val": x[positions].to(value_dtype)}


def _payload(tensors: dict[str, torch.Tensor], name: str, numel: int
             ) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Validated (indices as int64 or None for dense, values) of field `name`; ValueError if bad."""
    idx_key, val_key = f"{name}.idx", f"{name}.val"
    has_dense, has_idx, has_val = name in tensors, idx_key in tensors, val_key in tensors
    if has_dense and (has_idx or has_val):
        raise ValueError(f"payload {name!r}: both dense {name!r} and sparse entries present")
    if has_dense:
        values = tensors[name]
        if values.dim() != 1 or values.numel() != numel:
            raise ValueError(f"payload {name!r}: dense length {tuple(values.shape)} != expected ({numel},)")
        _check_values(name, values)
        return None, values
    if not (has_idx or has_val):
        raise ValueError(f"payload {name!r}: missing entries, expected {name!r} or {idx_key!r} "
                         f"and {val_key!r} (message has {sorted(tensors)})")
    if not (has_idx and has_val):
        missing = idx_key if not has_idx else val_key
        raise ValueError(f"payload {name!r}: missing entry {missing!r} (message has {sorted(tensors)})")
    idx, values = tensors[idx_key], tensors[val_key]
    if idx.dtype not in INDEX_DTYPES:
        raise ValueError(f"payload {name!r}: index dtype must be an integer type, got {idx.dtype}")
    _check_values(name, values)
    if idx.dim() != 1 or values.dim() != 1:
        raise ValueError(f"payload {name!r}: idx and val must be 1-D, got shapes "
                         f"{tuple(idx.shape)} and {tuple(values.shape)}")
    if idx.numel() != values.numel():
        raise ValueError(f"payload {name!r}: idx/val length mismatch, {idx.numel()} indices "
                         f"and {values.numel()} values")
    idx = idx.long()
    if idx.numel():
        low, high = index_range(idx)
        if low < 0 or high >= numel:
            raise ValueError(f"payload {name!r}: index out of range [0, {numel}): "
                             f"min {low}, max {high}")
    return idx, values


def _check_values(name: str, values: torch.Tensor) -> None:
    if not values.is_floating_point():
        raise ValueError(f"payload {name!r}: values must be floating point, got {values.dtype}")


def entries(tensors: dict[str, torch.Tensor], name: str, numel: int) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The payload as (indices as int64, values), or (None, the dense values): what `decode` would add up,
    without the dense vector. Same validation as decode."""
    return _payload(tensors, name, numel)


def decode(tensors: dict[str, torch.Tensor], name: str, numel: int) -> torch.Tensor:
    """The dense float32 vector (length numel) that `encode` described; zeros where nothing was sent.

    Raises ValueError with a clear message (name, what is wrong) on a bad payload: index out of range,
    idx/val length mismatch, wrong dense length, missing entries, non-integer index dtype.
    """
    idx, values = _payload(tensors, name, numel)
    if idx is None:
        return values.to(torch.float32, copy=True)
    out = torch.zeros(numel, dtype=torch.float32, device=values.device)
    return out.index_add_(0, idx.to(values.device), values.to(torch.float32))


def add_into(target: torch.Tensor, tensors: dict[str, torch.Tensor], name: str,
             alpha: float = 1.0) -> torch.Tensor:
    """target += alpha * decoded payload, in place, without building the dense vector for a sparse payload
    (index_add_ / scatter-add); returns target. Same validation as decode.
    """
    if target.dim() != 1:
        raise ValueError(f"add_into {name!r}: target must be flat (1-D), got shape {tuple(target.shape)}")
    idx, values = _payload(tensors, name, target.numel())
    values = values.to(device=target.device, dtype=target.dtype)
    if idx is None:
        return target.add_(values, alpha=alpha)
    return target.index_add_(0, idx.to(target.device), values, alpha=alpha)


def payload_bytes(tensors: dict[str, torch.Tensor], name: str) -> int:
    """Bytes of the idx+val (or dense) entries of field `name`; ValueError if it has none."""
    keys = [k for k in (name, f"{name}.idx", f"{name}.val") if k in tensors]
    if not keys:
        raise ValueError(f"payload {name!r}: no entries in message (has {sorted(tensors)})")
    return sum(tensors[k].numel() * tensors[k].element_size() for k in keys)
