"""A model's parameters and floating buffers as flat float32 vectors.

Algorithms work on flat tensors (docs/algorithms.md, "Conventions"); these helpers are the only place
that knows how a module's tensors map onto them. Order is `model.parameters()` / `model.buffers()`.
"""
from __future__ import annotations

import torch
from torch import nn


def float_buffers(model: nn.Module) -> list[torch.Tensor]:
    """Buffers that carry statistics (BatchNorm means/variances); integer counters are skipped."""
    return [b for b in model.buffers() if b.is_floating_point()]


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _flatten(tensors: list[torch.Tensor]) -> torch.Tensor:
    if not tensors:
        return torch.zeros(0, dtype=torch.float32)
    # reshape copies channels_last tensors into logical (NCHW) order, so the layout never leaks.
    return torch.cat([t.detach().reshape(-1).to("cpu", torch.float32) for t in tensors])


def _assign(tensors: list[torch.Tensor], flat: torch.Tensor, what: str) -> None:
    total = sum(t.numel() for t in tensors)
    if flat.numel() != total:
        raise ValueError(f"{what}: flat vector has {flat.numel()} values, the model expects {total}")
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view(t.shape))
            offset += n


def get_params(model: nn.Module) -> torch.Tensor:
    return _flatten(list(model.parameters()))


def set_params(model: nn.Module, flat: torch.Tensor) -> None:
    _assign(list(model.parameters()), flat, "parameters")


def get_grads(model: nn.Module) -> torch.Tensor:
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    return _flatten(grads)


def get_buffers(model: nn.Module) -> torch.Tensor:
    return _flatten(float_buffers(model))


def set_buffers(model: nn.Module, flat: torch.Tensor) -> None:
    _assign(float_buffers(model), flat, "buffers")
