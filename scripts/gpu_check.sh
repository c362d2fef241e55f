#!/usr/bin/env bash
# Every CUDA path on a GPU machine, in about 8 minutes, into one report (for a lent GPU: run it whenever one is):
#   1. the GPU tests: devices, mixed CPU/GPU runs, gloo and NCCL all-reduce (tests that need two GPUs skip on one);
#   2. two clients sharing one GPU (×1 and ×2, ASGD, 40 s): the emulation fidelity table of the run's report;
#   3. scenarios/cifar10_resnet18.yaml, 30 s per entry, on generated CIFAR-10-format data (no download needed).
#
#   bash scripts/gpu_check.sh [REPORT]      # default report: runs/gpu-check/report.md ($OUT/gpu_check.md if $OUT is set)
#   GPU_CHECK_DEVICE=cpu bash scripts/gpu_check.sh   # the same steps on the CPU: checks the script, not CUDA
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEVICE=${GPU_CHECK_DEVICE:-cuda:0}
work=$(mktemp -d)
report=${1:-${OUT:+$OUT/gpu_check.md}}
report=${report:-runs/gpu-check/report.md}
mkdir -p "$(dirname "$report")"
export FLWR_TELEMETRY_ENABLED=0 EDGESYNC_CACHE="$work/cache"
started=$(date +%s)
status=0

say() { printf '%s\n' "$@" >>"$report"; }
step() {  # step TITLE SECONDS COMMAND...: run it with a time limit, its output's tail into the report
    local title=$1 limit=$2; shift 2
    local t0=$(date +%s) rc
    echo "== $title" >&2
    timeout --kill-after=10 "$limit" "$@" >"$work/out" 2>&1; rc=$?
    [ "$rc" -ne 0 ] && status=1
    say "## $title" "" "\`$*\` — exit $rc after $(( $(date +%s) - t0 )) s (limit $limit s)" "" '```'
    tail -n 25 "$work/out" >>"$report"
    say '```' ""
}

: >"$report"
say "# GPU check" "" "$(date -u +%Y-%m-%dT%H:%M:%SZ), device \`$DEVICE\`, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')" ""
say '```' "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | head -n 5 || true)" '```' ""
say "torch: $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count(), "NCCL", torch.distributed.is_nccl_available())' 2>&1)" ""

step "GPU tests" 200 "$PY" -m pytest -q -p no:xdist -rs tests/runtime/test_gpu.py tests/runtime/test_allreduce_live.py \
    -k "cuda or gpu or nccl or mixed or device"

shared="$work/shared-gpu"
step "Two clients sharing one GPU" 150 "$PY" -m edgesync.cli run scenarios/quickstart.yaml --out "$shared" -q \
    --set "clients=[{profile: x1, device: $DEVICE}, {profile: x2, device: $DEVICE}]" \
    --set "algorithms=[{name: asgd, lr: 0.05, batch_size: 32}]" --set stop.time_budget_s=40 \
    --set stop.stop_at_target=false --set eval.every_s=10
if [ -f "$shared/report.md" ]; then
    say "### Emulation fidelity, two clients on one GPU" "" "$("$PY" scripts/gpu_check.py section "$shared" "Emulation fidelity")" ""
fi

data=$("$PY" scripts/gpu_check.py cifar "$work/cifar")
resnet="$work/cifar10-resnet18"
small=()  # on a CPU (a dry run of this script) ResNet-18 at batch 128 takes seconds a step: two clients, batch 8
[ "${DEVICE%%:*}" = cpu ] && small=(--set "clients={count: 2, device: cpu}" --set algorithms.0.batch_size=8
    --set algorithms.1.batch_size=8 --set algorithms.2.batch_size=8)
step "ResNet-18 on generated CIFAR-10 data" 240 env EDGESYNC_DATA="$data" "$PY" -m edgesync.cli run \
    scenarios/cifar10_resnet18.yaml --out "$resnet" -q --set "clients={count: 4, device: $DEVICE}" \
    --set stop.time_budget_s=30 --set eval.every_s=10 --set eval.test_size=500 "${small[@]}"
if [ -f "$resnet/report.md" ]; then
    say "### Clients of the ResNet-18 run" "" "$("$PY" scripts/gpu_check.py section "$resnet" "Clients")" ""
fi

say "Total: $(( $(date +%s) - started )) s; $([ "$status" -eq 0 ] && echo 'every step passed' || echo 'A STEP FAILED (see its exit code above)')."
rm -rf "$work"
echo "report: $report" >&2
exit "$status"
