#!/usr/bin/python3
"""petdaq-calibrate dead-time against the simulator (docs/dead_time.md).

  dead_time_test.py --bin BIN --config CONFIG --work DIR

Simulates the default mouse acquisition with a front-end dead time and pile-up at four
activities, fits the dead-time table from them (petdaq-calibrate dead-time), checks that
the lossless singles per MBq it reports are flat within 1.5 %; fits it again from one
decaying source (--decaying) and checks the same τ within 5 %; then has petdaq-sim-check
simulate other acquisitions (another seed) and correct their true prompts by the live time
the table gives (the daemon's code, core/dead_time.cpp): the corrected trues per MBq must
stay within 2 % (+ 3 sigma of the counts) of the lowest activity's up to the NECR peak,
while the uncorrected ones fall far below. Exit 1 on a miss, 77 without NumPy/SciPy/YAML.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy  # noqa: F401
    import scipy  # noqa: F401
    import yaml
except ImportError as e:
    print(f"skipped: {e} (python3-numpy, python3-scipy, python3-yaml)")
    sys.exit(77)

FRONT_END = ["--dead-time-ns", "1000", "--pile-up-ns", "100"]
CALIBRATION = [("2", "0.05"), ("10", "0.02"), ("40", "0.01"), ("80", "0.01")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    sim = os.path.join(a.bin, "petdaq-sim")
    acqs = []
    for activity, duration in CALIBRATION:
        d = os.path.join(a.work, f"cal{activity}")
        subprocess.run([sim, "--config", a.config, "--output-dir", d, "--activity-MBq", activity,
                        "--duration-s", duration, "--seed", "21", "--threads", "2", "--quiet"] + FRONT_END,
                       check=True, stdout=subprocess.DEVNULL)
        acqs.append((d, activity))
    first = acqs[0][0]
    out = os.path.join(a.work, "table")
    cmd = [os.path.join(a.bin, "petdaq-calibrate"), "dead-time", "--config", os.path.join(first, "petdaq.yaml"),
           "--position-lut", os.path.join(first, "position_lut.npy"),
           "--energy-correction", os.path.join(first, "energy_correction.npy"), "--output-dir", out]
    for d, activity in acqs:
        cmd += ["--acquisition", f"{os.path.join(d, 'frames.bin')}={activity}"]
    fit = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    print(fit)
    failures = []
    relative = [float(line.split("|")[5]) for line in fit.splitlines() if re.match(r"^[0-9.]+ \|", line)]
    if len(relative) != len(CALIBRATION) or max(abs(r - 1) for r in relative) > 0.015:
        failures.append(f"lossless singles per MBq not flat within 1.5 %: {relative}")
    with open(os.path.join(out, "dead_time.yaml"), encoding="utf-8") as f:
        table = yaml.safe_load(f)
    if table["format"] != "petdaq dead-time 1" or len(table["tau_s"]) != 24:
        failures.append("dead_time.yaml: wrong format or number of BDMs")

    # The same front end from one decaying source (T½ = 20 ms over 80 ms: 80 to 5 MBq), cut
    # into eight intervals: the same τ within 5 %, the same flat lossless singles.
    dec = os.path.join(a.work, "decaying")
    subprocess.run([sim, "--config", a.config, "--output-dir", dec, "--activity-MBq", "80", "--half-life-s", "0.02",
                    "--duration-s", "0.08", "--seed", "23", "--threads", "2", "--quiet"] + FRONT_END,
                   check=True, stdout=subprocess.DEVNULL)
    dec_out = os.path.join(a.work, "table_decaying")
    fit_dec = subprocess.run(
        cmd[:cmd.index("--output-dir")] + ["--output-dir", dec_out,
                                            "--decaying", f"{os.path.join(dec, 'frames.bin')}=80",
                                            "--half-life-s", "0.02", "--intervals", "8"],
        check=True, capture_output=True, text=True).stdout
    print(fit_dec)
    relative = [float(line.split("|")[5]) for line in fit_dec.splitlines() if re.match(r"^[0-9.]+ \|", line)]
    if len(relative) != 8 or max(abs(r - 1) for r in relative) > 0.02:
        failures.append(f"decaying source: lossless singles per MBq not flat within 2 %: {relative}")
    with open(os.path.join(dec_out, "dead_time.yaml"), encoding="utf-8") as f:
        tau_dec = sorted(yaml.safe_load(f)["tau_s"])
    tau = sorted(table["tau_s"])
    median_dec, median = tau_dec[len(tau_dec) // 2], tau[len(tau) // 2]
    if abs(median_dec / median - 1) > 0.05:
        failures.append(f"decaying source: tau median {median_dec * 1e9:.1f} ns, from four activities "
                        f"{median * 1e9:.1f} ns")

    check = subprocess.run(
        [os.path.join(a.bin, "petdaq-sim-check"), "--config", a.config, "--work-dir", os.path.join(a.work, "check"),
         "--activities", "2,20,50,80", "--durations", "0.1,0.03,0.02,0.02", "--seed", "22", "--threads", "2",
         "--policy", "take_all_goods", "--dead-time-table", os.path.join(out, "dead_time.yaml")] + FRONT_END,
        check=True, capture_output=True, text=True).stdout
    print(check)
    rows = [[float(x) for x in line.strip("|\n ").split("|")] for line in check.splitlines()
            if re.match(r"^\| [0-9]", line)]
    necr = [r[4] for r in rows]
    peak = necr.index(max(necr))
    sigma0 = rows[0][9]
    for r in rows[1:peak + 1]:
        limit = 0.02 + 3 * (r[9] ** 2 + sigma0 ** 2) ** 0.5
        if abs(r[8] - 1) > limit:
            failures.append(f"{r[0]:g} MBq: corrected trues per MBq / lowest activity's = {r[8]:.4f} "
                            f"(limit ±{limit:.4f})")
    if rows[-1][6] / rows[0][6] > 0.8:
        failures.append("the uncorrected trues show no dead-time loss: the test cannot fail")

    # Dead time per board: the two photons of one decay make both their boards dead at once,
    # so the trues' live fraction exceeds singles² (by about 2 % at 80 MBq here). The table's
    # coincidence correlation must bring the model within 1.5 % of the trues' true live
    # fraction (the same decays simulated without the front end); singles² alone misses it.
    board = ["--dead-time-ns", "250", "--dead-time-unit", "bdm", "--pile-up-ns", "100"]
    bcmd = None
    for activity, duration in (("2", "1"), ("10", "0.2"), ("40", "0.08"), ("80", "0.08")):
        d = os.path.join(a.work, f"board{activity}")
        subprocess.run([sim, "--config", a.config, "--output-dir", d, "--activity-MBq", activity,
                        "--duration-s", duration, "--seed", "24", "--threads", "2", "--quiet"] + board,
                       check=True, stdout=subprocess.DEVNULL)
        if bcmd is None:
            bcmd = [os.path.join(a.bin, "petdaq-calibrate"), "dead-time", "--config", os.path.join(d, "petdaq.yaml"),
                    "--position-lut", os.path.join(d, "position_lut.npy"),
                    "--energy-correction", os.path.join(d, "energy_correction.npy"),
                    "--output-dir", os.path.join(a.work, "table_board")]
        bcmd += ["--acquisition", f"{os.path.join(d, 'frames.bin')}={activity}"]
    print(subprocess.run(bcmd, check=True, capture_output=True, text=True).stdout)
    board_table = os.path.join(a.work, "table_board", "dead_time.yaml")
    with open(board_table, encoding="utf-8") as f:
        kappa = yaml.safe_load(f)["coincidence_correlation"]
    if not kappa > 0:
        failures.append(f"dead time per board: coincidence correlation {kappa}, expected > 0")
    check = subprocess.run(
        [os.path.join(a.bin, "petdaq-sim-check"), "--config", a.config, "--work-dir", os.path.join(a.work, "check_board"),
         "--activities", "80", "--durations", "0.04", "--seed", "25", "--threads", "2", "--policy", "take_all_goods",
         "--dead-time-table", board_table, "--same-decays"] + board,
        check=True, capture_output=True, text=True).stdout
    print(check)
    row = [float(x) for x in [line for line in check.splitlines() if re.match(r"^\| [0-9]", line)][0]
           .strip("|\n ").split("|")]
    if abs(row[11] - 1) > 0.015:
        failures.append(f"dead time per board, 80 MBq: model / true coincidence live fraction {row[11]:.4f}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
