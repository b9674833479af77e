"""Reading a file of 16-byte raw frames (DESIGN section 2) in fixed-size chunks."""
import os

import numpy as np

from . import CalibrationError

FRAME = np.dtype([("head_du", "u1"), ("bdm", "u1"), ("time", ">u8"), ("x", "u1"), ("y", "u1"),
                  ("energy", ">u2"), ("temp_int", "i1"), ("temp_frac_tail", "u1")])
assert FRAME.itemsize == 16
CHUNK_FRAMES = 1 << 22
# A calibration file with more frames of wrong markers than this is not a frame file.
MAX_BAD_MARKER_FRACTION = 0.01


class FrameFile:
    """A frame file; iterating yields, per chunk, the good frames' DU index, x, y, raw energy."""

    def __init__(self, path, scanner):
        self.path = str(path)
        self.scanner = scanner
        try:
            size = os.path.getsize(self.path)
        except OSError as e:
            raise CalibrationError(f"{self.path}: cannot read the frame file: {e.strerror}") from e
        if size % FRAME.itemsize:
            raise CalibrationError(
                f"{self.path}: {size} bytes is not a whole number of 16-byte frames "
                f"({size % FRAME.itemsize} trailing bytes: a truncated file?)")
        if size == 0:
            raise CalibrationError(f"{self.path}: empty frame file")
        self.frame_count = size // FRAME.itemsize
        self.counts = {"frames": 0, "bad_marker": 0, "bad_bdm": 0, "bad_du": 0, "bad_position": 0}

    def chunks(self, with_time=False):
        sc = self.scanner
        for k in self.counts:
            self.counts[k] = 0
        with open(self.path, "rb") as f:
            while True:
                fr = np.fromfile(f, dtype=FRAME, count=CHUNK_FRAMES)
                if fr.size == 0:
                    break
                self.counts["frames"] += fr.size
                ok = np.ones(fr.size, dtype=bool)
                if sc.check_markers:
                    ok &= ((fr["head_du"] >> 4) == sc.head_marker) & \
                          ((fr["temp_frac_tail"] & 15) == sc.tail_marker)
                    self.counts["bad_marker"] += int(fr.size - ok.sum())
                    if self.counts["bad_marker"] > MAX_BAD_MARKER_FRACTION * self.counts["frames"]:
                        raise CalibrationError(
                            f"{self.path}: {self.counts['bad_marker']} of the first "
                            f"{self.counts['frames']} frames have wrong head/tail markers: "
                            "not a file of raw frames (DESIGN section 2)?")
                bdm = fr["bdm"].astype(np.int32)
                du = (fr["head_du"] & 15).astype(np.int32)
                bad = ok & (bdm >= sc.bdm_count)
                self.counts["bad_bdm"] += int(bad.sum())
                ok &= ~bad
                bad = ok & (du >= sc.du_per_bdm)
                self.counts["bad_du"] += int(bad.sum())
                ok &= ~bad
                bad = ok & ((fr["x"] >= sc.position_size) | (fr["y"] >= sc.position_size))
                self.counts["bad_position"] += int(bad.sum())
                ok &= ~bad
                fr = fr[ok]
                out = (bdm[ok] * sc.du_per_bdm + du[ok], fr["x"].astype(np.int32),
                       fr["y"].astype(np.int32), fr["energy"].astype(np.int32))
                yield out + (fr["time"].astype(np.uint64),) if with_time else out

    def summary(self):
        c = self.counts
        refused = {k: v for k, v in c.items() if k != "frames" and v}
        text = f"{c['frames']} frames"
        if refused:
            text += " (refused: " + ", ".join(f"{k} {v}" for k, v in refused.items()) + ")"
        return text
