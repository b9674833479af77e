#!/usr/bin/env bash
# petdaq-offline on a large simulated acquisition next to the rate at which the same machine
# reads the file (docs/offline.md, "Large files"): the file's read rate with one `dd` stream
# and with six at once (three times), then the GPU backend and the CPU backend on 16 threads
# (three runs each, alternating), each .plm compared with the first after the header; where
# the page cache can be dropped, the file's read rate from the disk and the GPU backend on it
# cold. Logs under OUT_DIR.
# Usage: offline_rate.sh BIN_DIR OUT_DIR [FRAMES] [WORK_DIR]   (FRAMES: 400000000)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:?usage: offline_rate.sh BIN_DIR OUT_DIR [FRAMES] [WORK_DIR]}
out=${2:?usage: offline_rate.sh BIN_DIR OUT_DIR [FRAMES] [WORK_DIR]}
frames=${3:-400000000}
work=${4:-$(mktemp -d)}
mkdir -p "$out" "$work"
status=0

"$bin/petdaq-sim" --config "$root/config/petdaq.yaml" --output-dir "$work/acq" --frames "$frames" \
    --activity-MBq 20 --seed 1 --quiet 2>&1 | tail -1 | tee "$out/sim.log"
rm -f "$work/acq/truth.bin"  # not needed here, and twice the frames' size
input=$work/acq/frames.bin
size=$(stat -c %s "$input")

echo "== read rate of $input ($size bytes), page cache"
for i in 1 2; do dd if="$input" of=/dev/null bs=16M 2>&1 | tail -1; done
part=$(( size / 6 / 16777216 + 1 ))
for i in 1 2 3; do
  start=$(date +%s.%N)
  for k in 0 1 2 3 4 5; do
    dd if="$input" of=/dev/null bs=16M skip=$((k * part)) count=$part 2>/dev/null &
  done
  wait
  end=$(date +%s.%N)
  awk -v b="$size" -v s="$start" -v e="$end" \
    'BEGIN { printf "six streams: %.2f GB/s = %.0f M frames/s\n", b / (e - s) / 1e9, b / 16 / (e - s) / 1e6 }'
done

run() {  # tag, then petdaq-offline's options
  local tag=$1
  shift
  "$bin/petdaq-offline" --config "$work/acq/petdaq.yaml" --input "$input" \
      --output "$work/$tag.plm" --quiet "$@" > "$out/offline_$tag.log" 2>&1 ||
    { status=1; tail -2 "$out/offline_$tag.log"; }
  grep -E 'wall time|waits|output writing|device per slice|throughput' "$out/offline_$tag.log" | sed "s/^/  $tag: /"
}
run gpu --backend gpu
run cpu16 --backend cpu --threads 16
for i in 2 3; do
  run gpu$i --backend gpu
  cmp -s <(tail -c +65 "$work/gpu.plm") <(tail -c +65 "$work/gpu$i.plm") ||
    { echo "  gpu$i .plm DIFFERS"; status=1; }
  rm -f "$work/gpu$i.plm"
  run cpu16_$i --backend cpu --threads 16
  cmp -s <(tail -c +65 "$work/gpu.plm") <(tail -c +65 "$work/cpu16_$i.plm") ||
    { echo "  cpu16_$i .plm DIFFERS"; status=1; }
  rm -f "$work/cpu16_$i.plm"
done

# From the disk: where this machine lets the page cache be dropped (root), the file read
# cold with one stream, then the GPU backend on it cold.
drop() { sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; }
if drop; then
  echo "== from the disk (page cache dropped before each)"
  dd if="$input" of=/dev/null bs=16M 2>&1 | tail -1 | sed 's/^/  one stream: /'
  drop
  run gpu_cold --backend gpu
  cmp -s <(tail -c +65 "$work/gpu.plm") <(tail -c +65 "$work/gpu_cold.plm") ||
    { echo "  gpu_cold .plm DIFFERS"; status=1; }
  rm -f "$work/gpu_cold.plm"
else
  echo "== from the disk: not measured (the page cache cannot be dropped here)"
fi
if cmp -s <(tail -c +65 "$work/gpu.plm") <(tail -c +65 "$work/cpu16.plm"); then
  echo "  gpu and cpu .plm identical after the header ($(stat -c %s "$work/gpu.plm") bytes)"
else
  echo "  gpu and cpu .plm DIFFER"
  status=1
fi
rm -f "$work/gpu.plm" "$work/cpu16.plm"
exit $status
