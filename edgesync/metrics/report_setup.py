"""report.md's setup paragraph: the scenario, the clients and their devices, the data and the coordinator's
costs, in words."""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

from edgesync.emulation.profiles import ConstantProfile, parse_profile
from edgesync.metrics.formatting import NONE, RunData, code, num, pct
from edgesync.metrics.report_values import describe_value, device_text, first_given, nested


def setup_paragraph(run: RunData) -> str:
    s = run.scenario
    parts = [_describe_clients(run)]
    for what, value in [
        ("dataset", first_given(nested(s, "dataset"), nested(s, "data", "dataset"), nested(s, "data", "name"))),
        ("model", nested(s, "model")),
        ("partition", _partition_view(first_given(nested(s, "partition"), nested(s, "data", "partition")))),
        ("seed", None if run.aggregates else nested(s, "seed")),  # with seeds, listed below
        ("runtime", nested(s, "runtime")),
    ]:
        text = describe_value(value)
        if text:
            parts.append(f"{what} {text}")
    seeds = sorted({s for e in run.aggregates.values() for s in e["seeds"]})
    if seeds:
        parts.append(f"seeds {', '.join(map(str, seeds))}")
    sentence = "; ".join(p for p in parts if p) or "no scenario recorded"
    shown = run.aggregates or {label: run.summary[label] for label in run.labels}
    entries = ", ".join(code(label) + _entry_note(e.get("algorithm"), label, _mitigation(s, label))
                        for label, e in shown.items())
    tested = "validation" if run.on_validation else "test"
    target = f" Target {tested} accuracy: {pct(run.target_acc)}." if run.target_acc is not None else ""
    started = _started(run.metrics)
    coordinator = _coordinator_time(s) if run.virtual_time else ""
    return (f"**Setup.** {sentence[0].upper()}{sentence[1:]}.{coordinator} "
            f"Entries compared: {entries or NONE}.{target}{started}")


# algorithms/machinery/stragglers.py's keys (the report reads run folders and imports no algorithm; a test keeps
# the two lists equal)
MITIGATION_KEYS = ("backup_workers", "close_at", "over_select", "deadline_s", "deadline_median", "partial_work")


def _mitigation(scenario: dict, label: str) -> str:
    """The straggler mitigation an entry runs with, as its keys say it ('backup_workers 1'); '' for none."""
    entry = next((a for a in scenario.get("algorithms") or [] if isinstance(a, dict)
                  and (a.get("label") or a.get("name")) == label.split("@")[0]), {})
    return ", ".join(f"{k} {entry[k]}" for k in MITIGATION_KEYS
                     if entry.get(k) is not None and not (k == "partial_work" and entry[k] == "drop"))


def _entry_note(algorithm: Any, label: str, mitigation: str) -> str:
    said = [str(algorithm)] if algorithm not in (None, label) else []
    said += [mitigation] if mitigation else []
    return f" ({'; '.join(said)})" if said else ""


def _coordinator_time(scenario: dict) -> str:
    """How the simulator charged the coordinator's work (`sim.server_time`), with the costs it used."""
    mode = nested(scenario, "sim", "server_time")
    if mode == "zero":
        return " Coordinator time: zero (idealised)."
    if mode == "measured":
        return " Coordinator time: measured (its wall time at each event of this run)."
    if mode != "model":
        return ""
    costs = nested(scenario, "sim", "measured_server_s")
    parts = []
    for label, c in costs.items() if isinstance(costs, dict) else ():
        v = {k: num(c.get(k)) for k in ("decode_update", "collect", "apply", "encode_send", "query")} \
            if isinstance(c, dict) else {}
        if v and None not in v.values():
            parts.append(f"{code(label)} {_ms(v['decode_update'] + v['collect'])} / "
                         f"{_ms(v['decode_update'] + v['apply'])}, {_ms(v['encode_send'])}, {_ms(v['query'])}")
    listed = f" (ms per update collected / applied, per message sent, per query: {'; '.join(parts)})" if parts else ""
    return f" Coordinator time: model, costs measured once on the machine that ran it{listed}."


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.3g}"


def _describe_clients(run: RunData) -> str:
    """'4 clients (2 × x1, 1 × x5, 1 × x10) on 2 hosts, devices 1 × cuda:0, 3 × cpu' from clients.jsonl,
    else from the scenario."""
    by_rank: dict[Any, dict] = {}
    for row in run.clients:
        by_rank.setdefault(row.get("client"), row)
    if by_rank:
        profiles = Counter(str(r.get("profile", "?")) for r in by_rank.values())
        hosts = {r.get("host") for r in by_rank.values() if r.get("host")}
        on_hosts = f" on {len(hosts)} hosts" if len(hosts) > 1 else (f" on {next(iter(hosts))}" if hosts else "")
        # the simulator's clients have no device of their own ("virtual"): nothing to say
        devices = Counter(device_text(r) for r in by_rank.values() if r.get("device") not in (None, "", "virtual"))
        on_devices = ", devices " + ", ".join(f"{n} × {d}" for d, n in devices.items()) if devices else ""
        return f"{_clients_phrase(len(by_rank), profiles)}{on_hosts}{on_devices}"
    spec = nested(run.scenario, "clients")
    if isinstance(spec, bool):
        return ""
    if isinstance(spec, int):
        return _clients_phrase(spec, Counter())
    if isinstance(spec, dict):
        count = num(first_given(spec.get("count"), spec.get("n")))
        profile = describe_value(first_given(spec.get("profile"), spec.get("profiles")))
        if count is None:
            return ""
        return f"{int(count)} clients" + (f" ({profile})" if profile else "")
    if isinstance(spec, list):
        profiles = Counter()
        for c in spec:
            c = c if isinstance(c, dict) else {"profile": c}
            count = num(first_given(c.get("count"), c.get("n"))) or 1
            profiles[_profile_label(c.get("profile"))] += int(count)
        return _clients_phrase(sum(profiles.values()), profiles)
    return ""


def _profile_label(profile: Any) -> str:
    """A client's profile as clients.jsonl names it: 'x10' for 'x10' or {'kind': 'constant', 'factor': 10},
    'gamma-hetero(μ=1,Vm=0.6)' for a gamma mapping, 'x1' when absent; else its description."""
    if profile is None:
        return ConstantProfile().label
    try:
        return parse_profile(profile).label
    except (ValueError, TypeError):  # not a valid profile (pydantic's ValidationError is a ValueError)
        return describe_value(profile) or "?"


def _partition_view(partition: Any) -> Any:
    """A partition with only the parameter its kind uses: alpha for dirichlet, shards_per_client for shards
    (a resolved scenario carries them all; a written one may omit the kind, which defaults to iid)."""
    used = {"iid": (), "sorted_slices": (), "dirichlet": ("alpha",), "shards": ("shards_per_client",)}
    if not isinstance(partition, dict):
        return partition
    kind = partition.get("kind", "iid")
    if kind not in used:
        return partition
    return {"kind": kind, **{k: partition[k] for k in used[kind] if k in partition}}


def _clients_phrase(n: int, profiles: Counter) -> str:
    mix = ", ".join(f"{count} × {profile}" for profile, count in profiles.items())
    return f"{n} client{'s' if n != 1 else ''}" + (f" ({mix})" if mix else "")


def _started(metrics: list[dict]) -> str:
    stamps = [t for t in (num(r.get("wall_clock")) for r in metrics) if t is not None]
    if not stamps:
        return ""
    when = datetime.fromtimestamp(min(stamps), tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f" First evaluation recorded {when} (wall clock)."
