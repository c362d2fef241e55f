"""FedAdam, FedYogi, FedAdagrad: adaptive server optimizers over FedAvg's round (Reddi et al. 2021, "Adaptive
Federated Optimization", Alg. 2; docs/algorithms.md, `fedadam`, `fedyogi`, `fedadagrad`).

The clients run FedAvg's round (H local SGD steps from x, Δ_i = y_i − x). The server treats the round's
Δ = Σ p_i Δ_i (p_i the client's share of the training samples, `weighted`, on by default here) as a
pseudo-gradient and steps, per coordinate,

    m ← β1·m + (1 − β1)·Δ
    v ← v + Δ²                              (FedAdagrad)
    v ← v − (1 − β2)·Δ²·sign(v − Δ²)        (FedYogi)
    v ← β2·v + (1 − β2)·Δ²                  (FedAdam)
    x ← x + η·m / (√v + τ)

with m and v starting at 0 (η = `global_lr`, τ = `tau`, the adaptivity). One server class; the three differ
in the second-moment rule alone (`model_passes.adaptive`, chosen by the config's name).

The paper's rule has no bias correction, and that is the default. `bias_correction` (FedAdam only) scales η
by √(1 − β2^t)/(1 − β1^t): `adam` with Kingma & Ba's t = 1, 2, … (the server's rounds applied), `flower` with
Flower's t, one more (flwr 1.41 `server/strategy/fedadam.py` raises β to `server_round + 1`, its rounds
counted from 1), so that a run with `flower` matches Flower's FedAdam round for round
(tests/algorithms/test_fed_adaptive_vs_flower.py). Flower's FedAdagrad fixes β1 = 0; here β1 is a key
(default 0.9, the paper's), and `beta1: 0` gives Flower's.

m, v and the number of rounds applied are the server half's state: a checkpoint keeps them, and under
`aggregation: allreduce` they travel to a client whose replica is not current (`replica_state`).
"""
from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig


class FedOptConfig(LocalSGDConfig):
    """The keys the three share (Reddi et al.'s hyper-parameters; their experiments' β1, β2 and a τ they tune)."""

    global_lr: float = Field(0.01, gt=0, description="η, the server learning rate: x ← x + η·m/(√v + τ)")
    beta1: float = Field(0.9, ge=0, lt=1, description="β1, the decay of the first moment m")
    tau: float = Field(1e-3, gt=0, description="τ, the adaptivity: x ← x + η·m/(√v + τ)")
    weighted: bool = Field(True, description="weight Δ_i by the client's training samples (FedAvg's p_i)")


class FedAdamConfig(FedOptConfig):
    name: Literal["fedadam"] = "fedadam"  # type: ignore[assignment]
    beta2: float = Field(0.99, ge=0, lt=1, description="β2, the decay of the second moment v")
    bias_correction: Literal["none", "adam", "flower"] = Field(
        "none", description="none: the paper's rule; adam: η·√(1 − β2^t)/(1 − β1^t), t = 1, 2, … the "
                            "rounds applied; flower: the same with t one more, as flwr's FedAdam")


class FedYogiConfig(FedOptConfig):
    name: Literal["fedyogi"] = "fedyogi"  # type: ignore[assignment]
    beta2: float = Field(0.99, ge=0, lt=1, description="β2, the rate of the second moment v's sign-driven change")


class FedAdagradConfig(FedOptConfig):
    name: Literal["fedadagrad"] = "fedadagrad"  # type: ignore[assignment]


class FedOptServer(DeltaServer):
    """x ← x + η·m/(√v + τ) over the round's mean Δ, v by the rule its config's name selects."""

    config: FedOptConfig

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.m = torch.zeros_like(self.params)  # first moment
        self.v = torch.zeros_like(self.params)  # second moment
        self.t = 0  # server steps applied (the bias correction's t)

    def apply(self, mean: torch.Tensor) -> None:
        cfg = self.config
        self.t += 1
        # new tensors (m, v and x may be tensors already handed to a runtime), the three in one pass; the rule
        # for v by the config's name (model_passes.adaptive)
        self.params, self.m, self.v = model_passes.adaptive(self.params, self.m, self.v, mean, cfg.name, cfg.beta1,
                                                            getattr(cfg, "beta2", 0.0), cfg.tau,
                                                            cfg.global_lr * self.bias_scale())

    def bias_scale(self) -> float:
        """√(1 − β2^t)/(1 − β1^t) under `bias_correction` (FedAdam), else 1."""
        mode = getattr(self.config, "bias_correction", "none")
        if mode == "none":
            return 1.0
        t = self.t + (1 if mode == "flower" else 0)
        return math.sqrt(1 - self.config.beta2 ** t) / (1 - self.config.beta1 ** t)

    def replica_state(self) -> dict[str, torch.Tensor]:
        return {"m": self.m, "v": self.v, "t": torch.tensor([self.t], dtype=torch.int64)}

    def load_replica_state(self, tensors: dict[str, torch.Tensor]) -> None:
        self.m, self.v, self.t = tensors["m"], tensors["v"], int(tensors["t"].item())


PAPER = "Reddi et al. 2021, Adaptive Federated Optimization, Alg. 2"
ADAM_SPEC = AlgorithmSpec(name="fedadam", config=FedAdamConfig, server=FedOptServer, client=LocalSGDClient,
                          family="synchronous", paper=f"FedAdam ({PAPER})")
YOGI_SPEC = AlgorithmSpec(name="fedyogi", config=FedYogiConfig, server=FedOptServer, client=LocalSGDClient,
                          family="synchronous", paper=f"FedYogi ({PAPER})")
ADAGRAD_SPEC = AlgorithmSpec(name="fedadagrad", config=FedAdagradConfig, server=FedOptServer,
                             client=LocalSGDClient, family="synchronous", paper=f"FedAdagrad ({PAPER})")
