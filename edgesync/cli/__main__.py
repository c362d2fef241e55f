"""`python -m edgesync.cli …`: the `edgesync` command (the launcher starts its client processes so)."""
from edgesync.cli.app import main

main()
