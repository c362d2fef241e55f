"""The emulated device model: how long one step of a ×1 device lasts (the base step) when clients share hosts.

A ×k client's step lasts k × base. The base cannot simply be each client's undisturbed step time: four
clients on two cores each measure that step alone, then all compute at once and every step runs two or
three times longer, so a ×10 client ends up ×4 relative to the ×1 clients (issue 18 measured ×4.0 and
×5.9 in the quick start). The fair-share rule picks a base slow enough that every client's compute fits
in its host, on average and at its busiest. Client i computes `u_i` seconds (its undisturbed step) every
`f_i × base` seconds, so the n clients of one compute pool (a host's CPUs, or one GPU) keep
`Σ u_i / (f_i × base)` cores busy on average; and when they all compute at once — every synchronous
round starts them together — each gets `cores / n` of a core, so the fastest one's step takes
`u_i × n / cores`. The base leaves `headroom` on top of both:

    base_pool = max( Σ_i u_i / f_i / cores,   max_i u_i / f_i × max(1, n / cores) ) / headroom

(the quick start, four clients ×1,×1,×1,×10 on 2 cores: the all-at-once term, 2 u / 0.7 = 2.9 u. A base
of 1.9 u, the average term alone, left SSGD's ×1 steps 5–12% over their target; 2.5 u, headroom 0.8, up
to 6% over in one of four SSGD runs, the coordinator's evaluations taking their share of the cores.)

**Slots** (`edgesync client --slots K`, runtime/live/slots.py): the K clients of one process share its one
torch thread through a compute turn (emulation/compute_turn.py) and compute one at a time, so a turn is a
pool of one core nested in its host's. HELLO names a slot's turn; clients that name none have a turn of
their own, and the rule above is unchanged for them. With turns, the units that compete for the host's
cores are the turns, not the clients, and the terms become

    average = max( Σ_i u_i / f_i / cores,   max_turn Σ_(i in turn) u_i / f_i )
    at_once = max_turn max_(i in turn) ( Σ_(j in turn, f_j ≤ f_i) u_j + max_(k in turn, f_k > f_i) u_k ) / f_i
              × max(1, turns / cores)

A turn keeps at most one core busy (the second average term). When all of a turn's slots ask at once, the
turn goes earliest deadline first, so slot i waits for the slots whose factor is at most its own, and,
the turn not being preempted, for at most one slower slot that took it just before; then it computes.
Its step (wait included: a slot's step starts when it asks for the turn) must fit in f_i × base,
stretched by the host's other turns competing for the cores. With one client per turn this is the rule
above. Five ×1 slots in each of two processes on 2 cores: average 5 u, at once 5 u → base 5 u / headroom,
and each slot's wait for its four neighbours stays inside its ×1 step. A ×1 slot among 49 ×10 slots of
one process: at once 5 u (a ×10 slot waits for all 50 steps, within its 10 bases; the ×1 slot for one
×10 step at most, then its own: 2 u), where first come first served would need 50 u; the average, 5.9 u,
sets the base. A ×1 and a ×4 slot alone in a process: 2 u, the ×1 slot's step and the ×4 slot's. The
isolation plan treats a turn as one process: pinned when the host has a core per turn, else capped at
twice its slots' summed need at ×1, every slot of it carrying the same plan.

**Fewer at once** (`at_most`): when no more than K clients can compute at once — a round that samples K
clients (`clients_per_round`), or devices that come and go (availability: the online count's 3-sigma
bound, emulation/availability.py) — the terms count the K clients that load a pool most: the K largest
u_i / f_i in the average, a turn's K slowest slots and at most K turns at once. With every client able to
compute at once it is the rule above. (200 slots in 2 processes, FedAvg 20 per round: 20 u instead of
200 u — the same ×1 device, ten times fewer base seconds.)

The run's base is the slowest pool's, so a ×k client is ×k relative to every ×1 client wherever it runs.
`fixed` mode takes the base from the scenario (an absolute device speed); `undisturbed` keeps each client
at its own undisturbed step (right when every client has a core of its own).

Isolation follows the same numbers: when a pool has a core per client, each client is pinned to one;
otherwise each gets a CPU quota of twice what it would keep busy at ×1, 2 u / base, whatever its factor, and
at least its fair share of the pool's cores, cores / processes (a cap against a neighbour's burst). A ×k
client's steps are slowed by pacing; a quota of its slowed need, a k-th of that, or of a step far shorter
than a fixed base, would stall decoding the model it receives and encoding its update too (a spent CFS quota
holds the process for the rest of its period), which neither runtime's device model charges (the simulator
puts a client's messages on its links and the coordinator only).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PoolClient:
    """What the coordinator knows of one client: from HELLO (host, cores, device) and CALIBRATE (step)."""

    rank: int
    host: str
    device: str          # "cpu" or e.g. "cuda:0": the clients of one host and device share one pool
    cores: float         # CPUs this client's process may run on (a GPU counts as 1)
    undisturbed_s: float  # its measured step time alone on the host
    factor: float        # its profile's mean slowdown (≥ 1)
    turn: str | None = None  # the compute turn it shares with the other slots of its process; None: its own

    @property
    def pool(self) -> str:
        return f"{self.host}/{'cpu' if self.device == 'cpu' else self.device}"

    @property
    def busy(self) -> float:
        """Seconds of compute per second of base step it needs: u / f."""
        return self.undisturbed_s / self.factor


@dataclass
class DevicePlan:
    """The base step and, per client, how to isolate it (a core index, or a CPU share, or nothing)."""

    base_s: float
    mode: str
    pools: dict[str, float] = field(default_factory=dict)        # pool → the base it alone would need
    core: dict[int, int] = field(default_factory=dict)           # rank → index into its allowed CPUs
    cpu_share: dict[int, float] = field(default_factory=dict)    # rank → CPUs its quota allows
    clients_per_pool: dict[str, list[int]] = field(default_factory=dict)
    turns_per_pool: dict[str, int] = field(default_factory=dict)  # processes whose slots share a turn count once
    at_most: int | None = None  # clients that can compute at once, when fewer than all (a round's sample, churn)

    def describe(self) -> str:
        if self.mode == "undisturbed":
            return "undisturbed: each client's ×1 step is its own undisturbed step time"
        if self.mode == "fixed":
            return f"fixed base step {self.base_s * 1e3:.2f} ms"
        slowest = max(self.pools, key=self.pools.get) if self.pools else "?"
        parts = [f"{pool}: {len(ranks)} clients" + (f" in {self.turns_per_pool[pool]} processes"
                                                     if self.turns_per_pool.get(pool, len(ranks)) < len(ranks) else "")
                 for pool, ranks in sorted(self.clients_per_pool.items())]
        clients = sum(len(r) for r in self.clients_per_pool.values())
        fewer = f"; at most {self.at_most} computing at once" if self.at_most is not None and self.at_most < clients else ""
        return f"shared base step {self.base_s * 1e3:.2f} ms (set by {slowest}; {', '.join(parts)}{fewer})"


def turns(clients: list[PoolClient]) -> list[list[PoolClient]]:
    """The clients grouped by the compute turn they share (a client without one is a turn of its own),
    in the order of their lowest rank."""
    groups: dict[object, list[PoolClient]] = {}
    for c in sorted(clients, key=lambda c: c.rank):
        groups.setdefault(c.turn if c.turn is not None else ("rank", c.rank), []).append(c)
    return list(groups.values())


def turn_at_once_s(members: list[PoolClient]) -> float:
    """The base one turn's slots need when they all ask at once: earliest deadline first, slot i waits for
    the slots whose factor is at most its own and for one slower slot's step already under way (the turn is
    not preempted); its wait and step must fit in f_i × base."""
    def need(m: PoolClient) -> float:
        blocking = max((c.undisturbed_s for c in members if c.factor > m.factor), default=0.0)
        return (sum(c.undisturbed_s for c in members if c.factor <= m.factor) + blocking) / m.factor
    return max(need(m) for m in members)


def pool_base_s(clients: list[PoolClient], headroom: float, at_most: int | None = None) -> float:
    """The base step one pool needs so that its clients' compute fits in `headroom` of its cores, on
    average and when all of them (at most `at_most` of them) compute at once."""
    k = len(clients) if at_most is None else max(1, min(at_most, len(clients)))
    cores = min(c.cores for c in clients)  # the clients of a pool report the same cores; be conservative
    groups = turns(clients)

    def heaviest(members: list[PoolClient], key) -> list[PoolClient]:
        return sorted(members, key=key, reverse=True)[:k]

    average = max(sum(c.busy for c in heaviest(clients, lambda c: c.busy)) / cores,
                  max(sum(c.busy for c in heaviest(t, lambda c: c.busy)) for t in groups))
    slowest = [heaviest(t, lambda c: c.undisturbed_s) for t in groups]
    at_once = max(turn_at_once_s(t) for t in slowest) * max(1.0, min(len(groups), k) / cores)
    return max(average, at_once) / headroom


def plan_devices(clients: list[PoolClient], mode: str = "shared", headroom: float = 0.7,
                 base_step_s: float | None = None, isolation: str = "auto", at_most: int | None = None) -> DevicePlan:
    """The base step for `mode` ("shared", "fixed", "undisturbed") and each client's isolation; `at_most`:
    how many clients can compute at once (None: all).

    `isolation`: "auto" pins when a CPU pool has a core per client, else caps with a CPU share;
    "affinity" / "cgroup" ask for one of them; "none" leaves the OS scheduler alone.
    """
    pools: dict[str, list[PoolClient]] = {}
    for c in clients:
        pools.setdefault(c.pool, []).append(c)
    needs = {name: pool_base_s(members, headroom, at_most) for name, members in pools.items()}
    if mode == "fixed":
        if base_step_s is None:
            raise ValueError("emulation.mode fixed needs emulation.base_step_ms")
        base = base_step_s
    elif mode == "shared":
        base = max(needs.values()) if needs else 0.0
    elif mode == "undisturbed":
        base = 0.0  # every client keeps its own reference; nothing shared
    else:
        raise ValueError(f"unknown emulation mode {mode!r}: expected shared, fixed or undisturbed")
    plan = DevicePlan(base, mode, needs, clients_per_pool={n: sorted(c.rank for c in m) for n, m in pools.items()},
                      turns_per_pool={n: len(turns(m)) for n, m in pools.items()}, at_most=at_most)
    if isolation == "none":
        return plan
    for name, members in pools.items():
        if not name.endswith("/cpu"):
            continue  # a GPU's clients share it as the GPU schedules them; nothing to pin
        cores = min(c.cores for c in members)
        groups = turns(members)  # a process is pinned or capped as a whole, its slots with it
        pin = isolation == "affinity" or (isolation == "auto" and cores >= len(groups))
        for i, group in enumerate(groups):
            for c in group:
                if pin and i < cores:
                    plan.core[c.rank] = i
                elif isolation in ("auto", "cgroup") and mode != "undisturbed" and base > 0:
                    # Twice what the process would keep busy at ×1, whatever its factor, and never less than its
                    # fair share of the pool's cores. Its steps are slowed by pacing; a quota sized to a ×k step,
                    # or to a step far shorter than a fixed base, would stall its messages too (a CFS quota,
                    # once spent, holds the process for the rest of its period), which no device model charges:
                    # the simulator puts a client's messages on its links and the coordinator only.
                    need = sum(m.undisturbed_s for m in group) / base
                    plan.cpu_share[c.rank] = round(min(1.0, max(2.0 * need, cores / len(groups))), 4)
    return plan


def local_notes(clients: int, cores: int, mode: str, isolation: str, processes: int | None = None) -> list[str]:
    """What `edgesync validate` says of running `clients` clients in `processes` client processes (default:
    one each; fewer host them as slots) on this machine's `cores`."""
    processes = clients if processes is None else processes
    notes = []
    if mode == "undisturbed" and clients > cores:
        notes.append(f"emulation.mode undisturbed with {clients} clients on this machine's {cores} cores: "
                     "`edgesync run` here makes them share cores, so a ×k client will not be ×k relative to the "
                     "others (the run's fidelity warning will say by how much); the default mode shared keeps it")
    if isolation == "affinity" and processes > cores:
        notes.append(f"emulation.isolation affinity: {processes} client processes but this machine has {cores} cores, "
                     f"so `edgesync run` here pins only {cores} of them; auto or cgroup caps the rest")
    return notes
