#!/usr/bin/env bash
# The embedded demo (README, command 1): simulate an acquisition of a mouse-sized phantom on
# the default scanner, replay it over UDP on loopback into petdaqd in real time while the
# live rates print, record what petdaqd publishes, then process the same file offline and
# check that the daemon published exactly the same coincidences with nothing dropped; last,
# a QA report (plots and an HTML page) from the acquisition's histograms. petdaqd runs with
# its histograms on, and the live page (petdaq-web) stays up with the run's last rates and
# histograms until you stop the demo (Enter or Ctrl-C; at once when not run from a terminal).
#   tools/demo.sh [BUILD_DIR]
# environment: DEMO_MBQ, DEMO_SECONDS, DEMO_SPEED, DEMO_WEB_LISTEN (127.0.0.1:8080),
#   DEMO_UDP (petdaqd's UDP input, 127.0.0.1:5600), DEMO_ZMQ (its ZeroMQ endpoint,
#   tcp://127.0.0.1:5556)
set -euo pipefail

cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/bin
dir=$build/demo
mbq=${DEMO_MBQ:-2}
seconds=${DEMO_SECONDS:-5}
speed=${DEMO_SPEED:-1}
mkdir -p "$dir"

say() { printf '\n== %s\n' "$*"; }

acq=$dir/acq-${mbq}MBq-${seconds}s
if [[ ! -f $acq/frames.bin ]]; then
  say "simulating ${seconds} s at ${mbq} MBq (petdaq-sim)"
  "$bin/petdaq-sim" --config config/petdaq.yaml --output-dir "$acq" --duration-s "$seconds" \
    --activity-MBq "$mbq" --seed 1
fi
# The daemon's configuration: the defaults (config/petdaq.yaml) with this acquisition's
# tables, the demo's ports and the live histograms on.
config=$dir/demo.yaml
tables=$(realpath "$acq")
cat > "$config" <<EOF
calibration:
  position_lut: $tables/position_lut.npy
  energy_correction: $tables/energy_correction.npy
  time_offsets: $tables/time_offsets.npy
input:
  endpoints: ["${DEMO_UDP:-127.0.0.1:5600}"]
output:
  zmq:
    endpoint: "${DEMO_ZMQ:-tcp://127.0.0.1:5556}"
  histograms:
    enabled: true
EOF

daemon_pid=
record_pid=
web_pid=
cleanup() {
  [[ -n $web_pid ]] && kill "$web_pid" 2>/dev/null || true
  [[ -n $record_pid ]] && kill "$record_pid" 2>/dev/null || true
  [[ -n $daemon_pid ]] && kill "$daemon_pid" 2>/dev/null || true
}
trap cleanup EXIT

say "starting petdaqd (live rates once a second)"
"$bin/petdaqd" --config "$config" --print-rates 2> >(tee "$dir/petdaqd.log" >&2) &
daemon_pid=$!
for _ in $(seq 100); do
  grep -q ' ready' "$dir/petdaqd.log" 2>/dev/null && break
  kill -0 "$daemon_pid" 2>/dev/null || { echo "petdaqd failed to start" >&2; exit 1; }
  sleep 0.1
done

# The live view in a browser; the demo goes on without it if its port is taken.
if [[ -x $bin/petdaq-web ]]; then
  "$bin/petdaq-web" --config "$config" --listen "${DEMO_WEB_LISTEN:-127.0.0.1:8080}" \
    2> "$dir/petdaq-web.log" &
  web_pid=$!
  for _ in $(seq 50); do
    grep -q 'page at' "$dir/petdaq-web.log" && break
    kill -0 "$web_pid" 2>/dev/null || break
    sleep 0.1
  done
  if url=$(grep -o 'http://[^ ]*/' "$dir/petdaq-web.log"); then
    say "live view while it runs: open $url in a browser (petdaq-web)"
  else
    echo "petdaq-web did not start: $(cat "$dir/petdaq-web.log")" >&2
    web_pid=
  fi
fi

"$bin/petdaq-record" --config "$config" --output "$dir/live.plm" --quiet &
record_pid=$!
sleep 0.5

say "replaying $acq/frames.bin at ${speed}x real time (petdaq-replay)"
"$bin/petdaq-replay" --config "$config" --speed "$speed" --input "$acq/frames.bin"

sleep 1
say "stopping petdaqd (SIGTERM: drain, resolve the last slice, publish, exit)"
kill -TERM "$daemon_pid"
wait "$daemon_pid"
daemon_pid=
sleep 0.3
kill -INT "$record_pid"
wait "$record_pid" || true
record_pid=

say "processing the same file offline (petdaq-offline)"
"$bin/petdaq-offline" --config "$config" --input "$acq/frames.bin" --output "$dir/offline.plm" \
  --histograms "$dir/offline.pdh"

say "summary"
final=$(grep -o 'final counters: .*' "$dir/petdaqd.log" | tail -1)
counter() { grep -o "$1=[0-9]*" <<<"$final" | cut -d= -f2; }
drops=0
for c in rx.kernel_drops rx.ring_full stream.late stream.time_jump stream.pending_full \
         coinc.records_overflow out.zmq_refused; do
  v=$(counter "$c"); v=${v:-0}
  printf '  %-24s %s\n' "$c" "$v"
  drops=$((drops + v))
done
printf '  %-24s %s\n' rx.frames "$(counter rx.frames)" coinc.prompts "$(counter coinc.prompts)" \
  coinc.delayed "$(counter coinc.delayed)"
# Slices are cut by wall clock in the daemon and by data size offline, so compare each
# stream's records (kind, run, time_a, dt, crystals, energies, flags), not the batch framing.
# The daemon's run ids start from its start time (unique across restarts), offline's from 0:
# runs are compared by their order.
records() {
  "$bin/petdaq-dump" "$1" | grep -v '^#' |
    awk '{ if (!($2 in run)) run[$2] = n++; $2 = run[$2]; $3 = ""; print }' | sort -s -k1,1
}
if cmp -s <(records "$dir/live.plm") <(records "$dir/offline.plm"); then
  n=$(records "$dir/offline.plm" | wc -l)
  echo "  live and offline coincidences identical: $n records"
else
  echo "  live and offline coincidences DIFFER (see $dir/live.plm and $dir/offline.plm)"
  exit 1
fi
if ((drops)); then echo "  some frames or messages were dropped (counters above)"; exit 1; fi
echo "  zero loss"

say "QA report: flood maps, energy spectra, singles map, time differences, rates (petdaq-qa)"
if /usr/bin/python3 -c 'import numpy, matplotlib' 2>/dev/null; then
  tools/qa/petdaq-qa "$dir/offline.pdh" --output "$dir/qa"
  echo "  open $dir/qa/index.html in a browser"
else
  echo "  skipped: petdaq-qa needs python3-numpy and python3-matplotlib"
fi

if [[ -n $web_pid ]] && kill -0 "$web_pid" 2>/dev/null; then
  if [[ -t 0 ]]; then
    say "the live page stays up with the run's last rates and histograms: $url"
    read -r -p "  press Enter (or Ctrl-C) to stop the demo " _ || true
  else
    echo "  (not a terminal: petdaq-web stops with the demo)"
  fi
fi
