"""The petdaq Python package (python/petdaq) against the C++ tools it mirrors.

Run by CTest with PYTHONPATH pointing at python/ and PETDAQ_BIN_DIR at the build's binaries:
read_plm is compared with petdaq-dump's text on a simulated acquisition processed by
petdaq-offline, the geometry with DESIGN section 3's formulas.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import petdaq

SOURCE = os.environ.get("PETDAQ_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("PETDAQ_BIN_DIR", "")


def tool(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        raise unittest.SkipTest(f"{name} is not built")
    return path


def dump_records(plm):
    """petdaq-dump's records: {kind: [(time_a, dt, crystal_a, crystal_b, energy_a, energy_b, flags)]}."""
    out = subprocess.run([tool("petdaq-dump"), plm], check=True, capture_output=True, text=True).stdout
    records = {"prompt": [], "delayed": []}
    for line in out.splitlines():
        if line.startswith("#") or line.startswith("deadtime "):
            continue
        kind, _run, _slice, t, dt, a, b, ea, eb, flags = line.split()
        records[kind].append((int(t), int(dt), int(a), int(b), float(ea), float(eb), int(flags, 16)))
    return records, out


def dump_records_and_dead(plm):
    """petdaq-dump's dead intervals: [(run, t_begin, t_end, frames_dropped)], and its text."""
    out = subprocess.run([tool("petdaq-dump"), plm], check=True, capture_output=True, text=True).stdout
    dead = [tuple(int(v) for v in line.split()[1:]) for line in out.splitlines()
            if line.startswith("deadtime ")]
    return dead, out


class Acquisition:
    """A small simulated acquisition processed by petdaq-offline into a .plm file."""
    dir = None

    @classmethod
    def get(cls):
        if cls.dir is None:
            cls.dir = tempfile.mkdtemp(prefix="petdaq-py-")
            subprocess.run([tool("petdaq-sim"), "--config", os.path.join(SOURCE, "config", "petdaq.yaml"),
                            "--output-dir", cls.dir, "--duration-s", "0.02", "--activity-MBq", "3",
                            "--quiet"], check=True, capture_output=True)
            subprocess.run([tool("petdaq-offline"), "--config", os.path.join(cls.dir, "petdaq.yaml"),
                            "--input", os.path.join(cls.dir, "frames.bin"), "--output",
                            os.path.join(cls.dir, "out.plm"), "--quiet"], check=True,
                           capture_output=True)
        return cls.dir


def tearDownModule():
    for acquisition in (Acquisition, HistogramAcquisition):
        if acquisition.dir:
            shutil.rmtree(acquisition.dir, ignore_errors=True)


class Version(unittest.TestCase):
    def test_one_version_string(self):
        with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
            cmake = re.search(r"project\(petdaq VERSION ([0-9.]+)", f.read()).group(1)
        with open(os.path.join(SOURCE, "python", "pyproject.toml")) as f:
            pyproject = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
        self.assertEqual(petdaq.__version__, cmake)
        self.assertEqual(pyproject, cmake)


class ReadPlm(unittest.TestCase):
    def test_records_equal_petdaq_dump(self):
        plm = os.path.join(Acquisition.get(), "out.plm")
        f = petdaq.read_plm(plm)
        want, text = dump_records(plm)
        self.assertGreater(len(want["prompt"]), 100)
        self.assertGreater(len(want["delayed"]), 10)
        for kind, got in (("prompt", f.prompts), ("delayed", f.delayed)):
            self.assertEqual(len(got), len(want[kind]))
            w = np.array(want[kind], dtype=object)
            np.testing.assert_array_equal(got["time_a"], w[:, 0].astype(np.uint64))
            np.testing.assert_array_equal(got["dt"], w[:, 1].astype(np.int32))
            np.testing.assert_array_equal(got["crystal_a"], w[:, 2].astype(np.uint32))
            np.testing.assert_array_equal(got["crystal_b"], w[:, 3].astype(np.uint32))
            # petdaq-dump prints energies with 9 significant digits: exact for float32.
            np.testing.assert_array_equal(got["energy_a"], w[:, 4].astype(np.float32))
            np.testing.assert_array_equal(got["energy_b"], w[:, 5].astype(np.float32))
            np.testing.assert_array_equal(got["flags"], w[:, 6].astype(np.uint32))
        tick = float(re.search(r"tick_ps (\S+)", text).group(1))
        self.assertEqual(f.tick_ps, tick)
        self.assertEqual(f.partial_tail_bytes, 0)
        self.assertTrue(np.all(f.delayed["flags"] & petdaq.FLAG_DELAYED))
        # Batches of one kind tile time.
        prompts = f.messages[f.messages["kind"] == petdaq.KIND_PROMPTS]
        np.testing.assert_array_equal(prompts["t_begin"][1:], prompts["t_end"][:-1])

    def test_a_file_being_written_is_read_up_to_its_last_complete_message(self):
        plm = os.path.join(Acquisition.get(), "out.plm")
        whole = petdaq.read_plm(plm)
        with open(plm, "rb") as f:
            data = f.read()
        # End the copy 10 bytes into the second message's header.
        self.assertGreaterEqual(len(whole.messages), 2)
        first = 64 + 64 + int(whole.messages[0]["record_count"]) * 32
        cut = os.path.join(Acquisition.get(), "growing.plm")
        with open(cut, "wb") as f:
            f.write(data[:first + 10])
        part = petdaq.read_plm(cut)
        self.assertEqual(len(part.messages), 1)
        self.assertEqual(part.partial_tail_bytes, 10)
        n_prompts = sum(int(m["record_count"]) for m in part.messages if m["kind"] == 1)
        np.testing.assert_array_equal(part.prompts, whole.prompts[:n_prompts])

    def test_dead_intervals_are_read_by_python_and_petdaq_dump(self):
        # A file with the deadtime messages petdaqd writes under overload (DESIGN section 6).
        plm = os.path.join(Acquisition.get(), "out.plm")
        whole = petdaq.read_plm(plm)
        intervals = np.array([(1000, 5000, 77), (9000, 9500, 3)], dtype=petdaq.DEAD_INTERVAL)
        h = np.zeros(1, dtype=petdaq.MESSAGE_HEADER)
        h["magic"], h["version"], h["kind"] = petdaq.formats.MESSAGE_MAGIC, 1, petdaq.KIND_DEADTIME
        h["t_begin"], h["t_end"] = 1000, 9500
        h["record_count"], h["record_size"] = 2, petdaq.DEAD_INTERVAL.itemsize
        with open(plm, "rb") as f:
            data = f.read()
        dead = os.path.join(Acquisition.get(), "dead.plm")
        with open(dead, "wb") as f:
            f.write(data + h.tobytes() + intervals.tobytes())
        got = petdaq.read_plm(dead)
        np.testing.assert_array_equal(got.dead, intervals)
        self.assertEqual(got.dead_ticks(), 4500)
        np.testing.assert_array_equal(got.prompts, whole.prompts)
        self.assertEqual(whole.dead.size, 0)
        records, text = dump_records_and_dead(dead)
        self.assertEqual(records, [(0, 1000, 5000, 77), (0, 9000, 9500, 3)])
        self.assertIn("# dead time: 1 intervals, 4500 ticks, 80 frames dropped", text)
        # A deadtime message with the wrong record size is refused, naming the offset.
        h["record_size"] = 32
        with open(dead, "wb") as f:
            f.write(data + h.tobytes() + intervals.tobytes())
        with self.assertRaisesRegex(petdaq.plm.PlmError, "record size 32, expected 24"):
            petdaq.read_plm(dead)

    def test_corruption_is_an_error_naming_the_offset(self):
        plm = os.path.join(Acquisition.get(), "out.plm")
        with open(plm, "rb") as f:
            data = bytearray(f.read())
        data[64] ^= 0xFF
        bad = os.path.join(Acquisition.get(), "bad.plm")
        with open(bad, "wb") as f:
            f.write(data)
        with self.assertRaisesRegex(petdaq.plm.PlmError, "message at byte 64"):
            petdaq.read_plm(bad)
        with open(bad, "wb") as f:
            f.write(b"PDQX" + bytes(60))
        with self.assertRaisesRegex(petdaq.plm.PlmError, "not a petdaq list-mode file"):
            petdaq.read_plm(bad)


class Export(unittest.TestCase):
    """petdaq-export's HDF5 and CASToR outputs read back with h5py and NumPy."""

    def export(self, fmt, out):
        acq = Acquisition.get()
        subprocess.run([tool("petdaq-export"), "--input", os.path.join(acq, "out.plm"), "--config",
                        os.path.join(acq, "petdaq.yaml"), "--format", fmt, "--output", out,
                        "--quiet"], check=True, capture_output=True)

    def test_hdf5_equals_petdaq_dump(self):
        try:
            import h5py
        except ImportError:
            self.skipTest("h5py (python3-h5py) missing")
        acq = Acquisition.get()
        out = os.path.join(acq, "out.h5")
        self.export("hdf5", out)
        want, text = dump_records(os.path.join(acq, "out.plm"))
        with h5py.File(out, "r") as f:
            for kind, name in (("prompt", "prompts"), ("delayed", "delayed")):
                d = f[name]
                self.assertIsNotNone(d.chunks)
                self.assertEqual(d.compression, "gzip")
                got = d[:]
                self.assertEqual(len(got), len(want[kind]))
                self.assertEqual([tuple(r) for r in got.tolist()],
                                 [(t, dt, a, b, np.float32(ea), np.float32(eb), fl)
                                  for t, dt, a, b, ea, eb, fl in want[kind]])
            self.assertEqual(f.attrs["tick_ps"], float(re.search(r"tick_ps (\S+)", text).group(1)))
            self.assertEqual(f["counts"].attrs["prompts"], len(want["prompt"]))
            self.assertEqual(f["counts"].attrs["delayed"], len(want["delayed"]))
            plm = petdaq.read_plm(os.path.join(acq, "out.plm"))
            np.testing.assert_array_equal(f["messages"]["t_end"], plm.messages["t_end"])
            np.testing.assert_array_equal(f["messages"]["record_count"], plm.messages["record_count"])
            # The C++ geometry equals the Python package's (two implementations of DESIGN 3).
            g = petdaq.Geometry()
            np.testing.assert_allclose(f["geometry/crystal_position_mm"][:], g.lut(), atol=1e-9)
            np.testing.assert_array_equal(f["geometry/ring"][:], g.ring(np.arange(g.crystal_count)))
            np.testing.assert_array_equal(f["geometry/sector"][:], g.sector(np.arange(g.crystal_count)))
            self.assertIn("scanner:", f["settings"].attrs["config_yaml"].decode())

    def test_castor_records_equal_the_plm(self):
        acq = Acquisition.get()
        base = os.path.join(acq, "scan")
        self.export("castor", base)
        plm = petdaq.read_plm(os.path.join(acq, "out.plm"))
        events = np.fromfile(base + ".cdf", dtype=np.dtype([("time_ms", "<u4"), ("crystal_1", "<u4"),
                                                           ("crystal_2", "<u4")]))
        p = plm.prompts
        self.assertGreater(len(p), 100)
        np.testing.assert_array_equal(events["crystal_1"], p["crystal_a"])
        np.testing.assert_array_equal(events["crystal_2"], p["crystal_b"])
        t0 = plm.messages[0]["t_begin"]
        want_ms = np.floor((p["time_a"] - t0).astype(np.float64) * plm.tick_ps * 1e-9)
        np.testing.assert_array_equal(events["time_ms"], want_ms.astype(np.uint32))
        with open(base + ".cdh") as f:
            header = dict(line.split(": ", 1) for line in f.read().splitlines())
        self.assertEqual(header["Data mode"], "list-mode")
        self.assertEqual(int(header["Number of events"]), len(p))
        self.assertEqual(header["Data filename"], "scan.cdf")
        g = petdaq.Geometry()
        lut = np.fromfile(base + ".lut", dtype="<f4").reshape(-1, 6)
        self.assertEqual(len(lut), g.crystal_count)
        np.testing.assert_allclose(lut[:, :3], g.lut(), atol=1e-4)
        np.testing.assert_allclose(np.linalg.norm(lut[:, 3:], axis=1), 1, atol=1e-6)


class LiveExport(unittest.TestCase):
    def test_hdf5_of_a_subscription_equals_a_recording_of_it(self):
        try:
            import h5py
        except ImportError:
            self.skipTest("h5py (python3-h5py) missing")
        with tempfile.TemporaryDirectory(prefix="petdaq-live-") as d:
            endpoint = "ipc://" + os.path.join(d, "pub.sock")
            config = os.path.join(SOURCE, "config", "petdaq.yaml")
            common = dict(stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            record = subprocess.Popen([tool("petdaq-record"), "--config", config, "--output",
                                       os.path.join(d, "rec.plm"), "--endpoint", endpoint,
                                       "--messages", "10", "--quiet"], **common)
            export = subprocess.Popen([tool("petdaq-export"), "--config", config, "--endpoint",
                                       endpoint, "--messages", "10", "--output",
                                       os.path.join(d, "live.h5"), "--quiet"], **common)
            # Two subscribers of two topics each; then 5 prompt and 5 delayed batches.
            subprocess.run([tool("petdaq-test-publisher"), "--endpoint", endpoint,
                            "--wait-subscriptions", "4", "--batches", "5"], check=True,
                           capture_output=True, timeout=60)
            _, record_err = record.communicate(timeout=30)
            _, export_err = export.communicate(timeout=30)
            self.assertEqual(record.returncode, 0, record_err)
            self.assertEqual(export.returncode, 0, export_err)
            rec = petdaq.read_plm(os.path.join(d, "rec.plm"))
            self.assertGreater(len(rec.prompts), 0)
            with h5py.File(os.path.join(d, "live.h5"), "r") as f:
                np.testing.assert_array_equal(f["prompts"][:].view(petdaq.RECORD), rec.prompts)
                np.testing.assert_array_equal(f["delayed"][:].view(petdaq.RECORD), rec.delayed)
                np.testing.assert_array_equal(f["messages"]["message_id"], rec.messages["message_id"])
                self.assertEqual(f.attrs["source"].decode(), endpoint)


# A small scanner with histogram bins other than the defaults, so the edges are checked
# against the configuration rather than against the defaults.
SMALL_SCANNER = """scanner:
  bdm_transaxial: 8
  bdm_axial: 1
  du_transaxial: 2
  du_axial: 2
  crystal_transaxial: 8
  crystal_axial: 8
  position_size: 64
  tick_ps: 15.625
  ring_radius_mm: 40.0
calibration:
  position_lut: none.npy
  energy_correction: none.npy
output:
  histograms:
    energy_bins: 100
    energy_max_keV: 800.0
    raw_bins: 128
    raw_bin_adc: 32
    rate_bins: 40
    rate_bin_ms: 2.0
"""

# The 16-byte raw frame of DESIGN section 2.
FRAME = np.dtype([("head_du", "u1"), ("bdm", "u1"), ("time", ">u8"), ("x", "u1"), ("y", "u1"),
                  ("energy", ">u2"), ("temp_int", "i1"), ("temp_frac_tail", "u1")])
assert FRAME.itemsize == 16


class HistogramAcquisition:
    """A small simulated acquisition processed by petdaq-offline --histograms; its printed
    summary parsed into {label: count}."""
    dir = None
    summary = None

    @classmethod
    def get(cls):
        if cls.dir is None:
            cls.dir = tempfile.mkdtemp(prefix="petdaq-py-hist-")
            config = os.path.join(cls.dir, "small.yaml")
            with open(config, "w") as f:
                f.write(SMALL_SCANNER)
            acq = os.path.join(cls.dir, "acq")
            subprocess.run([tool("petdaq-sim"), "--config", config, "--output-dir", acq,
                            "--duration-s", "0.05", "--activity-MBq", "2", "--quiet"], check=True,
                           capture_output=True)
            out = subprocess.run([tool("petdaq-offline"), "--config", os.path.join(acq, "petdaq.yaml"),
                                  "--input", os.path.join(acq, "frames.bin"), "--output",
                                  os.path.join(cls.dir, "run.plm"), "--histograms",
                                  os.path.join(cls.dir, "run.pdh"), "--quiet"],
                                 check=True, capture_output=True, text=True).stdout
            cls.summary = {m.group(1).strip(): int(m.group(2))
                           for m in re.finditer(r"^\s*([a-z_. ]+?)\s+(\d+)(?:\s|$)", out, re.M)}
        return cls.dir

    @classmethod
    def path(cls, name):
        return os.path.join(cls.get(), name)


class Histograms(unittest.TestCase):
    """read_histograms on a file petdaq-offline wrote, against the C++ side and the inputs."""

    def setUp(self):
        self.h = petdaq.read_histograms(HistogramAcquisition.path("run.pdh"))
        self.printed = HistogramAcquisition.summary

    def test_totals_equal_the_counters_petdaq_offline_printed(self):
        h, printed = self.h, self.printed
        self.assertGreater(printed["singles"], 1000)
        self.assertGreater(printed["prompts"], 100)
        self.assertEqual(int(h["crystal_singles"].counts.sum()), printed["singles"])
        self.assertEqual(int(h["rate_singles"].counts.sum()), printed["singles"])
        self.assertEqual(int(h["crystal_energy_rejected"].counts.sum()), printed["energy rejected"])
        self.assertEqual(int(h["dt_prompt"].counts.sum()),
                         printed["prompts"] - printed["coinc.records_overflow"])
        self.assertEqual(int(h["dt_delayed"].counts.sum()), printed["delayed"])
        self.assertEqual(int(h["bdm_pair_prompt"].counts.sum()), printed["prompts"])
        self.assertEqual(int(h["rate_delayed"].counts.sum()), printed["delayed"])
        # The file's own counters are those the tool printed.
        c = h.meta["counters"]
        self.assertEqual(c["single.accepted"], printed["singles"])
        self.assertEqual(c["coinc.prompts"], printed["prompts"])
        self.assertEqual(c["stream.late"], printed["stream.late"])

    def test_flood_equals_a_count_of_the_frames(self):
        frames = np.fromfile(os.path.join(HistogramAcquisition.path("acq"), "frames.bin"), dtype=FRAME)
        self.assertEqual(self.printed["stream.late"], 0)  # else late frames would be missing
        du = frames["head_du"] & 0x0F
        ok = ((frames["head_du"] >> 4 == 0xA) & (frames["temp_frac_tail"] & 0x0F == 0x5)
              & (frames["bdm"] < 8) & (du < 4) & (frames["x"] < 64) & (frames["y"] < 64))
        want = np.zeros((8, 4, 64, 64), dtype=np.uint64)
        f = frames[ok]
        np.add.at(want, (f["bdm"], f["head_du"] & 0x0F, f["y"], f["x"]), 1)
        flood = self.h["flood"]
        self.assertEqual(flood.shape, (8, 4, 64, 64))
        self.assertGreater(int(want.sum()), 10000)
        np.testing.assert_array_equal(flood.counts, want)

    def test_dt_prompt_equals_a_count_of_the_records(self):
        plm = petdaq.read_plm(HistogramAcquisition.path("run.plm"))
        tick_ps = plm.tick_ps
        window_ticks = int(round(self.h.meta["window_ps"] / tick_ps))
        bin_ticks = max(1, -(-(window_ticks + 1) // 1024))  # DESIGN 7: ceil((W + 1) / 1024)
        dt = self.h["dt_prompt"]
        n = dt.shape[0]
        want = np.bincount(np.minimum(plm.prompts["dt"] // bin_ticks, n - 1), minlength=n)
        np.testing.assert_array_equal(dt.counts, want)
        self.assertEqual(dt.unit, "ps")
        np.testing.assert_allclose(dt.edges, np.arange(n + 1) * bin_ticks * tick_ps)

    def test_names_shapes_units_and_edges(self):
        h = self.h
        self.assertEqual(h.names()[:2], ["crystal_singles", "crystal_energy_rejected"])
        self.assertEqual(set(h), {"crystal_singles", "crystal_energy_rejected", "energy_keV",
                                  "energy_raw", "flood", "dt_prompt", "dt_delayed", "bdm_pair_prompt",
                                  "bdm_pair_delayed", "bdm_pair_randoms_singles_rate", "rate_singles",
                                  "rate_prompts", "rate_delayed"})
        crystals = 8 * 4 * 64
        e = h["energy_keV"]
        self.assertEqual((e.shape, e.unit, e.counts.dtype), ((crystals, 100), "keV", np.dtype("<u4")))
        np.testing.assert_allclose(e.edges, np.linspace(0, 800, 101))
        np.testing.assert_allclose(e.centers, np.arange(100) * 8 + 4)
        r = h["energy_raw"]
        self.assertEqual((r.shape, r.unit), ((crystals, 128), "ADC"))
        self.assertEqual(r.edges[-1], 128 * 32)
        rate = h["rate_prompts"]
        self.assertEqual((rate.shape, rate.unit), ((40,), "s"))
        np.testing.assert_allclose(rate.edges[-1], 40 * 0.002)
        self.assertEqual(h["crystal_singles"].shape, (crystals,))
        self.assertEqual(h["bdm_pair_prompt"].shape, (8, 8))
        self.assertEqual(h.tick_ps, 15.625)
        self.assertEqual(h.meta["scanner"]["position_size"], 64)
        self.assertEqual(h.meta["energy_window_keV"], [350, 650])

    def test_truncated_other_version_and_foreign_files_are_clear_errors(self):
        with open(HistogramAcquisition.path("run.pdh"), "rb") as f:
            data = f.read()
        cases = {"truncated.pdh": (data[:len(data) // 2], "truncated or padded"),
                 "tiny.pdh": (data[:10], "shorter than the 64-byte header"),
                 "version3.pdh": (data[:4] + b"\x03\x00" + data[6:], "version 3, this reader knows versions 1 to 2"),
                 "frames.pdh": (b"\xa0" * 256, "bad magic"),
                 # The first descriptor's shape forged to 2^32 - 1 on each of 4 axes.
                 "shape.pdh": (data[:64 + 52] + np.array([4] + [2**32 - 1] * 4, "<u4").tobytes()
                               + data[64 + 72:], "histogram crystal_singles: bins past the end")}
        for name, (content, message) in cases.items():
            path = HistogramAcquisition.path(name)
            with open(path, "wb") as f:
                f.write(content)
            with self.assertRaises(petdaq.HistogramFileError) as e:
                petdaq.read_histograms(path)
            self.assertIn(message, str(e.exception))
            self.assertIn(name, str(e.exception))
        with self.assertRaises(FileNotFoundError):
            petdaq.read_histograms(HistogramAcquisition.path("missing.pdh"))


def assert_hdf5_histograms_equal(test, group, h):
    """An HDF5 group petdaq-export wrote equals read_histograms' view of the same bytes."""
    test.assertEqual(sorted(group), sorted(h.names()))
    for name, hist in h.items():
        d = group[name]
        test.assertEqual(d.shape, hist.shape, name)
        test.assertEqual(d.dtype, hist.counts.dtype, name)
        np.testing.assert_array_equal(d[()], hist.counts, err_msg=name)
        test.assertEqual(d.attrs["unit"].decode(), hist.unit, name)
        test.assertEqual(d.attrs["lo"], hist.lo, name)
        test.assertEqual(d.attrs["width"], hist.width, name)
        np.testing.assert_array_equal(d.attrs["bin_edges"], hist.edges, err_msg=name)
    test.assertEqual(group.attrs["run_id"], h.run_id)
    test.assertEqual(group.attrs["tick_ps"], h.tick_ps)
    test.assertEqual(group.attrs["created_unix_ns"], h.created_unix_ns)
    test.assertEqual(json.loads(group.attrs["metadata_json"]), h.meta)


class HistogramExport(unittest.TestCase):
    """petdaq-export --histograms: the HDF5 datasets read with h5py equal read_histograms."""

    def setUp(self):
        try:
            import h5py
        except ImportError:
            self.skipTest("h5py (python3-h5py) missing")
        self.h5py = h5py

    def export(self, *extra):
        d = HistogramAcquisition.get()
        return subprocess.run([tool("petdaq-export"), "--input", os.path.join(d, "run.plm"), "--config",
                               os.path.join(d, "acq", "petdaq.yaml"), "--quiet", *extra],
                              capture_output=True, text=True)

    def test_hdf5_histograms_equal_read_histograms(self):
        out = HistogramAcquisition.path("hist.h5")
        pdh = HistogramAcquisition.path("run.pdh")
        r = self.export("--histograms", pdh, "--output", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        h = petdaq.read_histograms(pdh)
        with self.h5py.File(out, "r") as f:
            assert_hdf5_histograms_equal(self, f["histograms"], h)
            self.assertEqual(f["histograms/flood"].compression, "gzip")
            self.assertEqual(f["histograms/flood"][()].sum(), HistogramAcquisition.summary["frames"])
            # The records are exported beside them as before.
            self.assertEqual(len(f["prompts"]), HistogramAcquisition.summary["prompts"])

    def test_a_refused_histogram_file_is_a_usage_error_and_writes_nothing(self):
        with open(HistogramAcquisition.path("run.pdh"), "rb") as f:
            data = f.read()
        bad = HistogramAcquisition.path("cut.pdh")
        with open(bad, "wb") as f:
            f.write(data[:-8])
        out = HistogramAcquisition.path("refused.h5")
        r = self.export("--histograms", bad, "--output", out)
        self.assertEqual(r.returncode, 2)
        self.assertIn("cut.pdh", r.stderr)
        self.assertIn("truncated or padded", r.stderr)
        self.assertFalse(os.path.exists(out))
        r = self.export("--histograms", HistogramAcquisition.path("run.pdh"), "--format", "castor",
                        "--output", HistogramAcquisition.path("scan"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--histograms", r.stderr)


class LiveHistogramExport(unittest.TestCase):
    """Live, petdaq-export takes the `histograms` topic: the last message of each run."""

    def test_the_last_histograms_of_each_run_are_exported(self):
        try:
            import h5py
            import zmq
        except ImportError as e:
            self.skipTest(f"{e.name} missing (python3-h5py, python3-zmq)")
        with open(HistogramAcquisition.path("run.pdh"), "rb") as f:
            run0 = f.read()
        # The same histograms as run 7 (run_id is at byte 16 of the file header).
        run7 = run0[:16] + np.uint64(7).astype("<u8").tobytes() + run0[24:]
        plm = petdaq.read_plm(HistogramAcquisition.path("run.plm"))
        config = os.path.join(HistogramAcquisition.path("acq"), "petdaq.yaml")

        def header(kind, message_id, record_count, record_size):
            h = np.zeros(1, dtype=petdaq.MESSAGE_HEADER)
            h["magic"], h["version"], h["kind"] = 0x31514450, 1, kind
            h["message_id"], h["record_count"], h["record_size"] = message_id, record_count, record_size
            return h.tobytes()

        with tempfile.TemporaryDirectory(prefix="petdaq-live-h-") as d:
            endpoint = "ipc://" + os.path.join(d, "pub.sock")
            ctx = zmq.Context()
            pub = ctx.socket(zmq.XPUB)
            pub.setsockopt(zmq.LINGER, 2000)
            pub.bind(endpoint)
            out = os.path.join(d, "live.h5")
            export = subprocess.Popen([tool("petdaq-export"), "--config", config, "--endpoint", endpoint,
                                       "--messages", "1", "--output", out, "--quiet"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                subscriptions = set()
                while len(subscriptions) < 3:  # coinc.prompt, coinc.delayed, histograms
                    self.assertTrue(pub.poll(30000), "petdaq-export did not subscribe")
                    m = pub.recv()
                    if m[:1] == b"\x01":
                        subscriptions.add(m[1:])
                self.assertIn(b"histograms", subscriptions)
                hist = lambda i, body: [b"histograms", header(4, i, 1, len(body)), body]  # noqa: E731
                pub.send_multipart(hist(0, bytes(range(256))))  # a layout no reader knows: refused
                # An earlier message of run 0: every bin zero (between the descriptors and
                # the JSON document).
                bins, meta = 64 + 96 * len(petdaq.read_histograms(HistogramAcquisition.path("run.pdh"))), \
                    int(np.frombuffer(run0, "<u8", 1, 32)[0])
                pub.send_multipart(hist(1, run0[:bins] + bytes(meta - bins) + run0[meta:]))
                pub.send_multipart(hist(2, run0))  # run 0's later message replaces it
                pub.send_multipart(hist(3, run7))
                prompts = plm.prompts
                pub.send_multipart([b"coinc.prompt", header(1, 0, len(prompts), 32), prompts.tobytes()])
                _, err = export.communicate(timeout=30)
            finally:
                if export.poll() is None:
                    export.kill()
                pub.close()
                ctx.term()
            self.assertEqual(export.returncode, 0, err)
            self.assertIn("1 malformed messages refused (last: histograms: not a petdaq histogram "
                          "file (bad magic))", err)
            h = petdaq.read_histograms(HistogramAcquisition.path("run.pdh"))
            with h5py.File(out, "r") as f:
                assert_hdf5_histograms_equal(self, f["histograms_run0"], h)
                self.assertEqual(f["histograms"].attrs["run_id"], 7)
                np.testing.assert_array_equal(f["histograms/flood"][()], h["flood"].counts)
                np.testing.assert_array_equal(f["prompts"][:].view(petdaq.RECORD), prompts)


class GeometryTest(unittest.TestCase):
    g = petdaq.Geometry()

    def test_crystal_ids_follow_design_section_3(self):
        g = self.g
        self.assertEqual(g.crystals_per_ring, 12 * 2 * 13)
        self.assertEqual(g.ring_count, 2 * 2 * 13)
        # b_trans 5, d_trans 1, c_trans 7; b_axial 1, d_axial 0, c_axial 3
        in_ring = 5 * (2 * 13) + 1 * 13 + 7
        ring = 1 * (2 * 13) + 0 * 13 + 3
        crystal = ring * g.crystals_per_ring + in_ring
        self.assertEqual(g.ring(crystal), ring)
        self.assertEqual(g.sector(crystal), 5)
        self.assertEqual(g.crystal_in_ring(crystal), in_ring)

    def test_positions(self):
        g = self.g
        lut = g.lut()
        self.assertEqual(lut.shape, (g.crystal_count, 3))
        self.assertEqual(len(np.unique(np.round(lut, 6), axis=0)), g.crystal_count)
        # Every crystal centre lies half a depth behind its panel's face.
        angle = 2 * np.pi * g.sector(np.arange(g.crystal_count)) / g.bdm_transaxial
        depth = lut[:, 0] * np.cos(angle) + lut[:, 1] * np.sin(angle)
        np.testing.assert_allclose(depth, g.ring_radius_mm + g.crystal_depth_mm / 2, atol=1e-9)
        # Neighbours inside a DU are one pitch apart, across and along; rings are centred on 0.
        np.testing.assert_allclose(np.linalg.norm(lut[1] - lut[0]), g.crystal_pitch_transaxial_mm)
        np.testing.assert_allclose(np.linalg.norm(lut[g.crystals_per_ring] - lut[0]),
                                   g.crystal_pitch_axial_mm)
        np.testing.assert_allclose(lut[:, 2].mean(), 0, atol=1e-9)
        # Across a DU gap: pitch + gap; across a BDM gap along the axis: pitch + BDM gap.
        np.testing.assert_allclose(np.linalg.norm(lut[13] - lut[12]),
                                   g.crystal_pitch_transaxial_mm + g.du_gap_mm)
        r = g.crystals_per_ring
        np.testing.assert_allclose(lut[26 * r, 2] - lut[25 * r, 2],
                                   g.crystal_pitch_axial_mm + g.bdm_gap_mm)

    def test_from_config(self):
        try:
            import yaml  # noqa: F401
        except ImportError:
            self.skipTest("PyYAML (python3-yaml) missing")
        g = petdaq.Geometry.from_config(os.path.join(SOURCE, "config", "petdaq.yaml"))
        self.assertEqual(g, petdaq.Geometry())


if __name__ == "__main__":
    unittest.main()
