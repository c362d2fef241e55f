"""Kernel-shaped links: one network namespace per emulated host, joined to the coordinator by a veth pair.

Two ways to give a client a slow link:

- **transport pacing** (the default elsewhere in EdgeSync): the sender sleeps so that a message of
  n bytes takes n·8/rate + latency. Portable and deterministic, but it only shapes *our* messages,
  at message granularity, and TCP never sees a slow link (no queue build-up, no congestion control).
- **kernel shaping** (this module): each host runs in its own network namespace and talks to the
  coordinator (root namespace) over a veth pair whose egress qdiscs limit the rate: the downlink
  (coordinator → host i) on the root-side end, the uplink (host i → coordinator) on the
  namespace-side end. Every byte — ZeroMQ frames, TCP headers, retransmissions — pays, and TCP
  reacts as it would on a real bottleneck.

Rate always comes from the kernel (htb). Delay, jitter and loss need ``sch_netem``; where the kernel
has no netem (``netem_available()``), they are left out and the transport must add them:
``NetnsLab.kernel_emulates`` says what the kernel does and ``NetnsLab.transport_shapes(i)`` what is
left for the transport.

The kernel rate counts whole Ethernet frames, headers included: TCP payload gets about
1448/1514 ≈ 95.6% of it at MTU 1500, where transport pacing (``links.Link``) counts payload bytes.

Addresses: host i gets a private /30 from ``POOL`` (root side .1, namespace side .2), picked so that
no existing route or address in the root namespace overlaps it. Names carry the creating process's
pid and a random lab id (``es-<pid>-<lab>-<i>`` for namespaces, ``es<lab>h<i>``/``es<lab>n<i>`` for
the veth ends, the root end also tagged with an ``ifalias``), so two labs coexist and
``cleanup_stale()`` only ever removes what this module made for a process that no longer runs.

Needs root (CAP_NET_ADMIN) and iproute2 (``ip``, ``tc``).

commands.py: the `ip`/`tc` commands; probe.py: whether it can run here; shaping.py: a direction's shape and its
`tc` commands; naming.py: names, addresses and the allocation lock; lab.py: `NetnsLab` and `cleanup_stale`;
measure.py: a link's achieved rate.
"""
from __future__ import annotations

from edgesync.emulation.netns.commands import NetnsCommandError, NetnsUnavailable
from edgesync.emulation.netns.lab import NetnsLab, cleanup_stale
from edgesync.emulation.netns.measure import measure_rate
from edgesync.emulation.netns.naming import MAX_HOSTS
from edgesync.emulation.netns.probe import available, netem_available
from edgesync.emulation.netns.shaping import FRAME_BYTES, DirectionShape

__all__ = [
    "DirectionShape", "NetnsCommandError", "NetnsLab", "NetnsUnavailable", "available", "cleanup_stale",
    "measure_rate", "netem_available", "FRAME_BYTES", "MAX_HOSTS",
]
