"""Partial participation: which of the online clients take part in a synchronous round.

FedAvg's C (McMahan et al. 2017) and every federated system since (FedScale, Flower's `fraction_fit`,
Plato, FLSim) train each round on a sample of the clients that are available at its start. Here the
synchronous halves (`ssgd`, `local_sgd`, `esync` and its stand-in) take

- `clients_per_round: K` or `client_fraction: C` (K = max(1, round(C·online))); neither = every online
  client, as before;
- `client_sampling: uniform` (each online client equally likely) or `data_size` (FedAvg's
  probability proportional to the client's number of training samples), without replacement.

The sample is a pure function of the run's seed, the round number, the try within the round (a round
whose every participant went offline before reporting is drawn again) and the online set, so a replay
draws the same clients, in every runtime. With fewer online clients than K, all of them take part.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from edgesync.algorithms.machinery.base import AlgorithmConfig, Population

SAMPLING_SALT = 0xFED  # keeps these draws apart from the other seeded streams of a run


class ParticipationConfig(AlgorithmConfig):
    """Keys of the synchronous algorithms that choose a round's clients."""

    clients_per_round: int | None = Field(None, ge=1, description="K clients per round, sampled among the "
                                          "online ones; default: all online clients")
    client_fraction: float | None = Field(None, gt=0, le=1, description="C: a fraction of the online clients "
                                          "per round (at least one), instead of clients_per_round")
    client_sampling: Literal["uniform", "data_size"] = Field("uniform", description="uniform, or weighted by "
                                                             "each client's training samples (FedAvg)")

    @model_validator(mode="after")
    def _one_size(self) -> "ParticipationConfig":
        if self.clients_per_round is not None and self.client_fraction is not None:
            raise ValueError("give clients_per_round or client_fraction, not both")
        return self

    @property
    def samples_clients(self) -> bool:
        return self.clients_per_round is not None or self.client_fraction is not None


def round_size(config: ParticipationConfig, online: int) -> int:
    """How many of `online` clients take part in a round."""
    if config.clients_per_round is not None:
        return min(online, config.clients_per_round)
    if config.client_fraction is not None:
        return min(online, max(1, round(config.client_fraction * online)))
    return online


def choose(config: ParticipationConfig, population: Population, online: list[int], round_no: int,
           attempt: int = 0, k: int | None = None) -> list[int]:
    """The round's participants, sorted: `k` of `online` (default: round_size's; all of them unless the
    config samples)."""
    pool = sorted(online)
    k = round_size(config, len(pool)) if k is None else k
    if k >= len(pool):
        return pool
    rng = np.random.default_rng([population.seed, round_no, attempt, SAMPLING_SALT])
    p = None
    if config.client_sampling == "data_size":
        sizes = np.array([population.data_sizes.get(c, 1) for c in pool], dtype=np.float64)
        p = sizes / sizes.sum()
    picked = rng.choice(len(pool), size=k, replace=False, p=p)
    return sorted(pool[i] for i in picked)
