#!/usr/bin/env bash
# petdaq-offline on a large simulated acquisition next to the rate at which the same machine
# reads the file (docs/offline.md, "Large files"): the GPU backend and the CPU backend on 16
# threads, three runs each, alternating, with the page cache's read rate measured between
# every two runs (one `dd` stream reading the file from start to end, and six and ten
# streams reading a share each at once); each GPU run against the faster of each kind of
# read around it; each .plm compared with the first after the header; where the page cache
# can be dropped, the file's read rate from the disk and the GPU backend on it cold. Logs
# under OUT_DIR.
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
sync  # the simulation's writes reach the disk before the runs, not during them
input=$work/acq/frames.bin
size=$(stat -c %s "$input")

# The page cache's read rate just before and after each GPU run: one `dd` stream (the file
# read as a program reads it, from start to end), and six and ten streams reading a share
# each at once (what the machine's memory allows readers side by side); a run's references
# are the faster one-stream read and the fastest many-stream read around it (the machine's
# read rate moves by a factor of up to two within minutes).
read_rate() {  # streams -> M frames/s
  local n=$1 share=$(( size / $1 / 16777216 + 1 )) start end
  start=$(date +%s.%N)
  for ((k = 0; k < n; ++k)); do
    dd if="$input" of=/dev/null bs=16M skip=$((k * share)) count=$share 2>/dev/null &
  done
  wait
  end=$(date +%s.%N)
  awk -v b="$size" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", b / 16 / (e - s) / 1e6 }'
}
reads() {  # prints the three and leaves the one-stream rate in $one, the faster of the others in $best
  local a b
  one=$(read_rate 1)
  a=$(read_rate 6)
  b=$(read_rate 10)
  best=$(( a > b ? a : b ))
  echo "  page cache read: one stream $one, six streams $a, ten streams $b M frames/s"
}

echo "== read rate of $input ($size bytes), page cache"
for i in 1 2; do dd if="$input" of=/dev/null bs=16M 2>&1 | tail -1 | sed 's/^/  one stream: /'; done

run() {  # tag, then petdaq-offline's options
  local tag=$1
  shift
  "$bin/petdaq-offline" --config "$work/acq/petdaq.yaml" --input "$input" \
      --output "$work/$tag.plm" --quiet "$@" > "$out/offline_$tag.log" 2>&1 ||
    { status=1; tail -2 "$out/offline_$tag.log"; }
  grep -E 'wall time|waits|output writing|this thread  |device per slice|throughput' \
      "$out/offline_$tag.log" | sed "s/^/  $tag: /"
}
rate_of() { awk '/^throughput/ { print $2 }' "$out/offline_$1.log"; }
same_as_first() {  # tag
  cmp -s <(tail -c +65 "$work/gpu1.plm") <(tail -c +65 "$work/$1.plm") ||
    { echo "  $1 .plm DIFFERS"; status=1; }
  [[ $1 == gpu1 ]] || rm -f "$work/$1.plm"
}
reads
before=$best
before_one=$one
for i in 1 2 3; do
  run gpu$i --backend gpu
  same_as_first gpu$i
  reads
  awk -v r="$(rate_of gpu$i)" -v a="$before" -v b="$best" -v c="$before_one" -v d="$one" 'BEGIN {
    ref = a > b ? a : b
    one = c > d ? c : d
    printf "  gpu%d: %.0f M frames/s = %.2f of the faster one-stream read around it (%d), %.2f of the fastest many-stream read (%d)\n", '"$i"', r, r / one, one, r / ref, ref }'
  run cpu16_$i --backend cpu --threads 16
  same_as_first cpu16_$i
  reads
  before=$best
  before_one=$one
done

# From the disk: where this machine lets the page cache be dropped (root), the file read
# cold with one stream, then the GPU backend on it cold.
drop() { sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; }
if drop; then
  echo "== from the disk (page cache dropped before each)"
  dd if="$input" of=/dev/null bs=16M 2>&1 | tail -1 | sed 's/^/  one stream: /'
  drop
  run gpu_cold --backend gpu
  same_as_first gpu_cold
else
  echo "== from the disk: not measured (the page cache cannot be dropped here)"
fi
echo "  every .plm identical after the header ($(stat -c %s "$work/gpu1.plm") bytes) unless said above"
rm -f "$work/gpu1.plm"
exit $status
