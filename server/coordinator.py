"""The coordinator a lab's server runs: serve one scenario to clients on other machines.

    python server/coordinator.py --scenario scenarios/quickstart.yaml --bind tcp://0.0.0.0:5555

Same as `edgesync coordinator`; the run folder and report are written when the last algorithm ends.
The Flower ServerApp is beside it: flower_server.py, a re-export of `edgesync.flower.apps:serverapp`.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgesync.cli import app  # noqa: E402

if __name__ == "__main__":
    app(["coordinator", *sys.argv[1:]])
