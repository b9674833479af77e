"""The binary layouts of DESIGN sections 4, 5 and 7 as NumPy dtypes (all little-endian)."""

import numpy as np

# One coincidence, 32 bytes (DESIGN section 5).
RECORD = np.dtype([
    ("time_a", "<u8"),     # ticks, the earlier single (the window opener for delayed)
    ("dt", "<i4"),         # time_b - time_a, ticks
    ("crystal_a", "<u4"),  # global crystal ids (DESIGN section 3)
    ("crystal_b", "<u4"),
    ("energy_a", "<f4"),   # keV
    ("energy_b", "<f4"),
    ("flags", "<u4"),      # bit 0 delayed, bit 1 from a multiple, bits 8-15 min(k, 255)
])
assert RECORD.itemsize == 32

# One single, 16 bytes (DESIGN section 4): the `singles` topic and kind-3 messages in a .plm.
SINGLE = np.dtype([
    ("time", "<u8"),       # ticks, corrected
    ("crystal", "<u4"),    # global crystal id (DESIGN section 3)
    ("energy", "<f4"),     # keV
])
assert SINGLE.itemsize == 16

# The 64-byte header of every published message and of every message in a .plm file.
MESSAGE_HEADER = np.dtype([
    ("magic", "<u4"), ("version", "<u2"), ("kind", "<u2"), ("message_id", "<u8"),
    ("run_id", "<u8"), ("slice_id", "<u8"), ("t_begin", "<u8"), ("t_end", "<u8"),
    ("record_count", "<u4"), ("record_size", "<u4"), ("flags", "<u4"),
    ("publisher_id", "<u4"),  # version 2: the publisher's instance id (0 in version 1)
])
assert MESSAGE_HEADER.itemsize == 64
MESSAGE_MAGIC = 0x31514450  # "PDQ1"
MESSAGE_VERSIONS = (1, 2)  # version 2 added publisher_id

# The 64-byte header of a .plm file.
FILE_HEADER = np.dtype([
    ("magic", "<u4"), ("version", "<u2"), ("header_size", "<u2"), ("tick_ps", "<f8"),
    ("crystal_count", "<u4"), ("crystals_per_ring", "<u4"), ("settings_hash", "<u8"),
    ("created_unix_ns", "<u8"), ("zeros", "V24"),
])
assert FILE_HEADER.itemsize == 64
FILE_MAGIC = 0x4C514450  # "PDQL"

KIND_PROMPTS, KIND_DELAYED, KIND_SINGLES = 1, 2, 3
KIND_DEADTIME = 5
KIND_NAMES = {KIND_PROMPTS: "prompts", KIND_DELAYED: "delayed", KIND_SINGLES: "singles",
              KIND_DEADTIME: "deadtime"}

# An interval of acquisition time shed as scanner-wide dead time (DESIGN section 6,
# "Overload"): raw ticks [t_begin, t_end) and the frames dropped in it.
DEAD_INTERVAL = np.dtype([("t_begin", "<u8"), ("t_end", "<u8"), ("frames_dropped", "<u8")])
assert DEAD_INTERVAL.itemsize == 24
# The record layout of each kind that carries records this package reads.
KIND_DTYPES = {KIND_PROMPTS: RECORD, KIND_DELAYED: RECORD, KIND_SINGLES: SINGLE,
               KIND_DEADTIME: DEAD_INTERVAL}
FLAG_DELAYED = 1
FLAG_FROM_MULTIPLE = 2


def multiplicity(flags):
    """Window multiplicity k (saturated at 255) from a flags array or value."""
    return (np.asarray(flags) >> 8) & 0xFF
