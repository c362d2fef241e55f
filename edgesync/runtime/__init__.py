"""Running a scenario: `runs` runs every entry of a scenario in either runtime (and `tuning` its grid first).
The runtimes are `live` (real clocks, ZeroMQ) and `sim` (a virtual clock); `sharding` and `allreduce` are the
live coordinator's two ways to spread the server's work; `bookkeeping` is what all of them share about a run."""
