"""Test doubles for the asynchronous family: a quadratic "trainer" and an in-process message loop.

`QuadraticTrainer` stands in for `edgesync.trainer.Trainer` with f(θ) = ½‖θ‖², so the gradient at θ
is θ itself (f'(w) = w): every number a client half produces can be worked out by hand.
`run_fifo` delivers a server half's instructions to client halves in order and feeds their updates
back, like the registry's smoke test but without the wire codec. `random_script` and `replay` drive a
server half alone with fake gradients (for "A equals B exactly" checks); `torch_sgd` is the reference
optimizer on the same quadratic.
"""
from __future__ import annotations

import random
from collections import deque

import torch


class QuadraticTrainer:
    """f(θ) = ½‖θ‖²: gradient θ (+ weight decay·θ), loss ½‖θ‖²; no BatchNorm buffers.

    `layers` splits θ into parameter tensors of those sizes (flat order), as `trainer.model.parameters()`
    shows them to per-layer top-k; by default θ is one tensor.
    """

    def __init__(self, num_samples: int = 8, batch_samples: int = 4, layers: tuple[int, ...] = ()):
        self.num_samples, self.batch_samples = num_samples, batch_samples
        self.theta: torch.Tensor | None = None
        self.gradient_at: list[torch.Tensor] = []  # every θ a gradient was computed at
        self.model = _Layers(self, layers)

    def set_params(self, theta: torch.Tensor) -> None:
        self.theta = theta.clone()

    def get_params(self) -> torch.Tensor:
        return self.theta.clone()

    def set_buffers(self, buffers: torch.Tensor) -> None:
        return None

    def get_buffers(self) -> torch.Tensor:
        return torch.zeros(0)

    def gradient(self, weight_decay: float = 0.0, interrupt=None) -> tuple[torch.Tensor, float]:
        self.gradient_at.append(self.theta.clone())
        g = self.theta.clone()
        if weight_decay:
            g = g + weight_decay * self.theta
        return g, 0.5 * float(self.theta @ self.theta)


class _Layers:
    """Stands in for `Trainer.model` where only its parameters' sizes are read."""

    def __init__(self, trainer: QuadraticTrainer, sizes: tuple[int, ...]):
        self.trainer, self.sizes = trainer, tuple(sizes)

    def parameters(self):
        sizes = self.sizes or (self.trainer.theta.numel(),)
        return iter([torch.zeros(n) for n in sizes])


def run_fifo(server, clients: dict, updates: int, order=None) -> list:
    """Deliver instructions first in, first out; returns the sends in delivery order.

    `order`, if given, is the sequence of clients whose pending instruction is delivered next
    (an interleaving); otherwise the queue's order.
    """
    pending: deque = deque(server.start())
    delivered = []
    for k in range(updates):
        if order is None:
            send = pending.popleft()
        else:
            send = next(s for s in pending if s.client == order[k])
            pending.remove(send)
        delivered.append(send)
        update = clients[send.client].on_instruction(send.instruction)
        pending.extend(server.on_update(send.client, update))
    return delivered


def torch_sgd(nesterov: bool, lrs=(0.1,) * 5) -> list[float]:
    """torch.optim.SGD on f(w) = ½w² from w0 = 1, γ = 0.9, η per step from `lrs`: w after each step."""
    w = torch.tensor([1.0], requires_grad=True)
    opt = torch.optim.SGD([w], lr=lrs[0], momentum=0.9, nesterov=nesterov)
    out = []
    for lr in lrs:
        opt.param_groups[0]["lr"] = lr
        opt.zero_grad()
        (0.5 * w * w).sum().backward()
        opt.step()
        out.append(w.item())
    return out


def random_script(seed: int, clients: list[int], steps: int, dim: int = 5):
    """(client, gradient) pairs: a seeded random interleaving of `clients`."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    return [(rng.choice(clients), torch.randn(dim, generator=gen)) for _ in range(steps)]


def replay(server, script, make_update) -> list[torch.Tensor]:
    """Feeds the script's gradients, each echoing the version of the model its client was last sent."""
    versions = {s.client: s.instruction.meta["version"] for s in server.start()}
    seen = []
    for client, grad in script:
        for send in server.on_update(client, make_update(grad.tolist(), version=versions[client])):
            versions[send.client] = send.instruction.meta["version"]
            seen.append(send.instruction.tensors["params"])
        seen.append(server.global_params())
    return seen
