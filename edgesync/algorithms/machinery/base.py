"""The algorithm contract: a server half, a client half and a typed config, registered by name.

An algorithm is pure logic over flat float32 tensors. It never knows which runtime moves its messages
(live ZeroMQ, the simulator, Flower), nor that a client is throttled or its link is slow.

- The **server half** lives in the coordinator. `start()` says what to send first; `on_update()` is
  called for every update that arrives and says what to send, to whom. Barriers and staleness
  policies are the server half's business: it simply sends nothing until it is ready.
- The **client half** lives in each client. `on_instruction()` gets an instruction (a model or a
  model difference plus metadata), runs local computation through a `Trainer`, returns an update.
  Its state persists between instructions and is exposed by `state_dict()` so runtimes that restart
  client processes (Flower) can keep it.

Two rules keep zero-copy transport safe: tensors received from a runtime may be read-only views of
network buffers (clone before changing them), and a tensor handed to the runtime in a `Send` is never
changed afterwards (update the global model out of place: `self.params = self.params - lr * g`).
"""
from __future__ import annotations

import copy
import math

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field

from edgesync.trainer import Trainer

# The learning rate an entry that gives none trains with; the Flower nodes fall back to it too.
DEFAULT_LR = 0.05


class AlgorithmConfig(BaseModel):
    """Hyper-parameters every algorithm has. Subclasses add their own and fix `name` to a Literal."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    label: str | None = Field(None, description="key of this entry in results; default: the name")
    lr: float = Field(DEFAULT_LR, gt=0, description="learning rate η")
    batch_size: int = Field(32, ge=1, description="mini-batch size per client step")
    weight_decay: float = Field(0.0, ge=0, description="L2 coefficient, added to the gradient")
    warmup_epochs: float = Field(0.0, ge=0, description="E: ramp η from η/N to η over E epochs of the "
                                 "training data, with momentum correction (DANA App. B.4); 0 = off")

    @property
    def key(self) -> str:
        return self.label or self.name


@dataclass
class Instruction:
    """Coordinator → client. `tensors` e.g. {"params": θ}; `meta` is JSON-able (round, version…)."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Update:
    """Client → coordinator. `meta` always carries `steps` and `samples` computed for this update."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Send:
    """An instruction addressed to one client (by rank)."""

    client: int
    instruction: Instruction


@dataclass
class ModelState:
    """The initial global model as flat vectors: trainable parameters and floating buffers."""

    params: torch.Tensor
    buffers: torch.Tensor
    sizes: tuple[int, ...] = ()  # numel of each parameter tensor, in flat order (params.py); () = one layer


@dataclass(frozen=True)
class Population:
    """What a runtime tells a server half about every client of the run, live or not: the run's seed
    (for choices a server half makes, such as which clients take part in a round) and each client's
    number of training samples. Set by the runtime after construction, like `now`."""

    seed: int = 0
    data_sizes: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdateFormat:
    """What a server half accepts as an update's main tensor; the runtime refuses anything else
    (runtime/bookkeeping/update_check.py) before `on_update` sees it."""

    key: str | None  # its name ("grad", "delta", "params"); None: any of those
    sparse: bool  # whether it may also travel as f"{key}.idx" + f"{key}.val" (compression.codec)
    value_dtypes: frozenset  # dtypes its values may have


class ServerAlgorithm(ABC):
    """Coordinator side. Holds the global model; turns arriving updates into instructions.

    `now()` is the runtime's clock in seconds since the algorithm started (wall or virtual); the
    runtime sets it before `start()`.
    """

    now: Callable[[], float] = staticmethod(time.perf_counter)
    population: Population = Population()
    update_key: ClassVar[str | None] = None  # the tensor every update carries; None: not declared

    def __init__(self, config: AlgorithmConfig, initial: ModelState, clients: list[int]):
        self.config = config
        self.params = initial.params.clone()
        self.buffers = initial.buffers.clone()
        self.clients = list(clients)
        self.updates = 0  # global model updates applied so far
        self.update_log: list[dict[str, Any]] = []

    @abstractmethod
    def start(self) -> list[Send]:
        """The first instructions, sent when every client is ready."""

    @abstractmethod
    def on_update(self, client: int, update: Update) -> list[Send]:
        """An update arrived from `client`. Returns what to send now (possibly nothing: a barrier)."""

    def update_format(self) -> UpdateFormat:
        """How this half's updates look. Default: dense float32 under `update_key`; a half that takes
        sparse payloads or other dtypes (the DGS family) says so here."""
        return UpdateFormat(self.update_key, False, frozenset({torch.float32}))

    def on_client_lost(self, client: int) -> list[Send]:
        """`client` is gone. Returns what to send to the others; by default nothing changes."""
        return []

    def on_client_joined(self, client: int) -> list[Send]:
        """`client` is back (it was lost and reconnected, its client half starting afresh). Returns what
        to send; the asynchronous and round-based halves take it back, this default ignores it."""
        return []

    def due(self) -> float:
        """When, on `now()`'s clock, this half wants `on_due()` called even if no message arrives (a round's
        deadline); ∞: never. The runtime asks after every call into the half."""
        return math.inf

    def on_due(self) -> list[Send]:
        """The time `due()` named has come. Returns what to send; by default nothing."""
        return []

    def on_query(self, client: int, meta: dict[str, Any]) -> dict[str, Any] | None:
        """A client asks something in the middle of an instruction (ESync's State Server).

        Returns the reply's metadata, or None for no reply (a non-blocking query's implicit
        "not yet"). The default serves no queries.
        """
        raise NotImplementedError(f"{type(self).__name__} answers no queries")

    def log_update(self, client: int, **fields: Any) -> None:
        """Record instrumentation of one applied update (lag τ, gap G, SHAT's c_i …).

        The runtime drains these after every `on_update`, stamps them with the algorithm's label and
        the time, and appends them to the run folder's updates.jsonl; the summary reports the means
        of `lag` and `gap`.
        """
        self.update_log.append({"client": client, "update": self.updates, **fields})

    def drain_update_log(self) -> list[dict[str, Any]]:
        rows, self.update_log = self.update_log, []
        return rows

    def global_params(self) -> torch.Tensor:
        """The global model to evaluate. The runtime copies it before evaluating elsewhere."""
        return self.params

    # Not state: the config is rebuilt from the scenario, the clock and population are the runtime's.
    _NOT_STATE: ClassVar[frozenset[str]] = frozenset({"config", "now", "population"})

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to go on after a restart (runtime/bookkeeping/checkpoint.py): a deep copy of this half's
        attributes — global model, counters, per-client records, momentum, RNGs — but its config and
        clock. Every server half is plain attributes of tensors, numbers and containers, so one
        generic copy serves them all; a half that holds something else overrides this pair."""
        return copy.deepcopy({k: v for k, v in vars(self).items() if k not in self._NOT_STATE})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        missing = set(vars(self)) - self._NOT_STATE - set(state)
        if missing:
            raise ValueError(f"{type(self).__name__} state lacks {sorted(missing)}: written by another version?")
        vars(self).update(copy.deepcopy(state))

    def global_buffers(self) -> torch.Tensor:
        return self.buffers


class ClientContext(Protocol):
    """What a client half may ask of its runtime while it runs an instruction."""

    def now(self) -> float:
        """The runtime's clock, in seconds: wall time live, virtual time in the simulator."""

    def query(self, meta: dict[str, Any]) -> dict[str, Any]:
        """A blocking round trip to the server half's `on_query`; returns its reply."""

    def send_query(self, meta: dict[str, Any]) -> None:
        """A non-blocking query: training goes on; a reply, if the server sends one, comes later."""

    def replies(self) -> list[dict[str, Any]]:
        """Replies to non-blocking queries that have arrived since the last call."""

    def wait_replies(self, timeout_s: float) -> tuple[list[dict[str, Any]], float]:
        """Wait up to `timeout_s` on the runtime's clock for replies to non-blocking queries.

        Returns at the first arrival with (replies, seconds waited), else ([], timeout_s).
        """


class NoQueries:
    """The context of a runtime whose client halves ask nothing (and of unit tests)."""

    def now(self) -> float:
        return time.perf_counter()

    def query(self, meta: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("this runtime serves no queries")

    send_query = query

    def replies(self) -> list[dict[str, Any]]:
        return []

    def wait_replies(self, timeout_s: float) -> tuple[list[dict[str, Any]], float]:
        time.sleep(timeout_s)
        return [], timeout_s


class ClientAlgorithm(ABC):
    """Client side. Passive: an instruction in, an update out; explicit, serializable state.

    Every runtime shares nothing but the trainer with a client half, so it must load the parameters
    it needs into the trainer at the start of each instruction (the simulator's clients share one
    model; Flower starts a new process per message). `ctx` is set by the runtime.
    """

    uses_queries: ClassVar[bool] = False  # True if on_instruction calls ctx.query/send_query/replies

    def __init__(self, config: AlgorithmConfig, trainer: Trainer):
        self.config = config
        self.trainer = trainer
        self.ctx: ClientContext = NoQueries()

    @abstractmethod
    def on_instruction(self, instruction: Instruction) -> Update:
        """Run the local computation the instruction asks for and return the update to send."""

    def state_dict(self) -> dict[str, Any]:
        """State that must survive between instructions (momentum, residuals…). Default: none."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None

    def follow_ups(self) -> list[Update]:
        """Messages to send after the update, in order (all-reduce's lead: the round's mean). Default: none."""
        return []


@dataclass(frozen=True)
class AlgorithmSpec:
    """What the registry holds for a name."""

    name: str
    config: type[AlgorithmConfig]
    server: type[ServerAlgorithm]
    client: type[ClientAlgorithm]
    family: str  # "synchronous" | "asynchronous"
    paper: str = ""
    # The registered algorithm that stands in for this one where a client cannot be asked anything in the
    # middle of an instruction (a Flower ClientApp): None if the client half never queries, or has none.
    without_queries: str | None = None
    # The edgesync.api version an extension was written for (extensions.API_VERSION when it was); the
    # registry refuses an outside spec without one, or for another major version. Built-in specs leave it None.
    api_version: str | None = None

    summary: ClassVar[str] = ""
