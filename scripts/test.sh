#!/usr/bin/env bash
# The test suite in two stages, then its wall time:
#   1. at once: every test not marked `timing` or `ray`, on $TEST_WORKERS pytest-xdist workers (default 4:
#      most of the suite waits on sockets, subprocesses and sleeps, so more workers than the 2 cores still
#      pays), and beside them, in one pytest process of their own, the `ray` tests one after another (one Ray
#      instance at a time on the machine; a cluster test's `ray stop` ends every Ray, so none of the workers
#      start one);
#   2. the `timing` tests (elapsed times, rates, CPU shares, calibration for a claim) one after another, alone
#      on a quiet machine.
# Extra arguments go to every part (e.g. `-m "not slow"` for `make test-fast`, `-x`, a path).
# Every part always runs; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${TEST_WORKERS:-4}
export FLWR_TELEMETRY_ENABLED=0

parallel="not (timing or ray)"; ray="ray and not timing"; timing="timing"
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "-m" ]; then
        parallel="($2) and not (timing or ray)"; ray="($2) and ray and not timing"; timing="($2) and timing"; shift 2
    else args+=("$1"); shift; fi
done

start=$(date +%s)
logs=$(mktemp -d)
"$PY" -m pytest -q -p no:xdist -m "$ray" "${args[@]}" > "$logs/ray" 2>&1 &
ray_pid=$!
"$PY" -m pytest -q -n "$WORKERS" --dist worksteal -m "$parallel" "${args[@]}" 2>&1 | tee "$logs/parallel"
parallel_rc=${PIPESTATUS[0]}
parallel_end=$(date +%s)
wait $ray_pid
ray_rc=$?
ray_end=$(date +%s)
echo; echo "--- the ray tests, run beside the parallel part:"; cat "$logs/ray"
mid=$(date +%s)
"$PY" -m pytest -q -p no:xdist -m "$timing" "${args[@]}" 2>&1 | tee "$logs/timing"
timing_rc=${PIPESTATUS[0]}
end=$(date +%s)

# pytest exits 5 when a part selects no test (a path without any): not a failure
for part in parallel_rc ray_rc timing_rc; do [ "${!part}" -eq 5 ] && printf -v "$part" 0; done

# Every part's counts added up, from pytest's last line ("3 failed, 1690 passed, 7 skipped, … in 512.3s").
count() {  # $1: passed, skipped, failed or errors?
    for part in parallel ray timing; do
        grep -E " in [0-9.]+s( \(|$)" "$logs/$part" | tail -n 1 | grep -oE "[0-9]+ $1" || true
    done | awk '{s += $1} END {print s + 0}'
}
printf '\nsuite: %d passed, %d skipped, %d failed, %d errors in %d s (%d s on %s workers, the ray tests beside them ending at %d s; then %d s for the timing tests alone)\n' \
    "$(count passed)" "$(count skipped)" "$(count failed)" "$(count errors\?)" \
    $((end - start)) $((parallel_end - start)) "$WORKERS" $((ray_end - start)) $((end - mid))
rm -rf "$logs"
for rc in $parallel_rc $ray_rc $timing_rc; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
