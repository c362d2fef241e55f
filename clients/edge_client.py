"""The edge client a lab machine runs: join a coordinator, train as told, exit when the run ends.

    python clients/edge_client.py --connect tcp://SERVER:5555 --profile x10 --device cuda:0

Same as `edgesync client`; this file exists so a machine can run it from a checkout without the
`edgesync` entry point on its PATH. The Flower ClientApps are beside it: flower_client.py (EdgeSync's own)
and numpy_client.py (the legacy NumPyClient), each a re-export of `edgesync.flower.apps`.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgesync.cli import app  # noqa: E402

if __name__ == "__main__":
    app(["client", *sys.argv[1:]])
