"""Emulation fidelity where it matters: the slowdown the algorithms actually felt, relative to the run's fastest.

A client's own throttle can hit its target exactly while the experiment is off by 2.5×: when clients
share cores, the ×1 clients' steps stretch too, and a ×10 client is then only ×4 *relative to them*.
So the factor recorded for each client of an entry is relative:

    achieved_factor = its median step time / the median step time of the fastest profile's clients
    target_factor   = its median drawn factor / the fastest profile's clients' median drawn factor

(the fastest profile: the smallest median drawn factor in the entry; a client that ran no throttle drew
×1). `fidelity_error` is achieved / target − 1; an entry's `fidelity_max_error` is the largest |error|.
A client whose profile is a trace (its factor changes with time) has no whole-run target: medians of a
changing factor and of its step times need not match; it is neither judged nor a reference (its steps
are checked against the trace instead: benchmarks/trace_fidelity.py).

The step is not all the algorithm feels: between steps a client sends its update and waits for the next
instruction. So each client also gets its **end-to-end** factor, as the algorithm feels it, against what the
emulation model predicts once that time is counted:

    e2e_factor     = the fastest profile's clients' median steps per second of wall time / its own
    e2e_predicted  = asynchronous: (target × s + o) / (s + o), s and o the fastest clients' median step and
                     time outside their steps per step (sending, waiting for the model): a ×k client pays the
                     same communication per step as they do, so it is less than ×k slower end to end;
                     synchronous: 1 (every client waits at the barrier for the slowest)

A gap between the two is what the emulation does not model: a straggler's own link, queueing at the
coordinator, a client starved of CPU between its steps.
"""
from __future__ import annotations

import logging
import statistics
from collections import Counter
from typing import Any

log = logging.getLogger("edgesync.fidelity")

FACTOR_DIGITS = 4
SAME_FACTOR = 1e-6  # clients whose drawn factors differ less than this share a profile


def annotate(rows: list[dict[str, Any]], synchronous: bool = False) -> float | None:
    """Set `target_factor`, `achieved_factor`, `fidelity_error`, `e2e_factor` and `e2e_predicted` in the client
    rows of one entry (in place); returns the largest |fidelity_error|, None when no two clients can be
    compared."""
    timed = [r for r in rows if r.get("median_step_s") and r.get("steps")
             and not str(r.get("profile", "")).startswith("trace(")]
    for r in rows:
        for key in ("target_factor", "achieved_factor", "fidelity_error", "e2e_factor", "e2e_predicted"):
            r.setdefault(key, None)
    if not timed:
        return None
    drawn = {id(r): r.get("median_factor") or 1.0 for r in timed}
    fastest = min(drawn.values())
    reference = [r for r in timed if drawn[id(r)] - fastest < SAME_FACTOR * fastest]
    step = statistics.median(r["median_step_s"] for r in reference)
    worst = 0.0
    for r in timed:
        target = drawn[id(r)] / fastest
        achieved = r["median_step_s"] / step
        r["target_factor"] = round(target, FACTOR_DIGITS)
        r["achieved_factor"] = round(achieved, FACTOR_DIGITS)
        r["fidelity_error"] = round(achieved / target - 1, FACTOR_DIGITS)
        worst = max(worst, abs(r["fidelity_error"]))
    _end_to_end(timed, reference, drawn, fastest, step, synchronous)
    return round(worst, FACTOR_DIGITS) if len(timed) > 1 else None


def _end_to_end(timed: list[dict], reference: list[dict], drawn: dict, fastest: float, step: float,
                synchronous: bool) -> None:
    """`e2e_factor` and `e2e_predicted` (module docstring), for clients with a wall time."""
    def rate(r: dict) -> float | None:
        return r["steps"] / r["wall_s"] if r.get("wall_s") else None
    ref_rates = [x for x in map(rate, reference) if x]
    outside = [r["wait_s"] / r["steps"] for r in reference if r.get("wait_s") is not None]
    if not ref_rates:
        return
    ref_rate, o = statistics.median(ref_rates), statistics.median(outside) if outside else 0.0
    for r in timed:
        mine = rate(r)
        if not mine:
            continue
        target = drawn[id(r)] / fastest
        r["e2e_factor"] = round(ref_rate / mine, FACTOR_DIGITS)
        r["e2e_predicted"] = 1.0 if synchronous else round((target * step + o) / (step + o), FACTOR_DIGITS)


def warn_if_off(label: str, rows: list[dict[str, Any]], tolerance: float) -> list[str]:
    """A warning per client whose achieved factor is off its target by more than `tolerance`, naming the
    client and the likely cause; logged (the run log and the console) and returned."""
    per_host = Counter(r.get("host") for r in rows)
    out = []
    for r in rows:
        err = r.get("fidelity_error")
        if err is None or abs(err) <= tolerance:
            continue
        host = r.get("host")
        if err < 0:
            cause = (f"the faster clients' steps ran longer than their target: too many clients per core on "
                     f"{host} ({per_host[host]} clients there)" if r["target_factor"] > 1 else
                     f"its steps ran longer than the fastest clients' ({per_host[host]} clients on {host})")
        else:
            cause = (f"its own steps ran longer than their target: too many clients per core on {host} "
                     f"({per_host[host]} clients there)")
        msg = (f"{label}: client {r.get('client')} ({r.get('profile')}) ran ×{r['achieved_factor']:.2f} "
               f"relative to the fastest clients, target ×{r['target_factor']:.2f} ({err:+.1%}); likely cause: "
               f"{cause}. Lower emulation.headroom, run fewer clients per host, or set emulation.base_step_ms")
        log.warning("%s", msg)
        out.append(msg)
    return out
