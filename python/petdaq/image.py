"""Image files (.pdim) and `image` messages (DESIGN section 7, "Image").

The live TOF back-positioned image (a histo-image: each prompt at its most likely point along
its line of response, optionally minus the delayed-window records), the sliding-window image,
the axial profiles and the centroid trace. TOF back-projection, not a reconstruction: no
attenuation, scatter or normalisation correction.

    import petdaq
    im = petdaq.read_image("run.pdim")
    im.run.shape                  # (z, y, x) voxels, int32 counts
    im.window                     # the last window_s of acquisition
    im.centres_mm(0)              # voxel centres along x (1: y, 2: z), in mm
    im.trace["t_s"], im.trace["x_mm"], im.trace["x_err_mm"], im.trace["weight"]
    im.axial_run, im.axial_window # counts per z slice

An `image` message carries exactly these bytes as its body (petdaq.read_image(bytes)).
"""

import struct

import numpy as np

MAGIC = 0x4D494450  # "PDIM"
VERSION = 1
HEADER = struct.Struct("<IHHQ3If3fId4Q4QIfd24x")  # 160 bytes
assert HEADER.size == 160
FLAG_SUBTRACT_DELAYED = 1
TRACE = np.dtype([("t_s", "<f8"), ("x_mm", "<f8"), ("y_mm", "<f8"), ("z_mm", "<f8"),
                  ("x_err_mm", "<f8"), ("y_err_mm", "<f8"), ("z_err_mm", "<f8"),
                  ("weight", "<f8")])
TALLIES = ("prompts_in", "prompts_out", "delayed_in", "delayed_out")


class ImageFileError(ValueError):
    """A truncated, foreign or unreadable image file; the message says what is wrong."""


class Image:
    """A parsed image file: run and window images (z, y, x), geometry, spans, trace."""

    def __init__(self, buf):
        if len(buf) < HEADER.size:
            raise ImageFileError(f"not an image file: {len(buf)} bytes, shorter than its header")
        (magic, version, header, self.run_id, nx, ny, nz, self.voxel_mm, ox, oy, oz, self.flags,
         self.tick_ps, rf, re, wf, we, t0, t1, t2, t3, ntrace, self.trace_bin_ms,
         self.window_s) = HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise ImageFileError("not an image file: bad magic")
        if version != VERSION:
            raise ImageFileError(f"image file version {version}, this reader knows {VERSION}")
        for d in (nx, ny, nz):
            if not 1 <= d <= 1024:
                raise ImageFileError(f"image file: dimension {d} out of range")
        self.dims = (nx, ny, nz)
        self.origin_mm = (ox, oy, oz)
        self.subtract_delayed = bool(self.flags & FLAG_SUBTRACT_DELAYED)
        self.run_span_ticks = (rf, re)
        self.window_span_ticks = (wf, we)
        self.tallies = dict(zip(TALLIES, (t0, t1, t2, t3)))
        v = nx * ny * nz
        need = header + 8 * v + 16 * nz + ntrace * TRACE.itemsize
        if need != len(buf):
            raise ImageFileError(f"image file: {len(buf)} bytes, its header says {need}")
        at = header
        self.run = np.frombuffer(buf, "<i4", v, at).reshape(nz, ny, nx)
        at += 4 * v
        self.window = np.frombuffer(buf, "<i4", v, at).reshape(nz, ny, nx)
        at += 4 * v
        self.axial_run = np.frombuffer(buf, "<f8", nz, at)
        at += 8 * nz
        self.axial_window = np.frombuffer(buf, "<f8", nz, at)
        at += 8 * nz
        self.trace = np.frombuffer(buf, TRACE, ntrace, at)

    def centres_mm(self, axis):
        """Voxel centres along axis 0 (x), 1 (y) or 2 (z), in mm."""
        return self.origin_mm[axis] + (np.arange(self.dims[axis]) + 0.5) * self.voxel_mm

    def seconds(self, ticks):
        return ticks * self.tick_ps * 1e-12


def read_image(source):
    """An image file's path, or the bytes of one (an `image` message body)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Image(bytes(source))
    with open(source, "rb") as f:
        return Image(f.read())
