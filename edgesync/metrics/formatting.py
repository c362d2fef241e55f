"""What report.md and the plots share: `RunData`, a run folder read back, and the value formatters that
make a plot's labels read exactly like the tables.

`edgesync.metrics.report` loads a folder into a `RunData` (`load_run`) and writes report.md;
`edgesync.metrics.plots` draws from one. Both import this module, and neither imports the other's
private helpers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NONE = "—"                         # a missing value, in plots and in report.md


@dataclass
class RunData:
    """What a run folder holds, read back."""

    name: str
    scenario: dict
    metrics: list[dict]
    clients: list[dict]
    summary: dict[str, dict]               # label -> summary entry, in report order
    target_acc: float | None
    virtual_time: bool                     # the simulator's clock, not the wall clock
    updates: list[dict] = field(default_factory=list)  # updates.jsonl: per-update lag, gap …
    tuning: dict | None = None             # tuning.json of a tuned run (edgesync/runtime/tuning.py)
    partitions: dict = field(default_factory=dict)  # partition.json: each variant's split (metrics/partition_report.py)

    @property
    def on_validation(self) -> bool:
        """Whether the accuracies are validation accuracies (a tuning run's folder), not test accuracies."""
        return (self.scenario.get("eval") or {}).get("on") == "validation"

    @property
    def has_staleness(self) -> bool:
        return any("gap" in r for r in self.updates)

    @property
    def labels(self) -> list[str]:
        """The runs' labels (one per entry, seed and sweep combination), without the seeds' aggregates."""
        return [label for label, entry in self.summary.items() if "seeds" not in entry]

    @property
    def aggregates(self) -> dict[str, dict]:
        """label → the aggregate over seeds of that entry (metrics/seeds.py); empty without seeds."""
        return {label: entry for label, entry in self.summary.items() if "seeds" in entry}

    def seed_runs(self, label: str) -> list[str]:
        """The per-seed run labels of an aggregate label, in seed order."""
        from edgesync.metrics.seeds import split_seed  # formatting stays import-light
        return [run for run in self.labels if split_seed(run)[0] == label]


def num(value: Any) -> float | int | None:
    """`value` if it is a real number (not a bool, not NaN), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return value


def sort_key(value: Any) -> tuple:
    """Numbers first, in order, then everything else by its text (client ranks that may be names)."""
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def pct(value: Any) -> str:
    """A fraction as a percentage with two decimals: 0.8 → '80.00 %'."""
    v = num(value)
    return NONE if v is None else f"{100 * v:.2f} %"


def secs(value: float | None) -> str:
    """Seconds to a tenth (a column reads evenly); below 0.1 s two significant digits."""
    if value is None:
        return NONE
    return f"{value:,.1f}" if value == 0 or abs(value) >= 0.095 else f"{value:.2g}"


def code(label: Any) -> str:
    """An entry label as inline code, safe inside a Markdown table."""
    return "`" + str(label).replace("|", "\\|") + "`"


def whole(value: Any) -> str:
    """A count, rounded, with thousands separators: 1234.6 → '1,235'."""
    v = num(value)
    return NONE if v is None else f"{int(round(v)):,}"


def md_table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    """A Markdown table; `align` has one letter per column, 'r' for right-aligned."""
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(cells) + " |" for cells in [header, rule, *rows]]
