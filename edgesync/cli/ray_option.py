"""`--ray [ADDRESS]`: the simulator's clients on a Ray cluster."""
from __future__ import annotations

import os
import re


RAY_DEFAULT = "default"  # `--ray` alone: RAY_ADDRESS, else a cluster started on this machine, else a new one
_RAY_ADDRESS = re.compile(r"(rays?://\S+|auto|local|[\w.\-\[\]:]+:\d+)")


def ray_flag(argv: list[str]) -> list[str]:
    """`--ray` may stand alone or take an ADDRESS (host:port, ray://…, auto, local); click's options always
    take a value, so a lone one is given the default's name."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--ray" and (i + 1 == len(out) or not _RAY_ADDRESS.fullmatch(out[i + 1])):
            out[i] = f"--ray={RAY_DEFAULT}"
    return out


def on_ray(address: str | None, overrides: list[str]) -> None:
    """`--ray [ADDRESS]`: the simulator's clients run on Ray (sim.backend ray), on the cluster at ADDRESS."""
    if address is None:
        return
    overrides.append("sim.backend=ray")
    if address != RAY_DEFAULT:
        os.environ["RAY_ADDRESS"] = address  # read by ray.init(), as in any Ray program
