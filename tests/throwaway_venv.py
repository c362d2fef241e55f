"""A throwaway virtual environment for tests that `pip install` what a user would: it reaches the project's
packages (torch, edgesync, pip, setuptools, pytest) through a .pth file, so nothing is downloaded, and what is
installed into it never reaches the project's own environment. `pip`, `pytest` and `edgesync` in its bin/ run
them with its python, so a documented command line runs there as written (put bin/ first on PATH)."""
from __future__ import annotations

import os
import subprocess
import sysconfig
import venv
from pathlib import Path

# pip without a network: setuptools from this environment (no isolated build) and nothing from an index
OFFLINE_PIP = {"PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def throwaway_python(root: Path) -> Path:
    """The python of a new environment in `root` (see the module docstring)."""
    venv.create(root, with_pip=False)
    python = root / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    project_site = sysconfig.get_paths()["purelib"]
    # an `import` line: addsitedir also runs the project's own .pth files (edgesync's editable install)
    (Path(site) / "edgesync_project.pth").write_text(f"import site; site.addsitedir({project_site!r})\n")
    for command, module in (("pip", "pip"), ("pytest", "pytest"), ("edgesync", "edgesync.cli")):
        script = root / "bin" / command
        script.write_text(f'#!/bin/sh\nexec "{python}" -m {module} "$@"\n')
        script.chmod(0o755)
    return python


def environment(python: Path, **extra: str) -> dict[str, str]:
    """os.environ with the throwaway environment first on PATH, pip offline, and none of this pytest's settings
    (an xdist worker's) reaching a pytest started there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return {**env, **OFFLINE_PIP, "FLWR_TELEMETRY_ENABLED": "0", "VIRTUAL_ENV": str(python.parent.parent),
            "PATH": f"{python.parent}:{env['PATH']}", **extra}
