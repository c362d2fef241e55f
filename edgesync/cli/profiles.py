"""`edgesync profiles`: the named device profiles."""
from __future__ import annotations

from rich.table import Table

from edgesync.cli.shared import out


def profiles():
    """List the named device profiles scenarios and clients can use."""
    from edgesync.emulation.profiles import DESCRIPTIONS, NAMED
    t = Table(title="device profiles")
    t.add_column("name")
    t.add_column("definition")
    t.add_column("what it emulates")
    for name, p in NAMED.items():
        spec = ", ".join(f"{k}={v}" for k, v in p.model_dump().items() if k != "kind")
        t.add_row(name, f"{p.kind}: {spec}", DESCRIPTIONS[name])
    out.print(t)
    out.print("Any xK with K >= 1 works (x3, x2.5); gamma profiles take a mapping: "
              "{kind: gamma, machines: heterogeneous|homogeneous, mean: 1.0, v_task: 0.1, v_mach: 0.6}. "
              "Nothing emulates a device faster than it is: a factor below 1 (x0.5, or a gamma mean below 1) "
              "is refused, in scenarios and in --profile alike; live, a single gamma step drawn below 1 runs "
              "at full speed.", highlight=False)
