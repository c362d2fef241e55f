"""report.md's Participation, Availability and Traces sections: who took part in the rounds, who was
offline when, and how the scenario's device and link traces ran (the facts: metrics/churn.py).

Each section is there only when the folder has what it shows, so a folder from before these records
renders as it did. Many clients are summarised, never listed: above MAX_CLIENT_ROWS clients an entry's
rounds per client become a histogram (plots/rounds_per_client.png) with the most and least frequent
participants named, and the availability plot draws the first clients by rank, saying which.
"""
from __future__ import annotations

from typing import Any

from edgesync.metrics.churn import ChurnRecords, device_traces, link_traces, most_and_least, ranks_text
from edgesync.metrics.formatting import NONE, RunData, code, md_table, secs, whole
from edgesync.metrics.churn_plots import MAX_AVAILABILITY_CLIENTS, MAX_AVAILABILITY_PANELS, MAX_TRACE_LINES
from edgesync.metrics.recorder import PLOTS_DIR

ROUNDS_PLOT = "rounds_per_client.png"
AVAILABILITY_PLOT = "availability.png"
TRACES_PLOT = "traces.png"
MAX_CLIENT_ROWS = 20   # an entry with more clients gets a histogram and its extremes, not a row per client
EXTREMES = 5           # clients named as the most and as the least frequent participants

PARTICIPATION_NOTE = (
    "Per synchronous entry, from updates.jsonl's round rows: the clients drawn at each round's start "
    "(among those online then; a round whose participants all left is drawn again, and each try counts), "
    "how many were online at the draw, and how many reported in each round that closed; then from "
    "clients.jsonl the rounds each client reported in. Cells are mean (min–max). Offline time is "
    "clients.jsonl's `offline_s`; its share is of the entry's run (to its last evaluation).")
AVAILABILITY_NOTE = (
    "Each client's online stretches (bars; offline between them), from the presence rows of updates.jsonl. "
    "An availability schedule is drawn from the scenario's seed and each client's rank, so every entry "
    "with the same seed faces the same one.")
TRACES_NOTE = (
    "The traces as scenario.yaml sets them, piecewise constant from each row's time (every entry faces "
    "them from its own start); clients with the same trace share a line, and a link's up and down are "
    "drawn apart (dashed: down) where they differ. Before a device trace's first row the device runs at ×1; "
    "before a link trace's first row the link keeps its own setting (not drawn). A whole-run achieved factor "
    "(the Emulation fidelity table's, from median step times) is one figure, not a time series: not drawn here.")
TIMELINE_NOTE = ("Dots: the steps a traced device recorded (clients.jsonl's `step_timeline`, sampled), each "
                 "one's seconds over the run's base step (`base_step_s`), from the first entry that has them: "
                 "how its steps followed the trace.")


def has_participation(churn: ChurnRecords) -> bool:
    return bool(churn.participation or churn.offline_times)


def needs_rounds_histogram(churn: ChurnRecords) -> bool:
    return any(len(p.per_client) > MAX_CLIENT_ROWS for p in churn.participation.values())


def has_availability(churn: ChurnRecords) -> bool:
    return bool(churn.schedules)


def has_traces(run: RunData) -> bool:
    return bool(device_traces(run.scenario) or link_traces(run.scenario))


# ---------------------------------------------------------------------------------------------- sections

def participation_section(churn: ChurnRecords) -> list[str]:
    """Rounds per entry, offline time per entry, and per client a row (few clients) or a summary (many)."""
    parts, offline = churn.participation, churn.offline_times
    lines = ["## Participation", "", PARTICIPATION_NOTE, ""]
    if parts:
        header = ["Entry", "Rounds drawn", "Drawn per round", "Online at draw", "Reported per round",
                  "Rounds per client", "Never took part"]
        rows = []
        for label, p in parts.items():
            redrawn = len(p.drawn) - p.rounds
            drawn = f"{p.rounds:,}" + (f" (+{redrawn} redrawn)" if redrawn > 0 else "") if p.drawn else NONE
            rows.append([code(label), drawn,
                         _spread(p.drawn), _spread(p.online), _spread(p.reported),
                         _spread(list(p.per_client.values())), f"{len(p.never)} of {len(p.per_client)}"])
        lines += md_table(header, rows, "lrrrrrr") + [""]
        if not any(p.drawn for p in parts.values()):
            lines += ["No round rows: every client online took part in every round.", ""]
    if offline:
        header = ["Entry", "Clients ever offline", "Mean offline (s)", "Max offline (s)",
                  "Mean share of the run", "Max share"]
        rows = []
        for label, times in offline.items():
            end = churn.end(label)
            shares = [t / end for t in times.values()] if end else []
            rows.append([code(label), f"{sum(t > 0 for t in times.values())} of {len(times)}",
                         secs(_mean(list(times.values()))), secs(max(times.values())),
                         _share(_mean(shares)), _share(max(shares, default=None))])
        lines += md_table(header, rows, "lrrrrr") + [""]
    labels = list(dict.fromkeys([*parts, *offline]))
    if all(len(churn.clients(label)) <= MAX_CLIENT_ROWS for label in labels):
        lines += _per_client_table(churn, labels) + [""]
    else:
        for label, p in parts.items():
            most, least = most_and_least(p.per_client, EXTREMES)
            lines.append(f"- {code(label)}: most often {_named(most)}; least often {_named(least)}"
                         f" ({len(p.never)} of {len(p.per_client)} clients in no round).")
        if parts:
            lines += ["", f"![Rounds each client took part in]({PLOTS_DIR}/{ROUNDS_PLOT})", ""]
    return lines


def availability_section(churn: ChurnRecords) -> list[str]:
    schedules = churn.schedules
    if len(schedules) == 1 and len(schedules[0].labels) > 1:
        same = (f"Every entry faced the same schedule (checked: their presence rows agree), so one panel is "
                f"drawn, from {code(schedules[0].drawn_from)}.")
    elif len(schedules) == 1:
        same = f"Drawn from {code(schedules[0].drawn_from)}."
    else:
        groups = "; ".join(", ".join(map(code, s.labels)) for s in schedules)
        same = f"Entries with different schedules (other seeds) get a panel each: {groups}."
        if len(schedules) > MAX_AVAILABILITY_PANELS:
            same += f" The first {MAX_AVAILABILITY_PANELS} are drawn."
    clients = max(len(s.intervals) for s in schedules)
    capped = (f" With {clients} clients, the plot draws the first {MAX_AVAILABILITY_CLIENTS} by rank "
              f"(clients {ranks_text(sorted(schedules[0].intervals)[:MAX_AVAILABILITY_CLIENTS])})."
              if clients > MAX_AVAILABILITY_CLIENTS else "")
    return ["## Availability", "", f"{AVAILABILITY_NOTE} {same}{capped}", "",
            f"![Client availability: online stretches]({PLOTS_DIR}/{AVAILABILITY_PLOT})", ""]


def traces_section(run: RunData, churn: ChurnRecords) -> list[str]:
    device, links = device_traces(run.scenario), link_traces(run.scenario)
    which = []
    if device:
        which.append(f"device traces: client{'s' if len(device) > 1 else ''} {ranks_text(list(device))}")
    if links:
        apart = [r for r, t in links.items() if t.get("up") != t.get("down")]
        which.append(f"link traces: client{'s' if len(links) > 1 else ''} {ranks_text(list(links))}"
                     + (f" (up and down differ for {ranks_text(apart)})" if apart else ""))
    distinct = max(len({tuple(t) for t in device.values()}),
                   len({(tuple(t.get("up", ())), tuple(t.get("down", ()))) for t in links.values()}))
    capped = (f" Each panel draws the first {MAX_TRACE_LINES} distinct traces." if distinct > MAX_TRACE_LINES
              else "")
    timeline = f" {TIMELINE_NOTE}" if any(rank in device for rank in churn.achieved_factors) else ""
    return ["## Traces", "", f"{TRACES_NOTE}{timeline} In this run, {'; '.join(which)}.{capped}", "",
            f"![Device and link traces]({PLOTS_DIR}/{TRACES_PLOT})", ""]


def _per_client_table(churn: ChurnRecords, labels: list[str]) -> list[str]:
    header = ["Entry", "Client", "Rounds", "Offline (s)", "Offline share", "Lost", "Rejoined"]
    parts, offline = churn.participation, churn.offline_times
    rows = []
    for label in labels:
        end = churn.end(label)
        by_rank = {r.get("client"): r for r in churn.run.clients if str(r.get("algorithm")) == label}
        for rank in churn.clients(label):
            row = by_rank.get(rank, {})
            off = offline.get(label, {}).get(rank)
            rows.append([code(label), str(rank),
                         str(parts[label].per_client.get(rank, 0)) if label in parts else NONE,
                         secs(off), _share(off / end if off is not None and end else None),
                         whole(row.get("lost")), whole(row.get("rejoined"))])
    return md_table(header, rows, "lrrrrrr")


def _spread(values: list[int]) -> str:
    """'3.2 (1–4)': mean (min–max); one value alone; — for none."""
    if not values:
        return NONE
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{_mean(values):.1f} ({lo}–{hi})"


def _named(extremes: list[tuple[Any, int]]) -> str:
    return ", ".join(f"client {rank} ({n} round{'s' if n != 1 else ''})" for rank, n in extremes)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _share(value: float | None) -> str:
    return NONE if value is None else f"{100 * value:.1f} %"
