"""Scenario files: YAML validated into typed models, with errors that name file, key, value and need.

A scenario overrides only what differs from the defaults below. `load_scenario(path, overrides)`
applies `--set key.path=value` overrides to the raw YAML before validation, so they are checked
exactly like the file, and checks every combination of the scenario's `sweep` (`sweep_combinations`;
`edgesync.sweep` turns them into labelled sub-runs). Every problem becomes a `ScenarioError` whose lines
read `FILE: key.path: problem (got VALUE)`.

A number in the YAML that becomes a list (a client count) and a sweep (which multiplies whole
scenarios) are bounded, and the bounds are checked before anything is built: `MAX_CLIENTS`,
`MAX_SWEEP_VARIANTS`, `MAX_SWEEP_CLIENTS` below, and the tuning runs a `tune` grid asks for,
`MAX_TUNE_RUNS`. `tune_points` expands a `tune` grid for one entry (`edgesync.runtime.tuning` runs it).
"""
from __future__ import annotations

import difflib
import itertools
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from edgesync import algorithms
from edgesync.data.datasets import INPUT_SHAPES
from edgesync.data.fashion_mnist import ENV_VAR as DATA_ENV_VAR
from edgesync.data.partition import PARTITION_KINDS
from edgesync.emulation.availability import Availability, parse_availability
from edgesync.emulation.links import Link
from edgesync.emulation.profiles import ConstantProfile, GammaProfile, Profile, TraceProfile, parse_profile
from edgesync.emulation.traces import given_rows
from edgesync.models import FIXED_INPUT_SIDE
from edgesync.models.shard_plan import plan_for

# Every registered algorithm's config, told apart by its `name` (pydantic's discriminated union).
AlgorithmEntry = Annotated[Union[tuple(spec.config for spec in algorithms.specs())], Field(discriminator="name")]

# What a scenario may ask to be built. The simulator holds about 0.85-1.45 MB per client with the small
# CNN (docs/simulator.md, "Memory"), so 10,000 clients need 9-15 GB, ten times the 1,000 it is measured
# with; 100,000 would need over 85 GB and more than Fashion-MNIST's 60,000 training samples (every client
# needs one). A validated client costs about 0.5 kB and 3 µs, so a sweep's 100,000 clients in all take
# 50 MB and a fraction of a second to check.
MAX_CLIENTS = 10_000            # clients of one scenario, or of one sweep variant
MAX_SWEEP_VARIANTS = 1_000      # combinations of one sweep (the product of its value lists' lengths)
MAX_SWEEP_CLIENTS = 100_000     # clients of all a sweep's variants together (each variant is built)
MAX_SEEDS = 100                 # seeds of one scenario (each multiplies every variant)
MAX_SHARDS = 64                 # parameter-server shards of one coordinator
DEFAULT_SHARDS = 4              # SHAT's EQ3 shards over four servers
# A tuning run is a whole training run: 200 of them at the DGS comparison's ~15 s each (simulator, 2 cores)
# are nearly an hour, and a grid that asks for more is more likely a typo (a value list too many) than a plan.
MAX_TUNE_RUNS = 200             # tuning runs of a `tune` grid, all entries together


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Problem(ValueError):
    """A validator's problem at a key below the one it checks (`at`), with the value shown as `got`."""

    def __init__(self, message: str, got: str, at: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.got, self.at = got, at

    def line(self, key: str) -> str:
        return f"{'.'.join(map(str, (key, *self.at)))}: {self} (got {self.got})"


def _client_count(value: Any) -> int | None:
    """How many clients a `clients` value asks for (a count, `{count: N, …}` or a list); None if none."""
    count = value.get("count") if isinstance(value, dict) else value
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    return len(value) if isinstance(value, list) else None


def _too_many_clients(value: Any, at: tuple[str | int, ...] = ()) -> _Problem | None:
    """The problem with a `clients` value over MAX_CLIENTS, found without building a client."""
    count = _client_count(value)
    if count is None or count <= MAX_CLIENTS:
        return None
    where = ("count",) if isinstance(value, dict) else ()
    got = f"a list of {count}" if isinstance(value, list) else str(count)
    return _Problem(f"at most {MAX_CLIENTS:,} clients", got, at + where)


class DatasetSpec(Strict):
    name: Literal["fashion_mnist", "torchvision_fashion_mnist", "mnist", "cifar10"] = "fashion_mnist"
    root: str | None = Field(None, description="data folder, the only place looked in; must exist on the "
                             "machine that loads the scenario; EDGESYNC_DATA wins over it")
    train_size: int | None = Field(None, ge=1, description="use only the first N training samples")

    @field_validator("root")
    @classmethod
    def _root(cls, root: str | None, info: ValidationInfo) -> str | None:
        """An explicit root is where this machine reads the data: a wrong one is an error here, not a
        silent fallback to another copy. Where $EDGESYNC_DATA wins over it (Fashion-MNIST, CIFAR-10),
        this machine does not read it, and a root meant for the clients' machines is left alone."""
        env_wins = info.data.get("name") != "mnist" and os.environ.get(DATA_ENV_VAR)
        if root is not None and not env_wins and not Path(root).is_dir():
            raise ValueError("no such directory on this machine")
        return root


class ModelSpec(Strict):
    name: Literal["cnn", "vgg_small", "resnet18"] = "cnn"


class PartitionSpec(Strict):
    kind: Literal[PARTITION_KINDS] = "iid"  # type: ignore[valid-type]
    alpha: float = Field(0.5, gt=0, description="Dirichlet concentration (kind: dirichlet)")
    shards_per_client: int = Field(2, ge=1, description="shards per client (kind: shards)")


class DirectionSpec(Strict):
    """One direction of a link; a key left out keeps the value it overrides."""

    rate_mbps: float | None = Field(None, gt=0, description="bandwidth, Mbit/s")
    latency_ms: float | None = Field(None, ge=0, description="one-way latency, ms")
    jitter_ms: float | None = Field(None, ge=0, description="latency varies uniformly within ± this, ms")
    loss: float | None = Field(None, ge=0, lt=1, description="packet loss probability (shows up as delay)")
    trace: list[tuple[float, float, float]] | None = Field(None, description="[[t s, rate Mbit/s, latency ms], …]: "
                                                         "from t on, the link's rate and latency (emulation/traces.py)")
    trace_file: str | None = Field(None, description="CSV/JSON file of such rows, relative to the scenario; read "
                                   "once when it loads (the run folder keeps the rows)")

    @model_validator(mode="before")
    @classmethod
    def _trace_rows(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or (data.get("trace") is None and data.get("trace_file") is None):
            return data
        data = dict(data)
        rows = given_rows(data, "trace", "trace_file", ("t", "rate_mbps", "latency_ms"), "link trace",
                          (info.context or {}).get("base_dir"))
        for i, (_, rate, latency) in enumerate(rows):
            if rate <= 0 or latency < 0:
                raise ValueError(f"link trace row {i + 1}: the rate must be > 0 Mbit/s and the latency ≥ 0 ms, "
                                 f"got {rate:g} Mbit/s, {latency:g} ms")
        data["trace"] = [list(r) for r in rows]
        return data


class LinkSpec(DirectionSpec):
    """A client's link: values for both directions, with `up` (client → coordinator) and `down` overrides."""

    up: DirectionSpec | None = Field(None, description="client → coordinator overrides")
    down: DirectionSpec | None = Field(None, description="coordinator → client overrides")

    def direction(self, which: Literal["up", "down"]) -> DirectionSpec:
        base = {k: getattr(self, k) for k in DirectionSpec.model_fields}
        extra = getattr(self, which)
        if extra is not None:
            base.update({k: v for k, v in extra.model_dump().items() if v is not None})
        return DirectionSpec(**base)


def resolve_direction(which: Literal["up", "down"], *specs: "LinkSpec | None") -> DirectionSpec:
    """One direction of a link from specs in rising precedence (the scenario's `links`, a client's
    `link`); each spec's own `up`/`down` override its plain values."""
    merged: dict[str, Any] = {}
    for spec in specs:
        if spec is not None:
            merged.update(spec.direction(which).model_dump(exclude_none=True))
    return DirectionSpec(**merged)


def to_link(spec: DirectionSpec) -> Link:
    trace = tuple((t, rate, latency / 1e3) for t, rate, latency in spec.trace or ())
    return Link(rate_mbps=spec.rate_mbps, latency_s=(spec.latency_ms or 0.0) / 1e3,
                jitter_s=(spec.jitter_ms or 0.0) / 1e3, loss=spec.loss or 0.0, trace=trace)


class LinksSpec(LinkSpec):
    """The scenario's `links`: every client's link unless it sets its own, and how live runs emulate it."""

    backend: Literal["transport", "netns"] = Field("transport", description="live runs: pace messages in "
                                                   "the transport, or shape veth pairs in network namespaces "
                                                   "with tc (root; the transport adds what the kernel lacks)")


class ClientSpec(Strict):
    profile: Profile = ConstantProfile(factor=1)
    partition: PartitionSpec | None = Field(None, description="this client's own split; default: the scenario's")
    device: str = Field("cpu", description="torch device: cpu, cuda:N or auto")
    link: LinkSpec | None = Field(None, description="this client's link, over the scenario's `links`")
    availability: Availability | None = Field(None, description="when the device is online: a trace of online "
                                              "intervals or an exponential on/off model; default always")

    @field_validator("profile", mode="before")
    @classmethod
    def _profile(cls, value: Any, info: ValidationInfo) -> Profile:
        return parse_profile(value, info.context)

    @field_validator("availability", mode="before")
    @classmethod
    def _availability(cls, value: Any, info: ValidationInfo) -> Availability | None:
        return parse_availability(value, info.context)


class StopSpec(Strict):
    time_budget_s: float = Field(60.0, gt=0, description="wall (or virtual) seconds per algorithm")
    target_acc: float | None = Field(0.8, gt=0, le=1, description="accuracy for time-to-accuracy")
    stop_at_target: bool = Field(False, description="end an algorithm once it reaches target_acc")
    max_updates: int | None = Field(None, ge=1, description="global model updates per algorithm")


class EvalSpec(Strict):
    every_s: float = Field(2.0, gt=0, description="evaluate the global model this often")
    test_size: int | None = Field(2000, ge=1, description="test samples per evaluation; null = all")
    batch_size: int = Field(1000, ge=1)
    on: Literal["test", "validation"] = Field("test", description="what the global model is tested on: the "
                                              "test set, or the validation set `tune` carves from the training "
                                              "data (a tuning run; needs `tune`)")


class FaultsSpec(Strict):
    client_timeout_s: float = Field(30.0, gt=0, description="live runs: a client (or, seen from a client, the "
                                    "coordinator) silent this long is gone; heartbeats go every second")
    quorum: int = Field(1, ge=1, description="synchronous algorithms go on while at least this many clients "
                        "are alive; below it they wait client_timeout_s for returns, then the run aborts")


class CheckpointSpec(Strict):
    every_updates: int = Field(200, ge=0, description="live runs: write RUN_DIR/checkpoint.pt every this many "
                               "global updates (besides each algorithm's start and end); 0 = not by updates")
    every_s: float = Field(30.0, ge=0, description="live runs: also write it every this many seconds of the "
                           "algorithm's clock; 0 = not by time (both 0: no checkpoint, no --resume)")


class ServerCostSpec(Strict):
    """The coordinator's cost per event of one algorithm entry, in seconds (runtime/sim/server_cost.py)."""

    decode_update: float = Field(ge=0, description="decoding one UPDATE's frames and checking its tensors")
    collect: float = Field(ge=0, description="the server half's on_update for an update that leaves the "
                           "global model as it is (a barrier collecting)")
    apply: float = Field(ge=0, description="on_update for an update that changes the global model (an "
                         "asynchronous step, a round's aggregation)")
    encode_send: float = Field(ge=0, description="encoding one message the coordinator sends (TRAIN)")
    query: float = Field(ge=0, description="one QUERY: decoding it, on_query, encoding the REPLY")


class SimSpec(Strict):
    """Settings of the virtual-clock simulator (`runtime: sim`)."""

    base_step_s: float | None = Field(None, gt=0, description="undisturbed step time in seconds; "
                                      "null = measured once on this machine per model and batch size")
    server_time: Literal["model", "zero", "measured"] = Field(
        "model", description="coordinator processing time: model (its costs per event, measured once per "
        "machine and cached, recorded in measured_server_s; deterministic), zero (idealised: the coordinator "
        "takes no time) or measured (its wall time at every event; not deterministic)")
    backend: Literal["serial", "ray"] = Field(
        "serial", description="serial: every client's work in this process, one after another; ray: clients' "
        "instructions run at once on Ray workers (this machine's, or the cluster `--ray ADDRESS` or RAY_ADDRESS "
        "names) and are applied in virtual-time order: the same metrics (runtime/sim/ray_backend.py)")
    workers: int | None = Field(None, ge=1, description="ray: worker processes, each hosting a share of the "
                                "clients; null = one per CPU of the Ray cluster")
    spill_mb: float | None = Field(2048, gt=0, description="updates in flight held in memory, in MB; further "
                                   "ones wait on disk until they arrive (runtime/sim/spill.py; results do not "
                                   "change); null = no limit")
    measured_step_s: dict[int, float] = Field(default_factory=dict, description="filled in by a run: the "
                                              "measured step time per batch size, reused on replay")
    measured_server_s: dict[str, ServerCostSpec] = Field(
        default_factory=dict, description="filled in by a run with server_time model: the coordinator's "
        "costs per algorithm entry (label), reused on replay")


class LiveSpec(Strict):
    """How `edgesync run` hosts a live scenario's clients on this machine (runtime/live/launcher.py)."""

    processes: int | None = Field(None, ge=1, description="client processes to start, the clients spread over "
                                  "them as slots taking turns on each process's one torch thread (`edgesync client "
                                  "--slots`); null = one process per client while there are at most "
                                  "LOCAL_PROCESSES_PER_CORE per core, else one per core")


class EmulationSpec(Strict):
    """How emulated devices keep their speed when clients share a machine (emulation/device_model.py)."""

    mode: Literal["shared", "fixed", "undisturbed"] | None = Field(
        None, description="shared: one base step for every ×1 client, slow enough that the clients of each "
        "host fit in its compute; fixed: base_step_ms; undisturbed: each client's own undisturbed step "
        "(a core per client); null = fixed if base_step_ms is set, else shared")
    base_step_ms: float | None = Field(None, gt=0, description="the ×1 device's step time in ms (mode fixed); "
                                       "the simulator uses it too")
    headroom: float = Field(0.7, gt=0, le=1, description="shared mode: the fraction of a host's cores "
                            "the clients' compute may fill")
    isolation: Literal["auto", "affinity", "cgroup", "none"] = Field(
        "auto", description="auto: pin a client per core where a host has enough, else a cgroup CPU quota "
        "(root), else pacing alone; affinity / cgroup / none ask for one")
    tolerance: float = Field(0.05, gt=0, description="warn when a client's achieved factor is off its "
                             "target by more than this fraction")

    @model_validator(mode="after")
    def _consistent(self) -> "EmulationSpec":
        if self.mode == "fixed" and self.base_step_ms is None:
            raise ValueError("emulation.mode fixed needs emulation.base_step_ms (the ×1 device's step in ms)")
        if self.mode in ("shared", "undisturbed") and self.base_step_ms is not None:
            raise ValueError(f"emulation.base_step_ms fixes the device speed, but emulation.mode is {self.mode}: "
                             "drop base_step_ms, or set mode: fixed")
        return self

    @property
    def resolved_mode(self) -> str:
        return self.mode or ("fixed" if self.base_step_ms is not None else "shared")


DEFAULT_VALIDATION_FRACTION = 0.1  # of the training samples, held out when a `tune` block gives no size


class TuneStopSpec(Strict):
    """The tuning runs' stop rules; a key left out (null) keeps the scenario's `stop` value."""

    time_budget_s: float | None = Field(None, gt=0, description="tuning runs: seconds per entry")
    max_updates: int | None = Field(None, ge=1, description="tuning runs: global model updates per entry")
    stop_at_target: bool | None = Field(None, description="tuning runs: end an entry once it reaches "
                                        "stop.target_acc on the validation set")


class TuneSpec(Strict):
    """Equal tuning (edgesync/runtime/tuning.py): every entry tried at the same grid, chosen on validation data."""

    grid: dict[str, list[Any]] = Field(description="algorithm config key → values; each entry is "
                                       "tried at every combination of the keys its config has")
    metric: Literal["final_acc", "best_acc", "time_to_target"] = Field(
        "final_acc", description="what chooses a point, on the validation set: the final or the best accuracy "
        "(higher wins), or the time to stop.target_acc (shorter wins)")
    validation_fraction: float | None = Field(None, gt=0, lt=1, description="fraction of the training samples "
                                              "held out for validation (stratified by class); null: "
                                              f"{DEFAULT_VALIDATION_FRACTION} unless validation_size is set")
    validation_size: int | None = Field(None, ge=1, description="held-out samples as a count, instead of "
                                        "validation_fraction")
    seed: int | None = Field(None, description="the tuning runs' seed; null = the scenario's seed")
    stop: TuneStopSpec = Field(TuneStopSpec(), description="the tuning runs' stop rules over the scenario's")

    @model_validator(mode="after")
    def _one_size(self) -> "TuneSpec":
        if self.validation_size is not None and self.validation_fraction is not None:
            raise ValueError(f"validation_size ({self.validation_size}) and validation_fraction "
                             f"({self.validation_fraction:g}) both size the validation set: keep one")
        return self


class OutputSpec(Strict):
    dir: str = Field("runs", description="parent folder of run folders")
    name: str | None = Field(None, description="run folder name; default: scenario name + time")
    tensorboard: bool = Field(False, description="also write TensorBoard event files into RUN_DIR/tensorboard as "
                              "the run goes (one run per entry label); view: tensorboard --logdir RUN_DIR/tensorboard")


class Scenario(Strict):
    name: str
    description: str = ""
    seed: int = 0
    seeds: list[int] | None = Field(None, description="run every entry once per seed (labels LABEL@seed=N); "
                                    "summary.json adds mean, sd and a 95% t-interval over the seeds")
    runtime: Literal["live", "sim"] = "live"
    dataset: DatasetSpec = DatasetSpec()
    model: ModelSpec = ModelSpec()
    partition: PartitionSpec = PartitionSpec()
    clients: list[ClientSpec] = Field(min_length=1)
    algorithms: list[AlgorithmEntry] = Field(min_length=1)  # type: ignore[valid-type]
    stop: StopSpec = StopSpec()
    eval: EvalSpec = EvalSpec()
    links: LinksSpec = LinksSpec()
    sharding: Literal["none", "layer", "memory"] = Field(
        "none", description="none: one coordinator holds the whole model; layer: `shards` parameter servers "
        "each own the same number of whole layers (LPS); memory: each owns the same number of parameters, "
        "large layers split (MPS) (shat.txt §3.3; models/shard_plan.py)")
    shards: int | None = Field(None, ge=1, le=MAX_SHARDS, description=f"parameter-server shards with sharding "
                               f"layer or memory; null = {DEFAULT_SHARDS}")
    coordinator_link: LinkSpec | None = Field(None, description="the link of each shard (of the coordinator, "
                                              "unsharded): `up` into it, `down` out of it; null = unlimited")
    checkpoint: CheckpointSpec = CheckpointSpec()
    faults: FaultsSpec = FaultsSpec()
    emulation: EmulationSpec = EmulationSpec()
    sim: SimSpec = SimSpec()
    live: LiveSpec = LiveSpec()
    output: OutputSpec = OutputSpec()
    sweep: dict[str, list[Any]] = Field(default_factory=dict, description="dotted key → values; each "
                                        "combination is a labelled sub-run (e.g. ssgd@clients=16)")
    tune: TuneSpec | None = Field(None, description="tune every entry on the same grid, on validation data, "
                                  "before the runs (edgesync/runtime/tuning.py)")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("give at least one seed, or leave `seeds` out (one run with `seed`)")
        if len(value) > MAX_SEEDS:
            raise _Problem(f"at most {MAX_SEEDS} seeds", f"{len(value)}")
        repeated = sorted({s for s in value if value.count(s) > 1})
        if repeated:
            raise _Problem("each seed once", f"{', '.join(map(str, repeated))} repeated")
        if any(s < 0 for s in value):
            raise _Problem("seeds are whole numbers ≥ 0", str(value))
        return value

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, value: dict[str, list[Any]], info: ValidationInfo) -> dict[str, list[Any]]:
        """Each key has values, and the variants stay within the bounds: counted, not built."""
        for key, values in value.items():
            if not values:
                raise ValueError(f"sweep key {key!r} needs at least one value")
            if key == "sweep" or key.startswith("sweep."):
                raise ValueError("a sweep cannot sweep itself")
            if key == "seeds" or key == "seed" and info.data.get("seeds"):
                raise ValueError("give the seeds once: `seeds: [0, 1, 2]` runs each entry once per seed "
                                 "(a swept `seed` does the same)")
        for i, clients in enumerate(value.get("clients", [])):
            if problem := _too_many_clients(clients, ("clients", i)):
                raise problem
        sizes = [len(values) for values in value.values()]
        seeds = info.data.get("seeds")
        if seeds:  # every combination runs once per seed
            sizes.append(len(seeds))
        combinations = math.prod(sizes)
        if combinations > MAX_SWEEP_VARIANTS:
            raise _Problem(f"at most {MAX_SWEEP_VARIANTS:,} combinations",
                           f"{combinations:,}: {' × '.join(map(str, sizes))} values")
        if "clients" in value:  # each swept count once per combination of the other keys
            total = sum(_client_count(c) or 0 for c in value["clients"]) * (combinations // len(value["clients"]))
        elif "clients" in info.data:  # every variant has the scenario's clients
            total = len(info.data["clients"]) * combinations
        else:  # the scenario's clients are invalid, and reported as such
            total = 0
        if total > MAX_SWEEP_CLIENTS:
            raise _Problem(f"at most {MAX_SWEEP_CLIENTS:,} clients in all combinations together",
                           f"{total:,} in {combinations:,} combinations")
        return value

    @field_validator("tune")
    @classmethod
    def _tune(cls, tune: TuneSpec | None, info: ValidationInfo) -> TuneSpec | None:
        """The grid fits the entries: each key is some entry's config key, each value valid for every entry
        that has the key (alone and in each combination), and the runs stay within MAX_TUNE_RUNS."""
        entries, stop = info.data.get("algorithms"), info.data.get("stop")
        if tune is None or entries is None:  # invalid entries are reported as such
            return tune
        if info.data.get("sweep"):
            raise _Problem("tune and sweep do not combine (the chosen values could differ per combination): "
                           "tune each combination in a scenario of its own", "a sweep of "
                           + ", ".join(info.data["sweep"]))
        if not tune.grid:
            raise _Problem("needs at least one key: what to tune", "{}", ("grid",))
        for key, values in tune.grid.items():
            _check_grid_key(key, values, entries)
        counts = {e.key: len(tune_points(e, tune.grid)[1]) for e in entries}
        if sum(counts.values()) > MAX_TUNE_RUNS:
            raise _Problem(f"at most {MAX_TUNE_RUNS} tuning runs in all entries together",
                           f"{sum(counts.values())}: " + ", ".join(f"{k} {n}" for k, n in counts.items()), ("grid",))
        for entry in entries:  # whole combinations: rules across keys
            for point in tune_points(entry, tune.grid)[1]:
                if error := _invalid(entry, point):
                    raise _Problem(f"not valid for entry {entry.key!r} at {tune_tag(point)}: {error}",
                                   json.dumps(point), ("grid",))
        if tune.metric == "time_to_target" and stop is not None and stop.target_acc is None:
            raise _Problem("time_to_target needs a target: set stop.target_acc", repr(tune.metric), ("metric",))
        return tune

    @model_validator(mode="after")
    def _validation_needs_tune(self) -> "Scenario":
        if self.eval.on == "validation" and self.tune is None:
            raise ValueError("eval.on is validation, but there is no tune: block to say how large the validation "
                             "set is (tune.validation_fraction or tune.validation_size)")
        return self

    @field_validator("clients", mode="before")
    @classmethod
    def _clients(cls, value: Any) -> Any:
        """`clients: 4` means four undisturbed clients; `{count: 8, profile: gamma-hetero}` eight alike
        (any ClientSpec key besides count); a list gives each its own settings. At most MAX_CLIENTS,
        checked before the list is built."""
        if isinstance(value, bool):
            return value
        if problem := _too_many_clients(value):
            raise problem
        if isinstance(value, dict) and "count" in value:
            count, rest = value["count"], {k: v for k, v in value.items() if k != "count"}
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise _Problem("must be a whole number ≥ 1", repr(count), ("count",))
            return [dict(rest) for _ in range(count)]
        if isinstance(value, int):
            if value < 1:
                raise ValueError("needs at least one client")
            return [{} for _ in range(value)]
        if isinstance(value, list):
            return [{"profile": v} if isinstance(v, str) else v for v in value]
        return value

    def client_links(self, rank: int) -> tuple[Link, Link]:
        """(uplink, downlink) of client `rank`: the scenario's `links` overridden by the client's `link`."""
        specs = (self.links, self.clients[rank].link)
        return to_link(resolve_direction("up", *specs)), to_link(resolve_direction("down", *specs))

    def link_seeds(self, rank: int) -> tuple[int, int]:
        """(uplink, downlink) seeds of client `rank`'s link jitter and losses: the same in every runtime,
        so a simulated run and a live one draw the same delays and drops."""
        base = self.seed * 7919 + 2 * rank
        return base, base + 1

    @model_validator(mode="after")
    def _unique_labels(self) -> "Scenario":
        keys = [a.key for a in self.algorithms]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"algorithm entries need distinct labels; repeated: {', '.join(dup)} "
                             "(give each a `label:`)")
        return self

    @model_validator(mode="after")
    def _model_takes_the_images(self) -> "Scenario":
        """A model built for one image size (the small CNN: 28×28) cannot train on another dataset's."""
        side = FIXED_INPUT_SIDE.get(self.model.name)
        _, h, w = INPUT_SHAPES[self.dataset.name]
        if side is not None and (h, w) != (side, side):
            raise ValueError(f"model.name {self.model.name} is built for {side}×{side} images, but dataset.name "
                             f"{self.dataset.name} has {h}×{w}: use model.name resnet18, which takes any size")
        return self

    @model_validator(mode="after")
    def _traces_need_the_transport(self) -> "Scenario":
        if self.links.backend == "netns" and any(link.trace for r in range(len(self.clients))
                                                 for link in self.client_links(r)):
            raise ValueError("a link trace changes the rate during the run, which the transport follows but tc "
                             "(links.backend: netns) is set up once: use links.backend: transport with traces")
        return self

    @model_validator(mode="after")
    def _one_device_speed(self) -> "Scenario":
        fixed, sim = self.emulation.base_step_ms, self.sim.base_step_s
        if fixed is not None and sim is not None and abs(fixed / 1e3 - sim) > 1e-9:
            raise ValueError(f"two device speeds: emulation.base_step_ms is {fixed:g} ms but sim.base_step_s is "
                             f"{sim:g} s; keep one (emulation.base_step_ms serves both runtimes)")
        return self

    @model_validator(mode="after")
    def _live_processes(self) -> "Scenario":
        processes = self.live.processes
        if processes is not None and processes > len(self.clients):
            raise ValueError(f"live.processes is {processes}, but the scenario has {len(self.clients)} clients: "
                             "at most one process per client")
        if processes is not None and processes < len(self.clients) and self.links.backend == "netns":
            raise ValueError(f"live.processes {processes} hosts several clients per process, but links.backend "
                             "netns gives every client a network namespace of its own: drop live.processes, or "
                             "use links.backend transport")
        return self

    @model_validator(mode="after")
    def _sharded(self) -> "Scenario":
        if self.sharding == "none" and self.shards not in (None, 1):
            raise ValueError(f"shards is {self.shards} but sharding is none (one coordinator): say sharding: "
                             "layer or sharding: memory")
        if self.sharding == "layer":  # whole layers per shard: the model needs enough of them
            plan_for(self.model.name, self.shard_count, self.sharding)  # a ValueError says why not
        if self.runtime == "live" and self.shard_count > 1:
            if self.links.backend == "netns":
                raise ValueError("sharding: the follower shards listen on this machine's loopback, which clients in "
                                 "network namespaces do not reach: use links.backend transport")
            if self.live.processes is not None and self.live.processes < len(self.clients):
                raise ValueError(f"sharding: live.processes {self.live.processes} hosts several clients per process "
                                 "(slots), which do not talk to follower shards yet: drop live.processes")
        return self

    @model_validator(mode="after")
    def _all_reduce(self) -> "Scenario":
        for i, entry in enumerate(self.algorithms):
            if getattr(entry, "aggregation", "ps") != "allreduce":
                continue
            where = f"algorithms[{i}] ({entry.key}): aggregation: allreduce"
            if self.shard_count > 1:
                raise ValueError(f"{where} sums the updates on the clients, sharding {self.sharding} shards a "
                                 "parameter server: choose one (drop sharding, or aggregation: ps)")
            if self.runtime == "live" and self.links.backend == "netns":
                raise ValueError(f"{where}: clients in network namespaces do not reach each other's gloo sockets "
                                 "yet: use links.backend transport (the ring's time is emulated from the links)")
            if self.runtime == "live" and self.live.processes is not None and self.live.processes < len(self.clients):
                raise ValueError(f"{where}: live.processes {self.live.processes} hosts several clients per process "
                                 "(slots), which do not take part in collectives yet: drop live.processes")
        return self

    @property
    def shard_count(self) -> int:
        """Parameter-server shards: 1 unless sharded."""
        return 1 if self.sharding == "none" else self.shards or DEFAULT_SHARDS

    def coordinator_links(self) -> tuple[Link, Link]:
        """(inbound, outbound) link of each shard: `coordinator_link`'s up and down; unlimited if unset."""
        spec = self.coordinator_link
        if spec is None:
            return Link(), Link()
        return to_link(spec.direction("up")), to_link(spec.direction("down"))

    @property
    def profiles(self) -> list[GammaProfile | ConstantProfile]:
        return [c.profile for c in self.clients]

    @property
    def varies_in_time(self) -> bool:
        """Whether any client's emulation changes during an algorithm: a device trace, a link trace or an
        availability (live clients then follow the coordinator's clock: runtime/live/run_clock.py)."""
        own = self.coordinator_link is not None and any(d.trace for d in self.coordinator_links())
        return own or any(c.availability is not None or isinstance(c.profile, TraceProfile)
                          or any(link.trace for link in self.client_links(rank))
                          for rank, c in enumerate(self.clients))

    def resolved(self) -> dict:
        """The scenario with every default filled in, as plain data (what a run folder records)."""
        data = self.model_dump(mode="json")
        for client, spec in zip(data["clients"], self.clients):
            client["profile"] = spec.profile.model_dump(mode="json")
        return data


def tune_points(entry: algorithms.AlgorithmConfig, grid: dict[str, list[Any]]) -> tuple[list[str], list[dict]]:
    """(the grid keys `entry`'s config has, every combination of their values): the product of the value
    lists in the grid's order; no combination when the entry has none of the keys (nothing to tune)."""
    keys = [k for k in grid if k in type(entry).model_fields]
    if not keys:
        return [], []
    return keys, [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def tune_tag(point: dict) -> str:
    """A grid point as tuning runs are labelled by it: `lr=0.05,momentum=0.9`."""
    return ",".join(f"{k}={_show(v)}" for k, v in point.items())


UNTUNABLE = ("name", "label")  # what an entry is, not how it is set


def _check_grid_key(key: str, values: list[Any], entries: list) -> None:
    at: tuple[str | int, ...] = ("grid", key)
    if key in UNTUNABLE:
        raise _Problem("an entry's algorithm and label are not tuned", json.dumps(values, default=str), at)
    if not values:
        raise _Problem("needs at least one value", "[]", at)
    shown = [_show(v) for v in values]
    if dup := sorted({v for v in shown if shown.count(v) > 1}):
        raise _Problem(f"repeated value {', '.join(dup)}", json.dumps(values, default=str), at)
    having = [e for e in entries if key in type(e).model_fields]
    if not having:
        known = sorted({f for e in entries for f in type(e).model_fields} - set(UNTUNABLE))
        close = difflib.get_close_matches(key, known, n=1)
        raise _Problem("no algorithm entry has this key" + (f"; did you mean {close[0]!r}?" if close else
                       f" (their keys: {', '.join(known)})"), json.dumps(values, default=str), at)
    for entry in having:
        for i, value in enumerate(values):
            if error := _invalid(entry, {key: value}):
                raise _Problem(f"not valid for entry {entry.key!r} ({entry.name}): {error}", repr(value), (*at, i))


def _invalid(entry: algorithms.AlgorithmConfig, point: dict) -> str | None:
    """Why `entry` with `point`'s values is not a valid config; None if it is."""
    try:
        type(entry).model_validate({**entry.model_dump(), **point})
    except ValidationError as err:
        first = err.errors()[0]
        return first["msg"].removeprefix("Value error, ")
    return None


class ScenarioError(ValueError):
    """A scenario that cannot be used; `str()` lists every problem, one per line."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))


def _loc(loc: tuple) -> str:
    # Drop the discriminator tags pydantic inserts (algorithms.1.ssgd.lr → algorithms.1.lr) and the
    # union-member names it inserts for profiles.
    tags = set(algorithms.names()) | {"ConstantProfile", "GammaProfile", "constant", "gamma"}
    parts = [str(p) for p in loc if str(p) not in tags]
    return ".".join(parts) or "(top level)"


def _model_at(loc: tuple, data: Any) -> type[BaseModel] | None:
    """The model class that holds the key at `loc` (for suggesting a close field name)."""
    if loc[0] == "algorithms" and len(loc) >= 3:
        try:
            return algorithms.get(data["algorithms"][loc[1]]["name"]).config
        except Exception:  # a broken entry has no model to suggest from
            return None
    model: type[BaseModel] | None = Scenario
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model else None
        if field is None:
            return None
        candidates = [field.annotation, *getattr(field.annotation, "__args__", ())]
        model = next((a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return model


def _suggest(loc: tuple, data: Any) -> str:
    """'; did you mean X?' for a misspelt key."""
    model = _model_at(loc, data)
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields) if model else [], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _format(err: ValidationError, data: Any = None) -> list[str]:
    problems = []
    for e in err.errors():
        if isinstance(problem := e.get("ctx", {}).get("error"), _Problem):
            problems.append(problem.line(_loc(e["loc"])))
            continue
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (not part of the scenario schema" + _suggest(e["loc"], data) + ")"
        elif e["type"] == "union_tag_invalid":
            msg = f"unknown algorithm {e['input'].get('name')!r}; registered: {', '.join(algorithms.names())}" \
                if isinstance(e.get("input"), dict) else msg
        elif e["type"] == "union_tag_not_found":
            msg = "each algorithm entry needs a `name:`"
        value = e.get("input")
        shown = "" if e["type"] in ("missing", "extra_forbidden", "union_tag_not_found") or isinstance(value, (dict, list)) \
            else f" (got {value!r})"
        if e["type"] == "extra_forbidden":
            shown = ""
        problems.append(f"{_loc(e['loc'])}: {msg}{shown}")
    # pydantic reports a failed union once per member; keep each line once.
    return list(dict.fromkeys(problems))


def parse_override(text: str) -> tuple[list[str | int], Any]:
    """'algorithms.0.lr=0.1' → (['algorithms', 0, 'lr'], 0.1). Values are YAML: 10, x10, [1, 2], null."""
    if "=" not in text:
        raise ScenarioError("--set", [f"{text!r}: expected KEY=VALUE, e.g. stop.time_budget_s=30"])
    key, raw = text.split("=", 1)
    path: list[str | int] = [int(p) if p.isdigit() else p for p in key.strip().split(".")]
    if not key.strip() or any(p == "" for p in path):
        raise ScenarioError("--set", [f"{text!r}: empty key"])
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ScenarioError("--set", [f"{key}: value {raw!r} is not valid YAML ({exc})"]) from None
    return path, value


def apply_override(data: dict, path: list[str | int], value: Any, source: str = "--set") -> None:
    node: Any = data
    for i, part in enumerate(path[:-1]):
        where = ".".join(map(str, path[: i + 1]))
        if isinstance(node, list):
            if not isinstance(part, int) or part >= len(node):
                raise ScenarioError(source, [f"{where}: no such list item (the list has {len(node)})"])
            if path[:i] == ["clients"] and isinstance(node[part], str):
                node[part] = {"profile": node[part]}  # the `clients: [x1, x10]` shorthand
            node = node[part]
        elif isinstance(node, dict):
            if part not in node or node[part] is None:
                node[part] = {}
            elif not isinstance(node[part], (dict, list)):
                if part == "clients" and isinstance(node[part], int):
                    if problem := _too_many_clients(node[part]):
                        raise ScenarioError(source, [problem.line("clients")])
                    node[part] = [{} for _ in range(node[part])]
                else:
                    raise ScenarioError(source, [f"{where}: is a value, not a section"])
            node = node[part]
        else:
            raise ScenarioError(source, [f"{where}: cannot descend into {node!r}"])
    last = path[-1]
    if not isinstance(node, (dict, list)):
        raise ScenarioError(source, [f"{'.'.join(map(str, path[:-1]))}: is a value, not a section"])
    if isinstance(node, list):
        if not isinstance(last, int) or last >= len(node):
            raise ScenarioError(source, [f"{'.'.join(map(str, path))}: no such list item"])
    node[last] = value


def scenario_from_dict(data: Any, source: str = "<scenario>", base_dir: str | Path | None = None) -> Scenario:
    """`base_dir`: where trace files named in the scenario are looked for (the scenario file's folder)."""
    if not isinstance(data, dict):
        raise ScenarioError(source, [f"a scenario is a YAML mapping, not {type(data).__name__}"])
    try:
        return Scenario.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as err:
        raise ScenarioError(source, _format(err, data)) from None


def load_raw(path: str | Path) -> dict:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(str(path), [f"cannot read the file ({exc.strerror})"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(str(path), [f"not valid YAML: {exc}"]) from None
    if data is None:
        raise ScenarioError(str(path), ["the file is empty"])
    return data


def load_scenario(path: str | Path, overrides: list[str] = ()) -> Scenario:
    data = load_raw(path)
    if isinstance(data, dict):
        data.setdefault("name", Path(path).stem)
        if problem := _too_many_clients(data.get("clients")):  # named with the file, before --set expands it
            raise ScenarioError(str(path), [problem.line("clients")])
        for text in overrides:
            key_path, value = parse_override(text)
            apply_override(data, key_path, value)
    source = str(path) + (" with --set " + " ".join(overrides) if overrides else "")
    scenario = scenario_from_dict(data, source, Path(path).parent)
    for _, variant, where in sweep_combinations(scenario, source):  # each must be a valid scenario too
        scenario_from_dict(variant, where, Path(path).parent)
    return scenario


# ---------------------------------------------------------------------------------------------- sweeps

def sweep_combinations(scenario: Scenario, source: str = "<scenario>") -> Iterator[tuple[str, dict, str]]:
    """(tag, data, source) of each combination of the scenario's sweep and seeds, in order; none without either.

    The combinations are the product of the value lists, in the order the keys are written, then the
    seeds (`seeds: [0, 1]` is a last axis `seed`, tag `seed=N`, so `ssgd@clients=8,seed=1`). `data` is the
    resolved scenario without its sweep, each key set to its value, and each algorithm entry labelled
    `LABEL@TAG`; the tag is `k=v,…` (`clients=8,lr=0.1`), a key shown by its last part when that is
    unambiguous (`lr`), else by its whole path (`clients.3.profile`). `source` names the combination in
    the errors of `scenario_from_dict(data, source)`. `edgesync.sweep.variants` validates them into
    labelled sub-runs; the sweep's bounds were checked when the scenario was.
    """
    if not scenario.sweep and not scenario.seeds:
        return
    axes = {**scenario.sweep, **({"seed": scenario.seeds} if scenario.seeds else {})}  # seeds vary fastest
    keys = list(axes)
    short = _short_names(keys)
    base = scenario.resolved()
    base.pop("sweep")
    base["seeds"] = None
    for combo in itertools.product(*(axes[k] for k in keys)):
        data = json.loads(json.dumps(base))  # a deep copy of plain data
        tag = ",".join(f"{short[k]}={_show(v)}" for k, v in zip(keys, combo))
        for key, value in zip(keys, combo):
            path = [int(p) if p.isdigit() else p for p in key.split(".")]
            apply_override(data, path, value, source=f"{source}: sweep {key}={_show(value)}")
        for entry in data["algorithms"]:
            entry["label"] = f"{entry.get('label') or entry['name']}@{tag}"
        yield tag, data, f"{source} (sweep {tag})"


def _short_names(keys: list[str]) -> dict[str, str]:
    lasts = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: last if lasts.count(last) == 1 and not last.isdigit() else k for k, last in zip(keys, lasts)}


def _show(value: Any) -> str:
    if isinstance(value, dict) and "count" in value and set(value) <= {"count", "profile"}:
        return f"{value['count']}×{_show(value.get('profile', 'x1'))}"  # clients: {count: 8, profile: x2}
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return "null" if value is None else str(value)
