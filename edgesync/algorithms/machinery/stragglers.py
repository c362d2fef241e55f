"""What a synchronous round does about slow clients: the mitigations practitioners reach for first.

- **Backup workers** (Chen, Pan, Monga, Bengio, Jozefowicz 2016, "Revisiting Distributed Synchronous SGD"):
  N + b workers compute, the round closes at the first N gradients. `backup_workers: b` closes each round at
  the first (online − b) reports; `close_at: K` at the first K.
- **Over-selection** (Bonawitz et al. 2019, "Towards Federated Learning at Scale", §2.2: select 130 % of the
  target, close at the first K): with `clients_per_round: K` (or `client_fraction`), `over_select: 1.3` draws
  ⌈1.3·K⌉ of the online clients and closes at the first K reports.
- **A round deadline** (Bonawitz et al.'s reporting window): `deadline_s` seconds after the round's start, or
  `deadline_median: f` = f × the median, over the round's participants, of each one's last round time (from
  the instruction's sending to its report's arrival, late reports included). While fewer than half of the
  participants have been timed (the first round), the median is this round's own: when half of its reports
  are in, the deadline is set at f × the time they took. With `partial_work: drop` (the default) the round
  closes at its deadline with the reports that have arrived (at the first report after it if none has).
- **Partial work** (`partial_work: accept | normalise`, algorithms with local steps only): each participant is
  told the time left to the deadline and stops its local steps so as to finish by then (by its last step's
  time: a client not yet timed runs one step), reporting what it did. The round waits for every participant.
  A round whose deadline is not known when it starts (set from its own reports) drops late reports instead.
  `accept` averages the reports as they are (FedProx's tolerance of partial solutions, Li et al. 2020; a
  client that ran no step reports Δ = 0 and counts in the mean); `normalise` is FedNova's weighting (Wang et
  al. 2020): d_i = Δ_i/τ_i, θ ← θ + ε·τ_eff·Σ p_i·d_i.

A report that arrives after its round closed is discarded and counted (`discarded`: updates and the local
steps they held, per client): the compute a mitigation throws away. A client whose report is still due is
*busy*: new rounds do not draw it (a straggler is never sent a second model to queue behind the first). When
its late report arrives it is free again: it joins a round under way that takes every online client
(no `clients_per_round`), else the next draw.
"""
from __future__ import annotations

import math
from statistics import median
from typing import Literal

from pydantic import Field, model_validator

from edgesync.algorithms.machinery.participation import ParticipationConfig


class StragglerConfig(ParticipationConfig):
    """Keys of the round algorithms (ssgd, local SGD and its family, FedNova) that mitigate slow clients."""

    backup_workers: int | None = Field(None, ge=1, description="b: each round closes at the first (online − b) "
                                       "reports; the rest are discarded (Chen et al. 2016)")
    close_at: int | None = Field(None, ge=1, description="K: each round closes at its first K reports")
    over_select: float | None = Field(None, ge=1, description="draw ⌈f·K⌉ clients and close at the first K "
                                      "(needs clients_per_round or client_fraction; Bonawitz et al. 2019: 1.3)")
    deadline_s: float | None = Field(None, gt=0, description="each round closes this many seconds after it "
                                     "started, with what has arrived")
    deadline_median: float | None = Field(None, gt=0, description="f: the round's deadline is f × the median of "
                                          "its participants' last round times, instead of deadline_s")

    @model_validator(mode="after")
    def _one_rule_each(self) -> "StragglerConfig":
        early = [k for k in ("backup_workers", "close_at", "over_select") if getattr(self, k) is not None]
        if len(early) > 1:
            raise ValueError(f"give one of backup_workers, close_at and over_select, not {' and '.join(early)}")
        if self.deadline_s is not None and self.deadline_median is not None:
            raise ValueError("give deadline_s or deadline_median, not both")
        if self.over_select is not None and not self.samples_clients:
            raise ValueError("over_select needs clients_per_round or client_fraction: the K it over-selects for")
        return self

    @property
    def has_deadline(self) -> bool:
        return self.deadline_s is not None or self.deadline_median is not None

    @property
    def mitigates(self) -> bool:
        """Whether any mitigation is on (the run folder's rounds are then logged, with what was discarded)."""
        return any(getattr(self, k) is not None for k in STRAGGLER_KEYS)


STRAGGLER_KEYS = ("backup_workers", "close_at", "over_select", "deadline_s", "deadline_median")


def partial_work_field():
    """The `partial_work` key of the configs whose clients run local steps (local SGD's family, FedNova)."""
    return Field("drop", description="at the deadline: drop (a late report is discarded), accept (each client "
                 "stops by the deadline and reports what it did: FedProx) or normalise (as accept, averaged "
                 "with FedNova's weighting)")


PartialWork = Literal["drop", "accept", "normalise"]


def check_partial_work(config) -> None:
    """A partial_work other than drop needs a deadline to stop by."""
    if getattr(config, "partial_work", "drop") != "drop" and not config.has_deadline:
        raise ValueError(f"partial_work: {config.partial_work} needs deadline_s or deadline_median: the time "
                         "each client stops by")


def draw_size(config: ParticipationConfig, target: int, available: int) -> int:
    """How many of `available` clients a round draws for `target` reports (over-selection draws more)."""
    f = getattr(config, "over_select", None)
    return min(available, math.ceil(f * target)) if f else target


def reports_needed(config: ParticipationConfig, drawn: int, online: int, target: int) -> int | None:
    """How many reports close a round of `drawn` participants among `online` clients (`target`: the sample
    size asked for, K): at least one, when a mitigation closes it early; None (every participant, those that
    join it later too) when none does."""
    b = getattr(config, "backup_workers", None)
    if b is not None:
        return max(1, min(drawn, online - b))
    k = getattr(config, "close_at", None)
    if k is not None:
        return max(1, min(drawn, k))
    if getattr(config, "over_select", None):
        return max(1, min(drawn, target))
    return None


def round_deadline(config: ParticipationConfig, participants: list[int], last_round_s: dict[int, float]) -> float:
    """Seconds from the round's start to its deadline (∞: none)."""
    if getattr(config, "deadline_s", None) is not None:
        return float(config.deadline_s)
    f = getattr(config, "deadline_median", None)
    timed = [last_round_s[c] for c in participants if c in last_round_s]
    if f is None or 2 * len(timed) < len(participants) or not timed:
        return math.inf  # none, or set from this round's own reports (in_round_deadline)
    return f * median(timed)


def in_round_deadline(config: ParticipationConfig, participants: int, reported: int, elapsed_s: float) -> float:
    """`deadline_median` in a round that started without one: once half of its `participants` have reported,
    `elapsed_s` after its start, f × that time (∞ before, or without the key)."""
    f = getattr(config, "deadline_median", None)
    if f is None or 2 * reported < participants:
        return math.inf
    return f * elapsed_s


def discarded_extras(server, rank: int) -> dict:
    """What a client's clients.jsonl row adds when its entry mitigates slow clients: the late updates the
    rounds discarded and the local steps they held (the compute thrown away)."""
    if not (isinstance(getattr(server, "config", None), StragglerConfig) and server.config.mitigates):
        return {}
    lost = getattr(server, "discarded", {}).get(rank, {"updates": 0, "steps": 0})
    return {"discarded_updates": lost["updates"], "wasted_steps": lost["steps"]}
