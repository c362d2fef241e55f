"""The client phases around an algorithm's training: SETUP every client, CALIBRATE the throttled ones one
at a time, and at the end END → STATS, written as clients.jsonl rows through the run's accounting.

`Phases.collect` waits for one kind of message from a set of clients while keeping liveness: the
Flower runtime uses it for its federated evaluation (EVALUATE → EVALUATED).
"""
from __future__ import annotations

import logging
import time

import numpy as np
import torch

from edgesync.algorithms.machinery.base import AlgorithmConfig
from edgesync.algorithms.machinery.participation import ParticipationConfig
from edgesync.constants import POLL_INTERVAL_S, READY_TIMEOUT_S, STATS_TIMEOUT_S
from edgesync.emulation.availability import online_at_most
from edgesync.emulation.device_model import DevicePlan, PoolClient, plan_devices
from edgesync.emulation.profiles import FactorSampler
from edgesync.runtime.bookkeeping.accounting import AlgorithmAccount
from edgesync.runtime.bookkeeping.membership import Membership, RunAborted
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.transport import protocol
from edgesync.transport.protocol import MessageType as T, ProtocolError

log = logging.getLogger("edgesync.coordinator")


def computing_at_once(scenario, config: AlgorithmConfig | None) -> int:
    """How many clients can compute at once in this algorithm: the devices online at once (availability),
    and of those, for a round that samples, its K (the shared base step counts only these)."""
    online = online_at_most([c.availability for c in scenario.clients])
    if isinstance(config, ParticipationConfig) and config.samples_clients:
        k = (config.clients_per_round if config.clients_per_round is not None
             else max(1, round(config.client_fraction * online)))
        return min(k, online)
    return online


class Phases:
    def __init__(self, members: Membership, progress: Progress):
        self.members = members
        self.scenario = members.scenario
        self.progress = progress
        self.splits: list[np.ndarray] = []  # every client's training-sample indices (set by the coordinator)
        self.set_up_for: dict[int, str] = {}  # rank → the algorithm its client half was last set up for
        self.plan: DevicePlan | None = None  # the emulated devices of the algorithm in progress
        self.shards = None  # a sharded server's lead (sharding/lead.py): clients learn its followers in SETUP
        self.ring = None  # all-reduce's store (allreduce/host.py): clients learn where it is in SETUP

    def send_setup(self, config: AlgorithmConfig, rank: int) -> None:
        sc, peer = self.scenario, self.members.peers[rank]
        meta = {
            "label": config.key, "algorithm": config.model_dump(mode="json"),
            "dataset": sc.dataset.model_dump(mode="json"), "model": sc.model.id,
            "profile": peer.profile.model_dump(mode="json"), "seed": sc.seed,
            "device": sc.clients[rank].device,
            "availability": (a.model_dump(mode="json") if (a := sc.clients[rank].availability) is not None else None),
        }
        if self.shards is not None and self.shards.meta is not None:
            meta["shards"] = self.shards.meta
        if self.ring is not None and (ring := self.ring.setup_meta(config)) is not None:
            meta["ring"] = ring
        self.members.send(rank, protocol.setup(meta, torch.from_numpy(self.splits[rank])))
        self.set_up_for[rank] = config.key

    def setup_all(self, config: AlgorithmConfig) -> None:
        self.config = config  # the algorithm being set up: how many of its clients compute at once
        for rank in self.members.alive():
            self.send_setup(config, rank)
        self.progress.status(f"setting up {config.key}")
        self.collect(T.READY, READY_TIMEOUT_S)

    def calibrate_all(self) -> None:
        """Measure each client's undisturbed step one client at a time (each client keeps it for later
        algorithms), plan the emulated devices (emulation/device_model.py), then tell every client its base
        step and isolation; the plan and each client's isolation go to the run log."""
        members, emu = self.members, self.scenario.emulation
        ranks = [r for r in sorted(members.peers) if r not in members.liveness.lost]
        for rank in ranks:  # a client answers at once what it measured before (same model and batch size)
            self.progress.status(f"calibrating client {rank}")
            members.send(rank, protocol.calibrate())
            replies = self.collect(T.CALIBRATED, READY_TIMEOUT_S, only={rank})
            if rank in replies:
                self.note_calibrated(rank, replies[rank])
        self.plan = plan_devices(self._pool_clients(ranks), emu.resolved_mode, emu.headroom,
                                 None if emu.base_step_ms is None else emu.base_step_ms / 1e3, emu.isolation,
                                 computing_at_once(self.scenario, getattr(self, "config", None)))
        log.info("emulation: %s", self.plan.describe())
        self.progress.status(f"emulation: {self.plan.describe()}")
        for rank in members.alive(ranks):
            members.send(rank, self.pace(rank))
        for rank, reply in sorted(self.collect(T.CALIBRATED, READY_TIMEOUT_S, only=set(ranks)).items()):
            self.note_calibrated(rank, reply)
            log.info("client %d: isolation %s", rank, reply.get("isolation"))

    def base_step_s(self) -> float:
        """The ×1 device's step the clients were paced to: the plan's shared base step, or (undisturbed mode,
        each client at its own step) the median of their undisturbed steps."""
        if self.plan is not None and self.plan.base_s > 0:
            return self.plan.base_s
        steps = sorted(p.info["reference_step_s"] for p in self.members.peers.values()
                       if isinstance(p.info.get("reference_step_s"), (int, float)))
        return steps[len(steps) // 2] if steps else 0.0

    def pace(self, rank: int) -> protocol.Message:
        """The CALIBRATE that sets client `rank`'s base step and isolation (also for one that rejoins)."""
        plan, emu = self.plan, self.scenario.emulation
        base = plan.base_s if plan is not None else 0.0  # 0 (undisturbed mode): its own undisturbed step
        core = plan.core.get(rank) if plan is not None else None
        share = plan.cpu_share.get(rank) if plan is not None else None
        return protocol.calibrate(base, core, share, emu.isolation)

    def note_calibrated(self, rank: int, reply: dict) -> None:
        """Keep what a client's CALIBRATED says: its undisturbed step, and the device it trains on."""
        info = self.members.peers[rank].info
        info["reference_step_s"] = reply.get("reference_s")
        if reply.get("device"):
            info["trained_on"] = reply["device"]

    def _pool_clients(self, ranks: list[int]) -> list[PoolClient]:
        out = []
        for rank in ranks:
            peer = self.members.peers[rank]
            step = peer.info.get("reference_step_s")
            if not step:
                continue
            device = str(peer.info.get("trained_on") or peer.info.get("device") or "cpu")
            cores = 1 if device.startswith("cuda") else int(peer.info.get("cores") or peer.info.get("cpus") or 1)
            factor = FactorSampler(peer.profile, seed=self.scenario.seed, rank=rank).mean_factor
            turn = peer.info.get("turn")  # the slots of one `edgesync client --slots K` process share one
            out.append(PoolClient(rank, str(peer.info.get("host")), device, cores, float(step), float(factor),
                                  str(turn) if turn else None))
        return out

    def end_all(self, account: AlgorithmAccount, bytes_at_start: tuple[dict, dict], refused: dict[int, int],
                seen: dict[int, dict[str, int]], extra: dict[int, dict] | None = None) -> None:
        """END to every live client; a clients.jsonl row for every client, from its STATS and the socket's
        bytes. A client that sent no STATS (lost, or silent at the end) keeps the steps and samples of the
        updates the coordinator received from it (`seen`)."""
        members, sock = self.members, self.members.sock
        for rank in members.alive():
            members.send(rank, protocol.end())
        stats = self.collect(T.STATS, STATS_TIMEOUT_S, strict=False)
        in0, out0 = bytes_at_start
        liveness = members.liveness
        rows = []
        for rank, peer in sorted(members.peers.items()):
            error = None
            if rank in liveness.lost:
                error = f"lost: {liveness.lost[rank]}"
            elif rank not in stats:
                error = "no statistics: the client did not answer END"
            rows.append(account.client_row(
                rank, peer.profile.label, stats.get(rank) or seen.get(rank, {}),
                bytes_up=sock.bytes_in.get(peer.identity, 0) - in0.get(peer.identity, 0),
                bytes_down=sock.bytes_out.get(peer.identity, 0) - out0.get(peer.identity, 0),
                host=peer.info.get("host"), device=peer.info.get("device"), gpu=peer.info.get("gpu"),
                refused=refused.get(rank, 0), lost=liveness.losses[rank], rejoined=liveness.returns[rank],
                error=error, extra=(extra or {}).get(rank)))
        account.write_clients(rows, self.scenario.emulation.tolerance)

    def collect(self, kind: T, timeout_s: float, only: set[int] | None = None,
                strict: bool = True) -> dict[int, dict]:
        """One `kind` message's metadata from each live client (or from `only`); other traffic is dropped.
        `strict`: RunAborted when one does not answer in time or reports an ERROR, else a warning."""
        members = self.members
        waiting = set(members.alive(only if only is not None else members.peers))
        got: dict[int, dict] = {}
        deadline = time.monotonic() + timeout_s
        while waiting := waiting - set(members.liveness.lost):  # a client lost meanwhile is not waited for
            if time.monotonic() > deadline:
                if strict:
                    raise RunAborted(f"clients {sorted(waiting)} sent no {kind} within {timeout_s:.0f} s")
                log.warning("clients %s sent no %s within %.0f s", sorted(waiting), kind, timeout_s)
                break
            members.tend()
            item = members.recv(POLL_INTERVAL_S * 5)
            if item is None:
                continue
            identity, msg = item
            rank = members.ranks.get(identity)
            if isinstance(msg, ProtocolError):
                members.reject(identity, str(msg))
            elif rank is None and msg.type == T.HELLO:  # a client coming back between algorithms tries again
                members.reject(identity, "between algorithms; say HELLO again in a moment",
                               expected=bool(msg.meta.get("offline")))  # a device asking while offline
            elif rank is None:
                members.say_hello_first(identity, msg, " (between algorithms)")
            elif rank in members.liveness.lost:
                pass  # it is taken back, and set up, once the next algorithm runs
            elif msg.type == T.ERROR:
                reason = msg.meta.get("reason")
                if strict and rank in waiting:
                    raise RunAborted(f"client {rank} failed while waiting for {kind}: {reason}")
                log.error("client %d reports: %s", rank, reason)
            elif msg.type == kind and rank in waiting:
                got[rank] = msg.meta
                waiting.discard(rank)
            # anything else (late UPDATEs after END) belongs to a finished phase: dropped
        return got
