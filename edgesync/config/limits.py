"""What a scenario may ask to be built, and how many clients a `clients` value asks for.

The bounds are checked before anything is built: a number in the YAML that becomes a list (a client
count) and a sweep (which multiplies whole scenarios) are counted, not expanded.
"""
from __future__ import annotations

from typing import Any

from edgesync.config.errors import Problem

# What a scenario may ask to be built. The simulator holds about 0.85-1.45 MB per client with the small
# CNN (docs/simulator.md, "Memory"), so 10,000 clients need 9-15 GB, ten times the 1,000 it is measured
# with; 100,000 would need over 85 GB and more than Fashion-MNIST's 60,000 training samples (every client
# needs one). A validated client costs about 0.5 kB and 3 µs, so a sweep's 100,000 clients in all take
# 50 MB and a fraction of a second to check.
MAX_CLIENTS = 10_000            # clients of one scenario, or of one sweep variant
MAX_SWEEP_VARIANTS = 1_000      # combinations of one sweep (the product of its value lists' lengths)
MAX_SWEEP_CLIENTS = 100_000     # clients of all a sweep's variants together (each variant is built)
MAX_SEEDS = 100                 # seeds of one scenario (each multiplies every variant)
MAX_SHARDS = 64                 # parameter-server shards of one coordinator
# A tuning run is a whole training run: 200 of them at the DGS comparison's ~15 s each (simulator, 2 cores)
# are nearly an hour, and a grid that asks for more is more likely a typo (a value list too many) than a plan.
MAX_TUNE_RUNS = 200             # tuning runs of a `tune` grid, all entries together


def client_count(value: Any) -> int | None:
    """How many clients a `clients` value asks for (a count, `{count: N, …}` or a list); None if none."""
    count = value.get("count") if isinstance(value, dict) else value
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    return len(value) if isinstance(value, list) else None


def too_many_clients(value: Any, at: tuple[str | int, ...] = ()) -> Problem | None:
    """The problem with a `clients` value over MAX_CLIENTS, found without building a client."""
    count = client_count(value)
    if count is None or count <= MAX_CLIENTS:
        return None
    where = ("count",) if isinstance(value, dict) else ()
    got = f"a list of {count}" if isinstance(value, list) else str(count)
    return Problem(f"at most {MAX_CLIENTS:,} clients", got, at + where)
