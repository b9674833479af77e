"""The petdaq Python package (python/petdaq) against the C++ tools it mirrors.

Run by CTest with PYTHONPATH pointing at python/ and PETDAQ_BIN_DIR at the build's binaries:
read_plm is compared with petdaq-dump's text on a simulated acquisition processed by
petdaq-offline, the geometry with DESIGN section 3's formulas.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
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
        if line.startswith("#") or line.startswith("single ") or line.startswith("deadtime "):
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

    def test_a_corrupt_first_record_count_is_an_error_not_an_empty_file(self):
        import struct
        plm = os.path.join(Acquisition.get(), "out.plm")
        with open(plm, "rb") as f:
            data = bytearray(f.read())
        struct.pack_into("<I", data, 64 + 48, 0x7FFFFFFF)  # the first message's record_count
        with tempfile.TemporaryDirectory(prefix="petdaq-py-count-") as d:
            bad = os.path.join(d, "bad.plm")
            with open(bad, "wb") as f:
                f.write(data)
            with self.assertRaisesRegex(petdaq.plm.PlmError, "no complete message"):
                petdaq.read_plm(bad)
            r = subprocess.run([tool("petdaq-dump"), bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("no complete message", r.stderr)
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
        with self.assertRaisesRegex(petdaq.plm.PlmError, "record size 32 for kind 5, expected 24"):
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

    def test_castor_refuses_crystal_ids_outside_the_scanner(self):
        import struct
        acq = Acquisition.get()
        with tempfile.TemporaryDirectory(prefix="petdaq-py-castor-") as d:
            with open(os.path.join(acq, "out.plm"), "rb") as f:
                file_header = f.read(64)
            rec = lambda a, b: struct.pack("<QiIIffI", 1000, 5, a, b, 511.0, 511.0, 0)
            head = struct.pack("<IHHQQQQQIIII", 0x31514450, 2, 1, 0, 1, 0, 0, 2000, 3, 32, 0, 0)
            plm = os.path.join(d, "bad.plm")
            with open(plm, "wb") as f:
                f.write(file_header + head + rec(0, 1) + rec(0xFFFFFFFF, 2) + rec(3, 0xFFFFFFFF))
            r = subprocess.run([tool("petdaq-export"), "--input", plm, "--config",
                                os.path.join(acq, "petdaq.yaml"), "--format", "castor", "--output",
                                os.path.join(d, "out"), "--quiet"], capture_output=True, text=True)
            # Refused, not written: a reconstruction gets no file with a hole in it.
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("4294967295", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "out.cdf")))

    def test_an_output_that_is_an_input_is_refused_and_the_input_kept(self):
        acq = Acquisition.get()
        d = tempfile.mkdtemp(prefix="petdaq-py-same-")
        try:
            plm = os.path.join(d, "run.plm")
            shutil.copyfile(os.path.join(acq, "out.plm"), plm)
            config = os.path.join(d, "petdaq.yaml")
            shutil.copyfile(os.path.join(acq, "petdaq.yaml"), config)
            os.symlink(plm, os.path.join(d, "link.plm"))
            os.link(plm, os.path.join(d, "hard.plm"))
            shutil.copyfile(plm, os.path.join(d, "base.cdf"))
            def read(path):
                with open(path, "rb") as f:
                    return f.read()
            before = {p: read(p) for p in (plm, config, os.path.join(d, "base.cdf"))}
            cases = [(["--input", plm, "--config", config, "--output", plm], "input"),
                     (["--input", plm, "--config", config, "--output", os.path.join(d, "link.plm")], "input"),
                     (["--input", plm, "--config", config, "--output", os.path.join(d, "hard.plm")], "input"),
                     (["--input", plm, "--config", config, "--output", config], "configuration"),
                     (["--input", os.path.join(d, "base.cdf"), "--config", config, "--format", "castor",
                       "--output", os.path.join(d, "base")], "input")]
            for args, what in cases:
                r = subprocess.run([tool("petdaq-export"), *args, "--quiet"], capture_output=True,
                                   text=True)
                self.assertEqual(r.returncode, 2, (args, r.stderr))
                self.assertIn(f"is the {what} file", r.stderr)
            for p, data in before.items():
                self.assertEqual(read(p), data, p)
        finally:
            shutil.rmtree(d, ignore_errors=True)

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
            np.testing.assert_allclose(f["geometry/crystal_position_mm"][:], g.lut()[:, :3], atol=1e-9)
            np.testing.assert_array_equal(f["geometry/ring"][:], g.ring(np.arange(g.crystal_count)))
            np.testing.assert_array_equal(f["geometry/sector"][:], g.sector(np.arange(g.crystal_count)))
            self.assertIn("scanner:", f["settings"].attrs["config_yaml"].decode())
        # The signed Δt row for row, and no corrections without a table or histograms.
        x = petdaq.read_export_hdf5(out)
        for records, dt in ((x.prompts, x.prompts_signed_dt_ps), (x.delayed, x.delayed_signed_dt_ps)):
            np.testing.assert_array_equal(dt, (petdaq.signed_dt_ticks(records) * plm.tick_ps).astype(np.float32))
        self.assertIsNone(x.normalization)
        self.assertIsNone(x.randoms_per_s)
        self.assertEqual(x.live_fraction, 1.0)
        self.assertEqual(x.attributes["randoms_model"], "none (no histogram file given)")

    def test_castor_records_equal_the_plm(self):
        acq = Acquisition.get()
        base = os.path.join(acq, "scan")
        self.export("castor", base)
        plm = petdaq.read_plm(os.path.join(acq, "out.plm"))
        header, events = petdaq.read_castor(base)
        # No correction known: time, TOF, crystal 1, crystal 2 (16 bytes).
        self.assertEqual(events.dtype.names, ("time_ms", "tof_ps", "id1", "id2"))
        self.assertEqual(os.path.getsize(base + ".cdf"), 16 * len(events))
        p = plm.prompts
        self.assertGreater(len(p), 100)
        np.testing.assert_array_equal(events["id1"], np.minimum(p["crystal_a"], p["crystal_b"]))
        np.testing.assert_array_equal(events["id2"], np.maximum(p["crystal_a"], p["crystal_b"]))
        # CASToR's Δt = t(crystal 1) − t(crystal 2): petdaq's signed Δt, in ps.
        want_tof = np.where(p["crystal_a"] <= p["crystal_b"], -p["dt"], p["dt"]) * plm.tick_ps
        np.testing.assert_array_equal(events["tof_ps"], want_tof.astype(np.float32))
        self.assertEqual(header["TOF information flag"], "1")
        self.assertEqual(header["Normalization correction flag"], "0")
        self.assertEqual(header["Random correction flag"], "0")
        t0 = plm.messages[0]["t_begin"]
        want_ms = np.floor((p["time_a"] - t0).astype(np.float64) * plm.tick_ps * 1e-9)
        np.testing.assert_array_equal(events["time_ms"], want_ms.astype(np.uint32))
        with open(base + ".cdh") as f:
            header = dict(line.split(": ", 1) for line in f.read().splitlines())
        self.assertEqual(header["Data mode"], "list-mode")
        self.assertEqual(int(header["Number of events"]), len(p))
        self.assertEqual(header["Data filename"], "scan.cdf")
        # The scanner is named after its geometry, its .hscan and .lut after the name.
        self.assertEqual(header["Scanner name"], "petdaq_12x2bdm_2x2du_13x13crystals_r80mm")
        scanner = os.path.join(acq, header["Scanner name"])
        with open(scanner + ".hscan") as f:
            self.assertIn(f"scanner name: {header['Scanner name']}\n", f.read())
        g = petdaq.Geometry()
        lut = np.fromfile(scanner + ".lut", dtype="<f4").reshape(-1, 6)
        self.assertEqual(len(lut), g.crystal_count)
        # Geometry.lut() is the same six values per crystal.
        np.testing.assert_allclose(lut, g.lut(), atol=1e-4)
        np.testing.assert_allclose(np.linalg.norm(lut[:, 3:], axis=1), 1, atol=1e-6)


class LiveSubscribe(unittest.TestCase):
    def test_a_change_of_publisher_is_reported_and_its_ids_count_afresh(self):
        try:
            import zmq  # noqa: F401
        except ImportError:
            self.skipTest("pyzmq (python3-zmq) missing")
        with tempfile.TemporaryDirectory(prefix="petdaq-sub-") as d:
            endpoint = "ipc://" + os.path.join(d, "pub.sock")
            pub = subprocess.Popen([tool("petdaq-test-publisher"), "--endpoint", endpoint,
                                    "--wait-subscriptions", "2", "--batches", "6",
                                    "--publisher-id", "4660", "--new-publisher-from", "3"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                batches = []
                for b in petdaq.subscribe(endpoint, timeout_s=20):
                    batches.append(b)
                    if len(batches) == 12:
                        break
            finally:
                pub.wait(timeout=30)
            self.assertEqual([b.publisher_id for b in batches], [0x1234] * 6 + [0x1235] * 6)
            self.assertEqual([b.new_publisher for b in batches],
                             [False] * 6 + [True] + [False] * 5)
            self.assertEqual([b.missed for b in batches], [0] * 12)
            self.assertEqual({int(b.header["version"]) for b in batches}, {2})


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


def wait_for(condition, limit_s, what):
    """Polls `condition` until it holds or `limit_s` passes (then fails naming `what`)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit_s} s waiting for {what}")
        time.sleep(0.02)


def final_counter(log, name):
    """A counter of petdaqd's "final counters" log line, or None."""
    at = log.find("final counters:")
    m = re.search(r" " + re.escape(name) + r"=(\d+)", log[at:]) if at >= 0 else None
    return int(m.group(1)) if m else None


class RatesReader:
    """petdaqd's latest `rates` document: when every subscription arrived, every frame too."""

    def __init__(self, endpoint):
        import zmq
        self.zmq = zmq
        self.socket = zmq.Context.instance().socket(zmq.SUB)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.SUBSCRIBE, b"rates")
        self.socket.connect(endpoint)
        self.last = {}

    def counter(self, name):
        while True:
            try:
                frames = self.socket.recv_multipart(flags=self.zmq.NOBLOCK)
            except self.zmq.Again:
                break
            if len(frames) == 3:
                self.last = json.loads(frames[2])
        return self.last.get("counters", {}).get(name, 0)

    def close(self):
        self.socket.close(linger=0)


class LiveSingles(unittest.TestCase):
    """petdaqd with the singles topic and the file sink's singles: the Python subscriber, the
    file sink, petdaq-record --singles, petdaq-dump and petdaq-export all give the same
    singles, as many as the daemon accepted; petdaq-record's file is complete while it runs."""

    def test_singles_live_on_disk_and_in_python(self):
        try:
            import zmq  # noqa: F401
        except ImportError:
            self.skipTest("pyzmq (python3-zmq) missing")
        for name in ("petdaqd", "petdaq-replay", "petdaq-record", "petdaq-sim", "petdaq-dump"):
            tool(name)
        with tempfile.TemporaryDirectory(prefix="petdaq-singles-") as d:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            endpoint = "ipc://" + os.path.join(d, "pub.sock")
            files = os.path.join(d, "files")
            os.mkdir(files)
            with open(os.path.join(d, "base.yaml"), "w") as f:
                f.write(f"""calibration:
  position_lut: position_lut.npy
  energy_correction: energy_correction.npy
input:
  endpoints: ["127.0.0.1:{port}"]
  framing: raw
  receive_buffer_bytes: 16777216
output:
  zmq:
    endpoint: "{endpoint}"
    send_hwm: 1000000
  singles:
    enabled: true
  file:
    enabled: true
    singles: true
    directory: "{files}"
backend: cpu
stream:
  max_disorder_ps: 5.0e9
""")
            acq = os.path.join(d, "acq")
            subprocess.run([tool("petdaq-sim"), "--config", os.path.join(d, "base.yaml"),
                            "--output-dir", acq, "--duration-s", "0.008", "--activity-MBq", "5",
                            "--quiet"], check=True, capture_output=True, timeout=120)
            config = os.path.join(acq, "petdaq.yaml")
            frames = os.path.join(acq, "frames.bin")
            offline = subprocess.run([tool("petdaq-offline"), "--config", config, "--input", frames,
                                      "--output", os.path.join(d, "offline.plm"), "--quiet"],
                                     check=True, capture_output=True, text=True, timeout=120).stdout
            offline_singles = int(re.search(r"^singles\s+(\d+)", offline, re.M).group(1))
            offline_prompts = int(re.search(r"^prompts\s+(\d+)", offline, re.M).group(1))
            self.assertGreater(offline_singles, 0)

            d_err = open(os.path.join(d, "d.err"), "w+")
            daemon = subprocess.Popen([tool("petdaqd"), "--config", config], stdout=subprocess.DEVNULL,
                                      stderr=d_err)
            rec_err_path = os.path.join(d, "rec.err")
            rec_err = open(rec_err_path, "w")
            recorder = None
            example = None
            rates = None
            try:
                def log():
                    with open(d_err.name) as f:
                        return f.read()
                wait_for(lambda: " ready" in log() or daemon.poll() is not None, 30, "petdaqd ready")
                self.assertIn(" ready", log())
                rates = RatesReader(endpoint)
                rec_plm = os.path.join(d, "rec.plm")
                recorder = subprocess.Popen([tool("petdaq-record"), "--config", config, "--output",
                                             rec_plm, "--singles"],
                                            stdout=subprocess.DEVNULL, stderr=rec_err)
                # The Python subscriber of the singles topic, on a thread of its own (it ends
                # when nothing has come for a while; the test waits for what it needs).
                batches, failure = [], []

                def listen():
                    try:
                        for batch in petdaq.subscribe(endpoint, topics=(petdaq.live.TOPIC_SINGLES,),
                                                      timeout_s=30,
                                                      on_error=lambda e: failure.append(str(e))):
                            batches.append(batch)
                    except TimeoutError:
                        pass
                listener = threading.Thread(target=listen, daemon=True)
                listener.start()
                # The example a new user starts from, on the singles topic.
                example_out = os.path.join(d, "example.out")
                example_err = os.path.join(d, "example.err")
                with open(example_out, "w") as out, open(example_err, "w") as err:
                    example = subprocess.Popen(
                        ["/usr/bin/python3", os.path.join(SOURCE, "tools", "examples", "subscribe.py"),
                         "--endpoint", endpoint, "--topic", "singles", "--timeout-s", "60"],
                        stdout=out, stderr=err, env=dict(os.environ, PYTHONUNBUFFERED="1"))

                def example_singles():
                    with open(example_out) as f:
                        return sum(int(m) for m in re.findall(r" records=(\d+)", f.read()))
                # rates (1) + petdaq-record (3 topics) + the two Python subscribers (1 each).
                wait_for(lambda: rates.counter("out.zmq_subscriptions") >= 6, 30,
                         "every subscription at petdaqd")
                replay = subprocess.run([tool("petdaq-replay"), frames, "--to", f"127.0.0.1:{port}",
                                         "--config", config, "--rate", "500000", "--quiet"],
                                        capture_output=True, text=True, timeout=120)
                self.assertEqual(replay.returncode, 0, replay.stderr + log())
                frame_count = os.path.getsize(frames) // 16
                wait_for(lambda: rates.counter("rx.frames") >= frame_count, 30, "every frame received")
                daemon.send_signal(signal.SIGTERM)
                self.assertEqual(daemon.wait(timeout=60), 0, log())
                accepted = final_counter(log(), "single.accepted")
                slices = final_counter(log(), "stream.slices")
                self.assertEqual(accepted, offline_singles, log())

                # petdaq-record still runs: its file holds every message it received, whole.
                def recorded_whole():
                    try:
                        f = petdaq.read_plm(rec_plm)
                    except petdaq.plm.PlmError:
                        return False
                    return (f.partial_tail_bytes == 0 and len(f.singles) == accepted and
                            len(f.prompts) == offline_prompts)
                wait_for(recorded_whole, 20, "petdaq-record's file to hold every message")
                self.assertIsNone(recorder.poll(), "petdaq-record stopped by itself")
                growing = petdaq.read_plm(rec_plm)
                self.assertEqual(int((growing.messages["kind"] == 1).sum()), slices)
                recorder.send_signal(signal.SIGINT)
                self.assertEqual(recorder.wait(timeout=20), 0)

                wait_for(lambda: sum(len(b.records) for b in list(batches)) >= accepted, 30,
                         "the Python subscriber to receive every single")
                wait_for(lambda: example_singles() >= accepted, 30, "subscribe.py to print every single")
                example.send_signal(signal.SIGINT)
                self.assertEqual(example.wait(timeout=20), 0)
                self.assertEqual(example_singles(), accepted)
                with open(example_err) as f:
                    self.assertNotIn("skipped", f.read())
                with open(example_out) as f:
                    self.assertIn(" first: time=", f.read())
                self.assertEqual(failure, [])
                batches = list(batches)
            finally:
                for p in (daemon, recorder, example):
                    if p is not None and p.poll() is None:
                        p.kill()
                        p.wait()
                if rates:
                    rates.close()
                d_err.close()
                rec_err.close()

            live = np.concatenate([b.records for b in batches])
            self.assertEqual(live.dtype, petdaq.SINGLE)
            self.assertEqual(len(live), accepted)
            # Batches tile time per run, each single inside its batch, in time order.
            for a, b in zip(batches, batches[1:]):
                if a.header["run_id"] == b.header["run_id"]:
                    self.assertEqual(int(b.header["t_begin"]), int(a.header["t_end"]))
                    self.assertEqual(int(b.header["message_id"]), int(a.header["message_id"]) + 1)
            for b in batches:
                t = b.records["time"]
                self.assertTrue(np.all(t[1:] >= t[:-1]))
                self.assertTrue(np.all((t >= b.header["t_begin"]) & (t < b.header["t_end"])))
            self.assertTrue(np.all((live["energy"] > 0) & (live["energy"] < 2000)))

            # The daemon's file sink wrote the same singles, between its coincidence messages.
            sink = [petdaq.read_plm(os.path.join(files, n))
                    for n in sorted(os.listdir(files)) if n.endswith(".plm")]
            np.testing.assert_array_equal(np.concatenate([f.singles for f in sink]), live)
            self.assertEqual(sum(len(f.prompts) for f in sink), offline_prompts)
            recorded = petdaq.read_plm(rec_plm)
            np.testing.assert_array_equal(recorded.singles, live)
            self.assertEqual(int((recorded.messages["kind"] == 3).sum()), len(batches))
            self.assertEqual(recorded.skipped, {})

            # petdaq-dump prints them; the coincidence lines are those of a file without singles.
            dump = subprocess.run([tool("petdaq-dump"), rec_plm], check=True, capture_output=True,
                                  text=True).stdout
            self.assertIn(f"# singles messages {len(batches)} records {accepted}\n", dump)
            lines = [ln.split() for ln in dump.splitlines() if ln.startswith("single ")]
            self.assertEqual(len(lines), accepted)
            self.assertEqual([int(x[3]) for x in lines[:50]], [int(t) for t in live["time"][:50]])
            self.assertEqual([int(x[4]) for x in lines[:50]], [int(c) for c in live["crystal"][:50]])
            records, _ = dump_records(rec_plm)
            self.assertEqual(len(records["prompt"]), offline_prompts)

            # petdaq-export writes them to HDF5.
            try:
                import h5py
            except ImportError:
                return
            h5 = os.path.join(d, "rec.h5")
            subprocess.run([tool("petdaq-export"), "--input", rec_plm, "--config", config,
                            "--output", h5, "--quiet"], check=True, capture_output=True, timeout=120)
            with h5py.File(h5, "r") as f:
                np.testing.assert_array_equal(f["singles"][:].view(petdaq.SINGLE), live)
                self.assertEqual(int(f["counts"].attrs["singles"]), accepted)
                np.testing.assert_array_equal(f["prompts"][:].view(petdaq.RECORD), recorded.prompts)


class PerRunCounters(unittest.TestCase):
    """petdaq-replay --loop into petdaqd: every run's .pdh file carries that run's counters,
    which equal its bins, and the runs' counters add up to the daemon's totals."""

    def test_each_runs_counters_equal_its_histograms(self):
        for name in ("petdaqd", "petdaq-replay", "petdaq-sim"):
            tool(name)
        with tempfile.TemporaryDirectory(prefix="petdaq-runs-") as d:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            endpoint = "ipc://" + os.path.join(d, "pub.sock")
            files = os.path.join(d, "files")
            os.mkdir(files)
            with open(os.path.join(d, "base.yaml"), "w") as f:
                f.write(f"""calibration:
  position_lut: position_lut.npy
  energy_correction: energy_correction.npy
input:
  endpoints: ["127.0.0.1:{port}"]
  receive_buffer_bytes: 16777216
output:
  zmq:
    endpoint: "{endpoint}"
  histograms:
    enabled: true
    interval_ms: 200
  file:
    enabled: true
    directory: "{files}"
backend: cpu
""")
            acq = os.path.join(d, "acq")
            subprocess.run([tool("petdaq-sim"), "--config", os.path.join(d, "base.yaml"),
                            "--output-dir", acq, "--duration-s", "0.03", "--activity-MBq", "5",
                            "--quiet"], check=True, capture_output=True, timeout=120)
            config = os.path.join(acq, "petdaq.yaml")
            frames = os.path.join(acq, "frames.bin")
            log_path = os.path.join(d, "d.err")
            with open(log_path, "w") as log_file:
                daemon = subprocess.Popen([tool("petdaqd"), "--config", config],
                                          stdout=subprocess.DEVNULL, stderr=log_file)
            def log():
                with open(log_path) as f:
                    return f.read()
            rates = None
            try:
                wait_for(lambda: " ready" in log() or daemon.poll() is not None, 30, "petdaqd ready")
                self.assertIn(" ready", log())
                rates = RatesReader(endpoint)
                wait_for(lambda: rates.counter("rx.frames") >= 0 and rates.last, 30, "a rates document")
                subprocess.run([tool("petdaq-replay"), frames, "--to", f"127.0.0.1:{port}",
                                "--config", config, "--rate", "1000000", "--loop", "3", "--quiet"],
                               check=True, capture_output=True, timeout=120)
                frame_count = 3 * (os.path.getsize(frames) // 16)
                wait_for(lambda: rates.counter("rx.frames") >= frame_count, 30, "every frame received")
                daemon.send_signal(signal.SIGTERM)
                self.assertEqual(daemon.wait(timeout=60), 0, log())
            finally:
                if daemon.poll() is None:
                    daemon.kill()
                    daemon.wait()
                if rates:
                    rates.close()
            runs = sorted(os.path.join(files, n) for n in os.listdir(files) if n.endswith(".pdh"))
            self.assertGreaterEqual(len(runs), 2, log())
            totals = {}
            for path in runs:
                h = petdaq.read_histograms(path)
                # Named after the .plm holding the run's first message, beside it.
                m = re.match(r"(.*)-run(\d+)\.pdh$", os.path.basename(path))
                self.assertIsNotNone(m, path)
                self.assertTrue(os.path.exists(os.path.join(files, m.group(1) + ".plm")), path)
                self.assertEqual(int(m.group(2)), h.run_id)
                counters = h.meta["counters"]
                self.assertIn("counters_since_start", h.meta)
                self.assertEqual(int(h["crystal_singles"].counts.sum()), counters["single.accepted"], path)
                self.assertEqual(int(h["crystal_energy_rejected"].counts.sum()),
                                 counters["single.energy_rejected"], path)
                self.assertEqual(int(h["dt_prompt"].counts.sum()),
                                 counters["coinc.prompts"] - counters["coinc.records_overflow"], path)
                self.assertGreater(counters["single.accepted"], 0, path)
                for k in ("single.accepted", "coinc.prompts", "coinc.delayed"):
                    totals[k] = totals.get(k, 0) + counters[k]
            for k, v in totals.items():
                self.assertEqual(v, final_counter(log(), k), k)


class SkippedKinds(unittest.TestCase):
    def test_a_kind_the_reader_does_not_use_is_skipped_and_counted(self):
        plm = os.path.join(Acquisition.get(), "out.plm")
        whole = petdaq.read_plm(plm)
        with open(plm, "rb") as f:
            data = f.read()
        # A message of kind 9 with three 24-byte records after the file header.
        head = np.zeros(1, dtype=petdaq.MESSAGE_HEADER)
        head["magic"], head["version"], head["kind"] = 0x31514450, 1, 9
        head["record_count"], head["record_size"] = 3, 24
        other = os.path.join(Acquisition.get(), "other-kind.plm")
        with open(other, "wb") as f:
            f.write(data[:64] + head.tobytes() + bytes(72) + data[64:])
        got = petdaq.read_plm(other)
        self.assertEqual(got.skipped, {9: 1})
        np.testing.assert_array_equal(got.prompts, whole.prompts)
        np.testing.assert_array_equal(got.delayed, whole.delayed)
        out = subprocess.run([tool("petdaq-dump"), "--summary", other], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("# skipped 1 message(s) of kind 9", out.stdout)
        ref = subprocess.run([tool("petdaq-dump"), "--summary", plm], capture_output=True, text=True)
        self.assertIn(ref.stdout.splitlines()[2], out.stdout)  # the same message counts


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

    def test_signed_tof_equals_a_count_of_the_records(self):
        # Δt = t(lower crystal id) − t(higher) (DESIGN section 5), counted here from the .plm.
        plm = petdaq.read_plm(HistogramAcquisition.path("run.plm"))
        tick_ps = self.h.tick_ps
        dt = self.h["dt_prompt"]
        w = int(round(dt.width / tick_ps))
        half = dt.shape[0]
        p = plm.prompts
        signed = np.where(p["crystal_a"] <= p["crystal_b"], -p["dt"].astype(np.int64), p["dt"])
        tof = self.h["tof_prompt"]
        self.assertEqual(tof.shape, (2 * half,))
        want = np.bincount(np.clip((signed + half * w) // w, 0, 2 * half - 1), minlength=2 * half)
        np.testing.assert_array_equal(tof.counts, want)
        np.testing.assert_allclose(tof.edges[half], -0.5 * tick_ps)  # tick 0 inside bin `half`
        self.assertTrue(0 < want[:half].sum() < want.sum(), "both signs occur")
        du = self.h["du_pair_tof_prompt"]
        dus = 8 * 4
        self.assertEqual(du.shape[:2], (dus, dus))
        np.testing.assert_array_equal(du.counts.sum(axis=(0, 1)).sum(), len(p))

    def test_names_shapes_units_and_edges(self):
        h = self.h
        self.assertEqual(h.names()[:2], ["crystal_singles", "crystal_energy_rejected"])
        self.assertEqual(set(h), {"crystal_singles", "crystal_energy_rejected", "energy_keV",
                                  "energy_raw", "flood", "dt_prompt", "dt_delayed", "bdm_pair_prompt",
                                  "bdm_pair_delayed", "bdm_pair_randoms_singles_rate", "rate_singles",
                                  "rate_prompts", "rate_delayed", "tof_prompt", "tof_delayed",
                                  "du_pair_tof_prompt", "du_pair_tof_delayed"})
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
                 "version4.pdh": (data[:4] + b"\x04\x00" + data[6:], "version 4, this reader knows versions 1 to 3"),
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


try:
    import scipy  # noqa: F401
    HAVE_SCIPY = True
except ImportError:
    HAVE_SCIPY = False


@unittest.skipUnless(HAVE_SCIPY, "python3-scipy is not installed")
class Figures(unittest.TestCase):
    """petdaq.figures on histograms drawn from known distributions (the fits against the
    simulator: tests/tools/figures_test.py)."""

    def test_ctr_of_a_gaussian_over_a_flat_floor(self):
        from petdaq import figures
        rng = np.random.default_rng(3)
        tick, half = 15.625, 257
        t = np.concatenate([rng.normal(-60, 400 / figures.FWHM_PER_SIGMA, 30000),
                            rng.uniform(-4000, 4000, 20000)])
        counts = np.bincount(np.clip(np.round(t / tick).astype(int) + half, 0, 2 * half - 1),
                             minlength=2 * half)
        edges = (np.arange(2 * half + 1) - half - 0.5) * tick
        f = figures.fit_ctr(counts, edges)
        self.assertAlmostEqual(f.fwhm_ps, 400, delta=4 * f.fwhm_err_ps)
        self.assertAlmostEqual(f.centre_ps, -60, delta=4 * f.centre_err_ps + 1)
        self.assertAlmostEqual(f.floor_per_bin, 20000 / (8000 / tick), delta=2)
        self.assertIsNone(figures.fit_ctr(counts // 1000, edges))  # too few prompts

    def test_photopeak_of_a_spectrum(self):
        from petdaq import figures
        rng = np.random.default_rng(4)
        e = np.concatenate([rng.normal(511, 0.10 * 511 / figures.FWHM_PER_SIGMA, 40000),
                            rng.uniform(0, 340, 40000), rng.exponential(150, 20000)])
        edges = np.arange(201) * 5.0
        f = figures.fit_photopeak(np.histogram(np.clip(e, 0, 999), edges)[0], edges)
        self.assertAlmostEqual(f.position_keV, 511, delta=1)
        self.assertAlmostEqual(f.resolution_percent, 10.0, delta=0.2)

    def test_a_file_without_signed_dt_has_no_ctr(self):
        from petdaq import figures
        h = petdaq.read_histograms(HistogramAcquisition.path("run.pdh"))
        self.assertTrue(figures.has_signed_tof(h))
        del h.histograms["tof_prompt"]
        self.assertFalse(figures.has_signed_tof(h))
        self.assertIsNone(figures.ctr(h))
        self.assertIsNone(figures.ctr_map(h))


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
        r = self.export("--randoms", "singles-rate", "--format", "castor",
                        "--output", HistogramAcquisition.path("scan"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--histograms", r.stderr)
        # With histograms, CASToR events carry each pair's randoms rate.
        r = self.export("--histograms", HistogramAcquisition.path("run.pdh"), "--format", "castor",
                        "--output", HistogramAcquisition.path("scan"))
        self.assertEqual(r.returncode, 0, r.stderr)
        header, events = petdaq.read_castor(HistogramAcquisition.path("scan"))
        self.assertEqual(header["Random correction flag"], "1")
        self.assertTrue(np.all(events["randoms_per_s"] > 0))


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
        six = g.lut()
        self.assertEqual(six.shape, (g.crystal_count, 6))
        lut = six[:, :3]
        np.testing.assert_array_equal(lut, g.position_mm(np.arange(g.crystal_count)))
        np.testing.assert_allclose(np.linalg.norm(six[:, 3:], axis=1), 1, atol=1e-12)
        # The outward vector points from the axis through the crystal's panel.
        self.assertTrue(np.all(np.einsum("ij,ij->i", six[:, 3:5], lut[:, :2]) > 0))
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


class ReadImage(unittest.TestCase):
    """petdaq.read_image on a file built here field by field (DESIGN section 7, "Image")."""

    @staticmethod
    def build(nx=3, ny=2, nz=4, samples=2):
        import struct
        from petdaq import image as pim
        rng = np.random.default_rng(4)
        run = rng.integers(-3, 50, size=(nz, ny, nx)).astype("<i4")
        window = rng.integers(-3, 50, size=(nz, ny, nx)).astype("<i4")
        trace = np.zeros(samples, pim.TRACE)
        trace["t_s"] = np.arange(samples) * 0.05 + 0.025
        trace["z_mm"] = [1.5, -2.0][:samples]
        trace["weight"] = 7
        header = pim.HEADER.pack(pim.MAGIC, 1, 160, 42, nx, ny, nz, 2.0, -3.0, -2.0, -4.0, 1,
                                 15.625, 10, 20, 12, 20, 100, 5, 3, 1, samples, 50.0, 10.0)
        body = (header + run.tobytes() + window.tobytes()
                + run.sum(axis=(1, 2)).astype("<f8").tobytes()
                + window.sum(axis=(1, 2)).astype("<f8").tobytes() + trace.tobytes())
        return body, run, window, trace

    def test_fields_arrays_and_trace(self):
        body, run, window, trace = self.build()
        im = petdaq.read_image(body)
        self.assertEqual(im.run_id, 42)
        self.assertEqual(im.dims, (3, 2, 4))
        self.assertTrue(im.subtract_delayed)
        np.testing.assert_array_equal(im.run, run)
        np.testing.assert_array_equal(im.window, window)
        np.testing.assert_array_equal(im.axial_run, run.sum(axis=(1, 2)))
        np.testing.assert_array_equal(im.trace["z_mm"], trace["z_mm"])
        self.assertEqual(im.tallies, {"prompts_in": 100, "prompts_out": 5, "delayed_in": 3,
                                      "delayed_out": 1})
        np.testing.assert_allclose(im.centres_mm(0), [-2.0, 0.0, 2.0])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.pdim")
            with open(path, "wb") as f:
                f.write(body)
            np.testing.assert_array_equal(petdaq.read_image(path).run, run)

    def test_truncated_foreign_and_other_version_are_clear_errors(self):
        body, *_ = self.build()
        for bad, words in ((body[:-1], "header says"), (body[:40], "shorter than its header"),
                           (b"XXXX" + body[4:], "bad magic"), (body[:4] + b"\x02\x00" + body[6:], "version 2")):
            with self.assertRaises(petdaq.ImageFileError) as e:
                petdaq.read_image(bad)
            self.assertIn(words, str(e.exception))
