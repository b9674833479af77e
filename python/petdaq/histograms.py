"""Histogram files (.pdh) and `histograms` messages (DESIGN section 7, "Histograms").

A file is a 64-byte header, one 96-byte descriptor per histogram (name, unit, shape, bin
edges, where its bins are), the bins (little-endian, C order: unsigned counts, or doubles
for estimates such as `bdm_pair_randoms_singles_rate`) and a JSON
document (run, backend, scanner geometry, windows, counters). A `histograms` message
carries exactly these bytes as its body.

    import petdaq
    h = petdaq.read_histograms("run.pdh")
    h["energy_keV"].counts.sum(axis=0)      # the scanner's energy spectrum
    h["energy_keV"].edges                   # bin edges of the last axis, in h["energy_keV"].unit
    h.meta["counters"]["single.accepted"]
    for name, hist in h.items(): ...        # in file order

petdaq-qa and petdaq-export's tests read histograms with this module; petdaq-export's HDF5
files carry the same arrays (docs/export.md).
"""

import json
import struct

import numpy as np

MAGIC = 0x48514450  # "PDQH"
VERSION = 3  # 2 added the element type, 3 the signed Δt histograms; older files read the same
OLDEST_VERSION = 1
HEADER = struct.Struct("<IHHIIQQQQQd")  # 64 bytes
DESCRIPTOR = struct.Struct("<32s16sHHI4IddQ")  # 96 bytes
assert HEADER.size == 64 and DESCRIPTOR.size == 96


class HistogramFileError(ValueError):
    """A truncated, foreign or unreadable histogram file; the message says what is wrong."""


class Histogram:
    """One histogram: counts (a read-only NumPy array of its shape, uint32 or uint64), the
    unit and bin edges of its last axis."""

    def __init__(self, name, unit, counts, lo, width):
        self.name = name
        self.unit = unit
        self.counts = counts
        self.lo = lo
        self.width = width

    @property
    def shape(self):
        return self.counts.shape

    @property
    def edges(self):
        n = self.counts.shape[-1]
        return self.lo + self.width * np.arange(n + 1)

    @property
    def centers(self):
        return self.edges[:-1] + 0.5 * self.width


class HistogramSet:
    """All histograms of one file or message, by name, and its JSON metadata."""

    def __init__(self, header, histograms, meta):
        self.run_id = header["run_id"]
        self.created_unix_ns = header["created_unix_ns"]
        self.tick_ps = header["tick_ps"]
        self.histograms = histograms
        self.meta = meta

    def __getitem__(self, name):
        return self.histograms[name]

    def __contains__(self, name):
        return name in self.histograms

    def __iter__(self):
        return iter(self.histograms)

    def __len__(self):
        return len(self.histograms)

    def names(self):
        return list(self.histograms)

    def items(self):
        return self.histograms.items()


def parse(data):
    """Parse the bytes of a histogram file or of a `histograms` message body (the third
    frame); raises HistogramFileError."""
    data = memoryview(bytes(data))
    size = len(data)
    if size < HEADER.size:
        raise HistogramFileError(f"truncated: {size} bytes, shorter than the 64-byte header")
    (magic, version, header_size, count, descriptor_size, run_id, created, meta_offset,
     meta_bytes, file_bytes, tick_ps) = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise HistogramFileError("not a petdaq histogram file (bad magic)")
    if not OLDEST_VERSION <= version <= VERSION:
        raise HistogramFileError(
            f"version {version}, this reader knows versions {OLDEST_VERSION} to {VERSION}")
    if header_size != HEADER.size or descriptor_size != DESCRIPTOR.size:
        raise HistogramFileError("unexpected header or descriptor size")
    if file_bytes != size:
        raise HistogramFileError(
            f"truncated or padded: the header says {file_bytes} bytes, found {size}")
    if count > 4096 or HEADER.size + count * DESCRIPTOR.size > size:
        raise HistogramFileError("descriptor table past the end")
    if meta_offset > size or meta_bytes > size - meta_offset:
        raise HistogramFileError("metadata past the end")
    try:
        meta = json.loads(bytes(data[meta_offset:meta_offset + meta_bytes]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HistogramFileError(f"metadata is not JSON: {e}") from None
    histograms = {}
    for i in range(count):
        (name, unit, element_bytes, element_type, rank, s0, s1, s2, s3, lo, width,
         offset) = DESCRIPTOR.unpack_from(data, HEADER.size + i * DESCRIPTOR.size)
        name = name.rstrip(b"\0").decode("ascii", "replace")
        unit = unit.rstrip(b"\0").decode("ascii", "replace")
        if element_bytes not in (4, 8):
            raise HistogramFileError(f"histogram {name}: element size {element_bytes}")
        if element_type > 1 or (element_type == 1 and element_bytes != 8):
            raise HistogramFileError(
                f"histogram {name}: element type {element_type} of {element_bytes} bytes")
        if not 1 <= rank <= 4:
            raise HistogramFileError(f"histogram {name}: bad rank {rank}")
        shape = (s0, s1, s2, s3)[:rank]
        n = 1
        for axis in shape:  # Python integers: a forged shape cannot wrap around
            n *= axis
        if offset > size or n * element_bytes > size - offset:
            raise HistogramFileError(f"histogram {name}: bins past the end")
        # Unsigned counts, or (type 1) IEEE doubles: estimates such as the randoms.
        dtype = np.dtype("<f8" if element_type == 1 else "<u4" if element_bytes == 4 else "<u8")
        counts = np.frombuffer(data, dtype=dtype, count=n, offset=offset).reshape(shape)
        histograms[name] = Histogram(name, unit, counts, lo, width)
    header = dict(run_id=run_id, created_unix_ns=created, tick_ps=tick_ps)
    return HistogramSet(header, histograms, meta)


def read_histograms(path):
    """Read a .pdh file; raises HistogramFileError (naming the file) or OSError."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return parse(data)
    except HistogramFileError as e:
        raise HistogramFileError(f"{path}: {e}") from None

