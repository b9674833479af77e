#!/usr/bin/python3
"""petdaq-calibrate refuses what cannot give a table: a clear message naming the file, DU or
crystal, exit status 1, no table written; usage errors exit 2."""
import argparse
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError as e:
    print(f"skipped: {e} (python3-numpy)")
    sys.exit(77)

failures = []


def expect(name, cmd, status, *needles, no_file=None):
    done = subprocess.run(cmd, capture_output=True, text=True)
    err = done.stderr.strip()
    ok = done.returncode == status and all(n in err for n in needles)
    if no_file and os.path.exists(no_file):
        ok = False
        err += f" [{no_file} was written]"
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {done.returncode} (want {status}): {err.splitlines()[0] if err else ''}")
    if not ok:
        print(f"     wanted {needles} in: {err}")
        failures.append(name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--scratch", required=True)
    a = p.parse_args()
    tool = os.path.join(a.bin, "petdaq-calibrate")
    shutil.rmtree(a.scratch, ignore_errors=True)
    os.makedirs(a.scratch)
    frames = np.fromfile(os.path.join(a.work, "acq", "frames.bin"), dtype=np.uint8).reshape(-1, 16)
    cal = os.path.join(a.work, "cal")
    out = os.path.join(a.scratch, "out")

    def write(name, data):
        path = os.path.join(a.scratch, name)
        data.tofile(path)
        return path

    def cmap(path):
        return [tool, "crystal-map", "--config", a.config, "--frames", path, "--output-dir", out]

    lut_out = os.path.join(out, "position_lut.npy")
    truncated = write("truncated.bin", np.concatenate([frames[:100000].ravel(), frames[100000, :7]]))
    expect("truncated frame file", cmap(truncated), 1, truncated, "7 trailing bytes", "truncated",
           no_file=lut_out)
    noise = write("noise.bin", np.random.default_rng(1).integers(0, 256, 16 * 100000, dtype=np.uint8))
    expect("not a frame file", cmap(noise), 1, noise, "not a file of raw frames", no_file=lut_out)
    # Byte 1 is the BDM: drop every frame of BDM 3.
    head = frames[:1000000]
    dead = write("dead_du.bin", head[head[:, 1] != 3].ravel())
    expect("dead DU", cmap(dead), 1, dead, "BDM 3 DU 0", "dead DU", no_file=lut_out)
    few = write("few.bin", frames[:3000].ravel())
    expect("too few counts for the crystal map", cmap(few), 1, few, "BDM 0 DU 0", "too few counts",
           no_file=lut_out)
    few_energy = write("few_energy.bin", frames[:40000].ravel())
    expect("too few counts for the energy step",
           [tool, "energy", "--config", a.config, "--frames", few_energy, "--output-dir", out,
            "--position-lut", os.path.join(cal, "position_lut.npy")],
           1, few_energy, "crystal", "too few counts", no_file=os.path.join(out, "energy_correction.npy"))
    # Enough frames for every photopeak, too few for the documented 1 %: a warning (the table
    # is written), or with --strict a refusal without a table.
    short = write("short.bin", frames[:250000].ravel())
    energy_short = [tool, "energy", "--config", a.config, "--frames", short, "--output-dir", out,
                    "--position-lut", os.path.join(cal, "position_lut.npy")]
    expect("statistics below the documented precision: a warning", energy_short, 0,
           "warning: energy", short, "% for the worst", "times longer")
    if os.path.exists(os.path.join(out, "energy_correction.npy")):
        os.remove(os.path.join(out, "energy_correction.npy"))
    else:
        failures.append("the warned table was not written")
    expect("statistics below the documented precision: --strict refuses", energy_short + ["--strict"],
           1, "--strict", "% for the worst", no_file=os.path.join(out, "energy_correction.npy"))
    timing_short = write("timing_short.bin", frames[:400000].ravel())
    expect("time offsets below the documented precision: a warning",
           [tool, "time-offsets", "--config", a.config, "--frames", timing_short, "--output-dir", out,
            "--position-lut", os.path.join(cal, "position_lut.npy"),
            "--energy-correction", os.path.join(cal, "energy_correction.npy"),
            "--source", "cylinder", "--source-radius-mm", "10", "--source-length-mm", "20",
            "--offline", os.path.join(a.bin, "petdaq-offline")],
           0, "warning: time offsets", "ticks per crystal", "times longer")
    if os.path.exists(os.path.join(out, "time_offsets.npy")):
        os.remove(os.path.join(out, "time_offsets.npy"))
    else:
        failures.append("the warned time offsets were not written")
    expect("a table of the wrong shape",
           [tool, "energy", "--config", a.config, "--frames", few_energy, "--output-dir", out,
            "--position-lut", os.path.join(cal, "energy_correction.npy")],
           1, "energy_correction.npy", "expected uint8[8, 1, 128, 128]")
    expect("a missing configuration", cmap(few) [:2] + ["--config", os.path.join(a.scratch, "none.yaml"),
                                                      "--frames", few, "--output-dir", out],
           1, "none.yaml", "cannot read")

    # A point source at the centre links each BDM only with the one facing it.
    point = os.path.join(a.scratch, "point")
    subprocess.run([os.path.join(a.bin, "petdaq-sim"), "--config", a.config, "--output-dir", point,
                    "--duration-s", "0.1", "--activity-MBq", "10", "--source", "point", "--threads", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    expect("time offsets from a point at the centre",
           [tool, "time-offsets", "--config", a.config, "--frames", os.path.join(point, "frames.bin"),
            "--output-dir", out, "--position-lut", os.path.join(point, "position_lut.npy"),
            "--energy-correction", os.path.join(point, "energy_correction.npy"), "--source", "point"],
           1, "separate groups", "BDMs 0,4", no_file=os.path.join(out, "time_offsets.npy"))

    expect("a directory as the frame file", cmap(a.scratch), 2, a.scratch, "directory",
           no_file=lut_out)
    expect("no step", [tool], 2, "usage")
    expect("no --frames", [tool, "crystal-map", "--config", a.config, "--output-dir", out], 2, "--frames")
    expect("an unknown source", [tool, "time-offsets", "--config", a.config, "--frames", few, "--output-dir", out,
                                 "--position-lut", "x", "--energy-correction", "y", "--source", "sphere"],
           2, "--source")
    expect("a negative radius", cmap(few) + ["--max-radius", "-1"], 2, "--max-radius")
    # dead-time: three activities at least, each as FRAMES=MBQ.
    dead = [tool, "dead-time", "--config", a.config, "--output-dir", out,
            "--position-lut", os.path.join(cal, "position_lut.npy"),
            "--energy-correction", os.path.join(cal, "energy_correction.npy")]
    acq = os.path.join(a.work, "acq", "frames.bin")
    expect("dead time from two activities", dead + ["--acquisition", f"{acq}=1", "--acquisition", f"{acq}=2"],
           1, "3 or more", no_file=os.path.join(out, "dead_time.yaml"))
    expect("dead time from one activity three times",
           dead + ["--acquisition", f"{acq}=1", "--acquisition", f"{acq}=1", "--acquisition", f"{acq}=1"],
           1, "3 or more different", no_file=os.path.join(out, "dead_time.yaml"))
    expect("dead time without an activity", dead + ["--acquisition", acq], 2, "FRAMES=ACTIVITY_MBq")
    expect("dead time with a negative activity", dead + ["--acquisition", f"{acq}=-5"], 2, "FRAMES=ACTIVITY_MBq")
    print(f"{len(failures)} failed" if failures else "all refused as they should be")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
