"""What both runtimes share about a run: its accounting (metrics, updates and clients rows), evaluation,
checkpoints and resume, the workload (data splits, model, trainers), update checks, step times, progress, and
who is in it (membership and liveness)."""
