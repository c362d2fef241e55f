#!/usr/bin/env bash
# The test suite in three lanes that run at once, then its wall time:
#   1. every test that does not measure time or start Ray, on $TEST_WORKERS pytest-xdist workers (default 3:
#      much of the suite waits on sockets, subprocesses and sleeps, so more workers than the 2 cores pays; with
#      the other two lanes beside them, 3 finished sooner than 4, 696 s against 713 s, one run each), at the
#      lowest CPU priority (nice 19), whole modules at a time, the longest first (tests/conftest.py);
#   2. one at a time at normal priority, the `timing` tests (elapsed times, rates, CPU shares): they mostly
#      wait, and whenever they want a core the kernel gives it to them, so their figures are a quiet
#      machine's while the other lanes use the rest;
#   3. one at a time at nice 19, the `ray` tests: one Ray at a time (a cluster test's `ray stop` ends every
#      Ray on the machine), and at the parallel lane's priority, since beside a Ray test at normal priority
#      the nice-19 lane got no CPU for tens of seconds and its 2 s timeouts failed. The `serial_lane` tests
#      (long, mostly waiting on subprocesses) run here too: this lane ended minutes before the parallel one.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORKERS=${TEST_WORKERS:-3}
export FLWR_TELEMETRY_ENABLED=0
# The suite starts some 400 Python processes: without cached bytecode (__pycache__, ignored by git) each one
# compiles this project's modules again, and each pytest process rewrites every test file's asserts again.
unset PYTHONDONTWRITEBYTECODE

ray="ray or serial_lane"
parallel="not (timing or $ray)"; timing="timing and not ($ray)"
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "-m" ]; then
        parallel="($2) and ($parallel)"; timing="($2) and ($timing)"; ray="($2) and ($ray)"; shift 2
    else args+=("$1"); shift; fi
done

start=$(date +%s)
logs=$(mktemp -d)
nice -n 19 "$PY" -m pytest -q -n "$WORKERS" --dist loadscope --no-loadscope-reorder -m "$parallel" "${args[@]}" >"$logs/parallel" 2>&1 &
parallel_pid=$!
( nice -n 19 "$PY" -m pytest -q -p no:xdist -m "$ray" "${args[@]}" >"$logs/ray" 2>&1; echo $? >"$logs/ray.rc"
  date +%s >"$logs/ray.end" ) &
ray_pid=$!
"$PY" -m pytest -q -p no:xdist -m "$timing" "${args[@]}" 2>&1 | tee "$logs/timing"
timing_rc=${PIPESTATUS[0]}
timing_end=$(date +%s)
wait "$ray_pid"
cat "$logs/ray"
ray_rc=$(cat "$logs/ray.rc")
tail -n +1 --pid="$parallel_pid" -f "$logs/parallel"  # what it printed so far, then as it goes, to its end
wait "$parallel_pid"
parallel_rc=$?
end=$(date +%s)

# pytest exits 5 when a part selects no test (a path without any): not a failure
for part in parallel_rc timing_rc ray_rc; do [ "${!part}" -eq 5 ] && printf -v "$part" 0; done

# The parts' counts added up, from pytest's last line ("3 failed, 1690 passed, 7 skipped, … in 512.3s").
count() {  # $1: passed, skipped, failed or errors?
    for part in parallel timing ray; do
        grep -E " in [0-9.]+s( \(|$)" "$logs/$part" | tail -n 1 | grep -oE "[0-9]+ $1" || true
    done | awk '{s += $1} END {print s + 0}'
}
printf '\nsuite: %d passed, %d skipped, %d failed, %d errors in %d s (%s workers; beside them the timing tests took %d s, the Ray tests %d s)\n' \
    "$(count passed)" "$(count skipped)" "$(count failed)" "$(count errors\?)" \
    $((end - start)) "$WORKERS" $((timing_end - start)) $(($(cat "$logs/ray.end") - start))
rm -rf "$logs"
for rc in $parallel_rc $timing_rc $ray_rc; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
