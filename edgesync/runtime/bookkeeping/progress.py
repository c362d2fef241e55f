"""What a person watching a run sees: a live table on a terminal, plain lines elsewhere (CI, logs)."""
from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.table import Table


class Progress:
    def __init__(self, enabled: bool = True, console: Console | None = None):
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self.live_mode = enabled and self.console.is_terminal
        self._live: Live | None = None
        self._rows: dict[str, dict] = {}
        self._budget: dict[str, float] = {}
        self._status = ""
        self._last_line = 0.0

    # -- events --------------------------------------------------------------------------------
    def status(self, text: str) -> None:
        self._status = text
        if self.live_mode and self._live:
            self._live.update(self._table())
        elif self.enabled:
            self.console.print(f"[dim]{text}[/dim]", highlight=False)

    def start_algorithm(self, label: str, budget_s: float) -> None:
        self._rows[label] = {"time_s": 0.0, "updates": 0, "test_acc": None, "best": None, "state": "running"}
        self._budget[label] = budget_s
        self._status = f"running {label}"
        if self.live_mode and self._live is None:
            self._live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
            self._live.start()
        elif self.enabled and not self.live_mode:
            self.console.print(f"▶ {label}: up to {budget_s:g} s", highlight=False)

    def update(self, row: dict) -> None:
        r = self._rows.get(row["algorithm"])
        if r is None:
            return
        r.update(time_s=row["time_s"], updates=row["updates"], test_acc=row["test_acc"])
        r["best"] = max(r["best"] or 0.0, row["test_acc"])
        if self.live_mode and self._live:
            self._live.update(self._table())
        elif self.enabled and time.monotonic() - self._last_line > 10:
            self._last_line = time.monotonic()
            self.console.print(f"  {row['algorithm']}: t={row['time_s']:.0f}s updates={row['updates']} "
                               f"acc={row['test_acc']:.3f}", highlight=False)

    def end_algorithm(self, label: str, final: dict) -> None:
        r = self._rows[label]
        r.update(state="done", time_s=final["time_s"], updates=final["updates"], test_acc=final["test_acc"])
        if self.live_mode and self._live:
            self._live.update(self._table())
        elif self.enabled:
            self.console.print(f"■ {label}: {final['time_s']:.1f} s, {final['updates']} updates, "
                               f"final accuracy {final['test_acc']:.3f}", highlight=False)

    def close(self) -> None:
        if self._live:
            self._live.stop()
            self._live = None

    # -- rendering -----------------------------------------------------------------------------
    def _table(self) -> Table:
        t = Table(title=self._status, title_justify="left", expand=False)
        for col in ("algorithm", "progress", "time", "updates", "accuracy", "best"):
            t.add_column(col, justify="left" if col in ("algorithm", "progress") else "right")
        for label, r in self._rows.items():
            budget = self._budget[label]
            frac = 1.0 if r["state"] == "done" else min(1.0, r["time_s"] / budget)
            bar = "█" * int(frac * 20) + "░" * (20 - int(frac * 20))
            acc = "–" if r["test_acc"] is None else f"{r['test_acc']:.3f}"
            best = "–" if r["best"] is None else f"{r['best']:.3f}"
            t.add_row(label, bar, f"{r['time_s']:.0f}/{budget:g} s", str(r["updates"]), acc, best)
        return t
