"""An UPDATE's tensors, checked against the model and the algorithm before its server half sees them.

Server halves trust what they are given: a gradient of the wrong length would crash the loop, one of
the wrong dtype or holding NaN/Inf would poison the global model for good. The coordinator runs
`UpdateCheck.check` on every UPDATE first; `UpdateRefused` names the tensor, what it holds and what
was expected, and the update is answered with ERROR and not applied.

What an update may carry is what the server half declares (`ServerAlgorithm.update_format()`):
- its main tensor (`key`: "grad", "delta" or "params"; any of them if the half names none), 1-D, as
  many elements as the model has parameters, of a declared value dtype (float32 by default) — and, if
  the format is sparse (the DGS family), either dense or as `KEY.idx` (int32/int64, every index in
  range) + `KEY.val` (same length);
- "buffers", the model's floating buffers (BatchNorm statistics): 1-D, float32, their count;
- nothing else. Every floating tensor must be finite.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from edgesync.algorithms.machinery.base import ModelState, ServerAlgorithm
from edgesync.params import all_finite

MODEL_FIELDS = ("grad", "delta", "params")  # what an update's main tensor may be called
INDEX_DTYPES = (torch.int32, torch.int64)


class UpdateRefused(ValueError):
    """An update that does not fit the model or the algorithm; the text is safe to send back.
    `nonfinite` marks NaN/Inf values: the client's training has diverged, not its message."""

    def __init__(self, reason: str, nonfinite: bool = False):
        super().__init__(reason)
        self.nonfinite = nonfinite


def _names(dtypes) -> str:
    return "/".join(sorted(str(d).removeprefix("torch.") for d in dtypes))


@dataclass(frozen=True)
class UpdateCheck:
    algorithm: str
    fields: tuple[str, ...]  # the main tensor's accepted names (one, unless the server half does not say)
    params: int  # numel of θ
    buffers: int  # numel of the buffers vector
    value_dtypes: frozenset  # dtypes the main tensor's values may have
    sparse: bool  # whether the main tensor may travel as NAME.idx + NAME.val
    all_reduce: bool = False  # whether it takes all-reduce reports (the round's mean, from its lead, or nothing)

    @classmethod
    def for_server(cls, server: ServerAlgorithm, initial: ModelState) -> "UpdateCheck":
        fmt = server.update_format()
        return cls(server.config.key, (fmt.key,) if fmt.key else MODEL_FIELDS, initial.params.numel(),
                   initial.buffers.numel(), frozenset(fmt.value_dtypes), fmt.sparse,
                   bool(getattr(server, "all_reduce", False)))

    def check(self, tensors: dict[str, torch.Tensor], ring: bool = False) -> None:
        """Raise UpdateRefused unless `tensors` is a well-formed, finite update of this algorithm (`ring`:
        an all-reduce report, as its metadata says)."""
        if ring and self.all_reduce:
            for name in tensors:
                if name not in ("mean", "buffers"):
                    raise UpdateRefused(f"tensor {name!r} is not part of a {self.algorithm} all-reduce report "
                                        "(expected nothing, or 'mean' and optionally 'buffers')")
            if "mean" in tensors:
                self._dense("mean", tensors["mean"], self.params, {torch.float32}, "the model's parameters")
            if "buffers" in tensors:
                self._dense("buffers", tensors["buffers"], self.buffers, {torch.float32}, "the model's buffers")
            return
        main = [n for n in self.fields if n in tensors]
        sparse = [f"{n}{part}" for n in self.fields for part in (".idx", ".val")
                  if self.sparse and f"{n}{part}" in tensors]
        expected = self._expected()
        for name in tensors:
            if name != "buffers" and name not in main and name not in sparse:
                raise UpdateRefused(f"tensor {name!r} is not part of a {self.algorithm} update (expected {expected})")
        if len(main) + (1 if sparse else 0) != 1:
            raise UpdateRefused(f"a {self.algorithm} update carries {expected}; this one has {sorted(tensors) or 'none'}")
        if main:
            self._dense(main[0], tensors[main[0]], self.params, self.value_dtypes, "the model's parameters")
        else:
            self._sparse(sparse[0].rsplit(".", 1)[0], tensors)
        if "buffers" in tensors:
            self._dense("buffers", tensors["buffers"], self.buffers, {torch.float32}, "the model's buffers")

    def _expected(self) -> str:
        main = " or ".join(repr(n) for n in self.fields)
        if self.sparse:
            main += " (dense, or sparse as NAME.idx + NAME.val)"
        return f"{main}, and optionally 'buffers'"

    def _dense(self, name: str, t: torch.Tensor, numel: int, dtypes, what: str) -> None:
        if t.dtype not in dtypes:
            raise UpdateRefused(f"tensor {name!r}: dtype {_names([t.dtype])}, expected {_names(dtypes)}")
        if t.dim() != 1 or t.numel() != numel:
            raise UpdateRefused(f"tensor {name!r}: shape {list(t.shape)}, expected [{numel}] ({what})")
        _finite(name, t)

    def _sparse(self, name: str, tensors: dict[str, torch.Tensor]) -> None:
        idx_key, val_key = f"{name}.idx", f"{name}.val"
        if idx_key not in tensors or val_key not in tensors:
            missing = idx_key if idx_key not in tensors else val_key
            raise UpdateRefused(f"sparse {name!r}: {missing!r} is missing (both NAME.idx and NAME.val are needed)")
        idx, values = tensors[idx_key], tensors[val_key]
        if idx.dtype not in INDEX_DTYPES:
            raise UpdateRefused(f"tensor {idx_key!r}: dtype {_names([idx.dtype])}, expected {_names(INDEX_DTYPES)}")
        if values.dtype not in self.value_dtypes:
            raise UpdateRefused(f"tensor {val_key!r}: dtype {_names([values.dtype])}, "
                                f"expected {_names(self.value_dtypes)}")
        if idx.dim() != 1 or values.dim() != 1 or idx.numel() != values.numel():
            raise UpdateRefused(f"sparse {name!r}: shapes {list(idx.shape)} and {list(values.shape)}, "
                                "expected two 1-D tensors of the same length")
        if idx.numel() > self.params:
            raise UpdateRefused(f"sparse {name!r}: {idx.numel()} entries, expected at most {self.params} "
                                "(the model's parameters)")
        if idx.numel():
            low, high = (int(v) for v in torch.aminmax(idx))  # one pass, not two
            if low < 0 or high >= self.params:
                raise UpdateRefused(f"tensor {idx_key!r}: indices from {low} to {high}, "
                                    f"expected [0, {self.params}) (the model's parameters)")
        _finite(val_key, values)


def _finite(name: str, t: torch.Tensor) -> None:
    if not all_finite(t):  # one pass in the common case (params.py)
        bad = int((~torch.isfinite(t)).sum())
        raise UpdateRefused(f"tensor {name!r}: {bad} of {t.numel()} values are NaN or Inf; "
                            "refused, the global model is unchanged", nonfinite=True)
