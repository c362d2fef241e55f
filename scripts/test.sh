#!/usr/bin/env bash
# The test suite in two parts, then its wall time:
#   1. every test that does not measure time, on $TEST_WORKERS pytest-xdist workers (default 4: most of the
#      suite waits on sockets, subprocesses and sleeps, so more workers than the 2 cores still pays);
#   2. the `timing` tests (elapsed times, rates, CPU shares) and the `alone` ones (a Ray instance, `ray stop`)
#      alone, one after another, on a quiet machine.
# Extra arguments go to both parts (e.g. `-m "not slow"` for `make test-fast`, `-x`, a path).
# Both parts always run; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${TEST_WORKERS:-4}
export FLWR_TELEMETRY_ENABLED=0

marks="not (timing or alone)"; timing="timing or alone"
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "-m" ]; then marks="($2) and not (timing or alone)"; timing="($2) and (timing or alone)"; shift 2
    else args+=("$1"); shift; fi
done

start=$(date +%s)
logs=$(mktemp -d)
"$PY" -m pytest -q -n "$WORKERS" --dist worksteal -m "$marks" "${args[@]}" 2>&1 | tee "$logs/parallel"
parallel=${PIPESTATUS[0]}
mid=$(date +%s)
"$PY" -m pytest -q -p no:xdist -m "$timing" "${args[@]}" 2>&1 | tee "$logs/alone"
alone=${PIPESTATUS[0]}
end=$(date +%s)
[ $alone -eq 5 ] && alone=0  # no timing test selected (a path without any): not a failure
[ $parallel -eq 5 ] && parallel=0

# Both parts' counts added up, from pytest's last line ("3 failed, 1690 passed, 7 skipped, … in 512.3s").
count() {  # $1: passed, skipped, failed or errors?
    for part in parallel alone; do
        grep -E " in [0-9.]+s( \(|$)" "$logs/$part" | tail -n 1 | grep -oE "[0-9]+ $1" || true
    done | awk '{s += $1} END {print s + 0}'
}
printf '\nsuite: %d passed, %d skipped, %d failed, %d errors in %d s (%d s on %s workers, then %d s for the timing tests alone)\n' \
    "$(count passed)" "$(count skipped)" "$(count failed)" "$(count errors\?)" \
    $((end - start)) $((mid - start)) "$WORKERS" $((end - mid))
rm -rf "$logs"
[ $parallel -ne 0 ] && exit $parallel
exit $alone
