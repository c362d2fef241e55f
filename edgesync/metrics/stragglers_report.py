"""report.md's "Compute thrown away" section: what each entry's straggler mitigation discarded (backup
workers, over-selection, a deadline that drops late reports: algorithms/machinery/stragglers.py).

From clients.jsonl: each client's `discarded_updates` and `wasted_steps` (the local steps its late updates
held), beside the steps it ran in all (`steps`, the late ones included). There only when some entry's
clients carry these fields, i.e. it set a mitigation.
"""
from __future__ import annotations

from edgesync.metrics.formatting import RunData, code, md_table, num, whole
from edgesync.metrics.report_values import cell_text

WASTE_NOTE = ("Per entry that mitigates slow clients: updates that reached the coordinator after their round "
              "had closed were discarded, and the local steps they held were computed for nothing. Share = "
              "wasted steps over all the steps its clients ran. Per client below, the same figures.")
MAX_CLIENT_ROWS = 20  # more clients: the per-entry totals only


def has_waste(run: RunData) -> bool:
    return any(r.get("wasted_steps") is not None for r in run.clients)


def _share(wasted: float, total: float) -> str:
    return f"{100 * wasted / total:.1f} %" if total else "—"


def waste_section(run: RunData) -> list[str]:
    rows = [r for r in run.clients if r.get("wasted_steps") is not None]
    by_entry: dict[str, list[dict]] = {}
    for r in rows:
        by_entry.setdefault(str(r.get("algorithm")), []).append(r)
    lines = ["## Compute thrown away", "", WASTE_NOTE, ""]
    body = []
    for label, rs in by_entry.items():
        wasted = sum(num(r.get("wasted_steps")) or 0 for r in rs)
        steps = sum(num(r.get("steps")) or 0 for r in rs)
        late = sum(num(r.get("discarded_updates")) or 0 for r in rs)
        body.append([code(label), whole(late), whole(wasted), whole(steps), _share(wasted, steps),
                     f"{sum((num(r.get('wasted_steps')) or 0) > 0 for r in rs)} of {len(rs)}"])
    lines += md_table(["Entry", "Discarded updates", "Wasted steps", "All steps", "Share", "Clients with waste"],
                      body, "lrrrrr") + [""]
    if all(len(rs) <= MAX_CLIENT_ROWS for rs in by_entry.values()):
        body = [[code(label), cell_text(r.get("client")), cell_text(r.get("profile")),
                 whole(r.get("discarded_updates")), whole(r.get("wasted_steps")), whole(r.get("steps")),
                 _share(num(r.get("wasted_steps")) or 0, num(r.get("steps")) or 0)]
                for label, rs in by_entry.items() for r in rs]
        lines += md_table(["Entry", "Client", "Profile", "Discarded updates", "Wasted steps", "Steps", "Share"],
                          body, "lllrrrr") + [""]
    return lines
