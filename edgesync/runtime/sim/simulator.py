"""The virtual-clock simulator: the same algorithm objects under a discrete-event engine.

Computation is real (real gradients on real data, run serially in this process, or at once on Ray
workers with `sim.backend: ray`: ray_backend.py); only time is virtual. A client's step lasts
`factor × base_step_s` virtual seconds (its device profile's factor, the machine's measured or
configured undisturbed step time); a message takes its link's transfer time; the coordinator's work
on each update and query takes the virtual time `sim.server_time` says: its cost model (`model`, the
default: costs measured once per machine, server_cost.py), none (`zero`, idealised) or its wall time
at that event (`measured`). The coordinator is one thread, as live: an update or query that arrives
while it is busy waits its turn (first come, first served), and what it sends leaves once it is encoded.

Events are (virtual time, sequence number) ordered: equal times run in the order they were
scheduled, so a run is a pure function of the scenario, its seed and the step and coordinator
costs used (recorded in the run folder's scenario.yaml). Unless `server_time` is `measured`, two
runs write identical metrics.jsonl apart from the `wall_clock` field.

Every client shares one model object and the training tensors (each keeps its index set, sampler
and client-half state); what grows with the clients is the messages in flight (one model-sized
tensor each) and any per-client model-sized state an algorithm keeps (docs/simulator.md: ~1.5 MB
per client for ASGD at 1,000 clients). The contract that makes this safe: a client half loads the
parameters it needs at the start of each instruction.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import math

import torch

from edgesync import algorithms
from edgesync.algorithms.machinery.base import AlgorithmConfig, Population, ServerAlgorithm, Update
from edgesync.constants import TIME_GRID_DIGITS
from edgesync.data.datasets import to_tensor
from edgesync.emulation.availability import Schedule
from edgesync.emulation.links import LinkChannel
from edgesync.metrics.recorder import RunRecorder
from edgesync.models import build_model
from edgesync.models.shard_plan import plan_for
from edgesync.transport.allocator import release_free_memory, tune_allocator
from edgesync.runtime.bookkeeping.accounting import TIME_DIGITS, AlgorithmAccount, client_totals
from edgesync.runtime.bookkeeping.evaluator import evaluate_state
from edgesync.runtime.bookkeeping.client_eval import final_client_figures
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.runtime.sim.server_calibration import cached_or_calibrated
from edgesync.runtime.sim.server_cost import CostSamples
from edgesync.runtime.sim.coordinator import VirtualCoordinator
from edgesync.runtime.sim.queries import QueryingClients
from edgesync.runtime.sim.ray_backend import RayClients
from edgesync.runtime.sim.ring import SimRing
from edgesync.runtime.sim.shards import Shards
from edgesync.runtime.sim.spill import Spill
from edgesync.algorithms.machinery.stragglers import discarded_extras
from edgesync.runtime.sim.state import UPDATING, Event, SimClient, client_trainer, fresh_half, step_clock
from edgesync.runtime.bookkeeping.step_time import cached_step
from edgesync.runtime.bookkeeping.workload import prepare_workload
from edgesync.config import Scenario
from edgesync.config.sim import ServerCostSpec
from edgesync.trainer import DeviceOffline, Trainer
from edgesync.transport import protocol

log = logging.getLogger("edgesync.sim")


class Simulator:
    def __init__(self, scenario: Scenario, recorder: RunRecorder, progress: Progress | None = None):
        self.scenario = scenario
        self.pool: RayClients | None = None  # its workers, started at the first algorithm that uses them
        self.remote: RayClients | None = None  # the pool, while an algorithm runs on it
        self.recorder = recorder
        self.progress = progress or Progress(enabled=False)
        self.server_costs: dict[str, ServerCostSpec] = {}  # per algorithm entry, with server_time model
        self.samples: CostSamples | None = None  # a calibration's: every timed part of the coordinator's work
        self.spill = Spill(scenario.sim.spill_mb)  # updates in flight past sim.spill_mb wait on disk

    def prepare(self) -> None:
        """Data, splits, θ₀, the shared model, the step time per batch size and the coordinator's costs."""
        sc = self.scenario
        torch.set_num_threads(1)  # serial and deterministic; the bare-loop benchmark uses the same
        tune_allocator()  # activations reuse heap memory rather than fresh pages every step (allocator.py)
        self.workload = work = prepare_workload(sc)
        self.data = data = work.data
        self.splits, self.initial = work.splits, work.initial
        self.x = to_tensor(data.train_x, data.mean, data.std)
        self.y = torch.as_tensor(data.train_y, dtype=torch.int64)
        make = lambda: build_model(sc.model.id, num_classes=data.num_classes, in_channels=data.input_shape[0])
        self.model, self.eval_model = make(), make()
        self.shard_plan = plan_for(sc.model.id, sc.shard_count, sc.sharding, data.num_classes, data.input_shape[0])
        if sc.shard_count > 1:
            log.info("%d parameter-server shards (sharding %s): %s of the parameters", sc.shard_count, sc.sharding,
                     self.shard_plan.describe())
        self.step_s: dict[int, float] = {}
        self.calibration: dict[int, dict] = {}  # batch size → the cached step's conditions (calibration.py)
        for config in sc.algorithms:
            self.step_s[config.batch_size] = self._step_time(config.batch_size)
        if sc.sim.server_time == "model":
            for config in sc.algorithms:
                self.server_costs[config.key] = self._server_cost(config)

    def measured(self) -> dict[str, dict]:
        """What a replay needs, as `sim` keys of the resolved scenario: `measured_step_s` (the step time per
        batch size, unless the scenario fixes it) and `measured_server_s` (the coordinator's costs per entry,
        with server_time model). Known once prepared."""
        sc = self.scenario
        fixed = sc.sim.base_step_s is not None or sc.emulation.base_step_ms is not None
        return {"measured_step_s": {} if fixed else dict(self.step_s), "calibration": dict(self.calibration),
                "measured_server_s": {key: costs.model_dump() for key, costs in self.server_costs.items()}}

    def share_prepared(self, other: "Simulator", clients: int) -> None:
        """Use `other`'s prepared data, model and step times (a calibration beside a run); client i
        trains on `other`'s split i mod its client count."""
        for name in ("workload", "data", "initial", "x", "y", "model", "eval_model", "step_s", "shard_plan"):
            setattr(self, name, getattr(other, name))
        self.splits = [other.splits[i % len(other.splits)] for i in range(clients)]

    def _step_time(self, batch_size: int) -> float:
        sim, fixed = self.scenario.sim, self.scenario.emulation.base_step_ms
        if fixed is not None:  # the live runtime's device speed too: both runtimes' times then agree
            return fixed / 1e3
        if sim.base_step_s is not None:
            return sim.base_step_s
        if batch_size in sim.measured_step_s:
            if batch_size in sim.calibration:  # a replay: the conditions of the figure it replays
                self.calibration[batch_size] = sim.calibration[batch_size]
            return sim.measured_step_s[batch_size]
        probe = Trainer(model=self.model, x=self.x, y=self.y, batch_size=batch_size, seed=0, subset=self.splits[0])
        entry = cached_step(probe, self.scenario.model.id)
        self.calibration[batch_size] = entry
        return float(entry["step_s"])

    def _server_cost(self, config: AlgorithmConfig) -> ServerCostSpec:
        """The coordinator's costs for this entry: recorded in the scenario (a replay), else cached on this
        machine, else calibrated now (server_calibration.py: a few seconds, once per machine)."""
        recorded = self.scenario.sim.measured_server_s.get(config.key)
        return recorded if recorded is not None else cached_or_calibrated(self, config)

    def run(self, skip=None) -> None:
        try:
            for config in self.scenario.algorithms:
                if skip is None or not skip.is_done(config.key):  # a resume keeps the entries that finished
                    self._run_algorithm(config)
        finally:
            if self.pool is not None:
                self.pool.close()

    def _on_ray(self, spec, config: AlgorithmConfig) -> RayClients | None:
        """The Ray workers this algorithm's clients run on (sim.backend ray), None: serially here."""
        if self.scenario.sim.backend != "ray":
            return None
        if spec.client.uses_queries:
            log.info("%s: its clients query the server mid-instruction: run serially", config.key)
            return None
        if self.pool is None:
            shape = self.data.input_shape
            self.pool = RayClients(self.x.numpy(), self.y.numpy(), self.scenario.model.id, self.data.num_classes,
                                   shape[0], len(self.scenario.clients), self.scenario.sim.workers, self.spill)
        return self.pool

    # -- one algorithm ---------------------------------------------------------------------------
    def _run_algorithm(self, config: AlgorithmConfig) -> None:
        sc = self.scenario
        server = self.begin(config)
        self.progress.start_algorithm(config.key, self.stop.time_budget_s)
        self._evaluate(0.0)
        try:
            end = self._events(server)
        finally:
            self.end_processes()
            if self.spill.spilled:
                log.info("%s: %d updates in flight waited on disk (sim.spill_mb: %g)", config.key,
                         self.spill.spilled, sc.sim.spill_mb)
            self.spill.clear()
            release_free_memory()  # the algorithm's model-sized blocks, back to the system
        self.account.client_acc = final_client_figures(self.eval_model, server, self.workload.client_sets, sc.eval.batch_size)
        if not self.account.final_evaluated(end, server.updates):  # the evaluation at the end may have seen it
            self._evaluate(end, final=True)
        self.coordinator.finish(end)  # its load, into coordinator.jsonl; a warning if it was the bottleneck
        self._log_clients(end)
        self.progress.end_algorithm(config.key, self.account.final_row)

    def begin(self, config: AlgorithmConfig) -> ServerAlgorithm:
        """Clients, server half, coordinator and an empty event queue for one algorithm; nothing is sent yet."""
        sc = self.scenario
        spec = algorithms.get(config.name)
        self.remote = self._on_ray(spec, config)
        clients = [self._client(rank, spec, config) for rank in range(len(sc.clients))]
        if self.remote is not None:
            self.remote.begin(sc, config, self.step_s[config.batch_size], self.splits)
        server = spec.server(config, self.initial, [c.rank for c in clients if c.online])
        self.clients, self.server, self.config, self.spec = clients, server, config, spec
        self.now = 0.0
        server.now = lambda: self.now
        server.population = Population(sc.seed, {c.rank: len(self.splits[c.rank]) for c in clients})
        self.heap: list[Event] = []
        self.seq = itertools.count()
        self.stop = sc.stop.for_base_step(self.step_s[config.batch_size])  # a budget in base steps: the ×1 step's
        self.account = AlgorithmAccount(config, self.stop, self.recorder, self.progress,
                                        chance_acc=1 / self.data.num_classes)
        self.queries = QueryingClients(clients, self.account, self.push, self._finished)  # ESync's State Server
        self.ring = SimRing(self, server)  # all-reduce: updates wait for the round's ring (ring.py)
        shards = Shards(self.shard_plan.fractions, *sc.coordinator_links(), seed=sc.seed)
        self.coordinator = coordinator = VirtualCoordinator(self, server, sc.sim.server_time, self.server_costs.get(
            config.key), self.initial, self.samples, shards)
        self.handlers = {"to_client": self._deliver_to_client, "to_server": self._to_server,
                         "query": self._to_server, "server_free": coordinator.wake, "presence": coordinator.arrive,
                         "due": coordinator.arrive,
                         "ring_mean": self._to_server,
                         "reply": self.queries.reply_at_client, "resume": self.queries.resume,
                         "availability": self._availability}
        for c in clients:
            if not c.schedule.always:
                if not c.online:
                    self.account.log_presence(c.rank, False, 0.0)
                self.push(c.schedule.next_change(0.0), "availability", c.rank, None, 0)
        return server

    def step(self) -> None:
        """Run the next event."""
        event = heapq.heappop(self.heap)
        self.now = event.time
        self.handlers[event.kind](event)

    def end_processes(self) -> None:
        """Stop the instructions still running when the algorithm ended (on Ray workers: let them end, as
        serially: their steps count)."""
        if self.remote is not None:
            self._apply(self.remote.everything())
        self.queries.end()

    def _events(self, server: ServerAlgorithm) -> float:
        """Run events in virtual-time order until a stop rule fires; returns the end time."""
        sc = self.scenario
        budget, every = self.stop.time_budget_s, sc.eval.every_s
        next_eval = every
        self.coordinator.start()
        while True:
            self._settle(budget)
            t_next = self.heap[0].time if self.heap else budget
            # The global model only changes at events: evaluations due before the next one see it as is.
            while next_eval <= min(t_next, budget):
                self._evaluate(next_eval)
                if self.account.should_stop(next_eval, server.updates):
                    return next_eval
                next_eval = round(next_eval + every, TIME_GRID_DIGITS)
            if t_next >= budget:
                return budget
            updated = self.heap[0].kind in UPDATING  # an update may be applied
            self.step()
            if updated and self.account.should_stop(self.now, server.updates):
                return self.now

    def _client(self, rank: int, spec, config: AlgorithmConfig) -> SimClient:
        sc = self.scenario
        profile = sc.clients[rank].profile
        clock = step_clock(profile, sc.seed, rank, self.step_s[config.batch_size])
        trainer = None  # on Ray, its worker holds the trainer and the half
        if self.remote is None:
            trainer = client_trainer(self.model, self.x, self.y, config, sc.seed, rank, self.splits[rank], clock)
        up, down = sc.client_links(rank)
        # seeded per client and direction: jitter and losses replay exactly
        up_seed, down_seed = sc.link_seeds(rank)
        schedule = Schedule(sc.clients[rank].availability, sc.seed, rank)
        c = SimClient(rank, profile, trainer, None, clock, up=LinkChannel(up, seed=up_seed),
                      down=LinkChannel(down, seed=down_seed), schedule=schedule, online=schedule.online(0.0))
        if not c.online:
            c.offline_since = 0.0
        if trainer is not None:
            fresh_half(c, spec, config)
        return c

    # -- events ------------------------------------------------------------------------------------
    def push(self, t: float, kind: str, client: int, message, size: int, epoch: int = 0, seq: int | None = None):
        # Times are sums of floats (0.1 + 0.1 + 0.1 = 0.30000000000000004); on a nanosecond grid, events
        # that coincide in exact arithmetic coincide here too, so the tie rules hold (TIME_GRID_DIGITS).
        t = round(t, TIME_GRID_DIGITS)
        heapq.heappush(self.heap, Event(t, next(self.seq) if seq is None else seq, kind, client, message, size, epoch))

    # -- instructions on Ray workers (ray_backend.py) --------------------------------------------------
    def _settle(self, budget: float) -> None:
        """Apply the results of the instructions in flight that may end before the next event."""
        while self.remote is not None:
            head = (self.heap[0].time, self.heap[0].seq) if self.heap else (budget, -1)
            if not (done := self.remote.due(*head)):
                return
            self._apply(done)

    def _apply(self, results) -> None:
        for flight, done in results:
            c, end = self.clients[flight.rank], flight.start + done.elapsed
            if done.update is None:
                c.free_at = end  # it stopped when it went offline; nothing is sent
            else:
                self._finished(c, done.update, end, flight.seq)

    # -- availability ------------------------------------------------------------------------------
    def _availability(self, event: Event) -> None:
        """A device goes offline (what it computes and what is in flight to or from it is lost; the server
        half hears on_client_lost) or comes back (a fresh client half, as a live client set up again)."""
        c, t = self.clients[event.client], event.time
        if self.remote is not None:
            self._apply(self.remote.take(c.rank))  # what it computed ended at its offline time at the latest
        online = c.schedule.online(t)
        if c.online and not online:
            c.online, c.epoch, c.offline_since = False, c.epoch + 1, t
            self.queries.stop(c)
            c.free_at = min(c.free_at, t)
            c.times.update_sent(t)
            self.account.log_presence(c.rank, False, t)
            self.coordinator.arrive(Event(t, next(self.seq), "presence", c.rank, "lost"))
        elif online and not c.online:
            c.online, c.rejoined = True, c.rejoined + 1
            c.offline_s += t - (c.offline_since if c.offline_since is not None else t)
            c.offline_since = None
            c.free_at = max(c.free_at, t)
            if self.remote is not None:
                self.remote.rejoin(c.rank)
            else:
                fresh_half(c, self.spec, self.config)  # its state starts afresh, as live
            self.account.log_presence(c.rank, True, t)
            self.coordinator.arrive(Event(t, next(self.seq), "presence", c.rank, "joined"))
        change = c.schedule.next_change(t)
        if change < self.stop.time_budget_s:
            self.push(change, "availability", c.rank, None, 0)

    def _to_server(self, event: Event) -> None:
        """An update or query reaches the coordinator, unless its sender went offline since it was sent."""
        c = self.clients[event.client]
        if event.kind == "to_server":
            event.message = self.spill.take(event.message)  # read back if it waited on disk
        if c.online and event.epoch == c.epoch:
            self.coordinator.arrive(event)

    def _deliver_to_client(self, event: Event) -> None:
        c = self.clients[event.client]
        if not c.online or event.epoch != c.epoch:
            return  # sent to a device that has gone offline since: lost with its connection
        if self.remote is not None:
            self._apply(self.remote.take(c.rank))  # its previous instruction's end: when this one can start
        start = max(event.time, c.free_at)
        self.ring.started(c.rank, event.message)
        c.times.instruction_started(start)
        c.clock.elapsed = 0.0
        c.clock.offline_at = c.schedule.next_change(start) if not c.schedule.always else math.inf
        if self.remote is not None:  # its update keeps the place among equal times it would have serially
            self.remote.start(c.rank, event.message, start, c.clock.offline_at, next(self.seq))
            return
        if not c.half.uses_queries:
            c.half.ctx.start = start
            try:
                update = c.half.on_instruction(event.message)
            except DeviceOffline:
                c.free_at = start + c.clock.elapsed  # it stopped when it went offline; nothing is sent
                return
            self._finished(c, update, start + c.clock.elapsed)
            return
        self.queries.start(c, event.message, start)  # it queries the server mid-instruction

    def _finished(self, c: SimClient, update: Update, done: float, seq: int | None = None) -> None:
        if self.ring.finished(c, update, done, seq):
            return  # sent when the round's ring has run
        c.free_at = done
        c.times.update_sent(done)
        size = protocol.update(update.meta, update.tensors).wire_size()
        self.push(c.up.arrival(done, size), "to_server", c.rank, self.spill.keep(update), size, c.epoch, seq)

    # -- results -----------------------------------------------------------------------------------
    def _evaluate(self, t: float, final: bool = False) -> None:
        acc, loss = evaluate_state(self.eval_model, self.server.global_params(), self.server.global_buffers(),
                                   self.workload.eval_x, self.workload.eval_y, self.scenario.eval.batch_size)
        write = self.account.log_final if final else self.account.log_eval
        write(self.account.counters(t, self.server.updates), acc, loss)

    def _log_clients(self, end: float) -> None:
        rows = []
        remote = self.remote.totals() if self.remote is not None else {}
        for c in self.clients:
            there = remote.get(c.rank)
            stats, factors, timeline = ((there.stats, there.factors, there.timeline) if there is not None else
                                        (c.trainer.stats, c.clock.factors, c.clock.timeline))
            # A client mid-step at the end finishes that step (counted in compute_s), as a live client does
            # before it reads END: its wall time runs to then, so compute_s + wait_s = wall_s.
            totals = client_totals(stats, c.times, end, "virtual", c.clock.base_step_s, factors,
                                   wall_end=c.free_at, base_s=c.clock.base_step_s, timeline=timeline)
            offline_s = c.offline_s + (end - c.offline_since if c.offline_since is not None else 0.0)
            rounds = getattr(self.server, "participation", None)  # as the live coordinator's client_extras
            rows.append(self.account.client_row(
                c.rank, c.profile.label, totals, c.bytes_up, c.bytes_down, host="sim", lost=c.epoch,
                rejoined=c.rejoined, extra={"offline_s": None if c.schedule.always else round(offline_s, TIME_DIGITS),
                                            "rounds": None if rounds is None else rounds.get(c.rank, 0),
                                            **discarded_extras(self.server, c.rank)}))
        self.account.write_clients(rows, self.scenario.emulation.tolerance)


def run_sim(scenario: Scenario, recorder: RunRecorder, progress: Progress, skip=None) -> dict[str, dict]:
    """Run every algorithm of `scenario` (but those `skip` has done) in virtual time; returns what a replay needs."""
    sim = Simulator(scenario, recorder, progress)
    sim.prepare()
    sim.run(skip)
    return sim.measured()
