"""report.md's Coordinator load section, and the warning near the top when the coordinator was an entry's
bottleneck: from the summary's figures (metrics/summary.py, from coordinator.jsonl; metrics/coordinator_load.py).

A folder from before coordinator.jsonl has none of these figures: the section is left out, as it was.
"""
from __future__ import annotations

from edgesync.metrics.formatting import NONE, RunData, code, md_table, num
from edgesync.metrics.coordinator_load import BOTTLENECK_SHARE, SATURATED_BUSY, SATURATION_WINDOW_S


def has_coordinator_load(run: RunData) -> bool:
    return any(num(run.summary[label].get("coordinator_utilisation")) is not None for label in run.labels)


def bottleneck_warnings(run: RunData) -> list[str]:
    """One line per entry whose coordinator was its bottleneck (empty when none was)."""
    lines = []
    for label in run.labels:
        e = run.summary[label]
        if e.get("coordinator_bottleneck"):
            lines.append(f"**Warning: the coordinator was the bottleneck of {code(label)}**: saturated for "
                         f"{_share(e.get('coordinator_saturated_share'))} of its run (utilisation "
                         f"{_share(e.get('coordinator_utilisation'))}, mean queueing delay "
                         f"{_ms(e.get('queue_delay_mean_s'))} ms, {_rate(e.get('updates_served_per_s'))} updates "
                         f"served per second). Its clients offered more than it could serve: its figures measure "
                         f"the coordinator as much as the algorithm.")
    return lines


def coordinator_note(virtual_time: bool) -> str:
    busy = ("the virtual time the simulator charged for its work (`sim.server_time`; `zero` charges none)"
            if virtual_time else "its loop's wall time outside its wait for the next message (decoding, checking, "
                                 "the server half's work, encoding and sending, snapshots, checkpoints)")
    delay = ("from the message's arrival (after its links) to the coordinator's start on it" if virtual_time else
             "from its arrival as its sender stamped it on the algorithm's clock (after its link's pacing; under "
             "Flower, when the node built its reply) to the coordinator taking it off its socket; an upper bound, "
             "over by the real transfer of a message each way (1–2 ms on one machine with 0.7 MB messages, more "
             "with larger ones or across a network)")
    return (f"Utilisation is the coordinator's busy time over the entry's run: {busy}. Queueing delay is each "
            f"update's or query's wait, {delay}; p95 its 95th percentile. Updates served are the UPDATE messages "
            f"it took up (applied or collected). Saturated is the share of the run in {SATURATION_WINDOW_S:g} s "
            f"windows the coordinator was busy at least {SATURATED_BUSY:.0%} of; above {BOTTLENECK_SHARE:.0%} it "
            f"was the entry's bottleneck. A sharded coordinator shows its busiest shard.")


def coordinator_section(run: RunData) -> list[str]:
    header = ["Entry", "Utilisation", "Queue delay mean (ms)", "Queue delay p95 (ms)", "Updates served/s",
              "Saturated", "Bottleneck"]
    rows = []
    for label in run.labels:
        e = run.summary[label]
        bottleneck = e.get("coordinator_bottleneck")
        rows.append([code(label), _share(e.get("coordinator_utilisation")), _ms(e.get("queue_delay_mean_s")),
                     _ms(e.get("queue_delay_p95_s")), _rate(e.get("updates_served_per_s")),
                     _share(e.get("coordinator_saturated_share")),
                     NONE if bottleneck is None else ("**yes**" if bottleneck else "no")])
    return ["## Coordinator load", "", coordinator_note(run.virtual_time), "",
            *md_table(header, rows, align="lrrrrrl"), ""]


def _share(value) -> str:
    v = num(value)
    return NONE if v is None else f"{100 * v:.1f} %"


def _ms(value) -> str:
    v = num(value)
    return NONE if v is None else f"{1e3 * v:.3g}"


def _rate(value) -> str:
    v = num(value)
    return NONE if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.3g}")

