"""Staleness measures shared by the asynchronous algorithms (docs/algorithms.md, "Staleness").

- lag τ: global updates applied by others between the model a client computed on and its update;
- gap G (DANA, Def. 1): ‖θ_apply − θ_computed‖₂ / √k over the k parameters;
- normalized gap G / RMS(g), RMS(g) = ‖g‖₂ / √k, so it reads as "how many raw-gradient-sized steps off".

One normaliser for every algorithm. DANA App. D normalises the gap by the norm of the gradient g_t, to
compare algorithms "when the norm of the gradients is the same"; that only works if every algorithm
divides by the same thing. So the normaliser is always the raw stochastic gradient: the gradient of the
mean mini-batch loss at the client's parameters (weight decay included, as every g in docs/algorithms.md),
before momentum, compression, error feedback or local steps — never the vector the master applies
(DANA-Slim's γv + g, SHAT's velocity, EASGD's elastic difference δ, the DGS family's sparse update with
its residual), which would make the figure depend on each algorithm's own rescaling of g. The RMS
(‖g‖₂/√k) rather than App. D's ‖g‖₂ puts G and its normaliser on the same per-parameter scale; the
two differ by the constant √k of a model, so comparisons between algorithms are the same.

Where it comes from: a client that sends anything other than its raw gradient reports its RMS in the
update's meta under `GRAD_RMS`; an update without it is a raw gradient (`gradient_client`), whose "grad"
tensor is measured. An update built from several local steps (EASGD's τ steps) reports the mean of the
RMS of the raw gradients of its steps: its expectation is a single step's, whatever τ, so the figure
stays comparable with one-gradient updates. (The RMS of the steps' summed or averaged gradient would not
be: mini-batch noise averages out over τ steps, shrinking it by up to √τ and inflating the normalized
gap by an artefact of τ; the first or last step's alone is one noisy sample of the same quantity.)
"""
from __future__ import annotations

import math
from typing import Any

import torch

from edgesync import model_passes

GRAD_RMS = "grad_rms"  # update meta: RMS of the raw gradient(s) the update was built from


def rms(x: torch.Tensor) -> float:
    """‖x‖₂ / √k over the k entries of a flat vector."""
    return float(torch.linalg.vector_norm(x)) / math.sqrt(x.numel())


def gap(theta_apply: torch.Tensor, theta_computed: torch.Tensor) -> float:
    if theta_apply is theta_computed:  # nothing applied since it was sent: no pass over the model needed
        return 0.0
    return gap_of_sq_dist(model_passes.sq_dist(theta_apply, theta_computed), theta_apply.numel())


def gap_of_sq_dist(sq_dist: float, numel: int) -> float:
    """G from Σ (θ_apply − θ_computed)², taken where a pass reads both anyway (model_passes.step)."""
    return math.sqrt(sq_dist / numel)


def raw_gradient_rms(meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> float | None:
    """The update's normaliser: the RMS its client reported, else that of its "grad" tensor (a raw
    gradient, sent as computed); None when neither is there or the value is not a finite number."""
    if GRAD_RMS in meta:
        value = meta[GRAD_RMS]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok else None
    return rms(tensors["grad"]) if "grad" in tensors else None


def normalized_gap(g: float, grad_rms: float | None) -> float | None:
    return g / grad_rms if grad_rms is not None and grad_rms > 0 else None


def staleness_fields(lag: int, theta_apply: torch.Tensor, theta_computed: torch.Tensor,
                     grad_rms: float | None) -> dict:
    """The fields every asynchronous server half logs per applied update."""
    return gap_fields(lag, gap(theta_apply, theta_computed), grad_rms)


def gap_fields(lag: int, g: float, grad_rms: float | None) -> dict:
    """The same from a gap already measured (a half that knows a cheaper way to it: dgs.DGSServer)."""
    ng = normalized_gap(g, grad_rms)
    return {"lag": lag, "gap": round(g, 9), "gap_normalized": None if ng is None else round(ng, 6)}
