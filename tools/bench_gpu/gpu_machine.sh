#!/usr/bin/env bash
# Everything petdaq measures on a GPU machine, in one go, logs under OUT_DIR:
#   1. the GPU backend's tests, compute-sanitizer and benchmark (gpu_check.sh);
#   2. a simulated acquisition processed offline by both backends: the two .plm files must
#      hold the same messages byte for byte (the file headers' creation times aside);
#   3. the CPU figures of the same machine (convert stage, engine, offline path);
#   4. petdaqd end to end over UDP loopback with the GPU backend (petdaqd_bench).
# Usage: gpu_machine.sh BIN_DIR OUT_DIR [FRAMES]   (binaries built with -DPETDAQ_PORTABLE=ON)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:?usage: gpu_machine.sh BIN_DIR OUT_DIR [FRAMES]}
out=${2:?usage: gpu_machine.sh BIN_DIR OUT_DIR [FRAMES]}
frames=${3:-50000000}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

echo "== 1. GPU backend: tests, compute-sanitizer, benchmark"
"$here/gpu_check.sh" "$bin" "$out/gpu" --slices 1048576,4194304,16777216,67108864 | tail -16 || status=1

echo "== 2. offline, cpu and gpu, on a simulated acquisition of $frames frames"
"$bin/petdaq-sim" --config "$root/config/petdaq.yaml" --output-dir "$work/acq" --frames "$frames" \
    --activity-MBq 20 --seed 1 2>&1 | tail -2 | tee "$out/sim.log"
for b in cpu gpu; do
  "$bin/petdaq-offline" --config "$work/acq/petdaq.yaml" --input "$work/acq/frames.bin" \
      --output "$work/$b.plm" --backend "$b" > "$out/offline_$b.log" 2>&1 || status=1
  grep -E 'backend|frames  |prompts|delayed  |wall time|stages|waits|throughput' "$out/offline_$b.log" | sed "s/^/  $b: /"
done
if cmp -s <(tail -c +65 "$work/cpu.plm") <(tail -c +65 "$work/gpu.plm"); then
  echo "  cpu and gpu .plm identical after the header ($(stat -c %s "$work/cpu.plm") bytes)"
else
  echo "  cpu and gpu .plm DIFFER"; status=1
fi

echo "== 3. CPU stages on this machine"
"$bin/petdaq-bench-convert" --input "$work/acq/frames.bin" --config "$work/acq/petdaq.yaml" 2>&1 \
    | tee "$out/bench_convert.log" | tail -4
"$bin/petdaq-bench-engine" 2>&1 | tee "$out/bench_engine.log" | tail -4

echo "== 4. petdaqd over UDP loopback, GPU backend"
PETDAQD="$bin/petdaqd" "$bin/petdaqd_bench" --backend gpu --start-mfps 20 --max-mfps 640 \
    --duration-s 2 2>&1 | tee "$out/daemon_gpu.log" | tail -12 || status=1
exit $status
