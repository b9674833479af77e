#!/usr/bin/python3
"""The CTR and energy-resolution figures (docs/figures.md) against the simulator's truth.

petdaq-sim makes a point-source acquisition on a small scanner with a known per-single time
resolution and energy resolution; petdaq-offline --histograms writes its histogram file with
the simulator's time-offset table, and again with a wrong one (the table's values given to
other crystals); petdaq-qa writes figures.json. Checked:
* the CTR fitted on all prompts equals √2 × the per-single FWHM within 3 %, and its median
  over DU pairs within 5 %; without the flood map's position blur (no frame corrected with a
  neighbour's time offset) within 1.5 %;
* with the wrong offset table the CTR is visibly wider (by more than 30 %);
* the energy resolution, of all crystals summed and the median over crystals, within 0.5
  points of the simulated one, every crystal's photopeak fitted;
* a file without the signed Δt histograms (as written before version 3) still gives a report,
  with the unsigned Δt plot and no CTR.

  figures_test.py PETDAQ_SIM PETDAQ_OFFLINE PETDAQ_QA WORKDIR [--table]

--table: instead, the table of docs/figures.md (several time and energy resolutions, longer
acquisitions), printed as Markdown.
Exit 77 (skipped) when NumPy, SciPy or Matplotlib is missing.
"""

import json
import math
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import scipy  # noqa: F401
    import matplotlib  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (install python3-numpy python3-scipy python3-matplotlib)")
    sys.exit(77)

sim, offline, qa, work = sys.argv[1:5]
table_mode = "--table" in sys.argv[5:]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(qa)), "..", "..", "python"))
from petdaq import figures  # noqa: E402
from petdaq import histograms as ph  # noqa: E402

SCANNER = ("scanner:\n  bdm_transaxial: 8\n  bdm_axial: 1\n  du_transaxial: 2\n  du_axial: 2\n"
           "  crystal_transaxial: 4\n  crystal_axial: 4\n  position_size: 64\n"
           "  tick_ps: 15.625\n  ring_radius_mm: 40.0\n"
           "calibration:\n  position_lut: none.npy\n  energy_correction: none.npy\n")

failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def acquire(name, time_ps, energy_res, duration_s, activity_MBq, seed=1, extra=()):
    """A point-source acquisition; its directory."""
    acq = os.path.join(work, name)
    config = os.path.join(work, "scanner.yaml")
    run([sim, "--config", config, "--output-dir", acq, "--duration-s", str(duration_s),
         "--activity-MBq", str(activity_MBq), "--source", "point", "--seed", str(seed),
         "--time-resolution-ps", str(time_ps), "--energy-resolution", str(energy_res)] + list(extra))
    return acq


def histograms(acq, name, time_offsets=None):
    """petdaq-offline's histogram file of the acquisition, with its own time-offset table or
    the one given; the .pdh path."""
    config = os.path.join(acq, "petdaq.yaml")
    if time_offsets is not None:
        text = open(config, encoding="utf-8").read()
        lines = [f"  time_offsets: {time_offsets}" if line.startswith("  time_offsets:") else line
                 for line in text.splitlines()]
        config = os.path.join(acq, f"{name}.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    pdh = os.path.join(acq, f"{name}.pdh")
    run([offline, "--config", config, "--input", os.path.join(acq, "frames.bin"), "--output",
         os.path.join(acq, f"{name}.plm"), "--histograms", pdh, "--quiet"])
    return pdh


def report(pdh, name):
    """petdaq-qa's figures.json of a histogram file."""
    out = os.path.join(work, f"qa_{name}")
    r = subprocess.run([qa, pdh, "--output", out], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"petdaq-qa failed on {pdh}: {r.stderr}")
    with open(os.path.join(out, "figures.json"), encoding="utf-8") as f:
        return json.load(f), out


def wrong_offsets(acq):
    """The acquisition's time-offset table with its values given to other crystals."""
    table = np.load(os.path.join(acq, "time_offsets.npy"))
    wrong = np.random.default_rng(5).permutation(table)
    path = os.path.join(acq, "wrong_offsets.npy")
    np.save(path, wrong)
    return path


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
with open(os.path.join(work, "scanner.yaml"), "w", encoding="utf-8") as f:
    f.write(SCANNER)

if table_mode:
    rows = []
    for time_ps, energy_res in ((200, 0.08), (350, 0.12), (500, 0.18)):
        acq = acquire(f"t{time_ps}", time_ps, energy_res, 2.0, 10)
        fig, _ = report(histograms(acq, "run"), f"t{time_ps}")
        bad, _ = report(histograms(acq, "wrong", wrong_offsets(acq)), f"t{time_ps}_wrong")
        c, e = fig["ctr"], fig["energy_resolution"]
        truth = math.sqrt(2) * time_ps
        rows.append(f"| {time_ps} | {truth:.1f} | {c['fwhm_ps']:.1f} ± {c['fwhm_err_ps']:.1f} | "
                    f"{100 * (c['fwhm_ps'] / truth - 1):+.2f} % | "
                    f"{fig['ctr_du_pairs']['median_fwhm_ps']:.1f} ({fig['ctr_du_pairs']['fitted']}) | "
                    f"{bad['ctr']['fwhm_ps']:.1f} | {100 * energy_res:.1f} | "
                    f"{e['global']['percent']:.2f} ± {e['global']['err_percent']:.2f} | "
                    f"{e['median_percent']:.2f} ({e['crystals_fitted']}) |")
    print("| per-single FWHM (ps) | CTR truth √2× (ps) | CTR fitted (ps) | difference | "
          "median per DU pair (ps, pairs) | CTR, wrong offsets (ps) | energy res. truth (%) | "
          "global fitted (%) | median per crystal (%, crystals) |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    sys.exit(0)

TIME_PS, ENERGY_RES = 350.0, 0.12
acq = acquire("acq", TIME_PS, ENERGY_RES, 0.5, 10)
pdh = histograms(acq, "run")
fig, qa_dir = report(pdh, "run")
truth = math.sqrt(2) * TIME_PS
c = fig["ctr"]
check(c is not None, "a CTR fitted")
print(f"      CTR {c['fwhm_ps']:.1f} ± {c['fwhm_err_ps']:.1f} ps, truth {truth:.1f} ps; "
      f"{c['prompts']} prompts")
check(abs(c["fwhm_ps"] / truth - 1) < 0.03, "CTR within 3 % of √2 × the per-single FWHM")
check(c["fwhm_err_ps"] < 0.01 * truth, "CTR statistical error below 1 %")
pairs = fig["ctr_du_pairs"]
check(pairs["fitted"] >= 8, f"CTR fitted on {pairs['fitted']} DU pairs (>= 8)")
check(pairs["median_fwhm_ps"] is not None and abs(pairs["median_fwhm_ps"] / truth - 1) < 0.05,
      f"median CTR per DU pair {pairs['median_fwhm_ps']} within 5 %")
h = ph.read_histograms(pdh)
check(int(h["tof_prompt"].counts.sum()) == h.meta["counters"]["coinc.prompts"],
      "tof_prompt holds every prompt")
check(abs(c["centre_ps"]) < 3 * h["tof_prompt"].width,
      f"a point source at the centre: Δt centred ({c['centre_ps']:.1f} ps)")

# Without the flood map's position blur no frame is given a neighbour's crystal (and time
# offset): the CTR is then the simulated one, to the fit's precision (docs/figures.md).
sharp = figures.ctr(ph.read_histograms(histograms(
    acquire("sharp", TIME_PS, ENERGY_RES, 0.5, 10, extra=["--position-blur", "0"]), "run")))
print(f"      without position blur: CTR {sharp.fwhm_ps:.1f} ± {sharp.fwhm_err_ps:.1f} ps")
check(abs(sharp.fwhm_ps / truth - 1) < 0.015, "without position blur, CTR within 1.5 % of the truth")

bad, _ = report(histograms(acq, "wrong", wrong_offsets(acq)), "wrong")
print(f"      wrong offsets: CTR {bad['ctr']['fwhm_ps']:.1f} ps")
check(bad["ctr"]["fwhm_ps"] > 1.3 * c["fwhm_ps"], "a wrong time-offset table widens the CTR by > 30 %")

e = fig["energy_resolution"]
g = e["global"]
print(f"      energy resolution {g['percent']:.2f} ± {g['err_percent']:.2f} % at "
      f"{g['position_keV']:.1f} keV; median per crystal {e['median_percent']:.2f} % "
      f"({e['crystals_fitted']} crystals); truth {100 * ENERGY_RES:.1f} %")
check(abs(g["percent"] - 100 * ENERGY_RES) < 0.5, "global energy resolution within 0.5 points")
check(abs(g["position_keV"] - 511) < 3, "photopeak at 511 keV after calibration")
check(e["crystals_fitted"] == len(e["per_crystal_percent"]), "every crystal's photopeak fitted")
check(abs(e["median_percent"] - 100 * ENERGY_RES) < 0.5,
      "median per-crystal energy resolution within 0.5 points")
page = open(os.path.join(qa_dir, "index.html"), encoding="utf-8").read()
check(f"{c['fwhm_ps']:.1f} ± " in page and f"{g['percent']:.2f} ± " in page,
      "the report page shows the CTR and the energy resolution")
for png in ("tof.png", "ctr_du_pairs.png", "energy_resolution.png", "energy_resolution_map.png"):
    check(os.path.getsize(os.path.join(qa_dir, png)) > 5000, f"{png} written")

# A file as written before version 3: the signed Δt histograms renamed away, version 2.
data = bytearray(open(pdh, "rb").read())
data[4:6] = (2).to_bytes(2, "little")
for i in range(int.from_bytes(data[8:12], "little")):
    at = 64 + 96 * i
    name = bytes(data[at:at + 32]).rstrip(b"\0")
    if b"tof" in name:
        data[at:at + 32] = (b"x" + name[1:]).ljust(32, b"\0")
old = os.path.join(work, "version2.pdh")
with open(old, "wb") as f:
    f.write(data)
old_fig, old_dir = report(old, "version2")
check(old_fig["ctr"] is None and "ctr_du_pairs" not in old_fig, "version 2: no CTR")
check(os.path.exists(os.path.join(old_dir, "dt.png")), "version 2: the unsigned Δt plotted")
check("no signed Δt histograms" in open(os.path.join(old_dir, "index.html"), encoding="utf-8").read(),
      "version 2: the page says why there is no CTR")
check(abs(old_fig["energy_resolution"]["global"]["percent"] - g["percent"]) < 1e-9,
      "version 2: the energy resolution all the same")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
