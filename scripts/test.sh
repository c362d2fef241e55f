#!/usr/bin/env bash
# The test suite in two parts, then its wall time:
#   1. every test that does not measure time, on $TEST_WORKERS pytest-xdist workers (default 4: most of the
#      suite waits on sockets, subprocesses and sleeps, so more workers than the 2 cores still pays);
#   2. the `timing` tests (elapsed times, rates, CPU shares) alone, one after another, on a quiet machine.
# Extra arguments go to both parts (e.g. `-m "not slow"` for `make test-fast`, `-x`, a path).
# Both parts always run; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${TEST_WORKERS:-4}
export FLWR_TELEMETRY_ENABLED=0

marks="not timing"; timing="timing"
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "-m" ]; then marks="($2) and not timing"; timing="($2) and timing"; shift 2
    else args+=("$1"); shift; fi
done

start=$(date +%s)
"$PY" -m pytest -q -n "$WORKERS" --dist worksteal -m "$marks" "${args[@]}"
parallel=$?
mid=$(date +%s)
"$PY" -m pytest -q -p no:xdist -m "$timing" "${args[@]}"
alone=$?
end=$(date +%s)
[ $alone -eq 5 ] && alone=0  # no timing test selected (a path without any): not a failure
[ $parallel -eq 5 ] && parallel=0
printf '\nsuite: %d s in all: %d s on %s workers, then %d s for the timing tests alone\n' \
    $((end - start)) $((mid - start)) "$WORKERS" $((end - mid))
[ $parallel -ne 0 ] && exit $parallel
exit $alone
