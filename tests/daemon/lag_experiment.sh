#!/usr/bin/env bash
# A lagging board costs only itself (DESIGN section 6, "Lag"; docs/daemon.md): a simulated
# acquisition replayed over UDP with every board in real time but one at --speed 0.6, into
# petdaqd with a small ring; the prompts between on-time boards that petdaqd published are
# compared with petdaq-offline's on the whole file.
#   tests/daemon/lag_experiment.sh [BUILD_DIR] [WORK_DIR]
# environment: LAG_SECONDS (4), LAG_MBQ (5), LAG_BDM (5), LAG_SPEED (0.6), LAG_EXTRA (more
# keys of the input section as YAML, e.g. "{shed_high_fraction: 1.0}")
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}; bin=$(realpath "$build/bin")
work=${2:-$build/lag_experiment}; mkdir -p "$work"; work=$(realpath "$work")
seconds=${LAG_SECONDS:-4}; mbq=${LAG_MBQ:-5}; slow=${LAG_BDM:-5}; speed=${LAG_SPEED:-0.6}
acq=$work/acq
[[ -f $acq/frames.bin ]] || "$bin/petdaq-sim" -q --config config/petdaq.yaml --output-dir "$acq" \
  --duration-s "$seconds" --activity-MBq "$mbq" --seed 3
/usr/bin/python3 - "$acq/frames.bin" "$slow" "$work" <<'PY'
import sys, numpy as np
f = np.fromfile(sys.argv[1], dtype=np.uint8).reshape(-1, 16)
slow = f[:, 1] == int(sys.argv[2])
f[slow].tofile(sys.argv[3] + "/slow.bin"); f[~slow].tofile(sys.argv[3] + "/others.bin")
PY
udp=127.0.0.1:$((20000 + RANDOM % 20000)); zmq=ipc://$work/pub.sock
/usr/bin/python3 - "$acq/petdaq.yaml" "$work/run.yaml" "$udp" "$zmq" "${LAG_EXTRA:-}" <<'PY'
import sys, yaml
src, dst, udp, zmq, extra = sys.argv[1:6]
import os
c = yaml.safe_load(open(src))
for k, v in (c.get("calibration") or {}).items():  # the tables beside the acquisition
    if isinstance(v, str) and v and not os.path.isabs(v):
        c["calibration"][k] = os.path.join(os.path.dirname(os.path.abspath(src)), v)
c.setdefault("input", {}).update({"endpoints": [udp], "ring_chunk_bytes": 1048576, "ring_chunks": 8})
c["input"].update(yaml.safe_load(extra) or {})
c.setdefault("coincidence", {}).update({"window_mode": "every_single", "policy": "take_all_goods"})
c.setdefault("stream", {}).update({"max_pending_frames": 262144, "max_slice_frames": 131072})
c.setdefault("output", {}).setdefault("zmq", {})["endpoint"] = zmq
yaml.safe_dump(c, open(dst, "w"), sort_keys=False)
PY
"$bin/petdaq-offline" -q --config "$work/run.yaml" --input "$acq/frames.bin" --output "$work/offline.plm" >/dev/null
"$bin/petdaqd" --config "$work/run.yaml" 2> "$work/petdaqd.log" & daemon=$!
trap 'kill $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q ' ready' "$work/petdaqd.log" && break; sleep 0.1; done
"$bin/petdaq-record" -q --config "$work/run.yaml" --prompts-only --output "$work/daemon.plm" & record=$!
sleep 0.5
"$bin/petdaq-replay" -c "$work/run.yaml" --speed "$speed" "$work/slow.bin" > /dev/null & a=$!
"$bin/petdaq-replay" -c "$work/run.yaml" --speed 1 "$work/others.bin" > /dev/null & b=$!
wait $a $b
sleep 1
kill -INT $daemon; wait $daemon || true
sleep 0.5; kill -INT $record 2>/dev/null; wait $record || true
PYTHONPATH=python /usr/bin/python3 - "$work" "$slow" <<'PY'
import sys, re, numpy as np
from petdaq import read_plm, Geometry
work, slow = sys.argv[1], int(sys.argv[2])
g = Geometry.from_config(work + "/run.yaml")
def bdm(c):
    return (g.ring(c) // (g.du_axial * g.crystal_axial)) * g.bdm_transaxial + g.sector(c)
def on_time(path):
    p = read_plm(path).prompts
    keep = (bdm(p["crystal_a"]) != slow) & (bdm(p["crystal_b"]) != slow)
    p = p[keep]
    return np.sort(p.view(np.dtype((np.void, p.dtype.itemsize))))
want, got = on_time(work + "/offline.plm"), on_time(work + "/daemon.plm")
common = np.intersect1d(want, got).size
log = open(work + "/petdaqd.log").read()
final = re.search(r"final counters: (.*)", log).group(1)
c = dict(kv.split("=") for kv in final.split() if "=" in kv)
print(f"on-time prompts: offline {want.size}, petdaqd {got.size}, in both {common} "
      f"({100.0 * common / max(1, want.size):.2f} %)")
for k in ("rx.ring_full", "rx.kernel_drops", "stream.late", "stream.dead_frames",
          "stream.dead_intervals", "stream.source_lagging", "stream.time_jump", "stream.runs"):
    print(f"  {k} {c.get(k, '?')}")
PY
