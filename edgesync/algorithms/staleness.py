"""Staleness measures shared by the asynchronous algorithms (ALGORITHMS.md, "Asynchronous family").

- lag τ: global updates applied by others between the model a client computed on and its update;
- gap G (DANA, Def. 1): ‖θ_apply − θ_computed‖₂ / √k over the k parameters; the normalized gap
  divides it by the update's own RMS, ‖g‖₂ / √k, so it reads as "how many steps off".
"""
from __future__ import annotations

import math

import torch


def gap(theta_apply: torch.Tensor, theta_computed: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(theta_apply - theta_computed)) / math.sqrt(theta_apply.numel())


def normalized_gap(g: float, step: torch.Tensor) -> float | None:
    rms = float(torch.linalg.vector_norm(step)) / math.sqrt(step.numel())
    return g / rms if rms > 0 else None


def staleness_fields(lag: int, theta_apply: torch.Tensor, theta_computed: torch.Tensor,
                     step: torch.Tensor) -> dict:
    """The fields every asynchronous server half logs per applied update."""
    g = gap(theta_apply, theta_computed)
    ng = normalized_gap(g, step)
    return {"lag": lag, "gap": round(g, 9), "gap_normalized": None if ng is None else round(ng, 6)}
