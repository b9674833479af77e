#!/usr/bin/python3
"""The live TOF back-positioned image and centroid trace (DESIGN section 7, "Image") against
the simulator's truth: petdaq-sim makes an acquisition, petdaq-offline --image processes it
as petdaqd would, and petdaq.read_image reads the file.

  point   a still point source off centre: the image's peak (the mode, found by mean shift
          from the centroid) within 0.5 mm of the true position on every axis; the RMS
          distance of the back-positioned counts from the source (the TOF blur along the
          lines of response) within 10 % of c/2 · σ of the simulated CTR (√2 · the single's
          FWHM / 2.355).
  line    a line source along the axis, off centre: its transaxial peak within 0.5 mm of the
          true x, y; its axial extent (at half the profile's plateau) within 10 % of its length.
  moving  a point source in sinusoidal motion along z, then along y: the centroid trace
          (≥ 10 Hz) against the true position at each sample's time: correlation ≥ 0.95 and
          the fitted amplitude within 10 % of the true one.

Prints the counts and the figures. Exits 77 (skip) when numpy is missing.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError as e:
    print(f"skipped: {e} (python3-numpy)")
    sys.exit(77)

HALF_C_MM_PER_PS = 0.299792458 / 2


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def simulate(a, name, extra):
    out = os.path.join(a.work, name)
    shutil.rmtree(out, ignore_errors=True)
    run([os.path.join(a.bin, "petdaq-sim"), "--config", a.config, "--output-dir", out,
         "--no-background", "--threads", "2", "--seed", "7"] + extra)
    image = os.path.join(out, "run.pdim")
    run([os.path.join(a.bin, "petdaq-offline"), "--config", os.path.join(out, "petdaq.yaml"),
         "--input", os.path.join(out, "frames.bin"), "--output", os.path.join(out, "run.plm"),
         "--image", image, "--quiet"])
    with open(os.path.join(out, "truth.json")) as f:
        truth = json.load(f)
    sys.path.insert(0, a.python)
    import petdaq
    return petdaq.read_image(image), truth


def voxel_grid(im):
    z, y, x = np.meshgrid(im.centres_mm(2), im.centres_mm(1), im.centres_mm(0), indexing="ij")
    return x, y, z


def check_point(a):
    time_fwhm = 200.0
    position = (12.5, -7.5, 6.0)
    im, truth = simulate(a, "point", ["--source", "point", "--source-position",
                                      ",".join(str(p) for p in position), "--activity-MBq", "3",
                                      "--duration-s", "0.25", "--time-resolution-ps", str(time_fwhm)])
    assert truth["source_position_mm"] == list(position), truth["source_position_mm"]
    img = im.run.astype(np.float64)
    x, y, z = voxel_grid(im)
    counts = img.sum()
    t = im.tallies
    print(f"point source at {position} mm: {t['prompts_in']} prompts in the image minus "
          f"{t['delayed_in']} delayed = {int(counts)} counts ({t['prompts_out']} prompts outside "
          f"the field of view), voxels of {im.voxel_mm} mm")
    if counts < 20000:
        print("FAIL: too few counts for the check")
        return False
    # The peak: the mode of the blurred point, by mean shift (a sphere of 15 mm) from the
    # centroid.
    c = np.array([(img * x).sum(), (img * y).sum(), (img * z).sum()]) / counts
    for _ in range(100):
        inside = (x - c[0]) ** 2 + (y - c[1]) ** 2 + (z - c[2]) ** 2 <= 15.0 ** 2
        w = img * inside
        n = np.array([(w * x).sum(), (w * y).sum(), (w * z).sum()]) / w.sum()
        if np.abs(n - c).max() < 1e-4:
            break
        c = n
    err = c - np.array(position)
    print(f"peak at ({c[0]:.3f}, {c[1]:.3f}, {c[2]:.3f}) mm: off by "
          f"({err[0]:+.3f}, {err[1]:+.3f}, {err[2]:+.3f}) mm (limit 0.5 mm on each axis)")
    ok = bool(np.all(np.abs(err) <= 0.5))
    # The TOF blur: RMS distance of the counts from the source, against c/2 · σ(CTR).
    r2 = (x - position[0]) ** 2 + (y - position[1]) ** 2 + (z - position[2]) ** 2
    rms = math.sqrt((img * r2).sum() / counts)
    sigma_ctr_ps = math.sqrt(2) * time_fwhm / 2.3548200450309493
    expect = HALF_C_MM_PER_PS * sigma_ctr_ps
    print(f"TOF blur: RMS distance from the source {rms:.2f} mm; c/2 · σ of the simulated CTR "
          f"(FWHM {math.sqrt(2) * time_fwhm:.0f} ps) = {expect:.2f} mm; ratio {rms / expect:.3f} "
          f"(limit ±10 %)")
    ok = ok and abs(rms / expect - 1) <= 0.10
    return ok


def check_line(a):
    position, length = (10.0, 5.0, 0.0), 40.0
    im, truth = simulate(a, "line", ["--source", "line", "--source-position",
                                     ",".join(str(p) for p in position), "--source-length-mm",
                                     str(length), "--activity-MBq", "3", "--duration-s", "0.25",
                                     "--time-resolution-ps", "200"])
    assert truth["source"] == "line" and truth["source_length_mm"] == length, truth
    img = im.run.astype(np.float64)
    xy = img.sum(axis=0)
    x, y = np.meshgrid(im.centres_mm(0), im.centres_mm(1))
    c = np.array([(xy * x).sum(), (xy * y).sum()]) / xy.sum()
    for _ in range(100):
        w = xy * (((x - c[0]) ** 2 + (y - c[1]) ** 2) <= 15.0 ** 2)
        n = np.array([(w * x).sum(), (w * y).sum()]) / w.sum()
        if np.abs(n - c).max() < 1e-4:
            break
        c = n
    err = c - np.array(position[:2])
    # The axial extent: where the profile crosses half its plateau (the median of its middle).
    prof, z = im.axial_run, im.centres_mm(2)
    plateau = float(np.median(prof[np.abs(z - position[2]) < length / 4]))
    above = z[prof >= plateau / 2]
    extent = above.max() - above.min() + im.voxel_mm
    print(f"line source at x, y = {position[:2]} mm, {length} mm long: {int(img.sum())} counts; "
          f"transaxial peak off by ({err[0]:+.3f}, {err[1]:+.3f}) mm (limit 0.5 mm); axial extent "
          f"at half the plateau {extent:.1f} mm (limit ±10 %)")
    return bool(np.all(np.abs(err) <= 0.5)) and abs(extent / length - 1) <= 0.10


def check_moving(a, axis):
    amplitude, period = 4.0, 0.5
    im, truth = simulate(a, "moving_" + axis, ["--source", "point", "--source-position", "3,-2,1",
                                       "--activity-MBq", "3", "--duration-s", "1.5",
                                       "--motion-amplitude-mm", str(amplitude),
                                       "--motion-period-s", str(period), "--motion-axis", axis])
    m = truth["motion"]
    assert m["amplitude_mm"] == amplitude and m["axis"] == axis, m
    k = "xyz".index(axis)
    t = im.trace["t_s"]
    rate = 1.0 / np.median(np.diff(t))
    origin_s = truth["time_origin_ticks"] * truth["tick_ps"] * 1e-12
    phase = 2 * np.pi * (t - origin_s) / m["period_s"]
    true_pos = truth["source_position_mm"][k] + m["amplitude_mm"] * np.sin(phase)
    # Whole samples only: the first and the last bin cover part of their interval.
    keep = (t - origin_s > im.trace_bin_ms * 1e-3) & (t < t.max())
    got = im.trace[f"{axis}_mm"][keep]
    true_pos, phase = true_pos[keep], phase[keep]
    weights = im.trace["weight"][keep]
    errors = im.trace[f"{axis}_err_mm"][keep]
    print(f"moving source: {len(got)} trace samples at {rate:.1f} Hz, {weights.mean():.0f} prompts "
          f"each, statistical error {errors.mean():.3f} mm on {axis}")
    if len(got) < 10 or rate < 10:
        print("FAIL: fewer than 10 samples or a rate below 10 Hz")
        return False
    corr = float(np.corrcoef(got, true_pos)[0, 1])
    # The measured amplitude: a least-squares sine at the known period and phase (sin, cos
    # and a constant).
    design = np.stack([np.sin(phase), np.cos(phase), np.ones_like(phase)], axis=1)
    coef, *_ = np.linalg.lstsq(design, got, rcond=None)
    fitted = math.hypot(coef[0], coef[1])
    # A bin averages the motion over its width: the expected amplitude is sinc-reduced.
    width = im.trace_bin_ms * 1e-3 / period
    expected = amplitude * (math.sin(math.pi * width) / (math.pi * width))
    print(f"centroid trace against the truth: correlation {corr:.4f} (limit 0.95); amplitude "
          f"{fitted:.3f} mm against {expected:.3f} mm ({amplitude} mm averaged over a "
          f"{im.trace_bin_ms:g} ms sample), ratio {fitted / expected:.3f} (limit ±10 %)")
    return corr >= 0.95 and abs(fitted / expected - 1) <= 0.10


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["point", "line", "moving"])
    p.add_argument("--bin", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--python", required=True, help="the directory of the petdaq package")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.what == "point":
        ok = check_point(a)
    elif a.what == "line":
        ok = check_line(a)
    else:
        ok = all([check_moving(a, "z"), check_moving(a, "y")])
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
