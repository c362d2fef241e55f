#!/usr/bin/env bash
# The test suite in three parts, the first two at once, then its wall time:
#   1. every test that does not measure time, on $TEST_WORKERS pytest-xdist workers (default 4: much of the
#      suite waits on sockets, subprocesses and sleeps, so more workers than the 2 cores still pays), at the
#      lowest CPU priority (nice 19), and beside it, one at a time at normal priority, the `timing` tests
#      (elapsed times, rates, CPU shares): they mostly wait, and whenever they want a core the kernel gives
#      it to them, so their figures are a quiet machine's while the parallel part uses the rest;
#   2. then, alone, the `ray` tests: a Ray instance's workers and raylet starve beside the parallel part, and
#      beside a Ray test on both cores the nice-19 parallel part got no CPU for tens of seconds, so that its
#      2 s timeouts failed; a cluster test's `ray stop` ends every Ray on the machine.
# Extra arguments go to every part (e.g. `-m "not slow"` for `make test-fast`, `-x`, a path).
# Every part always runs; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${TEST_WORKERS:-4}
export FLWR_TELEMETRY_ENABLED=0

alone="ray"
parallel="not (timing or $alone)"; timing="timing and not ($alone)"
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "-m" ]; then
        parallel="($2) and ($parallel)"; timing="($2) and ($timing)"; alone="($2) and ($alone)"; shift 2
    else args+=("$1"); shift; fi
done

start=$(date +%s)
logs=$(mktemp -d)
nice -n 19 "$PY" -m pytest -q -n "$WORKERS" --dist worksteal -m "$parallel" "${args[@]}" >"$logs/parallel" 2>&1 &
parallel_pid=$!
"$PY" -m pytest -q -p no:xdist -m "$timing" "${args[@]}" 2>&1 | tee "$logs/timing"
timing_rc=${PIPESTATUS[0]}
timing_end=$(date +%s)
tail -n +1 --pid="$parallel_pid" -f "$logs/parallel"  # what it printed so far, then as it goes, to its end
wait "$parallel_pid"
parallel_rc=$?
mid=$(date +%s)
"$PY" -m pytest -q -p no:xdist -m "$alone" "${args[@]}" 2>&1 | tee "$logs/alone"
alone_rc=${PIPESTATUS[0]}
end=$(date +%s)

# pytest exits 5 when a part selects no test (a path without any): not a failure
for part in parallel_rc timing_rc alone_rc; do [ "${!part}" -eq 5 ] && printf -v "$part" 0; done

# The parts' counts added up, from pytest's last line ("3 failed, 1690 passed, 7 skipped, … in 512.3s").
count() {  # $1: passed, skipped, failed or errors?
    for part in parallel timing alone; do
        grep -E " in [0-9.]+s( \(|$)" "$logs/$part" | tail -n 1 | grep -oE "[0-9]+ $1" || true
    done | awk '{s += $1} END {print s + 0}'
}
printf '\nsuite: %d passed, %d skipped, %d failed, %d errors in %d s (%d s on %s workers beside the timing tests, which took %d s; then %d s for the Ray tests alone)\n' \
    "$(count passed)" "$(count skipped)" "$(count failed)" "$(count errors\?)" \
    $((end - start)) $((mid - start)) "$WORKERS" $((timing_end - start)) $((end - mid))
rm -rf "$logs"
for rc in $parallel_rc $timing_rc $alone_rc; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
