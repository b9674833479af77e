#!/usr/bin/python3
"""petdaq-qa and the Python histogram reader on a small simulated acquisition.

petdaq-sim makes an acquisition on a small scanner, petdaq-offline --histograms writes its
histogram file; the reader's totals must equal the counters the file carries; petdaq-qa
must write every plot (each PNG opened: its size, and not blank) and the HTML page naming
them, and flag exactly the planted hot and dead crystals; a truncated file, a file of
another version and a missing file exit 2 with a clear message.

  qa_test.py PETDAQ_SIM PETDAQ_OFFLINE PETDAQ_QA WORKDIR
Exit 77 (skipped) when NumPy or Matplotlib is missing.
"""

import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
except ImportError as e:
    print(f"SKIP: {e} (install python3-numpy python3-matplotlib)")
    sys.exit(77)

sim, offline, qa, work = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(qa)), "..", "..", "python"))
from petdaq import histograms as ph  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
config = os.path.join(work, "small.yaml")
with open(config, "w") as f:
    f.write("scanner:\n  bdm_transaxial: 8\n  bdm_axial: 1\n  du_transaxial: 2\n"
            "  du_axial: 2\n  crystal_transaxial: 8\n  crystal_axial: 8\n"
            "  position_size: 64\n  tick_ps: 15.625\n  ring_radius_mm: 40.0\n"
            "calibration:\n  position_lut: none.npy\n  energy_correction: none.npy\n")
acq = os.path.join(work, "acq")
subprocess.run([sim, "--config", config, "--output-dir", acq, "--duration-s", "0.05",
                "--activity-MBq", "2"], check=True, stdout=subprocess.DEVNULL)
pdh = os.path.join(work, "run.pdh")
subprocess.run([offline, "--config", os.path.join(acq, "petdaq.yaml"), "--input",
                os.path.join(acq, "frames.bin"), "--output", os.path.join(work, "run.plm"),
                "--histograms", pdh, "--image", pdh[:-4] + ".pdim", "--quiet"], check=True,
               stdout=subprocess.DEVNULL)

# The reader: totals equal the counters of the same file.
h = ph.read_histograms(pdh)
c = h.meta["counters"]
check(c["single.accepted"] > 1000, "an acquisition with singles")
check(int(h["crystal_singles"].counts.sum()) == c["single.accepted"], "crystal_singles = single.accepted")
check(int(h["crystal_energy_rejected"].counts.sum()) == c["single.energy_rejected"],
      "crystal_energy_rejected = single.energy_rejected")
check(int(h["dt_prompt"].counts.sum()) == c["coinc.prompts"], "dt_prompt = coinc.prompts")
check(int(h["dt_delayed"].counts.sum()) == c["coinc.delayed"], "dt_delayed = coinc.delayed")
check(int(h["flood"].counts.sum()) == c["single.accepted"] + c["single.energy_rejected"]
      + c["frame.no_crystal"] + c["frame.bad_time"], "flood = frames with a valid position")
check(h["flood"].counts.shape == (8, 4, 64, 64), "flood shape [bdm][du][y][x]")
check(h["energy_keV"].unit == "keV" and h["energy_keV"].counts.shape[0] == 8 * 4 * 64,
      "energy_keV per crystal, in keV")
check(abs(h["energy_keV"].edges[-1] - 1000.0) < 1e-3, "energy edges up to energy_max_keV")

# The singles-rate randoms per pair of BDMs against 2τ S_a S_b / T (a < b) and
# τ (S_a² − Σ_{i in a} N_i²) / T (a = b) over the simulated duration T, from the crystal
# map: 8 BDMs around one ring of 128 crystals, 16 across each BDM.
import json  # noqa: E402
with open(os.path.join(acq, "truth.json")) as f:
    duration_s = json.load(f)["duration_s"]
tick_s = h.meta["tick_ps"] * 1e-12
tau = (round(h.meta["window_ps"] / h.meta["tick_ps"]) + 0.5) * tick_s  # closed edge
n = h["crystal_singles"].counts.astype(np.float64)
bdm_of = (np.arange(n.size) % 128) // 16
s_b = np.bincount(bdm_of, weights=n, minlength=8)
q_b = np.bincount(bdm_of, weights=n * n, minlength=8)
want = np.triu(2 * tau * np.outer(s_b, s_b) / duration_s, 1)
want[np.diag_indices(8)] = tau * (s_b * s_b - q_b) / duration_s
got = h["bdm_pair_randoms_singles_rate"].counts
check(got.dtype == np.float64 and got.shape == (8, 8), "randoms per BDM pair: f64 [bdm][bdm]")
check(np.allclose(got, want, rtol=0.01, atol=0), f"randoms per BDM pair = 2τSaSb/T: {got} vs {want}")
check(want.sum() > 5, f"randoms expected ({want.sum():.1f})")

# The image file beside it: every prompt counted once, inside or outside the field.
from petdaq import image as pim  # noqa: E402
im = pim.read_image(pdh[:-4] + ".pdim")
check(im.tallies["prompts_in"] + im.tallies["prompts_out"] == c["coinc.prompts"],
      "image tallies = coinc.prompts")
check(int(im.run.sum()) == im.tallies["prompts_in"] and im.run.shape == (64, 64, 64),
      "image voxels sum to the prompts in the field")
check(int(im.trace["weight"].sum()) == im.tallies["prompts_in"], "trace weights = prompts in the field")

# The report.
out = os.path.join(work, "qa")
r = subprocess.run([qa, pdh, "--output", out], capture_output=True, text=True)
check(r.returncode == 0, f"petdaq-qa exits 0 (got {r.returncode}: {r.stderr})")
pngs = ["energy_keV.png", "energy_raw.png", "singles_map.png", "tof.png", "ctr_du_pairs.png",
        "energy_resolution.png", "energy_resolution_map.png", "bdm_pairs.png",
        "rates.png", "flood_overview.png", "image.png", "trace.png"] + [f"flood_bdm{b:02d}.png" for b in range(8)]
page = open(os.path.join(out, "index.html"), encoding="utf-8").read() if os.path.exists(
    os.path.join(out, "index.html")) else ""
check("single.accepted" in page, "the page lists the counters")
check("TOF back-projection, not a reconstruction: no attenuation, scatter or normalisation" in page,
      "the page says what the image is not")
for name in pngs:
    path = os.path.join(out, name)
    if not os.path.exists(path):
        check(False, f"{name} written")
        continue
    img = mpimg.imread(path)
    check(img.shape[0] >= 300 and img.shape[1] >= 400, f"{name}: {img.shape} is a real plot")
    rgb = img[..., :3].reshape(-1, 3)
    colours = len(np.unique((rgb * 255).astype(np.uint8), axis=0))
    check(colours > 20 and float(rgb.std()) > 0.02, f"{name}: not blank ({colours} colours)")
    check(f'src="{name}"' in page, f"the page shows {name}")

# Hot and dead crystals on the page: the same file with every crystal's singles scaled up
# (so each DU is judged), one crystal made hot and one dead.
data = bytearray(open(pdh, "rb").read())
count = ph.HEADER.unpack_from(data, 0)[3]
for i in range(count):
    d = ph.DESCRIPTOR.unpack_from(data, ph.HEADER.size + i * ph.DESCRIPTOR.size)
    if d[0].rstrip(b"\0") == b"crystal_singles":
        singles = np.frombuffer(data, dtype="<u8", count=d[5], offset=d[11])
        planted = singles * 10 + 100
        planted[77] = 100 * int(np.median(planted[64:128]))
        planted[300] = 0
        data[d[11]:d[11] + planted.nbytes] = planted.astype("<u8").tobytes()
planted_pdh = os.path.join(work, "planted.pdh")
with open(planted_pdh, "wb") as f:
    f.write(data)
r = subprocess.run([qa, planted_pdh, "--output", os.path.join(work, "qa_planted")],
                   capture_output=True, text=True)
check(r.returncode == 0, f"planted file: exit 0 ({r.stderr})")
page = open(os.path.join(work, "qa_planted", "index.html"), encoding="utf-8").read()
check("<p>2 crystals whose" in page, "exactly two crystals flagged")
check("<tr><td>77</td>" in page and "<td>hot</td>" in page, "crystal 77 hot")
check("<tr><td>300</td>" in page and "<td>dead</td>" in page, "crystal 300 dead")
# BDM, DU and the crystal's index in its DU (c = c_trans * crystal_axial + c_axial).
check("<tr><td>77</td><td>4</td><td>2</td><td>40</td><td>hot</td>" in page, "crystal 77: BDM 4, DU 2, 40")
check("<tr><td>300</td><td>2</td><td>2</td><td>34</td><td>dead</td>" in page, "crystal 300: BDM 2, DU 2, 34")

# Bad files: clear message, exit 2.
data = open(pdh, "rb").read()
bad = {"truncated.pdh": (data[: len(data) // 2], "truncated"),
       "version4.pdh": (data[:4] + b"\x04\x00" + data[6:], "version 4"),
       "tiny.pdh": (data[:10], "truncated")}
# Files the reader takes whose histograms are not what petdaqd writes: a flood map of rank 1
# and an energy spectrum of rank 3 (same elements, same bytes): a clear message, no traceback.
for hist, rank in ((b"flood", 1), (b"energy_keV", 3)):
    changed = bytearray(data)
    for i in range(ph.HEADER.unpack_from(changed, 0)[3]):
        at = ph.HEADER.size + i * ph.DESCRIPTOR.size
        d = list(ph.DESCRIPTOR.unpack_from(changed, at))
        if d[0].rstrip(b"\0") == hist:
            n = d[5] * d[6] * d[7] * d[8]
            d[4], d[5:9] = rank, ([n, 1, 1, 1] if rank == 1 else [1, 1, n, 1])
            ph.DESCRIPTOR.pack_into(changed, at, *d)
    bad[hist.decode() + f"_rank{rank}.pdh"] = (bytes(changed), "cannot make a report")
for name, (content, message) in bad.items():
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(content)
    r = subprocess.run([qa, path, "--output", os.path.join(work, "bad")], capture_output=True,
                       text=True)
    check(r.returncode == 2, f"{name}: exit 2 (got {r.returncode})")
    check("Traceback" not in r.stderr, f"{name}: no traceback: {r.stderr!r}")
    check(message in r.stderr and name in r.stderr, f"{name}: message names it: {r.stderr!r}")
r = subprocess.run([qa, os.path.join(work, "missing.pdh"), "--output", out], capture_output=True,
                   text=True)
check(r.returncode == 2 and "missing.pdh" in r.stderr, f"missing file: exit 2 ({r.stderr!r})")
r = subprocess.run([qa], capture_output=True, text=True)
check(r.returncode == 2, "no arguments: exit 2")

# --endpoint: waits for a `histograms` message with data; only empty ones (a daemon that has
# seen no single yet), or none at all, is said so, exit 1 and no report.
try:
    import threading
    import zmq
except ImportError:
    zmq = None
if zmq is not None:
    data = bytearray(open(pdh, "rb").read())
    empty = bytearray(data)
    for i in range(ph.HEADER.unpack_from(empty, 0)[3]):
        d = ph.DESCRIPTOR.unpack_from(empty, ph.HEADER.size + i * ph.DESCRIPTOR.size)
        if d[0].rstrip(b"\0") == b"crystal_singles":
            empty[d[11]:d[11] + 8 * d[5]] = bytes(8 * d[5])

    def publish(endpoint, bodies, stop):
        sock = zmq.Context.instance().socket(zmq.PUB)
        sock.bind(endpoint)
        i = 0
        while not stop.is_set():
            sock.send_multipart([b"histograms", bytes(64), bytes(bodies[min(i, len(bodies) - 1)])])
            i += 1
            stop.wait(0.05)
        sock.close(linger=0)

    def qa_live(bodies, timeout_s):
        endpoint = "ipc://" + os.path.join(work, "qa_live.sock")
        out = os.path.join(work, f"qa_live{len(bodies)}")
        stop = threading.Event()
        t = threading.Thread(target=publish, args=(endpoint, bodies, stop)) if bodies else None
        if t:
            t.start()
        try:
            r = subprocess.run([qa, "--endpoint", endpoint, "--timeout-s", str(timeout_s),
                                "--output", out], capture_output=True, text=True, timeout=120)
        finally:
            stop.set()
            if t:
                t.join()
        return r, os.path.exists(os.path.join(out, "index.html"))

    r, written = qa_live([empty], 1.5)
    check(r.returncode == 1 and "all empty" in r.stderr and not written,
          f"only empty histograms: exit 1, said so, no report ({r.returncode}: {r.stderr!r})")
    r, written = qa_live([], 0.5)
    check(r.returncode == 1 and "no `histograms` message" in r.stderr and not written,
          f"no message: exit 1, said so ({r.returncode}: {r.stderr!r})")
    r, written = qa_live([empty, empty, empty, data], 30)
    check(r.returncode == 0 and written, f"empty, then data: the report ({r.returncode}: {r.stderr!r})")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
