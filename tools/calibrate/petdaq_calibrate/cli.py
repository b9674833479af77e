"""Command line of petdaq-calibrate: the steps crystal-map, energy, time-offsets, and all."""
import argparse
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import yaml

from . import CalibrationError
from . import crystal_map, energy, report, timing
from .frames import FrameFile
from .scanner import Scanner, load_config

DESCRIPTION = """\
The scanner's calibration tables (DESIGN section 3) from its own acquisitions, each step
usable alone, each writing its .npy table, a text report and PNG plots into --output-dir:

  crystal-map   flood acquisition -> position_lut.npy
  energy        flood acquisition + position_lut -> energy_correction.npy
  time-offsets  coincidence acquisition + both tables -> time_offsets.npy (uses petdaq-offline)
  all           the three in turn, and a petdaq.yaml naming the tables

Acquisitions are files of 16-byte raw frames (petdaq-sim's frames.bin, or a raw capture).
Exit status: 0 done; 1 the input cannot give a table (the message names the file, DU or
crystal); 2 a usage error."""


def _triple(text):
    try:
        v = tuple(float(x) for x in text.split(","))
    except ValueError:
        v = ()
    if len(v) != 3:
        raise argparse.ArgumentTypeError(f"'{text}' is not x,y,z in mm")
    return v


def _du(text):
    try:
        b, d = (int(x) for x in text.split(","))
        return b, d
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not BDM,DU") from None


def _positive(kind):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return v
    return parse


def build_parser():
    p = argparse.ArgumentParser(prog="petdaq-calibrate", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="step", required=True, metavar="STEP")

    def common(sp, frames_help):
        sp.add_argument("--config", required=True, help="petdaq YAML (scanner geometry, energy bin width, window)")
        sp.add_argument("--frames", required=True, help=frames_help)
        sp.add_argument("--output-dir", required=True, help="where the table, report and plots go")

    def map_options(sp):
        sp.add_argument("--min-counts-per-crystal", type=_positive(float), default=30.0,
                        help="flood frames per crystal a DU needs (default 30)")
        sp.add_argument("--max-radius", type=_positive(float), default=0.75,
                        help="label radius in nearest-peak distances (default 0.75)")
        sp.add_argument("--plot-du", type=_du, default=(0, 0), help="BDM,DU of the detailed flood plot (default 0,0)")

    def energy_options(sp):
        sp.add_argument("--energy-bins", type=_positive(int), default=1000, help="table bins (default 1000)")
        sp.add_argument("--saturation-keV", type=_positive(float), default=None,
                        help="fix E_s instead of fitting it ('inf': linear)")
        sp.add_argument("--min-photopeak-counts", type=_positive(int), default=100,
                        help="frames a crystal's photopeak needs (default 100)")

    def timing_options(sp):
        sp.add_argument("--source", choices=["point", "cylinder"], required=True,
                        help="the coincidence source: a point, or a uniform cylinder along the axis")
        sp.add_argument("--source-centre-mm", type=_triple, default=(0.0, 0.0, 0.0), help="x,y,z (default 0,0,0)")
        sp.add_argument("--source-radius-mm", type=_positive(float), default=15.0, help="cylinder radius (default 15)")
        sp.add_argument("--source-length-mm", type=_positive(float), default=70.0, help="cylinder length (default 70)")
        sp.add_argument("--min-prompts-per-crystal", type=_positive(int), default=20,
                        help="prompts each crystal needs (default 20)")
        sp.add_argument("--offline", default=None, help="petdaq-offline to run (default: beside this tool, else PATH)")

    sp = sub.add_parser("crystal-map", help="flood maps -> position_lut.npy")
    common(sp, "flood acquisition (frame file)")
    map_options(sp)
    sp = sub.add_parser("energy", help="per-crystal photopeaks -> energy_correction.npy")
    common(sp, "flood acquisition (frame file)")
    sp.add_argument("--position-lut", required=True, help="the crystal map (position_lut.npy)")
    energy_options(sp)
    sp = sub.add_parser("time-offsets", help="prompt time differences -> time_offsets.npy")
    common(sp, "coincidence acquisition (frame file)")
    sp.add_argument("--position-lut", required=True)
    sp.add_argument("--energy-correction", required=True)
    timing_options(sp)
    sp = sub.add_parser("all", help="the three steps, and a petdaq.yaml naming the tables")
    common(sp, "acquisition for the crystal map and energy (and timing unless --timing-frames)")
    sp.add_argument("--timing-frames", default=None, help="a separate coincidence acquisition for the time offsets")
    map_options(sp)
    energy_options(sp)
    timing_options(sp)
    return p


def _load_table(path, dtype, shape, what):
    try:
        t = np.load(path)
    except (OSError, ValueError) as e:
        raise CalibrationError(f"{path}: cannot read the {what}: {e}") from e
    if t.dtype != np.dtype(dtype) or t.shape != shape:
        raise CalibrationError(f"{path}: {what} is {t.dtype}{list(t.shape)}, expected "
                               f"{np.dtype(dtype)}{list(shape)}")
    return t


def _save_table(path, table):
    np.save(path, np.ascontiguousarray(table))
    return path


def _find_offline(given):
    if given:
        return given
    here = os.path.dirname(os.path.realpath(sys.argv[0]))
    for cand in (os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "petdaq-offline"),
                 os.path.join(here, "petdaq-offline")):
        if os.access(cand, os.X_OK):
            return cand
    found = shutil.which("petdaq-offline")
    if not found:
        raise CalibrationError("petdaq-offline not found beside petdaq-calibrate nor on PATH (--offline)")
    return found


def step_crystal_map(args, scanner, out):
    start = time.monotonic()
    opts = crystal_map.MapOptions(min_counts_per_crystal=args.min_counts_per_crystal, max_radius=args.max_radius)
    b, d = args.plot_du
    if not (0 <= b < scanner.bdm_count and 0 <= d < scanner.du_per_bdm):
        raise CalibrationError(f"--plot-du {b},{d}: no such DU in {args.config}")
    ff = FrameFile(args.frames, scanner)
    lut, results, floods = crystal_map.make_crystal_map(ff, scanner, opts)
    path = _save_table(os.path.join(out, "position_lut.npy"), lut)
    report.crystal_map_plots(os.path.join(out, "crystal_map.png"), os.path.join(out, "crystal_map_all.png"),
                             scanner, lut, floods, results, b * scanner.du_per_bdm + d)
    with open(os.path.join(out, "crystal_map.txt"), "w", encoding="utf-8") as f:
        f.write(report.crystal_map_text(scanner, ff, results, opts))
    labelled = sum(r.peak_counts.sum() for r in results) / max(1, sum(r.gated for r in results))
    print(f"crystal map: {path}: {scanner.du_count} DUs, {scanner.crystals_per_du} crystals each; "
          f"{labelled * 100:.2f} % of the gated flood frames on a crystal ({time.monotonic() - start:.1f} s)")
    return path


def step_energy(args, scanner, out, lut_path):
    start = time.monotonic()
    n = scanner.position_size
    lut = _load_table(lut_path, np.uint8, (scanner.bdm_count, scanner.du_per_bdm, n, n), "position table")
    es = args.saturation_keV if args.saturation_keV is not None else 0.0
    opts = energy.EnergyOptions(bins=args.energy_bins, min_photopeak_counts=args.min_photopeak_counts,
                                saturation_keV=es)
    ff = FrameFile(args.frames, scanner)
    table, result = energy.make_energy_correction(ff, scanner, lut, opts)
    path = _save_table(os.path.join(out, "energy_correction.npy"), table)
    report.energy_plots(os.path.join(out, "energy.png"), scanner, result, table, opts.bins)
    with open(os.path.join(out, "energy.txt"), "w", encoding="utf-8") as f:
        f.write(report.energy_text(scanner, ff, result, opts))
    es_text = "linear" if not math.isfinite(result.saturation_keV) else f"E_s {result.saturation_keV:.0f} keV"
    print(f"energy: {path}: {scanner.crystal_count} photopeaks (median {np.median(result.peaks_adc):.0f} ADC, "
          f"FWHM {np.median(result.fwhm) * 100:.1f} %), {es_text} ({time.monotonic() - start:.1f} s)")
    return path


def step_time_offsets(args, scanner, doc, out, frames, lut_path, energy_path):
    start = time.monotonic()
    n = scanner.position_size
    _load_table(lut_path, np.uint8, (scanner.bdm_count, scanner.du_per_bdm, n, n), "position table")
    try:
        e = np.load(energy_path, mmap_mode="r")
    except (OSError, ValueError) as err:
        raise CalibrationError(f"{energy_path}: cannot read the energy table: {err}") from err
    if e.dtype != np.float32 or e.ndim != 4 or e.shape[:3] != (scanner.bdm_count, scanner.du_per_bdm,
                                                              scanner.crystals_per_du):
        raise CalibrationError(f"{energy_path}: energy table is {e.dtype}{list(e.shape)}, expected "
                               f"float32[{scanner.bdm_count}, {scanner.du_per_bdm}, "
                               f"{scanner.crystals_per_du}, bins]")
    FrameFile(frames, scanner)  # size checks before the long run
    source = timing.Source(args.source, args.source_centre_mm, args.source_radius_mm, args.source_length_mm)
    opts = timing.TimingOptions(min_prompts_per_crystal=args.min_prompts_per_crystal)
    offline = _find_offline(args.offline)
    with tempfile.TemporaryDirectory(prefix="petdaq-calibrate-") as work:
        plm = timing.run_offline(offline, doc, args.config, frames, lut_path, energy_path, work)
        table, result = timing.make_time_offsets(plm, scanner, source, opts, name=frames)
    path = _save_table(os.path.join(out, "time_offsets.npy"), table)
    report.timing_plots(os.path.join(out, "time_offsets.png"), scanner, result, table)
    with open(os.path.join(out, "time_offsets.txt"), "w", encoding="utf-8") as f:
        f.write(report.timing_text(scanner, frames, "petdaq-offline output", result, table, source))
    print(f"time offsets: {path}: {result.used} prompts, residual sigma "
          f"{result.residual_sigma_ticks * scanner.tick_ps:.0f} ps, statistical error per crystal "
          f"{result.offset_sigma_ticks:.2f} ticks ({time.monotonic() - start:.1f} s)")
    return path


def write_config(doc, out):
    doc = dict(doc)
    cal = dict(doc.get("calibration") or {})
    cal.update(position_lut="position_lut.npy", energy_correction="energy_correction.npy",
               time_offsets="time_offsets.npy")
    doc["calibration"] = cal
    path = os.path.join(out, "petdaq.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Written by petdaq-calibrate: the input configuration with the calibrated tables\n")
        yaml.safe_dump(doc, f, sort_keys=False)
    return path


def run(argv):
    args = build_parser().parse_args(argv)
    doc = load_config(args.config)
    scanner = Scanner.from_config(doc, args.config)
    out = args.output_dir
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise CalibrationError(f"{out}: cannot create the output directory: {e.strerror}") from e
    if args.step == "crystal-map":
        step_crystal_map(args, scanner, out)
    elif args.step == "energy":
        step_energy(args, scanner, out, args.position_lut)
    elif args.step == "time-offsets":
        step_time_offsets(args, scanner, doc, out, args.frames, args.position_lut, args.energy_correction)
    else:
        lut = step_crystal_map(args, scanner, out)
        en = step_energy(args, scanner, out, lut)
        step_time_offsets(args, scanner, doc, out, args.timing_frames or args.frames, lut, en)
        print(f"configuration: {write_config(doc, out)}")


def main(argv=None):
    try:
        run(sys.argv[1:] if argv is None else argv)
    except CalibrationError as e:
        print(f"petdaq-calibrate: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        # A path that cannot be read or written as given (a directory for a file, no
        # permission): the path and the reason, no traceback.
        where = f"{e.filename}: " if e.filename else ""
        print(f"petdaq-calibrate: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
