#!/usr/bin/python3
"""Compares petdaq-calibrate's tables with the simulator's true tables and truth.

Independent of the tool's code: it reads frames, truth.bin and the .npy tables itself, and
classifies petdaq-offline's prompts by the truth of the frames they came from.

  truth_check.py map|energy|time|end-to-end[,...]|all ACQ_DIR CAL_DIR [--offline PATH] [--plot PNG]

Prints the figures, and exits 1 when one misses its limit (the limits of docs/calibrate.md).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import yaml
except ImportError as e:
    print(f"skipped: {e} (python3-numpy, python3-yaml)")
    sys.exit(77)

FRAME = np.dtype([("head_du", "u1"), ("bdm", "u1"), ("time", ">u8"), ("x", "u1"), ("y", "u1"),
                  ("energy", ">u2"), ("temp_int", "i1"), ("temp_frac_tail", "u1")])
TRUTH = np.dtype([("event_id", "<u8"), ("event_ticks", "<u8"), ("crystal", "<u4"), ("energy_keV", "<f4"),
                  ("kind", "u1"), ("photon", "u1"), ("phantom_scatters", "u1"), ("flags", "u1"),
                  ("reserved", "<u4")])
RECORD = np.dtype([("time_a", "<u8"), ("dt", "<i4"), ("crystal_a", "<u4"), ("crystal_b", "<u4"),
                   ("energy_a", "<f4"), ("energy_b", "<f4"), ("flags", "<u4")])


FIGURES = {}
SIM_ENERGY_RESOLUTION_PERCENT = 12.0  # petdaq-sim --energy-resolution default (docs/simulator.md)


def plot(path):
    """The per-crystal errors against truth: photopeaks and time offsets."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    if "photopeaks" in FIGURES:
        axes[0].hist(FIGURES["photopeaks"], bins=80, color="C0")
        for x in (511 * 0.99, 511 * 1.01):
            axes[0].axvline(x, color="r", ls="--", lw=0.8)
        axes[0].set_xlabel("true 511 keV photopeak through the calibrated table (keV)")
        axes[0].set_ylabel("crystals")
        axes[0].set_title("energy: limits at +-1 %")
    if "time_diff" in FIGURES:
        d = FIGURES["time_diff"]
        axes[1].hist(d, bins=np.arange(np.floor(d.min()) - 0.5, np.ceil(d.max()) + 1), color="C1")
        axes[1].set_xlabel("calibrated - true offset, mean removed (ticks of 15.625 ps)")
        axes[1].set_ylabel("crystals")
        axes[1].set_title(f"time offsets: rms {np.sqrt(np.mean(d ** 2)):.2f} ticks")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


class Acq:
    def __init__(self, acq):
        self.dir = acq
        with open(os.path.join(acq, "petdaq.yaml"), encoding="utf-8") as f:
            self.config = yaml.safe_load(f)
        s = self.config["scanner"]
        self.s = s
        self.du_per_bdm = s["du_transaxial"] * s["du_axial"]
        self.per_du = s["crystal_transaxial"] * s["crystal_axial"]
        self.frames = np.fromfile(os.path.join(acq, "frames.bin"), dtype=FRAME)
        self.truth = np.fromfile(os.path.join(acq, "truth.bin"), dtype=TRUTH)
        assert self.frames.size == self.truth.size
        self.bdm = self.frames["bdm"].astype(np.int64)
        self.du = (self.frames["head_du"] & 15).astype(np.int64)
        self.raw = self.frames["energy"].astype(np.int64)
        self.bin_width = int(self.config["calibration"].get("energy_bin_width", 10))
        window = self.config.get("energy_window") or {}
        self.window = (np.float32(window.get("low_keV", 350.0)), np.float32(window.get("high_keV", 650.0)))

    def table(self, d, name):
        return np.load(os.path.join(d, name))

    def local(self, lut):
        """Local crystal of every frame by a position table, -1 for no crystal."""
        label = lut[self.bdm, self.du, self.frames["y"], self.frames["x"]].astype(np.int64)
        row, col = np.divmod(label, self.s["crystal_axial"])
        local = (self.s["crystal_transaxial"] - 1 - row) * self.s["crystal_axial"] + col
        return np.where(label < self.per_du, local, -1)

    def energy(self, local, table):
        ok = local >= 0
        bins = table.shape[-1]
        e = np.full(local.size, np.nan, dtype=np.float32)
        e[ok] = self.raw[ok].astype(np.float32) * table[self.bdm[ok], self.du[ok], local[ok],
                                                        np.minimum(self.raw[ok] // self.bin_width, bins - 1)]
        return e


def check_map(acq, cal):
    true_local = acq.local(acq.table(acq.dir, "position_lut.npy"))
    cal_local = acq.local(acq.table(cal, "position_lut.npy"))
    identified = acq.truth["flags"] == 0  # the simulator's table names the truth crystal
    agree = np.mean(cal_local[identified] == true_local[identified])
    print(f"crystal map: {identified.sum()} frames whose truth crystal the true table names; "
          f"{agree * 100:.3f} % get the same crystal from the calibrated table (limit 99 %)")
    return agree >= 0.99


def check_energy(acq, cal):
    true_local = acq.local(acq.table(acq.dir, "position_lut.npy"))
    ok = true_local >= 0
    e_cal = acq.energy(true_local, acq.table(cal, "energy_correction.npy"))
    e_true = acq.energy(true_local, acq.table(acq.dir, "energy_correction.npy"))
    t = acq.truth
    # Where each crystal's photopeak lands: the raw value the true table calls 511 keV
    # (found on the true table's bins, linearly between bin centres), through the
    # calibrated table.
    e_true_table = acq.table(acq.dir, "energy_correction.npy")
    e_cal_table = acq.table(cal, "energy_correction.npy")
    bins = e_true_table.shape[-1]
    raw = np.arange(bins) * acq.bin_width + 0.5 * (acq.bin_width - 1)
    true_kev = raw[None, :] * e_true_table.reshape(-1, bins)
    raw511 = np.array([np.interp(511.0, row, raw) for row in true_kev])
    at = np.minimum((raw511 // acq.bin_width).astype(np.int64), bins - 1)
    photopeaks = raw511 * e_cal_table.reshape(-1, bins)[np.arange(raw511.size), at]
    worst = np.max(np.abs(photopeaks / 511 - 1))
    FIGURES["photopeaks"] = photopeaks
    print(f"energy: {photopeaks.size} crystals; the true 511 keV photopeak reads {photopeaks.min():.2f} .. "
          f"{photopeaks.max():.2f} keV through the calibrated table (mean {photopeaks.mean():.2f}), worst "
          f"{worst * 100:.3f} % off 511 (limit 1 %)")
    lo, hi = acq.window
    photons = ok & (t["kind"] == 1)
    acc_cal = np.mean((e_cal[photons] >= lo) & (e_cal[photons] <= hi))
    acc_true = np.mean((e_true[photons] >= lo) & (e_true[photons] <= hi))
    rel = acc_cal / acc_true - 1
    print(f"energy: window acceptance of true 511 keV photons {acc_cal * 100:.3f} % calibrated, "
          f"{acc_true * 100:.3f} % true table: {rel * 100:+.3f} % (limit 1 %)")
    good = worst <= 0.01 and abs(rel) <= 0.01
    # The report's energy resolution (written by the time-offset step, so not for a
    # crystal-map and energy run alone) against the simulator's 12 % at 511 keV.
    report = os.path.join(cal, "energy_resolution.txt")
    if os.path.exists(report):
        text = open(report, encoding="utf-8").read()
        glob = float(re.search(r"all crystals: ([0-9.]+) \+- ", text).group(1))
        median = float(re.search(r"median ([0-9.]+) %", text).group(1))
        print(f"energy resolution: {glob:.2f} % all crystals, median {median:.2f} % per crystal; "
              f"simulated {SIM_ENERGY_RESOLUTION_PERCENT} % (limit 0.5 points)")
        good = good and abs(glob - SIM_ENERGY_RESOLUTION_PERCENT) <= 0.5 and \
            abs(median - SIM_ENERGY_RESOLUTION_PERCENT) <= 0.5
    return good


def check_time(acq, cal):
    true = acq.table(acq.dir, "time_offsets.npy").astype(float)
    got = acq.table(cal, "time_offsets.npy").astype(float)
    diff = got - true
    diff -= diff.mean()
    rms = np.sqrt(np.mean(diff ** 2))
    FIGURES["time_diff"] = diff
    tick = float(acq.s["tick_ps"])
    print(f"time offsets: {got.size} crystals, rms difference to the true offsets after removing "
          f"the constant {rms:.3f} ticks ({rms * tick:.1f} ps; limit 1 tick)")
    return rms <= 1.0


def run_offline(offline, acq, tables_dir, work, name):
    conf = dict(acq.config)
    conf["calibration"] = dict(conf["calibration"])
    for k in ("position_lut", "energy_correction", "time_offsets"):
        conf["calibration"][k] = os.path.abspath(os.path.join(tables_dir, k + ".npy"))
    path = os.path.join(work, name + ".yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(conf, f)
    plm = os.path.join(work, name + ".plm")
    subprocess.run([offline, "--config", path, "--input", os.path.join(acq.dir, "frames.bin"),
                    "--output", plm, "--backend", "cpu", "--quiet"], check=True, stdout=subprocess.DEVNULL)
    data = np.fromfile(plm, dtype=np.uint8)
    pos, prompts = 64, []
    while pos < data.size:
        head = data[pos:pos + 64]
        kind = int(head[6:8].view("<u2")[0])
        count = int(head[48:52].view("<u4")[0])
        if kind == 1:
            prompts.append(data[pos + 64:pos + 64 + 32 * count].view(RECORD))
        pos += 64 + 32 * count
    return np.concatenate(prompts), conf


def trues(acq, tables_dir, records):
    """Prompts whose two singles are the two unscattered photons of one decay: each single
    is found back as the frame with its (corrected time, crystal)."""
    s = acq.s
    local = acq.local(acq.table(tables_dir, "position_lut.npy"))
    ok = local >= 0
    b_axial, b_trans = np.divmod(acq.bdm, s["bdm_transaxial"])
    d_trans, d_axial = np.divmod(acq.du, s["du_axial"])
    c_trans, c_axial = np.divmod(np.maximum(local, 0), s["crystal_axial"])
    per_ring = s["bdm_transaxial"] * s["du_transaxial"] * s["crystal_transaxial"]
    crystal = ((b_axial * s["du_axial"] * s["crystal_axial"] + d_axial * s["crystal_axial"] + c_axial) * per_ring
               + b_trans * s["du_transaxial"] * s["crystal_transaxial"] + d_trans * s["crystal_transaxial"] + c_trans)
    offsets = acq.table(tables_dir, "time_offsets.npy").astype(np.int64)
    time = acq.frames["time"].astype(np.int64) + offsets[crystal]
    key = np.where(ok, time * (1 << 20) + crystal, -1)
    order = np.argsort(key)
    skey = key[order]

    def frame_of(t, c):
        k = t.astype(np.int64) * (1 << 20) + c.astype(np.int64)
        i = np.searchsorted(skey, k)
        assert np.all(skey[np.minimum(i, skey.size - 1)] == k), "a prompt single matches no frame"
        return order[i]

    fa = frame_of(records["time_a"], records["crystal_a"])
    fb = frame_of(records["time_a"].astype(np.int64) + records["dt"], records["crystal_b"])
    t = acq.truth
    return int(np.sum((t["event_id"][fa] == t["event_id"][fb]) & (t["kind"][fa] == 1) & (t["kind"][fb] == 1)))


def check_end_to_end(acq, cal, offline):
    with tempfile.TemporaryDirectory() as work:
        rec_true, _ = run_offline(offline, acq, acq.dir, work, "true")
        rec_cal, _ = run_offline(offline, acq, cal, work, "calibrated")
        t_true, t_cal = trues(acq, acq.dir, rec_true), trues(acq, cal, rec_cal)
    rel = t_cal / t_true - 1
    print(f"end to end: prompts {rec_true.size} (true tables), {rec_cal.size} (calibrated); trues "
          f"{t_true} and {t_cal}: {rel * 100:+.3f} % (limit 1 %)")
    return abs(rel) <= 0.01


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", help="map, energy, time, end-to-end, several joined by commas, or all")
    p.add_argument("acq")
    p.add_argument("cal")
    p.add_argument("--offline", default="petdaq-offline")
    p.add_argument("--plot", default=None, help="a PNG of the per-crystal errors against truth")
    a = p.parse_args()
    acq = Acq(a.acq)
    checks = {"map": lambda: check_map(acq, a.cal), "energy": lambda: check_energy(acq, a.cal),
              "time": lambda: check_time(acq, a.cal),
              "end-to-end": lambda: check_end_to_end(acq, a.cal, a.offline)}
    names = list(checks) if a.what == "all" else a.what.split(",")
    unknown = [n for n in names if n not in checks]
    if unknown:
        p.error(f"unknown check {unknown[0]}")
    results = [checks[n]() for n in names]
    if a.plot:
        plot(a.plot)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
