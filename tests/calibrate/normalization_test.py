#!/usr/bin/python3
"""Normalisation from data and the exports' corrections, end to end on the small scanner:
a uniform cylinder simulated with per-crystal efficiencies (10 % rms), sorted by
petdaq-offline, calibrated by `petdaq-calibrate normalization`, exported by petdaq-export
to CASToR (TOF, randoms, normalisation) and HDF5. One step per invocation:

  setup    simulate, sort, split the prompts in two halves, calibrate on the whole and on
           one half (checked on the other)
  truth    crystal efficiencies within 2 % rms of the simulator's truth
  flat     normalised counts of the held-out half flat within statistics (and not without
           the table)
  castor   the CASToR export: header, TOF = petdaq's signed Δt, crystal order, the
           normalisation factor from the table, randoms per pair against the delayed
  hdf5     the HDF5 export read with the Python package: the same values as CASToR's
  refused  a record with an out-of-range crystal: exit 2, a clear message, no file left
  dead     the same acquisition with dead-interval messages (kind 5) between its messages
           gives the same normalisation table byte for byte (other kinds are skipped)
  calibrate_refusals  too short an acquisition, a cylinder wider than the ring, another
           scanner's file, a negative attenuation: refused with the reason, no table written

Exit 77 (skip) when numpy, scipy, matplotlib or yaml (or h5py for hdf5) is missing."""
import argparse
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy as np
    import scipy  # noqa: F401
    import matplotlib  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    print(f"skipped: {e} (python3-numpy, python3-scipy, python3-matplotlib, python3-yaml)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tools", "calibrate"))
sys.path.insert(0, os.path.join(SOURCE, "python"))
from petdaq_calibrate import normalization as nz  # noqa: E402
from petdaq_calibrate.listmode import DELAYED, PROMPTS, read_coincidences  # noqa: E402
from petdaq_calibrate.scanner import Scanner, load_config  # noqa: E402
import petdaq  # noqa: E402

# A water cylinder of 10 mm radius filling the 12.8 mm axial field of view, 15 MBq for 10 s:
# about 1.3 M prompts, 4600 per crystal on lines through the cylinder (1.5 % statistical
# precision per crystal efficiency). 10 % rms crystal efficiencies.
RADIUS, LENGTH = "10", "14"
SIM = ["--duration-s", "10", "--activity-MBq", "15", "--source", "cylinder", "--phantom-radius-mm", RADIUS,
       "--phantom-length-mm", LENGTH, "--seed", "7", "--detector-seed", "3", "--threads", "2",
       "--crystal-efficiency-spread", "0.1"]
SOURCE_ARGS = ["--source-radius-mm", RADIUS, "--source-length-mm", LENGTH]


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def split_plm(path, even, odd):
    """Every message into both files, its prompts and delayed split by record parity: two
    independent halves of the acquisition over the same time span."""
    data = np.fromfile(path, dtype=np.uint8)
    head = int(data[6:8].view("<u2")[0])
    outs = [bytearray(data[:head].tobytes()), bytearray(data[:head].tobytes())]
    pos = head
    while pos < data.size:
        mh = data[pos:pos + 64].copy()
        count, size = (int(x) for x in mh[48:56].view("<u4"))
        body = data[pos + 64:pos + 64 + count * size]
        kind = int(mh[6:8].view("<u2")[0])
        for k in (0, 1):
            part = body.reshape(count, size)[k::2] if kind in (PROMPTS, DELAYED) and count else body
            h = mh.copy()
            h[48:52] = np.frombuffer(np.uint32(part.shape[0] if part.ndim == 2 else count).tobytes(), np.uint8)
            outs[k] += h.tobytes() + part.tobytes()
        pos += 64 + count * size
    for out, name in ((outs[0], even), (outs[1], odd)):
        with open(name, "wb") as f:
            f.write(out)


def setup(a):
    acq = os.path.join(a.work, "acq")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    run([os.path.join(a.bin, "petdaq-sim"), "--config", a.config, "--output-dir", acq, "-q"] + SIM)
    plm, pdh = os.path.join(acq, "cylinder.plm"), os.path.join(acq, "cylinder.pdh")
    run([os.path.join(a.bin, "petdaq-offline"), "--config", os.path.join(acq, "petdaq.yaml"), "--input",
         os.path.join(acq, "frames.bin"), "--output", plm, "--histograms", pdh, "--backend", "cpu", "-q"],
        stdout=subprocess.DEVNULL)
    for big in ("frames.bin", "truth.bin"):
        os.remove(os.path.join(acq, big))
    even, odd = os.path.join(a.work, "even.plm"), os.path.join(a.work, "odd.plm")
    split_plm(plm, even, odd)
    tool = os.path.join(a.bin, "petdaq-calibrate")
    run([tool, "normalization", "--config", a.config, "--listmode", plm, "--output-dir",
         os.path.join(a.work, "norm")] + SOURCE_ARGS)
    run([tool, "normalization", "--config", a.config, "--listmode", even, "--check-listmode", odd,
         "--output-dir", os.path.join(a.work, "norm_half")] + SOURCE_ARGS)
    return 0


def scanner_of(a):
    return Scanner.from_config(load_config(a.config), a.config)


def truth(a):
    scanner = scanner_of(a)
    layout = nz.Layout(scanner)
    true = np.load(os.path.join(a.work, "acq", "crystal_efficiency.npy")).astype(np.float64)
    eps = np.load(os.path.join(a.work, "norm", nz.CRYSTAL_FILE)).astype(np.float64)
    # The block profile takes each (ring, position across the panel) class's mean: the
    # crystal efficiency is defined relative to it, and so is the truth it is compared with.
    cls = layout.ring * layout.per_panel + layout.pos
    true /= (np.bincount(cls, true) / np.bincount(cls))[cls]
    rms = float(np.std(eps / true - 1.0))
    spread = float(np.std(true))
    report = open(os.path.join(a.work, "norm", "normalization.txt"), encoding="utf-8").read()
    precision = float(re.search(r"statistical precision \(1 / sqrt\(fan counts\)\) ([0-9.]+) %", report).group(1))
    print(f"crystal efficiencies: {rms * 100:.2f} % rms from the truth (truth spread {spread * 100:.2f} %, "
          f"statistical precision {precision:.2f} %); limit 2 %")
    # Within 2 %, and within 30 % of the Poisson precision: no systematic error of size.
    ok = rms < 0.02 and rms < 1.3 * precision / 100 and spread > 0.05
    return 0 if ok else 1


def flat(a):
    text = open(os.path.join(a.work, "norm_half", "normalization.txt"), encoding="utf-8").read()
    print(text, end="")
    rows = re.findall(r"^  (.+): ([0-9.]+)  ([0-9.]+)  (\d+)  ([0-9.]+)  ([0-9.]+)$", text, re.M)
    if len(rows) != 4:
        print(f"expected 4 flatness rows in the report, found {len(rows)}")
        return 1
    bad = 0
    for name, with_t, without, groups, expected, limit in rows:
        with_t, without, limit = float(with_t), float(without), float(limit)
        good = with_t <= limit and without > limit
        print(f"{name}: chi2/dof {with_t:.3f} with the table (limit {limit:.3f}), {without:.3f} without: "
              f"{'ok' if good else 'FAIL'}")
        bad += not good
    return 1 if bad else 0


def export(a, fmt, out, extra=()):
    acq = os.path.join(a.work, "acq")
    run([os.path.join(a.bin, "petdaq-export"), "--input", os.path.join(acq, "cylinder.plm"), "--config",
         os.path.join(acq, "petdaq.yaml"), "--format", fmt, "--output", out, "--normalization",
         os.path.join(a.work, "norm"), "--histograms", os.path.join(acq, "cylinder.pdh"), "-q", *extra])


def expected_corrections(a, prompts):
    """Normalisation factor and randoms proportional to s_a s_b, recomputed here from the
    table and the histograms' singles."""
    scanner = scanner_of(a)
    layout = nz.Layout(scanner)
    tables = nz.load_tables(os.path.join(a.work, "norm"), scanner)
    lo = np.minimum(prompts["crystal_a"], prompts["crystal_b"]).astype(np.int64)
    hi = np.maximum(prompts["crystal_a"], prompts["crystal_b"]).astype(np.int64)
    eff = nz.lor_efficiency(layout, tables, lo, hi)
    singles = petdaq.read_histograms(os.path.join(a.work, "acq", "cylinder.pdh"))["crystal_singles"].counts
    return lo, hi, 1.0 / eff, singles.astype(np.float64)


def castor(a):
    base = os.path.join(a.work, "castor")
    export(a, "castor", base)
    hdr, ev = petdaq.read_castor(base)
    prompts, head = read_coincidences(os.path.join(a.work, "acq", "cylinder.plm"), PROMPTS)
    delayed, _ = read_coincidences(os.path.join(a.work, "acq", "cylinder.plm"), DELAYED)
    doc = load_config(os.path.join(a.work, "acq", "petdaq.yaml"))
    window_ps = float((doc.get("coincidence") or {}).get("window_ps", 4000.0))
    checks = []

    def check(what, ok):
        print(f"{what}: {'ok' if ok else 'FAIL'}")
        checks.append(ok)

    check("header: TOF flag, resolution, range 2 W, tick quantisation, randoms and normalisation flags",
          hdr["TOF information flag"] == "1" and float(hdr["TOF resolution (ps)"]) > 0
          and float(hdr["List TOF measurement range (ps)"]) == 2 * window_ps
          and float(hdr["List TOF quantization bin size (ps)"]) == float(head["tick_ps"])
          and hdr["Random correction flag"] == "1" and hdr["Normalization correction flag"] == "1"
          and float(hdr["petdaq live-time fraction"]) == 1.0)
    check(f"{ev.size} events, one per prompt", ev.size == prompts.size)
    lo, hi, norm, singles = expected_corrections(a, prompts)
    check("crystal 1 is the lower id", bool(np.all(ev["id1"] == lo) and np.all(ev["id2"] == hi)))
    tof = petdaq.signed_dt_ticks(prompts) * float(head["tick_ps"])
    check("TOF = t(crystal 1) - t(crystal 2) = petdaq's signed Δt in ps",
          bool(np.allclose(ev["tof_ps"], tof, rtol=0, atol=1e-3)))
    check("TOF within the measurement range", bool(np.all(np.abs(ev["tof_ps"]) <= window_ps)))
    rel = np.abs(ev["normalization"] / norm - 1.0)
    check(f"normalisation factor = 1 / table's LOR efficiency (max deviation {rel.max():.1e})",
          bool(rel.max() < 1e-5))
    k = ev["randoms_per_s"] / (singles[lo] * singles[hi])
    spread = float(np.std(k) / np.mean(k))
    check(f"randoms per pair proportional to s_1 s_2 (relative spread of the constant {spread:.1e})",
          spread < 1e-5)
    # The randoms map's shape against the delayed coincidences (which sample it regardless
    # of the policy): per crystal, the delayed fan sums vs the randoms of every pair.
    n = scanner_of(a).crystal_count
    s = singles
    pair_sum = s * (s.sum() - s)  # Σ_j s_i s_j, j ≠ i: every pair can pair on this scanner
    fan_delayed = np.bincount(delayed["crystal_a"], minlength=n) + np.bincount(delayed["crystal_b"], minlength=n)
    expected = pair_sum / pair_sum.sum() * fan_delayed.sum()
    chi2 = float(np.sum((fan_delayed - expected) ** 2 / expected) / (n - 1))
    check(f"per-crystal randoms shape vs {delayed.size} delayed: chi2/dof {chi2:.3f} (limit 1.3)", chi2 < 1.3)
    # CASToR's normalisation data file (for the sensitivity image): every pair the sorter can
    # form, with the events' factor.
    nhdr, lines = petdaq.read_castor(base + "_norm")
    min_sectors = int((doc.get("coincidence") or {}).get("min_sector_difference", 0))
    check(f"normalisation file: {lines.size} lines, every pair (min_sector_difference {min_sectors})",
          nhdr["Data mode"] == "normalization" and min_sectors == 0 and lines.size == n * (n - 1) // 2
          and bool(np.all(lines["id1"] < lines["id2"])))
    layout = nz.Layout(scanner_of(a))
    tables = nz.load_tables(os.path.join(a.work, "norm"), scanner_of(a))
    want = 1.0 / nz.lor_efficiency(layout, tables, lines["id1"].astype(np.int64), lines["id2"].astype(np.int64))
    check("normalisation file factors = 1 / the table's LOR efficiency",
          bool(np.max(np.abs(lines["normalization"] / want - 1.0)) < 1e-5))
    # Histogram mode: every line with its prompts and the same factors.
    hist_base = os.path.join(a.work, "castor_histogram")
    for old in (hist_base + "_norm.cdh", hist_base + "_norm.cdf"):
        if os.path.exists(old):
            os.remove(old)
    export(a, "castor", hist_base, ["--castor-mode", "histogram"])
    hh, hist = petdaq.read_castor(hist_base)
    counts = np.zeros(n * (n - 1) // 2)
    np.add.at(counts, lo * (2 * n - lo - 1) // 2 + (hi - lo - 1), 1)
    check(f"histogram: {hist.size} lines, their counts = the prompts per line ({int(hist['counts'].sum())} in all)",
          hh["Data mode"] == "histogram" and hist.size == n * (n - 1) // 2
          and not os.path.exists(hist_base + "_norm.cdh")
          and np.array_equal(hist["counts"], counts.astype(np.float32))
          and np.array_equal(hist["normalization"], lines["normalization"]))
    with np.errstate(divide="ignore", invalid="ignore"):
        k_hist = hist["randoms_per_s"] / (singles[hist["id1"]] * singles[hist["id2"]])
    check("histogram randoms: the same per-pair rate as the list mode's",
          bool(np.allclose(k_hist[np.isfinite(k_hist)], np.mean(k), rtol=1e-5)))
    total = float(hdr["petdaq randoms"].split(",")[1].split()[0])
    duration = float(hdr["Duration (s)"])
    print(f"randoms {total:.0f} per s in all, {total * duration:.0f} over the acquisition; "
          f"{delayed.size} delayed, {prompts.size} prompts")
    return 0 if all(checks) else 1


def hdf5(a):
    try:
        import h5py  # noqa: F401
    except ImportError:
        print("skipped: h5py (python3-h5py) missing")
        return 77
    out = os.path.join(a.work, "export.h5")
    export(a, "hdf5", out)
    x = petdaq.read_export_hdf5(out)
    prompts, head = read_coincidences(os.path.join(a.work, "acq", "cylinder.plm"), PROMPTS)
    _, ev = petdaq.read_castor(os.path.join(a.work, "castor")) if os.path.exists(
        os.path.join(a.work, "castor.cdh")) else (None, None)
    lo, hi, norm, singles = expected_corrections(a, x.prompts)
    ok = [
        x.prompts.size == prompts.size,
        np.array_equal(x.prompts_signed_dt_ps, (petdaq.signed_dt_ticks(x.prompts) * float(head["tick_ps"])).astype(np.float32)),
        x.delayed_signed_dt_ps.size == x.delayed.size,
        "lower crystal id" in x.signed_dt_convention,
        bool(np.max(np.abs(x.normalization / norm - 1.0)) < 1e-5),
        x.randoms_per_s is not None and x.randoms_per_s.size == x.prompts.size,
        x.live_fraction == 1.0 and x.acquisition_s > 9.9 and x.dead_time_s == 0.0,
    ]
    if ev is not None:
        ok.append(bool(np.array_equal(ev["randoms_per_s"], x.randoms_per_s)))
        ok.append(bool(np.array_equal(ev["tof_ps"], x.prompts_signed_dt_ps)))
    print(f"HDF5: {x.prompts.size} prompts, {x.delayed.size} delayed, live fraction {x.live_fraction}, "
          f"randoms model {x.attributes.get('randoms_model')}; checks {ok}")
    return 0 if all(ok) else 1


def refused(a):
    plm = os.path.join(a.work, "acq", "cylinder.plm")
    bad = os.path.join(a.work, "bad_crystal.plm")
    data = np.fromfile(plm, dtype=np.uint8)
    head = int(data[6:8].view("<u2")[0])
    # The first record of the first non-empty prompts message gets crystal_b = 512 (of 512).
    pos = head
    while True:
        count = int(data[pos + 48:pos + 52].view("<u4")[0])
        if int(data[pos + 6:pos + 8].view("<u2")[0]) == PROMPTS and count:
            break
        pos += 64 + count * 32
    data[pos + 64 + 16:pos + 64 + 20] = np.frombuffer(np.uint32(512).tobytes(), np.uint8)
    data.tofile(bad)
    acq = os.path.join(a.work, "acq")
    failures = 0
    for fmt, out, left in (("castor", os.path.join(a.work, "refused"), os.path.join(a.work, "refused.cdf")),
                           ("hdf5", os.path.join(a.work, "refused.h5"), os.path.join(a.work, "refused.h5"))):
        done = subprocess.run([os.path.join(a.bin, "petdaq-export"), "--input", bad, "--config",
                               os.path.join(acq, "petdaq.yaml"), "--format", fmt, "--output", out, "-q"],
                              capture_output=True, text=True)
        good = done.returncode == 2 and "crystal id 512 is out of range" in done.stderr and not os.path.exists(left)
        print(f"{fmt}: exit {done.returncode}, {done.stderr.strip()!r}, output left: {os.path.exists(left)}: "
              f"{'ok' if good else 'FAIL'}")
        failures += not good
    done = subprocess.run([os.path.join(a.bin, "petdaq-export"), "--input", bad, "--config",
                           os.path.join(acq, "petdaq.yaml"), "--format", "hdf5", "--castor-mode", "histogram",
                           "--output", os.path.join(a.work, "usage.h5")], capture_output=True, text=True)
    good = done.returncode == 2 and "--castor-mode" in done.stderr
    print(f"--castor-mode with hdf5: exit {done.returncode}: {'ok' if good else 'FAIL'}")
    failures += not good
    return 1 if failures else 0


def dead(a):
    plm = os.path.join(a.work, "acq", "cylinder.plm")
    data = np.fromfile(plm, dtype=np.uint8)
    head = int(data[6:8].view("<u2")[0])
    out = bytearray(data[:head].tobytes())
    pos, inserted = head, 0
    while pos < data.size:
        mh = data[pos:pos + 64]
        count, size = (int(x) for x in mh[48:56].view("<u4"))
        out += data[pos:pos + 64 + count * size].tobytes()
        t_begin, t_end = (int(x) for x in mh[32:48].view("<u8"))
        # A 24-byte DeadInterval (t_begin, t_end, frames_dropped) in a kind-5 message.
        dh = mh.copy()
        dh[6:8] = np.frombuffer(np.uint16(5).tobytes(), np.uint8)
        dh[48:56] = np.frombuffer(np.array([1, 24], dtype="<u4").tobytes(), np.uint8)
        body = np.array([t_begin, t_begin + (t_end - t_begin) // 10, 99], dtype="<u8")
        out += dh.tobytes() + body.tobytes()
        inserted += 1
        pos += 64 + count * size
    with_dead = os.path.join(a.work, "with_dead.plm")
    with open(with_dead, "wb") as f:
        f.write(out)
    got = os.path.join(a.work, "norm_with_dead")
    run([os.path.join(a.bin, "petdaq-calibrate"), "normalization", "--config", a.config, "--listmode", with_dead,
         "--output-dir", got] + SOURCE_ARGS)
    same = [n for n in (nz.CRYSTAL_FILE, nz.BLOCK_FILE, nz.GEOMETRIC_FILE, nz.AXIAL_FILE)
            if open(os.path.join(got, n), "rb").read() == open(os.path.join(a.work, "norm", n), "rb").read()]
    print(f"{inserted} dead-interval messages inserted; tables equal to the original's: {len(same)} of 4")
    return 0 if len(same) == 4 and inserted > 0 else 1


def calibrate_refusals(a):
    plm = os.path.join(a.work, "acq", "cylinder.plm")
    short = os.path.join(a.work, "short.plm")
    data = np.fromfile(plm, dtype=np.uint8)
    head = int(data[6:8].view("<u2")[0])
    # The file header and the first 2 000 prompts of the first message: too few per crystal.
    first = data[:head + 64 + 2000 * 32].copy()
    first[head + 48:head + 52] = np.frombuffer(np.uint32(2000).tobytes(), np.uint8)
    first.tofile(short)
    default_config = os.path.join(SOURCE, "config", "petdaq.yaml")
    cases = [
        ("a short acquisition", [short], a.config, 1, "acquire longer"),
        ("a cylinder wider than the ring", [plm, "--source-radius-mm", "25"], a.config, 1, "not inside the ring"),
        ("another scanner's file", [plm], default_config, 1, "512 crystals, the configuration 16224"),
        ("a negative attenuation", [plm, "--attenuation-per-mm", "-1"], a.config, 2, "must be >= 0"),
    ]
    failures = 0
    for name, args, config, want_rc, want_text in cases:
        out = os.path.join(a.work, "refused_norm")
        shutil.rmtree(out, ignore_errors=True)
        done = subprocess.run([os.path.join(a.bin, "petdaq-calibrate"), "normalization", "--config", config,
                               "--output-dir", out, "--listmode"] + args, capture_output=True, text=True)
        wrote = os.path.exists(os.path.join(out, nz.CRYSTAL_FILE))
        good = done.returncode == want_rc and want_text in done.stderr and not wrote
        print(f"{name}: exit {done.returncode}, {(done.stderr.strip().splitlines() or [''])[-1]!r}, table written: {wrote}: "
              f"{'ok' if good else 'FAIL'}")
        failures += not good
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("step", choices=["setup", "truth", "flat", "castor", "hdf5", "refused", "dead",
                                    "calibrate_refusals"])
    p.add_argument("--bin", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    return {"setup": setup, "truth": truth, "flat": flat, "castor": castor, "hdf5": hdf5,
            "refused": refused, "dead": dead, "calibrate_refusals": calibrate_refusals}[a.step](a)


if __name__ == "__main__":
    sys.exit(main())
