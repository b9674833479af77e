"""petdaq-export --format petsird read back by an independent reader (yardl_reader.py).

A simulated acquisition (petdaq-sim, petdaq-offline) is exported; the reader decodes the file
from the schema it embeds, and each field is checked against what petdaq-dump prints, the
configuration, the Python package's geometry (DESIGN section 3) and the PETSIRD release's
schema string kept in tests/export/data.
"""

import collections
import math
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

import numpy as np

import petdaq
import yardl_reader

SOURCE = os.environ.get("PETDAQ_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("PETDAQ_BIN_DIR", "")
SCHEMA = os.path.join(SOURCE, "tests", "export", "data", "petsird-0.9.1.schema.json")
C_MM_PER_PS = 0.299792458
TIME_BLOCK_CASES = ["EventTimeBlock", "ExternalSignalTimeBlock", "BedMovementTimeBlock",
                    "GantryMovementTimeBlock", "DeadTimeTimeBlock", "SinglesHistogramTimeBlock"]


def tool(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        raise unittest.SkipTest(f"{name} is not built")
    return path


def export(plm, out, *extra):
    return subprocess.run([tool("petdaq-export"), "--config", Data.config, "--input", plm,
                           "--output", out, "--format", "petsird", "--quiet", *extra],
                          check=True, capture_output=True, text=True)


def dump(plm):
    """petdaq-dump's records: {kind: [(time_a, dt, crystal_a, crystal_b)]}."""
    out = subprocess.run([tool("petdaq-dump"), plm], check=True, capture_output=True,
                         text=True).stdout
    records = {"prompt": [], "delayed": []}
    for line in out.splitlines():
        if not line.startswith("#"):
            kind, _run, _slice, t, dt, a, b = line.split()[:7]
            records[kind].append((int(t), int(dt), int(a), int(b)))
    return records


class Data:
    """One simulated acquisition and its PETSIRD export, shared by the tests."""
    dir = config = plm = None

    @classmethod
    def get(cls):
        if cls.dir is None:
            cls.dir = tempfile.mkdtemp(prefix="petdaq-petsird-")
            subprocess.run([tool("petdaq-sim"), "--config", os.path.join(SOURCE, "config", "petdaq.yaml"),
                            "--output-dir", cls.dir, "--duration-s", "0.02", "--activity-MBq", "3",
                            "--quiet"], check=True, capture_output=True)
            cls.config = os.path.join(cls.dir, "petdaq.yaml")
            cls.plm = os.path.join(cls.dir, "out.plm")
            subprocess.run([tool("petdaq-offline"), "--config", cls.config, "--input",
                            os.path.join(cls.dir, "frames.bin"), "--output", cls.plm, "--quiet"],
                           check=True, capture_output=True)
            cls.petsird = os.path.join(cls.dir, "out.petsird")
            export(cls.plm, cls.petsird)
            cls.schema, steps = yardl_reader.read(cls.petsird)
            cls.header, cls.blocks = steps["header"], steps["timeBlocks"]
        return cls


def tearDownModule():
    if Data.dir:
        shutil.rmtree(Data.dir, ignore_errors=True)


def config():
    import yaml
    with open(Data.config) as f:
        return yaml.safe_load(f)


def transform(m):
    """A RigidTransformation's 3 x 4 row-major matrix as a NumPy array."""
    return np.array(m["matrix"], dtype=np.float64).reshape(3, 4)


def bin_to_crystal(scanner, geometry):
    """Detection bin -> crystal id, found by position alone: the file's transforms place each
    bin; the Python package places each crystal; they must pair one to one."""
    module = scanner["scannerGeometry"]["replicatedModules"][0]
    elements = module["object"]["detectingElements"]["transforms"]
    energy_bins = len(scanner["eventEnergyBinEdges"][0]["edges"]) - 1
    places = []
    for m in module["transforms"]:
        mm = transform(m)
        for e in elements:
            em = transform(e)
            centre = mm[:, :3] @ em[:, 3] + mm[:, 3]
            places.extend([centre] * energy_bins)
    places = np.array(places)
    crystals = geometry.position_mm(np.arange(geometry.crystal_count))
    key = lambda p: tuple(np.round(p, 2))
    crystal_at = {key(p): c for c, p in enumerate(crystals)}
    return np.array([crystal_at[key(p)] for p in places]), places


def events(blocks, field):
    """[(block start ms, bin0, bin1, tofIdx)] of every event time block."""
    out = []
    for tag, b in blocks:
        if tag == "EventTimeBlock":
            lists = b[field]
            for ev in (lists[0][0] if lists else []):
                out.append((b["timeInterval"]["start"], ev["detectionBins"][0],
                            ev["detectionBins"][1], ev["tofIdx"]))
    return out


def message_header(kind, message_id, run_id, t_begin, t_end, count, size):
    return struct.pack("<IHHQQQQQIIII", 0x31514450, 1, kind, message_id, run_id, 0, t_begin,
                       t_end, count, size, 0, 0)


class PetsirdSchema(unittest.TestCase):
    def test_the_embedded_schema_is_the_release_string(self):
        d = Data.get()
        with open(SCHEMA, "rb") as f:
            release = f.read()
        self.assertEqual(d.schema.encode("utf-8"), release)
        with open(d.petsird, "rb") as f:
            head = f.read(16 + len(release))
        # magic, u32 version 1, then the string's length as a varint (2 bytes here).
        self.assertEqual(head[:9], b"yardl\x01\x00\x00\x00")
        n = len(release)
        self.assertEqual(head[9:11], bytes([0x80 | (n & 0x7F), n >> 7]))
        self.assertEqual(head[11:11 + n], release)


class PetsirdHeader(unittest.TestCase):
    def test_scanner_geometry_places_every_crystal(self):
        d = Data.get()
        g = petdaq.Geometry.from_config(d.config)
        scanner = d.header["scanner"]
        to_crystal, places = bin_to_crystal(scanner, g)
        self.assertEqual(len(to_crystal), g.crystal_count)
        self.assertEqual(sorted(to_crystal), list(range(g.crystal_count)))
        np.testing.assert_allclose(places, g.position_mm(to_crystal), atol=1e-3)
        module = scanner["scannerGeometry"]["replicatedModules"][0]
        self.assertEqual(len(module["transforms"]), g.bdm_transaxial * g.bdm_axial)
        for m in module["transforms"]:
            r = transform(m)[:, :3]
            np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-6)
        for e in module["object"]["detectingElements"]["transforms"]:
            np.testing.assert_allclose(transform(e)[:, :3], np.eye(3), atol=0)
        # The box: depth along the module's x (outward), pitches across and along the axis.
        corners = np.array([c["c"] for c in module["object"]["detectingElements"]["object"]["shape"]["corners"]])
        self.assertEqual(corners.shape, (8, 3))
        np.testing.assert_allclose(corners.max(0) - corners.min(0),
                                   [g.crystal_depth_mm, g.crystal_pitch_transaxial_mm,
                                    g.crystal_pitch_axial_mm], rtol=1e-6)
        np.testing.assert_allclose(corners.mean(0), 0, atol=1e-6)
        # Each face a loop (the release generator's order): consecutive corners share an edge.
        for face in (corners[:4], corners[4:]):
            for i in range(4):
                self.assertEqual(np.count_nonzero(face[i] != face[(i + 1) % 4]), 1)
        np.testing.assert_allclose(corners[4:] - corners[:4], [[g.crystal_depth_mm, 0, 0]] * 4, rtol=1e-6)
        self.assertEqual(module["object"]["nonDetectingElements"], [])
        self.assertIsNone(scanner["scannerGeometry"]["nonDetectingVolumes"])
        materials = scanner["bulkMaterials"]
        self.assertEqual([m["id"] for m in materials],
                         [module["object"]["detectingElements"]["object"]["materialId"]])

    def test_tof_energy_and_policies_follow_the_configuration(self):
        d = Data.get()
        c = config()
        s = d.header["scanner"]
        tick = c["scanner"].get("tick_ps", 15.625)
        window = round(c["coincidence"].get("window_ps", 4000.0) / tick)
        edges = np.array(s["tofBinEdges"][0][0]["edges"])
        want = (np.arange(-window, window + 2) - 0.5) * tick * C_MM_PER_PS / 2
        np.testing.assert_allclose(edges, want, rtol=1e-6)
        self.assertEqual(len(s["tofBinEdges"]), 1)
        self.assertEqual(len(s["tofBinEdges"][0]), 1)
        self.assertAlmostEqual(s["tofResolution"][0][0],
                               c["coincidence"].get("time_resolution_ps", 500.0) * C_MM_PER_PS / 2, 3)
        ew = c.get("energy_window", {})
        self.assertEqual(s["eventEnergyBinEdges"][0]["edges"],
                         [ew.get("low_keV", 350.0), ew.get("high_keV", 650.0)])
        self.assertEqual(s["energyResolutionAt511"], [0.0])
        self.assertEqual(s["singlesHistogramLevel"], 0)  # none
        self.assertEqual(s["singlesHistogramEnergyBinEdges"], [])
        policy = c["coincidence"].get("policy", "kill_multiples")
        self.assertEqual(s["promptEventPolicy"], 0 if policy == "kill_multiples" else s["promptEventPolicy"])
        self.assertEqual(s["tripleEventPolicy"], 0)
        self.assertEqual(s["quadrupleEventPolicy"], 0)
        delayed = c["coincidence"].get("delayed", {}).get("enabled", True)
        self.assertEqual([s["singleEventsAreStored"], s["promptEventsAreStored"],
                          s["delayedEventsAreStored"], s["tripleEventsAreStored"],
                          s["quadrupleEventsAreStored"]], [False, True, delayed, False, False])
        eff = s["detectionEfficiencies"]
        self.assertEqual(eff["calibrationFactor"], 1.0)
        self.assertIsNone(eff["detectionBinEfficiencies"])
        self.assertIsNone(eff["modulePairSGIDLUT"])
        self.assertIsNone(eff["modulePairEfficienciesVectors"])
        self.assertIsNone(s["gantryAlignment"])
        self.assertIsNone(d.header["exam"])
        self.assertIn(str(petdaq.Geometry.from_config(d.config).crystal_count), s["modelName"])


def expected_events(plm, records, delay_ticks):
    """(block start ms, lower crystal, higher crystal, signed Δt in ticks) from petdaq-dump."""
    f = petdaq.read_plm(plm)
    t0 = int(f.messages[0]["t_begin"])
    out = []
    for t, dt, a, b in records:
        dt -= delay_ticks
        lo, hi = min(a, b), max(a, b)
        signed = -dt if a <= b else dt
        out.append((math.floor((t - t0) * f.tick_ps * 1e-9), lo, hi, signed))
    return out, f.tick_ps


class PetsirdEvents(unittest.TestCase):
    def check_events(self, petsird_file, plm, tof_bin_ticks=1):
        d = Data.get()
        c = config()
        _, steps = yardl_reader.read(petsird_file)
        scanner, blocks = steps["header"]["scanner"], steps["timeBlocks"]
        g = petdaq.Geometry.from_config(d.config)
        to_crystal, _ = bin_to_crystal(scanner, g)
        edges = np.array(scanner["tofBinEdges"][0][0]["edges"])
        want = dump(plm)
        tick = c["scanner"].get("tick_ps", 15.625)
        delay = round(c["coincidence"].get("delayed", {}).get("offset_ps", 100000.0) / tick)
        mm_per_tick = tick * C_MM_PER_PS / 2
        for kind, field, shift in (("prompt", "promptEvents", 0), ("delayed", "delayedEvents", delay)):
            expected, _ = expected_events(plm, want[kind], shift)
            got = []
            for start, b0, b1, tof in events(blocks, field):
                c0, c1 = int(to_crystal[b0]), int(to_crystal[b1])
                self.assertLess(c0, c1)  # the first detection bin is the lower crystal id
                # The bin's edges hold the signed Δt (in mm of c Δt / 2).
                got.append((start, c0, c1, tof))
            self.assertGreater(len(expected), 10 if kind == "delayed" else 100)
            self.assertEqual(len(got), len(expected))
            # Counts per crystal pair and per time block equal petdaq-dump's.
            self.assertEqual(collections.Counter((s, c0, c1) for s, c0, c1, _ in got),
                             collections.Counter((blk, lo, hi) for blk, lo, hi, _ in expected))
            self.assertEqual(collections.Counter((c0, c1) for _, c0, c1, _ in got),
                             collections.Counter((lo, hi) for _, lo, hi, _ in expected))
            # Each event's TOF bin holds its signed Δt.
            got_tof = collections.Counter()
            for s, c0, c1, tof in got:
                got_tof[(s, c0, c1, edges[tof], edges[tof + 1])] += 1
            for blk, lo, hi, signed in expected:
                x = signed * mm_per_tick
                keys = [k for k in got_tof if k[:3] == (blk, lo, hi) and k[3] <= x < k[4] and got_tof[k]]
                self.assertTrue(keys, f"{kind} {blk} {lo} {hi} Δt {signed}: no event with that TOF bin")
                got_tof[keys[0]] -= 1
            if tof_bin_ticks == 1:
                # One bin per tick: the index is the signed Δt plus the window.
                window = (len(edges) - 2) // 2
                self.assertEqual(sorted((s, c0, c1, tof - window) for s, c0, c1, tof in got),
                                 sorted(expected))
        return blocks

    def test_prompts_and_delayed_equal_petdaq_dump(self):
        d = Data.get()
        blocks = self.check_events(d.petsird, d.plm)
        # Event time blocks tile the acquisition, 1 ms each, from 0.
        intervals = [(b["timeInterval"]["start"], b["timeInterval"]["stop"])
                     for tag, b in blocks if tag == "EventTimeBlock"]
        self.assertEqual(intervals, [(k, k + 1) for k in range(len(intervals))])
        self.assertGreaterEqual(len(intervals), 19)
        self.assertTrue(all(tag in TIME_BLOCK_CASES for tag, _ in blocks))

    def test_wider_tof_bins_hold_the_same_events(self):
        d = Data.get()
        out = os.path.join(d.dir, "tof4.petsird")
        export(d.plm, out, "--tof-bin-ticks", "4")
        self.check_events(out, d.plm, tof_bin_ticks=4)

    def test_a_crystal_outside_the_scanner_is_refused(self):
        d = Data.get()
        with open(d.plm, "rb") as f:
            data = bytearray(f.read())
        # The first message's first record: crystal_b (bytes 16-19 of the record) = 10^6.
        first = 64 + 64
        self.assertGreater(struct.unpack_from("<I", data, 64 + 48)[0], 0)
        struct.pack_into("<I", data, first + 16, 1_000_000)
        bad = os.path.join(d.dir, "bad-crystal.plm")
        with open(bad, "wb") as f:
            f.write(data)
        out = os.path.join(d.dir, "bad-crystal.petsird")
        r = export(bad, out)
        self.assertIn("refused (not written): 1 records with a crystal id outside", r.stderr)
        _, steps = yardl_reader.read(out)
        self.assertEqual(len(events(steps["timeBlocks"], "promptEvents")),
                         len(dump(d.plm)["prompt"]) - 1)


class PetsirdPartialFile(unittest.TestCase):
    def test_a_file_being_written_is_exported_up_to_its_last_complete_message(self):
        d = Data.get()
        with open(d.plm, "rb") as f:
            data = f.read()
        count, size = struct.unpack_from("<II", data, 64 + 48)
        first_end = 64 + 64 + count * size
        self.assertLess(first_end, len(data))
        cut = os.path.join(d.dir, "growing.plm")
        with open(cut, "wb") as f:
            f.write(data[:first_end + 10])  # 10 bytes into the second message's header
        out = os.path.join(d.dir, "growing.petsird")
        r = export(cut, out)
        self.assertIn("10 bytes of a partial message follow", r.stderr)
        _, steps = yardl_reader.read(out)
        got = events(steps["timeBlocks"], "promptEvents")
        self.assertEqual(len(got), count)  # the first message holds the prompts


class PetsirdRuns(unittest.TestCase):
    def test_a_second_run_continues_after_the_first_runs_last_block(self):
        d = Data.get()
        with open(d.plm, "rb") as f:
            data = f.read()
        # The same messages again as run 7: header, then each message with run_id replaced.
        second, pos = bytearray(), 64
        while pos < len(data):
            count, size = struct.unpack_from("<II", data, pos + 48)
            msg = bytearray(data[pos:pos + 64 + count * size])
            struct.pack_into("<Q", msg, 16, 7)
            second += msg
            pos += 64 + count * size
        plm = os.path.join(d.dir, "two-runs.plm")
        with open(plm, "wb") as f:
            f.write(data + bytes(second))
        out = os.path.join(d.dir, "two-runs.petsird")
        export(plm, out)
        _, steps = yardl_reader.read(out)
        one = events(Data.blocks, "promptEvents")
        n = sum(1 for tag, _ in Data.blocks if tag == "EventTimeBlock")
        both = events(steps["timeBlocks"], "promptEvents")
        self.assertEqual(both, one + [(t + n, b0, b1, tof) for t, b0, b1, tof in one])
        starts = [b["timeInterval"]["start"] for tag, b in steps["timeBlocks"] if tag == "EventTimeBlock"]
        self.assertEqual(starts, list(range(2 * n)))


class PetsirdSingles(unittest.TestCase):
    def test_the_histogram_files_crystal_singles_become_a_singles_histogram_block(self):
        d = Data.get()
        plm, pdh = os.path.join(d.dir, "h.plm"), os.path.join(d.dir, "h.pdh")
        subprocess.run([tool("petdaq-offline"), "--config", d.config, "--input",
                        os.path.join(d.dir, "frames.bin"), "--output", plm, "--histograms", pdh,
                        "--quiet"], check=True, capture_output=True)
        out = os.path.join(d.dir, "h.petsird")
        r = export(plm, out, "--histograms", pdh)
        self.assertIn("1 singles-histogram blocks", r.stderr)
        _, steps = yardl_reader.read(out)
        scanner, blocks = steps["header"]["scanner"], steps["timeBlocks"]
        self.assertEqual(scanner["singlesHistogramLevel"], 2)  # all: per detection bin
        self.assertEqual(scanner["singlesHistogramEnergyBinEdges"], scanner["eventEnergyBinEdges"])
        singles = [b for tag, b in blocks if tag == "SinglesHistogramTimeBlock"]
        self.assertEqual(len(singles), 1)
        n_event = sum(1 for tag, _ in blocks if tag == "EventTimeBlock")
        self.assertEqual(singles[0]["timeInterval"], {"start": 0, "stop": n_event})
        g = petdaq.Geometry.from_config(d.config)
        to_crystal, _ = bin_to_crystal(scanner, g)
        got = np.zeros(g.crystal_count, dtype=np.uint64)
        got[to_crystal] = singles[0]["singlesHistograms"][0]
        want = petdaq.read_histograms(pdh)["crystal_singles"].counts
        self.assertGreater(int(want.sum()), 1000)
        np.testing.assert_array_equal(got, want)
        # The events are those of the export without histograms.
        self.assertEqual(events(blocks, "promptEvents"), events(Data.blocks, "promptEvents"))

    def test_a_file_that_is_not_a_histogram_file_is_refused_before_writing(self):
        d = Data.get()
        out = os.path.join(d.dir, "refused.petsird")
        r = subprocess.run([tool("petdaq-export"), "--config", d.config, "--input", d.plm,
                            "--output", out, "--format", "petsird", "--histograms", d.plm],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a petdaq histogram file", r.stderr)
        self.assertFalse(os.path.exists(out))


class PetsirdDeadTime(unittest.TestCase):
    def test_dead_intervals_become_dead_time_blocks_and_unknown_kinds_are_skipped(self):
        d = Data.get()
        f = petdaq.read_plm(d.plm)
        t0, run = int(f.messages[0]["t_begin"]), int(f.messages[0]["run_id"])
        ms = round(1e9 / f.tick_ps)  # ticks per ms (exact for 15.625 ps ticks)
        self.assertEqual(ms * f.tick_ps, 1e9)
        with open(d.plm, "rb") as src:
            data = src.read()
        dead = [(t0 + 2 * ms + ms // 2, t0 + 4 * ms + ms // 4, 7), (t0 + 10 * ms, t0 + 10 * ms + ms // 2, 3)]
        body = b"".join(struct.pack("<QQQ", *x) for x in dead)
        data += message_header(5, 0, run, t0, t0 + 20 * ms, len(dead), 24) + body
        data += message_header(9, 0, run, t0, t0, 1, 5) + b"extra"
        plm = os.path.join(d.dir, "dead.plm")
        with open(plm, "wb") as out:
            out.write(data)
        petsird_file = os.path.join(d.dir, "dead.petsird")
        r = export(plm, petsird_file)
        self.assertIn("1 messages of kinds PETSIRD does not carry skipped", r.stderr)
        _, steps = yardl_reader.read(petsird_file)
        blocks = steps["timeBlocks"]
        self.assertEqual(events(blocks, "promptEvents"), events(Data.blocks, "promptEvents"))
        n_event = sum(1 for tag, _ in blocks if tag == "EventTimeBlock")
        dead_blocks = [b for tag, b in blocks if tag == "DeadTimeTimeBlock"]
        spans = [(b["timeInterval"]["start"], b["timeInterval"]["stop"]) for b in dead_blocks]
        # They cover the event time blocks exactly, in order, with no overlap.
        self.assertEqual(spans[0][0], 0)
        self.assertEqual(spans[-1][1], n_event)
        self.assertTrue(all(a[1] == b[0] for a, b in zip(spans, spans[1:])))
        g = petdaq.Geometry.from_config(d.config)
        modules = g.bdm_transaxial * g.bdm_axial
        alive = {}
        for b, (start, stop) in zip(dead_blocks, spans):
            fr = b["aliveTimeFractions"]
            self.assertEqual(len(fr["singlesAliveTimeFractions"]), 1)
            self.assertEqual(fr["singlesAliveTimeFractions"][0], [1.0] * g.crystal_count)
            m = np.array(fr["moduleCoincidenceAliveTimeFractions"][0][0])
            self.assertEqual(m.shape, (modules, modules))
            self.assertTrue(np.all(m == m[0, 0]))
            for k in range(start, stop):
                alive[k] = float(m[0, 0])
        want = {k: 1.0 for k in range(n_event)}
        want.update({2: 0.5, 3: 0.0, 4: 0.75, 10: 0.5})
        self.assertEqual(alive, want)


if __name__ == "__main__":
    unittest.main()
