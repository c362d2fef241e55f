#!/usr/bin/env bash
# One peer's own virtual environment (issue 38), never EdgeSync's: benchmarks/peers/.venvs/NAME.
#
#   bash benchmarks/peers/setup.sh NAME        # NAME: a requirements-NAME.txt beside this script
#
# Installs torch at EdgeSync's pin (constraints.txt: a peer that needs another torch fails to resolve here
# instead of downloading gigabytes; docs/peers.md then gives its row with the error), then the peer's pinned
# requirements. Idempotent: an environment whose requirements are unchanged is kept.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name="${1:?usage: setup.sh NAME (one of: $(cd "$here" && ls requirements-*.txt | sed 's/requirements-\(.*\)\.txt/\1/' | tr '\n' ' '))}"
req="$here/requirements-$name.txt"
[ -f "$req" ] || { echo "setup.sh: no $req (peers: $(cd "$here" && ls requirements-*.txt | tr '\n' ' '))" >&2; exit 2; }
venv="$here/.venvs/$name"
stamp="$venv/.requirements"
if [ -f "$stamp" ] && cmp -s "$stamp" <(cat "$here/constraints.txt" "$req"); then
  echo "setup.sh: $venv is up to date"; exit 0
fi
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -c "$here/constraints.txt" torch numpy
"$venv/bin/pip" install -q -c "$here/constraints.txt" -r "$req"
cat "$here/constraints.txt" "$req" > "$stamp"
echo "setup.sh: $name ready in $venv"
