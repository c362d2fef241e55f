"""`edgesync plugins`: the extensions installed in this environment (Python entry points), each checked."""
from __future__ import annotations

from rich.markup import escape

from edgesync.cli.shared import out


def plugins():
    """List the installed extensions (entry points of edgesync.algorithms, .models, .datasets and .profiles) with
    their package, version and code hash, each loaded and checked as a scenario would use it."""
    from edgesync import algorithms
    from edgesync.extensions import API_VERSION, ExtensionError, describe, entry_points
    from edgesync.data.datasets import DATASET_NAMES, outside_loader
    from edgesync.emulation.profiles import KINDS, outside_kind
    from edgesync.models import MODEL_NAMES, outside_builder

    out.print(f"edgesync API {API_VERSION}; built in: {len(algorithms.names())} algorithms, {len(MODEL_NAMES)} models, {len(DATASET_NAMES)} "
              f"datasets, {len(KINDS)} profile kinds. "
              "A scenario also takes a 'package.module:attr' reference (docs/extending.md).", highlight=False)
    found = 0
    for kind, check in (("algorithm", algorithms.get), ("model", outside_builder), ("dataset", outside_loader),
                        ("profile", outside_kind)):
        for name, ep in sorted(entry_points(kind).items()):
            found += 1
            try:
                check(name)
                status = "ok"
            except (ExtensionError, ValueError) as exc:
                status = f"[red]refused[/]: {escape(str(exc))}"
            info = describe(name, ep.module)
            out.print(f"{kind} [bold]{name}[/] = {ep.value}  ({info.describe()}): {status}", highlight=False,
                      soft_wrap=True)
    if not found:
        out.print("No extension is installed (no entry point in the groups edgesync.algorithms, edgesync.models, "
                  "edgesync.datasets or edgesync.profiles).")
