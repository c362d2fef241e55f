"""What one direction of a link is (`DirectionShape`) and the `tc` commands that shape a device's egress so:
htb for the rate, netem for delay, jitter and loss where the kernel has it."""
from __future__ import annotations

from dataclasses import dataclass


FRAME_BYTES = 1514  # a full Ethernet frame at MTU 1500, as htb counts it (no FCS/preamble)


# netem's default queue is 1000 packets; with delay it must hold a whole bandwidth-delay product, or it
# drops packets that nobody asked it to lose.
NETEM_LIMIT = 100_000


@dataclass(frozen=True)
class DirectionShape:
    """One direction of a link. rate None = unshaped; loss is a probability in [0, 1]."""

    rate_mbps: float | None = None
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        if self.rate_mbps is not None and not self.rate_mbps > 0:
            raise ValueError(f"rate_mbps must be > 0 or None, got {self.rate_mbps!r}")
        if not self.latency_ms >= 0 or not self.jitter_ms >= 0:
            raise ValueError(f"latency_ms and jitter_ms must be >= 0, got {self.latency_ms!r}, {self.jitter_ms!r}")
        if not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"loss must be in [0, 1], got {self.loss!r}")

    @property
    def needs_netem(self) -> bool:
        return self.latency_ms > 0 or self.jitter_ms > 0 or self.loss > 0


def _format_rate(mbps: float) -> str:
    # tc's "mbit" is 10^6 bit/s, but an integer count of bit/s leaves no doubt
    return f"{max(1, round(mbps * 1e6))}bit"


def _burst_bytes(mbps: float) -> int:
    # Tokens beyond `burst` are thrown away, so a burst shorter than the scheduling delay of the
    # dequeue (timer slack, a busy CPU) loses rate; 5 ms of traffic covers that, and at least two
    # full frames let a frame go out whole. Small next to any transfer worth measuring.
    return max(2 * FRAME_BYTES, round(mbps * 1e6 / 8 * 0.005))


def _netem_args(shape: DirectionShape) -> list[str]:
    if not shape.needs_netem:
        return []
    args = ["limit", str(NETEM_LIMIT), "delay", f"{shape.latency_ms:g}ms"]
    if shape.jitter_ms > 0:
        args.append(f"{shape.jitter_ms:g}ms")
    if shape.loss > 0:
        args += ["loss", f"{shape.loss * 100:g}%"]
    return args


def _shape_commands(ip: list[str], tc: list[str], dev: str, shape: DirectionShape, netem: bool) -> list[list[str]]:
    """The commands that shape dev's egress (ip/tc = ["ip"]/["tc"], or with "-n", ns).

    Rate: htb rather than tbf. tbf needs a queue bound (limit/latency) and drops beyond it, which at
    1 Mbit/s means TCP losses we did not ask for; htb queues in its leaf (pfifo, txqueuelen packets)
    and TCP Small Queues keep that short. htb also gives the usual rate-then-netem tree, netem as the
    leaf of the one class. `default 1` sends all traffic through class 1:1 (htb lets unclassified
    traffic bypass shaping otherwise); ceil = rate so it never borrows; cburst = burst (its default is
    one frame, which would make ceil, not rate, the limit).
    """
    delay = _netem_args(shape) if netem else []
    cmds: list[list[str]] = []
    if shape.rate_mbps is not None:
        rate, burst = _format_rate(shape.rate_mbps), str(_burst_bytes(shape.rate_mbps))
        # One segment per skb. With GSO, TCP hands htb skbs of up to 64 KB, which htb sends whole on
        # credit: at 1 Mbit/s half a second of traffic in one burst, then silence. Frame by frame, the
        # link serialises like a real one (measured here: 1 Mbit/s goodput error +2.3% -> +0.1% vs the
        # frame-overhead bound). Costs packets per second, negligible at these rates.
        cmds.append([*ip, "link", "set", "dev", dev, "gso_max_segs", "1"])
        cmds.append([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
        # quantum only divides bandwidth between sibling classes (there are none); setting it stops
        # htb warning that rate/r2q is out of range at high and low rates
        cmds.append([*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                     "rate", rate, "ceil", rate, "burst", burst, "cburst", burst, "quantum", str(FRAME_BYTES)])
        if delay:
            cmds.append([*tc, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "netem", *delay])
    elif delay:
        cmds.append([*tc, "qdisc", "add", "dev", dev, "root", "handle", "10:", "netem", *delay])
    return cmds
