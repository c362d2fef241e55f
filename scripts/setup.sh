#!/usr/bin/env bash
# Set up EdgeSync in this checkout: a virtual environment in .venv with the pinned dependencies,
# the package itself and the example extension examples/edgesync-feddyn (both editable), and the
# Fashion-MNIST files. Safe to re-run: it only does what is missing, and returns in about a second
# when nothing is.
#
# - An environment whose python already imports torch (a lab's GPU build) keeps it: the venv is
#   created with --system-site-packages and torch is not reinstalled.
# - Data: $EDGESYNC_DATA wins; else Debian's dataset-fashion-mnist (installed with apt-get when
#   running as root); else torchvision downloads it into data/fashion-mnist.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null; then echo "setup: $PY not found; install Python >= 3.10" >&2; exit 1; fi
"$PY" - <<'PYCHECK' || { echo "setup: Python >= 3.10 is needed ($("$PY" --version 2>&1) found)" >&2; exit 1; }
import sys; sys.exit(sys.version_info < (3, 10))
PYCHECK

# 1. The virtual environment.
if [ ! -x .venv/bin/python ]; then
    flags=()
    if "$PY" -c "import torch, torchvision" 2>/dev/null; then
        say "this python already has torch $("$PY" -c 'import torch; print(torch.__version__)'): keeping it"
        flags=(--system-site-packages)
    fi
    if ! "$PY" -m venv "${flags[@]}" .venv 2>/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            say "installing python3-venv"
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
            "$PY" -m venv "${flags[@]}" .venv
        else
            echo "setup: cannot create a virtual environment; install your distribution's python3-venv" >&2; exit 1
        fi
    fi
fi
VPY=.venv/bin/python

# 2. Dependencies, only when the pins changed since the last successful set-up.
stamp=.venv/.edgesync-setup
log=.venv/setup.log
pip_install() {  # quiet unless it fails; then the end of pip's log says why
    if ! "$VPY" -m pip install --disable-pip-version-check "$@" >>"$log" 2>&1; then
        tail -n 30 "$log" >&2; echo "setup: pip install $* failed (full log: $log)" >&2; exit 1
    fi
}
example=examples/edgesync-feddyn  # an extension from outside the package: the suite runs it in every runtime
# setup.py and the C files: a changed extension is built again (edgesync/_buffer_checks.c, _model_passes.c)
want=$(cat requirements.txt requirements-torch.txt pyproject.toml setup.py edgesync/_*.c \
       "$example/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if ! "$VPY" -c "import torch, torchvision" 2>/dev/null; then
        say "installing torch and torchvision ($(tr '\n' ' ' < requirements-torch.txt))"
        pip_install -r requirements-torch.txt
    fi
    say "installing pinned dependencies"
    pip_install -r requirements.txt
    pip_install --no-deps -e .
    pip_install --no-deps -e "$example"
    echo "$want" > "$stamp"
fi

# 3. Fashion-MNIST.
if [ -z "${EDGESYNC_DATA:-}" ] && [ ! -d /usr/share/datasets/fashion-mnist ] \
        && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's dataset-fashion-mnist"
    (apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null; }) \
        || say "apt-get could not install dataset-fashion-mnist; trying torchvision's download"
fi
"$VPY" -m edgesync.data --ensure >/dev/null
say "ready: $("$VPY" -m edgesync.data | head -n 1)"
