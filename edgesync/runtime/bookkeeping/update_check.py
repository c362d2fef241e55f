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
from edgesync.buffer_checks import all_finite, index_range, nonfinite_count

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

    def check(self, tensors: dict[str, torch.Tensor], ring: bool = False, raw: dict | None = None) -> None:
        """Raise UpdateRefused unless `tensors` is a well-formed, finite update of this algorithm (`ring`:
        an all-reduce report, as its metadata says; `raw`: the frames the tensors view, `Message.raw`, which the
        value checks read without calling into torch)."""
        raw = raw or {}
        if ring and self.all_reduce:
            for name in tensors:
                if name not in ("mean", "buffers"):
                    raise UpdateRefused(f"tensor {name!r} is not part of a {self.algorithm} all-reduce report "
                                        "(expected nothing, or 'mean' and optionally 'buffers')")
            if "mean" in tensors:
                self._dense("mean", tensors, raw, self.params, {torch.float32}, "the model's parameters")
            if "buffers" in tensors:
                self._dense("buffers", tensors, raw, self.buffers, {torch.float32}, "the model's buffers")
            return
        # one loop, no list or text built unless refused: this runs for every update, often cold (buffer_checks.py)
        main, sparse = [], set()  # dense main tensors; bases of sparse ones (NAME of NAME.idx / NAME.val)
        for name in tensors:
            if name == "buffers":
                continue
            if name in self.fields:
                main.append(name)
            elif self.sparse and name[-4:] in (".idx", ".val") and name[:-4] in self.fields:
                sparse.add(name[:-4])
            else:
                raise UpdateRefused(f"tensor {name!r} is not part of a {self.algorithm} update "
                                    f"(expected {self._expected()})")
        if len(main) + len(sparse) != 1:
            raise UpdateRefused(f"a {self.algorithm} update carries {self._expected()}; "
                                f"this one has {sorted(tensors) or 'none'}")
        if main:
            self._dense(main[0], tensors, raw, self.params, self.value_dtypes, "the model's parameters")
        else:
            self._sparse(sparse.pop(), tensors, raw)
        if "buffers" in tensors:
            self._dense("buffers", tensors, raw, self.buffers, {torch.float32}, "the model's buffers")

    def _expected(self) -> str:
        main = " or ".join(repr(n) for n in self.fields)
        if self.sparse:
            main += " (dense, or sparse as NAME.idx + NAME.val)"
        return f"{main}, and optionally 'buffers'"

    def _dense(self, name: str, tensors: dict, raw: dict, numel: int, dtypes, what: str) -> None:
        t = tensors[name]
        if t.dtype not in dtypes:
            raise UpdateRefused(f"tensor {name!r}: dtype {_names([t.dtype])}, expected {_names(dtypes)}")
        shape = t.shape  # one call for both the dimension and the length
        if len(shape) != 1 or shape[0] != numel:
            raise UpdateRefused(f"tensor {name!r}: shape {list(shape)}, expected [{numel}] ({what})")
        _finite(name, t, raw.get(name))

    def _sparse(self, name: str, tensors: dict[str, torch.Tensor], raw: dict) -> None:
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
        idx_shape, val_shape = idx.shape, values.shape
        if len(idx_shape) != 1 or len(val_shape) != 1 or idx_shape[0] != val_shape[0]:
            raise UpdateRefused(f"sparse {name!r}: shapes {list(idx_shape)} and {list(val_shape)}, "
                                "expected two 1-D tensors of the same length")
        if idx_shape[0] > self.params:
            raise UpdateRefused(f"sparse {name!r}: {idx_shape[0]} entries, expected at most {self.params} "
                                "(the model's parameters)")
        if idx_shape[0]:
            low, high = index_range(idx, raw.get(idx_key))
            if low < 0 or high >= self.params:
                raise UpdateRefused(f"tensor {idx_key!r}: indices from {low} to {high}, "
                                    f"expected [0, {self.params}) (the model's parameters)")
        _finite(val_key, values, raw.get(val_key))


def _finite(name: str, t: torch.Tensor, raw) -> None:
    if not all_finite(t, raw):  # one pass (buffer_checks.py)
        bad = nonfinite_count(t, raw)
        raise UpdateRefused(f"tensor {name!r}: {bad} of {t.numel()} values are NaN or Inf; "
                            "refused, the global model is unchanged", nonfinite=True)
