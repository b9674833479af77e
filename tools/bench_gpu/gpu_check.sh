#!/usr/bin/env bash
# Runs the GPU backend's checks on a machine with a CUDA device, writing logs to OUT_DIR:
# the GPU tests, compute-sanitizer memcheck and racecheck on a small representative subset,
# and the benchmark. Usage: gpu_check.sh BIN_DIR OUT_DIR [benchmark options...]
set -uo pipefail
bin=${1:?usage: gpu_check.sh BIN_DIR OUT_DIR [benchmark options]}
out=${2:?usage: gpu_check.sh BIN_DIR OUT_DIR [benchmark options]}
shift 2
mkdir -p "$out"
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/device.txt"

for test in gpu_backend_test gpu_slicer_test; do
  echo "== $test"
  "$bin/$test" --gtest_brief=1 2>&1 | tee -a "$out/tests.log" | tail -25 || status=1
done
grep -q "FAILED" "$out/tests.log" && status=1

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
subset='*SlicesOfTheMaximumSize*:*CarryOverflow*:*take_all_goods_first_open_closed_delayed*:*take_winner_of_goods_every_single_half_open_delayed*'
if [[ -n $sanitizer ]]; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    "$sanitizer" --tool "$tool" --error-exitcode 3 "$bin/gpu_backend_test" \
        --gtest_brief=1 --gtest_filter="$subset" > "$out/sanitizer_$tool.log" 2>&1
    rc=$?
    tail -4 "$out/sanitizer_$tool.log"
    echo "compute-sanitizer $tool exit $rc"
    [[ $rc -ne 0 ]] && status=1
  done
else
  echo "compute-sanitizer not found"
fi

echo "== petdaq-bench-gpu $*"
"$bin/petdaq-bench-gpu" "$@" 2>&1 | tee "$out/bench.log" || status=1
exit $status
