#!/usr/bin/env bash
# The test suite in two lanes at once, then its wall time:
#   1. every test not marked `timing` or `ray`, on $TEST_WORKERS pytest-xdist workers (default 4: most of the
#      suite waits on sockets, subprocesses and sleeps, so more workers than the 2 cores still pays), at the
#      lowest CPU priority (nice 19);
#   2. beside it, the `timing` tests (elapsed times, rates, CPU shares, calibration for a claim) and the `ray`
#      ones (a Ray instance; a cluster test's `ray stop` ends every Ray on the machine), one after another, at
#      normal priority. The kernel gives a normal-priority task the cores whenever it wants them (a nice-19
#      task weighs 15 against its 1024), so these tests run as if alone: lane 1 only takes the CPU they leave
#      idle, which is most of it (they mostly wait: sleeps, timeouts, paced clients). Run beside lane 1 at
#      equal priority instead, the Ray tests took 8x their time and one hung (Ray's raylet starved).
# Lane 2's output comes as it runs, then lane 1's. Extra arguments go to both lanes (e.g. `-m "not slow"` for
# `make test-fast`, `-x`, a path). Both lanes always run; the exit status is the first failure's.
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
nice -n 19 "$PY" -m pytest -q -n "$WORKERS" --dist worksteal -m "$parallel" "${args[@]}" > "$logs/parallel" 2>&1 &
parallel_pid=$!
trap 'kill "$parallel_pid" 2>/dev/null' EXIT
"$PY" -m pytest -q -p no:xdist -m "$alone" "${args[@]}" 2>&1 | tee "$logs/alone"
alone_rc=${PIPESTATUS[0]}
mid=$(date +%s)
printf '\n(the timing and Ray tests are done; the parallel part so far, then as it goes on:)\n'
tail -n +1 -f --pid="$parallel_pid" "$logs/parallel"
wait "$parallel_pid"
parallel_rc=$?
trap - EXIT
end=$(date +%s)

# pytest exits 5 when a part selects no test (a path without any): not a failure
for part in parallel_rc alone_rc; do [ "${!part}" -eq 5 ] && printf -v "$part" 0; done

# Both parts' counts added up, from pytest's last line ("3 failed, 1690 passed, 7 skipped, … in 512.3s").
count() {  # $1: passed, skipped, failed or errors?
    for part in parallel alone; do
        grep -E " in [0-9.]+s( \(|$)" "$logs/$part" | tail -n 1 | grep -oE "[0-9]+ $1" || true
    done | awk '{s += $1} END {print s + 0}'
}
printf '\nsuite: %d passed, %d skipped, %d failed, %d errors in %d s (the timing and Ray tests one at a time: %d s; beside them the rest on %s workers at nice 19)\n' \
    "$(count passed)" "$(count skipped)" "$(count failed)" "$(count errors\?)" \
    $((end - start)) $((mid - start)) "$WORKERS"
rm -rf "$logs"
for rc in $parallel_rc $alone_rc; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
