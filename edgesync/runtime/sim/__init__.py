"""The virtual-clock simulator: the same server and client halves as live, with time charged from measured step
times and the coordinator's cost model; serial by default, its clients' work on Ray workers with
`sim.backend: ray`, a sweep's variants in parallel with `--parallel`."""
