#!/usr/bin/python3
"""petdaq-nema count-rate against the simulator's truth (docs/nema.md).

  nema_test.py PETDAQ_SIM PETDAQ_OFFLINE PETDAQ_NEMA CONFIG WORK [--activities A,B,..]
               [--duration-s S] [--phantom nema-mouse|nema-rat] [--sf-points P] [--rate-percent R]
               [--sim-args "..."] [--delayed-offset-ns D] [--trues-tail F]

Simulates the NEMA phantom at each activity (coincidence policy take_all_goods with
every_single windows, where the delayed window estimates the random prompts without bias),
sorts it with petdaq-offline, runs petdaq-nema, and classifies every prompt by the truth of
the two frames it came from (true: one decay, neither photon scattered; scattered: one
decay, a photon scattered in the phantom; random otherwise), counting only the prompts the
standard's mask keeps (the same sinogram pixels as petdaq-nema, nema.sinogram_bins). Checks the scatter fraction of the lowest activity within
--sf-points points of the true scattered share, the trues, randoms and total rates within
--rate-percent % (+ 3 sigma of the counts) at every activity, and, without pile-up, that the
straight line under the peak takes at most --trues-tail of the trues for background (every
true line passes within a few mm of the line source). Prints the comparison and where the
scatter rate departs from the scattered prompts: the standard's split applied to each truth
class's own profile. The scatter rate is printed, not checked: the line under the peak
counts the scatter above it within 7 mm of the source as trues (docs/nema.md).
Exit 1 on a miss, 77 without NumPy.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import yaml
except ImportError as e:
    print(f"skipped: {e} (python3-numpy, python3-yaml)")
    sys.exit(77)

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from petdaq import nema  # noqa: E402
from petdaq.geometry import Geometry  # noqa: E402
from petdaq.plm import read_plm  # noqa: E402

FRAME = np.dtype([("head_du", "u1"), ("bdm", "u1"), ("time", ">u8"), ("x", "u1"), ("y", "u1"),
                  ("energy", ">u2"), ("temp_int", "i1"), ("temp_frac_tail", "u1")])
TRUTH = np.dtype([("event_id", "<u8"), ("event_ticks", "<u8"), ("crystal", "<u4"), ("energy_keV", "<f4"),
                  ("kind", "u1"), ("photon", "u1"), ("phantom_scatters", "u1"), ("flags", "u1"),
                  ("pile_up", "u1"), ("reserved", "V3")])


def classify(acq, records):
    """Per record: 0 true, 1 scattered, 2 random, by the truth of the frames of its singles."""
    with open(os.path.join(acq, "petdaq.yaml"), encoding="utf-8") as f:
        s = yaml.safe_load(f)["scanner"]
    frames = np.fromfile(os.path.join(acq, "frames.bin"), dtype=FRAME)
    truth = np.fromfile(os.path.join(acq, "truth.bin"), dtype=TRUTH)
    lut = np.load(os.path.join(acq, "position_lut.npy"))
    offsets = np.load(os.path.join(acq, "time_offsets.npy")).astype(np.int64)
    bdm = frames["bdm"].astype(np.int64)
    du = (frames["head_du"] & 15).astype(np.int64)
    per_du = s["crystal_transaxial"] * s["crystal_axial"]
    label = lut[bdm, du, frames["y"], frames["x"]].astype(np.int64)
    ok = label < per_du
    row, col = np.divmod(label, s["crystal_axial"])
    local = np.where(ok, (s["crystal_transaxial"] - 1 - row) * s["crystal_axial"] + col, 0)
    b_axial, b_trans = np.divmod(bdm, s["bdm_transaxial"])
    d_trans, d_axial = np.divmod(du, s["du_axial"])
    c_trans, c_axial = np.divmod(local, s["crystal_axial"])
    per_ring = s["bdm_transaxial"] * s["du_transaxial"] * s["crystal_transaxial"]
    crystal = ((b_axial * s["du_axial"] * s["crystal_axial"] + d_axial * s["crystal_axial"] + c_axial) * per_ring
               + b_trans * s["du_transaxial"] * s["crystal_transaxial"] + d_trans * s["crystal_transaxial"] + c_trans)
    time = frames["time"].astype(np.int64) + offsets[crystal]
    key = np.where(ok, time * (1 << 20) + crystal, -1)
    order = np.argsort(key, kind="stable")
    skey = key[order]

    def frame_of(t, c):
        k = t.astype(np.int64) * (1 << 20) + c.astype(np.int64)
        i = np.minimum(np.searchsorted(skey, k), skey.size - 1)
        assert np.all(skey[i] == k), "a coincidence single matches no frame"
        return order[i]

    fa = frame_of(records["time_a"], records["crystal_a"])
    fb = frame_of(records["time_a"].astype(np.int64) + records["dt"], records["crystal_b"])
    ta, tb = truth[fa], truth[fb]
    same = (ta["event_id"] == tb["event_id"]) & (ta["kind"] != 3) & (tb["kind"] != 3)
    scattered = (ta["kind"] == 2) | (tb["kind"] == 2)
    return np.where(same & ~scattered, 0, np.where(same, 1, 2))


def split_by_class(geom, prompts, cls, opt):
    """The standard's split applied to each class's own profile (the shifts of all prompts):
    per class (true, scattered, random), the counts in the mask and the part the straight
    line under the peak (plus everything outside the band) calls randoms + scatter."""
    sino = nema.make_sinograms(geom, prompts, prompts[:0], opt)
    shifts = nema.shifts_of(sino)
    k = round(nema.BAND_MM / sino.bin_mm)
    out = []
    for c in range(3):
        h = nema.make_sinograms(geom, prompts[cls == c], prompts[:0], opt).prompts
        out.append(nema.split_profile(nema.profile(h, shifts), sino.centre, k))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("sim")
    p.add_argument("offline")
    p.add_argument("nema_tool")
    p.add_argument("config")
    p.add_argument("work")
    p.add_argument("--activities", default="2,30")
    p.add_argument("--duration-s", type=float, default=0.05)
    p.add_argument("--phantom", default="nema-mouse")
    p.add_argument("--sf-points", type=float, default=1.0)
    p.add_argument("--rate-percent", type=float, default=2.0)
    p.add_argument("--sim-args", default="")
    p.add_argument("--threads", default="2")
    p.add_argument("--trues-tail", type=float, default=0.001,
                   help="without pile-up: most trues the standard's split may call background (fraction)")
    p.add_argument("--delayed-offset-ns", type=float, default=None,
                   help="coincidence.delayed.offset_ps of the sort (default: the config's)")
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    geom = Geometry.from_config(args.config)
    radius = nema.PHANTOMS[args.phantom][0]
    opt = nema.Options(phantom_radius_mm=radius)
    acqs = []
    for a in args.activities.split(","):
        acq = os.path.join(args.work, f"{a}MBq")
        subprocess.run([args.sim, "--config", args.config, "--output-dir", acq, "--phantom", args.phantom,
                        "--activity-MBq", a, "--duration-s", str(args.duration_s), "--threads", args.threads,
                        "--quiet"] + args.sim_args.split(), check=True, stdout=subprocess.DEVNULL)
        conf_path = os.path.join(acq, "petdaq.yaml")
        with open(conf_path, encoding="utf-8") as f:
            conf = yaml.safe_load(f)
        conf.setdefault("coincidence", {}).update(policy="take_all_goods", window_mode="every_single")
        if args.delayed_offset_ns is not None:
            conf["coincidence"].setdefault("delayed", {})["offset_ps"] = args.delayed_offset_ns * 1e3
        with open(conf_path, "w", encoding="utf-8") as f:
            yaml.safe_dump(conf, f)
        plm = os.path.join(args.work, f"{a}MBq.plm")
        subprocess.run([args.offline, "--config", conf_path, "--input", os.path.join(acq, "frames.bin"),
                        "--output", plm, "--backend", "cpu", "--quiet"], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(acq, "truth.json"), encoding="utf-8") as f:
            duration = json.load(f)["duration_s"]
        acqs.append((a, acq, plm, duration))
    out = os.path.join(args.work, "nema")
    cmd = [sys.executable, args.nema_tool, "count-rate", "--config", args.config, "--phantom", args.phantom,
           "--output", out]
    for a, _, plm, duration in acqs:
        cmd += ["--acquisition", f"{plm}={a}@{duration}"]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "count_rate.json"), encoding="utf-8") as f:
        result = json.load(f)
    points = {round(q["activity_MBq"], 6): q for q in result["points"]}
    failures = []
    split_rows = []
    print("| activity MBq | R_t NEMA / truth | R_s NEMA / truth | R_r NEMA / truth | R_tot NEMA / truth | "
          "SF NEMA | SF truth | trues σ |")
    print("|---|---|---|---|---|---|---|---|")
    for i, (a, acq, plm, duration) in enumerate(acqs):
        d = read_plm(plm)
        # The truth counts the prompts the standard's mask keeps, pixel by pixel as petdaq-nema.
        rec = d.prompts[nema.sinogram_bins(geom, d.prompts, opt)[3]]
        cls = classify(acq, rec)
        T, S, R = (int(np.sum(cls == k)) for k in range(3))
        (_, t_bg), (_, s_bg), (_, r_bg) = split_by_class(geom, rec, cls, opt)
        split_rows.append((a, duration, T, S, R, t_bg, s_bg, r_bg, points[round(float(a), 6)]["R_r"] * duration))
        # Without pile-up every true line of response passes within a few mm of the line
        # source: the straight line under the peak must take (almost) none of them.
        with open(os.path.join(acq, "truth.json"), encoding="utf-8") as f:
            piles = json.load(f).get("front_end", {}).get("pile_up_ns", 0) > 0
        if not piles and T >= 1000 and t_bg > args.trues_tail * T:
            failures.append(f"{a} MBq: the line under the peak takes {t_bg:.1f} of {T} trues for background")
        q = points[round(float(a), 6)]
        truth = {"R_t": T / duration, "R_s": S / duration, "R_r": R / duration, "R_tot": rec.size / duration}
        sf_true = S / (T + S)
        ratios = {k: q[k] / v if v else float("nan") for k, v in truth.items()}
        sigma = 1 / np.sqrt(max(T, 1))
        print(f"| {a} | {ratios['R_t']:.4f} | {ratios['R_s']:.4f} | {ratios['R_r']:.4f} | {ratios['R_tot']:.4f} | "
              f"{q['SF']:.4f} | {sf_true:.4f} | {sigma:.4f} |")
        if i == 0 and abs(q["SF"] - sf_true) * 100 > args.sf_points:
            failures.append(f"{a} MBq: scatter fraction {q['SF']:.4f}, truth {sf_true:.4f}")
        # The NEMA randoms are the delayed window's own count: both it and the truth's count
        # fluctuate.
        delayed_counts = q["R_r"] * duration
        for k, counts, other in (("R_t", T, 0), ("R_r", R, delayed_counts), ("R_tot", rec.size, 0)):
            if counts < 100:
                continue
            limit = args.rate_percent / 100 + 3 * np.sqrt(1 / counts + (1 / other if other > 0 else 0))
            if abs(ratios[k] - 1) > limit:
                failures.append(f"{a} MBq: {k} NEMA / truth = {ratios[k]:.4f} (limit ±{limit:.4f})")
    # Where R_s = C_r+s / T - R_r departs from the scattered prompts S: the trues the line
    # under the peak calls background (T_bg), the scatter it calls trues (S - S_bg), the
    # randoms it calls trues (R - R_bg), and the delayed window against the random prompts.
    print()
    print("| activity MBq | scattered S | trues as background T_bg | scatter as trues S - S_bg | "
          "randoms as trues R - R_bg | delayed - R | (R_s NEMA - S) / S |")
    print("|---|---|---|---|---|---|---|")
    for a, duration, T, S, R, t_bg, s_bg, r_bg, delayed in split_rows:
        err = t_bg - (S - s_bg) - (R - r_bg) + (R - delayed)
        print(f"| {a} | {S} | {t_bg:.1f} | {S - s_bg:.1f} | {R - r_bg:.1f} | {delayed - R:.1f} | "
              f"{err / S if S else float('nan'):+.4f} |")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
