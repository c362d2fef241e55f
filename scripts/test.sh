#!/usr/bin/env bash
# The test suite in two parts, then its wall time:
#   1. every test not marked `timing` or `ray`, on $TEST_WORKERS pytest-xdist workers (default 4: most of the
#      suite waits on sockets, subprocesses and sleeps, so more workers than the 2 cores still pays);
#   2. the `timing` tests (elapsed times, rates, CPU shares, calibration for a claim) and the `ray` ones (a Ray
#      instance; a cluster test's `ray stop` ends every Ray on the machine), one after another, alone. (Run
#      beside the parallel part, the Ray tests took 8x their time and one hung: Ray's workers and raylet
#      starve on a loaded host.)
# Extra arguments go to both parts (e.g. `-m "not slow"` for `make test-fast`, `-x`, a path).
# Both parts always run; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${TEST_WORKERS:-4}
export FLWR_TELEMETRY_ENABLED=0

parallel="not (timing or ray)"; alone="timing or ray"
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "-m" ]; then parallel="($2) and not (timing or ray)"; alone="($2) and (timing or ray)"; shift 2
    else args+=("$1"); shift; fi
done

start=$(date +%s)
logs=$(mktemp -d)
"$PY" -m pytest -q -n "$WORKERS" --dist worksteal -m "$parallel" "${args[@]}" 2>&1 | tee "$logs/parallel"
parallel_rc=${PIPESTATUS[0]}
mid=$(date +%s)
"$PY" -m pytest -q -p no:xdist -m "$alone" "${args[@]}" 2>&1 | tee "$logs/alone"
alone_rc=${PIPESTATUS[0]}
end=$(date +%s)

# pytest exits 5 when a part selects no test (a path without any): not a failure
for part in parallel_rc alone_rc; do [ "${!part}" -eq 5 ] && printf -v "$part" 0; done

# Both parts' counts added up, from pytest's last line ("3 failed, 1690 passed, 7 skipped, … in 512.3s").
count() {  # $1: passed, skipped, failed or errors?
    for part in parallel alone; do
        grep -E " in [0-9.]+s( \(|$)" "$logs/$part" | tail -n 1 | grep -oE "[0-9]+ $1" || true
    done | awk '{s += $1} END {print s + 0}'
}
printf '\nsuite: %d passed, %d skipped, %d failed, %d errors in %d s (%d s on %s workers, then %d s for the timing and Ray tests alone)\n' \
    "$(count passed)" "$(count skipped)" "$(count failed)" "$(count errors\?)" \
    $((end - start)) $((mid - start)) "$WORKERS" $((end - mid))
rm -rf "$logs"
for rc in $parallel_rc $alone_rc; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
