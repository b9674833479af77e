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

from petdaq.cli import ArgumentParser
from . import CalibrationError
from . import crystal_map, dead_time, energy, normalization, report, timing
from .frames import FrameFile
from .scanner import Scanner, load_config

DESCRIPTION = """\
The scanner's calibration tables (DESIGN section 3) from its own acquisitions, each step
usable alone, each writing its .npy table, a text report and PNG plots into --output-dir:

  crystal-map   flood acquisition -> position_lut.npy
  energy        flood acquisition + position_lut -> energy_correction.npy
  time-offsets  coincidence acquisition + both tables -> time_offsets.npy (uses petdaq-offline)
  all           the three in turn, and a petdaq.yaml naming the tables
  normalization uniform-cylinder list-mode (.plm) -> the normalisation table
                (norm_*.npy: crystal efficiencies, block profile, geometric and axial
                factors; petdaq-export --normalization DIR uses them)
  dead-time     acquisitions at 3+ activities + both tables -> dead_time.yaml (docs/dead_time.md)

Acquisitions are files of 16-byte raw frames (petdaq-sim's frames.bin, or a raw capture),
except for normalization, which reads coincidences (petdaq-offline's or petdaqd's .plm).
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


def _acquisition(text):
    path, sep, activity = text.rpartition("=")
    try:
        a = float(activity)
    except ValueError:
        a = float("nan")
    if not sep or not path or not a > 0 or not math.isfinite(a):
        raise argparse.ArgumentTypeError(f"'{text}' is not FRAMES=ACTIVITY_MBq")
    return path, a


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


def _non_negative(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return v


# The precision docs/calibrate.md ("Limits") promises: every crystal's photopeak within 1 %
# of 511 keV, time offsets within 1 tick rms.
PHOTOPEAK_LIMIT = 0.01
OFFSET_LIMIT_TICKS = 1.0
# The photopeak fits scatter about 1.6 times the σ/√n of an ideal Gaussian mean (the default
# scanner's photopeaks: 0.2 % rms against 0.12 % from σ/√n; docs/calibrate.md).
PHOTOPEAK_FIT_FACTOR = 1.6


def photopeak_precision(result):
    """(expected worst relative error over the crystals, rms relative error per crystal),
    estimated from the data: each photopeak's σ/√n from its FWHM and its frames."""
    n = np.maximum(np.asarray(result.photopeak_counts, dtype=np.float64).ravel(), 1.0)
    sigma = PHOTOPEAK_FIT_FACTOR * (np.asarray(result.fwhm, dtype=np.float64).ravel() / 2.3548) / np.sqrt(n)
    rms = float(np.sqrt(np.mean(sigma ** 2)))
    # The largest of N normal deviates lies near sqrt(2 ln N) standard deviations.
    return math.sqrt(2.0 * math.log(max(sigma.size, 2))) * rms, rms


def precision_check(args, message):
    """Statistics below the documented precision: a warning, or with --strict an error."""
    if getattr(args, "strict", False):
        raise CalibrationError(message + " (--strict: no table written)")
    print(f"petdaq-calibrate: warning: {message}", file=sys.stderr)
    return f"WARNING: {message}\n"


def build_parser():
    p = ArgumentParser("petdaq-calibrate", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="step", required=True, metavar="STEP")

    def common(sp, frames_help):
        sp.add_argument("-c", "--config", required=True, help="petdaq YAML (scanner geometry, energy bin width, window)")
        sp.add_argument("--frames", required=True, help=frames_help)
        sp.add_argument("--output-dir", required=True, help="where the table, report and plots go")
        sp.add_argument("--strict", action="store_true",
                        help="refuse (exit 1, no table) when the data's statistics give less than "
                             "the documented precision (photopeaks within 1 %%, offsets within 1 "
                             "tick), instead of warning")

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
    sp = sub.add_parser("normalization", help="uniform cylinder list-mode -> the normalisation table")
    sp.add_argument("--config", required=True, help="petdaq YAML (scanner geometry)")
    sp.add_argument("--listmode", required=True, help="the cylinder's coincidences (.plm)")
    sp.add_argument("--output-dir", required=True, help="where the table (norm_*.npy) and report go")
    sp.add_argument("--source", choices=["cylinder"], default="cylinder",
                    help="a uniform cylinder of activity in water, centred on the axis")
    sp.add_argument("--source-radius-mm", type=_positive(float), default=15.0, help="cylinder radius (default 15)")
    sp.add_argument("--source-length-mm", type=_positive(float), default=70.0, help="cylinder length (default 70)")
    sp.add_argument("--attenuation-per-mm", type=_non_negative, default=normalization.WATER_MU_PER_MM,
                    help="the cylinder's linear attenuation at 511 keV (default water, 0.0096)")
    sp.add_argument("--iterations", type=_positive(int), default=30, help="fit iterations (default 30)")
    sp.add_argument("--min-counts-per-crystal", type=_positive(float), default=100.0,
                    help="prompts on lines through the source each crystal needs (default 100)")
    sp.add_argument("--check-listmode", default=None,
                    help="another acquisition of the same cylinder whose normalised counts are "
                         "tested for flatness (chi2 per degree of freedom, in the report)")
    sp = sub.add_parser("dead-time", help="singles rates at 3+ activities -> dead_time.yaml")
    sp.add_argument("--config", required=True, help="petdaq YAML (scanner, energy window, energy bin width)")
    sp.add_argument("--acquisition", type=_acquisition, action="append", default=[],
                    metavar="FRAMES=MBQ", help="a frame file and its source activity in MBq (3 or more)")
    sp.add_argument("--decaying", type=_acquisition, action="append", default=[], metavar="FRAMES=MBQ",
                    help="a frame file of a decaying source and its activity at the first frame; "
                         "cut into --intervals acquisitions")
    sp.add_argument("--half-life-s", type=_positive(float), default=6586.2,
                    help="the decaying source's half-life (default 6586.2: 18F)")
    sp.add_argument("--intervals", type=_positive(int), default=8,
                    help="time intervals a decaying acquisition is cut into (default 8)")
    sp.add_argument("--position-lut", required=True)
    sp.add_argument("--energy-correction", required=True)
    sp.add_argument("--model", choices=dead_time.MODELS, default="non-paralysable",
                    help="dead-time model (default non-paralysable)")
    sp.add_argument("--output-dir", required=True, help="where dead_time.yaml, its report and plot go")
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
    worst, rms = photopeak_precision(result)
    warning = ""
    if worst > PHOTOPEAK_LIMIT:
        warning = precision_check(
            args, f"energy: {args.frames}: the photopeaks' statistics (median "
                  f"{np.median(result.photopeak_counts):.0f} frames per photopeak, FWHM "
                  f"{np.median(result.fwhm) * 100:.1f} %) give about {100 * rms:.2f} % per crystal "
                  f"and {100 * worst:.2f} % for the worst of {np.size(result.photopeak_counts)}: "
                  f"above the {100 * PHOTOPEAK_LIMIT:g} % the tables are made for; a flood "
                  f"{(worst / PHOTOPEAK_LIMIT) ** 2:.1f} times longer reaches it")
    path = _save_table(os.path.join(out, "energy_correction.npy"), table)
    report.energy_plots(os.path.join(out, "energy.png"), scanner, result, table, opts.bins)
    with open(os.path.join(out, "energy.txt"), "w", encoding="utf-8") as f:
        f.write(warning)
        f.write(f"expected photopeak precision from the statistics: {100 * rms:.2f} % per crystal, "
                f"{100 * worst:.2f} % for the worst (limit {100 * PHOTOPEAK_LIMIT:g} %)\n")
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
        pdh = os.path.join(work, "run.pdh")
        plm = timing.run_offline(offline, doc, args.config, frames, lut_path, energy_path, work, pdh)
        table, result = timing.make_time_offsets(plm, scanner, source, opts, name=frames)
        step_energy_resolution(pdh, frames, out)
    warning = ""
    if result.offset_sigma_ticks > OFFSET_LIMIT_TICKS:
        warning = precision_check(
            args, f"time offsets: {frames}: {result.used} prompts (median "
                  f"{np.median(result.per_crystal):.0f} per crystal) with a residual of "
                  f"{result.residual_sigma_ticks:.1f} ticks give about "
                  f"{result.offset_sigma_ticks:.2f} ticks per crystal: above the "
                  f"{OFFSET_LIMIT_TICKS:g} tick the tables are made for; an acquisition "
                  f"{(result.offset_sigma_ticks / OFFSET_LIMIT_TICKS) ** 2:.1f} times longer "
                  f"reaches it")
    path = _save_table(os.path.join(out, "time_offsets.npy"), table)
    report.timing_plots(os.path.join(out, "time_offsets.png"), scanner, result, table)
    with open(os.path.join(out, "time_offsets.txt"), "w", encoding="utf-8") as f:
        f.write(warning)
        f.write(report.timing_text(scanner, frames, "petdaq-offline output", result, table, source))
    print(f"time offsets: {path}: {result.used} prompts, residual sigma "
          f"{result.residual_sigma_ticks * scanner.tick_ps:.0f} ps, statistical error per crystal "
          f"{result.offset_sigma_ticks:.2f} ticks ({time.monotonic() - start:.1f} s)")
    return path


def step_normalization(args, scanner, out):
    start = time.monotonic()
    opts = normalization.NormOptions(radius_mm=args.source_radius_mm, length_mm=args.source_length_mm,
                                     mu_per_mm=args.attenuation_per_mm, iterations=args.iterations,
                                     min_counts_per_crystal=args.min_counts_per_crystal)
    if opts.radius_mm >= scanner.ring_radius_mm:
        raise CalibrationError(f"--source-radius-mm {opts.radius_mm:g}: not inside the ring "
                               f"({scanner.ring_radius_mm:g} mm)")
    result = normalization.make_normalization(args.listmode, scanner, opts)
    paths = normalization.save_tables(out, result)
    flat = None
    if args.check_listmode:
        tables = normalization.load_tables(out, scanner)
        flat = normalization.check_flatness(args.check_listmode, scanner, opts, tables, result.used)
    with open(os.path.join(out, "normalization.txt"), "w", encoding="utf-8") as f:
        f.write(normalization.report_text(args.listmode, result, opts, flat))
    print(f"normalization: {', '.join(paths)}: {result.used} prompts on {result.lines} lines; "
          f"crystal efficiencies rms {np.std(result.efficiency) * 100:.2f} % (statistical precision "
          f"{result.predicted_sigma * 100:.2f} %) ({time.monotonic() - start:.1f} s)")
    if flat:
        for name, (with_t, without, groups, expected, limit) in flat.groups.items():
            print(f"  flatness, {name}: chi2/dof {with_t:.3f} with the table (expected {expected:.3f}, "
                  f"limit {limit:.3f}), {without:.3f} without ({groups} groups)")
    return paths


def step_dead_time(args, scanner, out):
    start = time.monotonic()
    n = scanner.position_size
    lut = _load_table(args.position_lut, np.uint8, (scanner.bdm_count, scanner.du_per_bdm, n, n), "position table")
    try:
        table = np.load(args.energy_correction)
    except (OSError, ValueError) as err:
        raise CalibrationError(f"{args.energy_correction}: cannot read the energy table: {err}") from err
    if table.dtype != np.float32 or table.ndim != 4 or table.shape[:3] != (
            scanner.bdm_count, scanner.du_per_bdm, scanner.crystals_per_du):
        raise CalibrationError(f"{args.energy_correction}: energy table is {table.dtype}{list(table.shape)}")
    points = len(args.acquisition) + args.intervals * len(args.decaying)
    if points < 3:
        raise CalibrationError("dead-time needs acquisitions at 3 or more activities")
    if not args.decaying and len({activity for _, activity in args.acquisition}) < 3:
        raise CalibrationError("dead-time needs 3 or more different activities")
    acqs = []
    for frames, activity in args.acquisition:
        ff = FrameFile(frames, scanner)
        acqs.append(dead_time.measure(dead_time.Acquisition(frames, activity), ff, scanner, lut, table))
    for frames, activity in args.decaying:
        ff = FrameFile(frames, scanner)
        acqs += dead_time.measure_decaying(frames, activity, args.half_life_s, args.intervals, ff, scanner,
                                           lut, table)
    result = dead_time.make_dead_time(acqs, scanner, args.model)
    path = dead_time.write_table(os.path.join(out, "dead_time.yaml"), result)
    text = dead_time.report_text(result)
    with open(os.path.join(out, "dead_time.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    dead_time.plots(os.path.join(out, "dead_time.png"), result)
    print(f"dead time: {path}: {args.model}, tau median {np.median(result['tau']) * 1e9:.1f} ns over "
          f"{scanner.bdm_count} BDMs, coincidence correlation {result['kappa']:.4f} "
          f"({time.monotonic() - start:.1f} s)")
    print(text, end="")
    return path


def step_energy_resolution(pdh, frames, out):
    """The energy resolution with the new crystal map and energy table, from the histograms of
    the time-offset step's petdaq-offline run (docs/figures.md): energy_resolution.txt and
    energy_resolution.png."""
    er, per_ring = report.energy_resolution_from_histograms(pdh)
    report.energy_resolution_plots(os.path.join(out, "energy_resolution.png"), er, per_ring)
    with open(os.path.join(out, "energy_resolution.txt"), "w", encoding="utf-8") as f:
        f.write(report.energy_resolution_text(frames, er))
    g = er.global_fit
    ok = er.resolution_percent[er.fitted]
    print("energy resolution: " + ("no photopeak fitted" if g is None else
          f"{g.resolution_percent:.2f} % FWHM at {g.position_keV:.1f} keV (all crystals)") +
          (f"; median {np.median(ok):.2f} % over {ok.size} crystals" if ok.size else ""))


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
    if args.step == "normalization":
        step_normalization(args, scanner, out)
    elif args.step == "crystal-map":
        step_crystal_map(args, scanner, out)
    elif args.step == "energy":
        step_energy(args, scanner, out, args.position_lut)
    elif args.step == "dead-time":
        step_dead_time(args, scanner, out)
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
