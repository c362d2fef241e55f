"""The top-level Scenario model: its sections, and the rules that hold across them.

A scenario overrides only what differs from the defaults in its sections' models. The sections are
this package's modules (data, clients, links, stop_eval, …); the rules across them (a model built for
the dataset's images, one device speed, sharding with the runtime, …) are this model's validators.
"""
from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from edgesync.config.algorithm_entries import AlgorithmEntry
from edgesync.config.clients import ClientSpec, expand_clients
from edgesync.config.data import DatasetSpec, ModelSpec, PartitionSpec
from edgesync.config.emulation import EmulationSpec
from edgesync.config.errors import Problem
from edgesync.config.faults import CheckpointSpec, FaultsSpec
from edgesync.config.limits import (MAX_SEEDS, MAX_SHARDS, MAX_SWEEP_CLIENTS, MAX_SWEEP_VARIANTS, client_count,
                                    too_many_clients)
from edgesync.config.links import LinkSpec, LinksSpec, resolve_direction, to_link
from edgesync.config.live import LiveSpec
from edgesync.config.output import OutputSpec
from edgesync.config.sim import SimSpec
from edgesync.config.stop_eval import EvalSpec, StopSpec
from edgesync.config.strict import Strict
from edgesync.config.tune import TuneSpec
from edgesync.config.tune_grid import check_tune
from edgesync.data.datasets import INPUT_SHAPES, TOKEN_INDICES
from edgesync.data.leaf import FORMATS as LEAF_FORMATS
from edgesync.emulation.links import Link
from edgesync.emulation.profiles import DeviceProfile
from edgesync.models import FIXED_INPUT_SIDE, MODEL_NAMES, TOKEN_MODELS
from edgesync.models import TOKEN_INDICES as MODEL_TOKEN_INDICES
from edgesync.models.shard_plan import plan_for

DEFAULT_SHARDS = 4  # with sharding layer or memory and no `shards`: SHAT's EQ3 shards over four servers


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
            raise Problem(f"at most {MAX_SEEDS} seeds", f"{len(value)}")
        repeated = sorted({s for s in value if value.count(s) > 1})
        if repeated:
            raise Problem("each seed once", f"{', '.join(map(str, repeated))} repeated")
        if any(s < 0 for s in value):
            raise Problem("seeds are whole numbers ≥ 0", str(value))
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
            if problem := too_many_clients(clients, ("clients", i)):
                raise problem
        sizes = [len(values) for values in value.values()]
        seeds = info.data.get("seeds")
        if seeds:  # every combination runs once per seed
            sizes.append(len(seeds))
        combinations = math.prod(sizes)
        if combinations > MAX_SWEEP_VARIANTS:
            raise Problem(f"at most {MAX_SWEEP_VARIANTS:,} combinations",
                           f"{combinations:,}: {' × '.join(map(str, sizes))} values")
        if "clients" in value:  # each swept count once per combination of the other keys
            total = sum(client_count(c) or 0 for c in value["clients"]) * (combinations // len(value["clients"]))
        elif "clients" in info.data:  # every variant has the scenario's clients
            total = len(info.data["clients"]) * combinations
        else:  # the scenario's clients are invalid, and reported as such
            total = 0
        if total > MAX_SWEEP_CLIENTS:
            raise Problem(f"at most {MAX_SWEEP_CLIENTS:,} clients in all combinations together",
                           f"{total:,} in {combinations:,} combinations")
        return value

    @field_validator("tune")
    @classmethod
    def _tune(cls, tune: TuneSpec | None, info: ValidationInfo) -> TuneSpec | None:
        """The grid fits the entries (edgesync/config/tune_grid.py)."""
        entries = info.data.get("algorithms")
        if tune is None or entries is None:  # invalid entries are reported as such
            return tune
        if getattr(info.data.get("eval"), "on", "test") == "validation":
            return tune  # a tuning run: its entries are the grid's points, kept only for the validation set
        check_tune(tune, entries, info.data.get("stop"), info.data.get("sweep"))
        return tune

    @model_validator(mode="after")
    def _natural_id(self) -> "Scenario":
        """`partition.by` names the natural id: LEAF's data sets have one, `user`; an `hf` dataset's is a column,
        which becomes its dataset.args.natural_id (so every process loads the same groups); others have none."""
        by = self.partition.by
        if by is None:
            return self
        name = self.dataset.name
        if name in LEAF_FORMATS:
            if by != "user":
                raise ValueError(f"partition.by {by!r}: dataset.name {name} (LEAF) has one natural id, `user`")
        elif name == "hf":
            given = self.dataset.args.get("natural_id")
            if given is not None and given != by:
                raise ValueError(f"partition.by {by!r} differs from dataset.args.natural_id {given!r}: give one")
            self.dataset.args["natural_id"] = by
        else:
            raise ValueError(f"partition.by {by!r}: dataset.name {name} has no natural ids (LEAF's data sets have "
                             "users; an hf dataset takes an id column)")
        return self

    @model_validator(mode="after")
    def _validation_needs_tune(self) -> "Scenario":
        if self.eval.on == "validation" and self.tune is None:
            raise ValueError("eval.on is validation, but there is no tune: block to say how large the validation "
                             "set is (tune.validation_fraction or tune.validation_size)")
        return self

    @model_validator(mode="after")
    def _tuning_seed_is_not_judged(self) -> "Scenario":
        """A seed that chose the values would also judge them: its runs favour whatever it chose."""
        if self.tune is None or self.eval.on == "validation":  # the tuning runs themselves
            return self
        judged = self.seeds or [self.seed]
        if self.tune.tuning_seed in judged:
            where = "seeds" if self.seeds else "seed"
            raise ValueError(f"tune.seed {self.tune.tuning_seed} is also an evaluation seed ({where}: "
                             f"{judged if self.seeds else self.seed}): give tune.seed a seed the final runs do "
                             "not use, so that no seed both chooses the values and judges them")
        return self

    @field_validator("clients", mode="before")
    @classmethod
    def _clients(cls, value: Any) -> Any:
        return expand_clients(value)

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
    def _model_takes_the_inputs(self) -> "Scenario":
        """A model built for one image size (the small CNN: 28×28) cannot train on another dataset's, an image
        model not on token sequences, a token model (leaf_lstm) not on images nor on another dataset's tokens
        (Shakespeare's 80 characters, Sent140's 10,001 word indices)."""
        name, shape = self.model.name, INPUT_SHAPES.get(self.dataset.name)
        if name not in MODEL_NAMES or shape is None:  # an outside model's or dataset's inputs are known once loaded
            return self
        tokens = len(shape) == 1  # (L,) token indices; images are (C, H, W)
        indices = TOKEN_INDICES.get(self.dataset.name)  # None: not known before loading
        fitting = sorted(m for m in TOKEN_MODELS if indices in (None, MODEL_TOKEN_INDICES[m]))
        if name in TOKEN_MODELS and not tokens:
            raise ValueError(f"model.name {name} takes sequences of token indices, but dataset.name "
                             f"{self.dataset.name} holds images")
        if name not in TOKEN_MODELS and tokens:
            raise ValueError(f"model.name {name} takes images, but dataset.name {self.dataset.name} holds sequences "
                             f"of token indices: use model.name {' or '.join(fitting or sorted(TOKEN_MODELS))}")
        if name in TOKEN_MODELS and indices is not None and MODEL_TOKEN_INDICES[name] != indices:
            use = f": use model.name {' or '.join(fitting)}" if fitting else ""
            raise ValueError(f"model.name {name} takes token indices 0..{MODEL_TOKEN_INDICES[name] - 1}, but "
                             f"dataset.name {self.dataset.name} holds 0..{indices - 1}{use}")
        side = FIXED_INPUT_SIDE.get(name)
        if side is None:
            return self
        _, h, w = shape
        if (h, w) != (side, side):
            raise ValueError(f"model.name {name} is built for {side}×{side} images, but dataset.name "
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
            plan_for(self.model.id, self.shard_count, self.sharding)  # a ValueError says why not
        for i, entry in enumerate(self.algorithms if self.shard_count > 1 else ()):
            if getattr(entry, "deadline_s", None) is not None or getattr(entry, "deadline_median", None) is not None:
                raise ValueError(f"algorithms[{i}] ({entry.key}): a round deadline is kept by the lead shard's clock, "
                                 f"which the follower shards do not share: drop sharding {self.sharding}, or use "
                                 "backup_workers / close_at (they follow the order of the updates)")
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
    def profiles(self) -> list[DeviceProfile]:
        return [c.profile for c in self.clients]

    @property
    def varies_in_time(self) -> bool:
        """Whether any client's emulation changes during an algorithm: a device trace, a link trace or an
        availability (live clients then follow the coordinator's clock: runtime/live/run_clock.py)."""
        own = self.coordinator_link is not None and any(d.trace for d in self.coordinator_links())
        return own or any(c.availability is not None or c.profile.varies_in_time
                          or any(link.trace for link in self.client_links(rank))
                          for rank, c in enumerate(self.clients))

    def resolved(self) -> dict:
        """The scenario with every default filled in, as plain data (what a run folder records)."""
        data = self.model_dump(mode="json")
        for client, spec in zip(data["clients"], self.clients):
            client["profile"] = spec.profile.model_dump(mode="json")
        return data
