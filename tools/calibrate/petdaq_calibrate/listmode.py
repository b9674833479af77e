"""Reading a list-mode file (.plm, DESIGN section 7) into NumPy arrays."""
import numpy as np

from . import CalibrationError

FILE_HEADER = np.dtype([("magic", "<u4"), ("version", "<u2"), ("header_size", "<u2"),
                        ("tick_ps", "<f8"), ("crystal_count", "<u4"), ("crystals_per_ring", "<u4"),
                        ("settings_hash", "<u8"), ("created_unix_ns", "<u8")])
MESSAGE_HEADER = np.dtype([("magic", "<u4"), ("version", "<u2"), ("kind", "<u2"),
                           ("message_id", "<u8"), ("run_id", "<u8"), ("slice_id", "<u8"),
                           ("t_begin", "<u8"), ("t_end", "<u8"), ("count", "<u4"),
                           ("record_size", "<u4"), ("flags", "<u4"), ("reserved", "<u4")])
COINCIDENCE = np.dtype([("time_a", "<u8"), ("dt", "<i4"), ("crystal_a", "<u4"), ("crystal_b", "<u4"),
                        ("energy_a", "<f4"), ("energy_b", "<f4"), ("flags", "<u4")])
assert MESSAGE_HEADER.itemsize == 64 and COINCIDENCE.itemsize == 32
FILE_MAGIC, MESSAGE_MAGIC = 0x4C514450, 0x31514450
PROMPTS, DELAYED = 1, 2


def read_coincidences(path, kind=PROMPTS):
    """All records of one kind, in file order, and the file header."""
    data = np.fromfile(path, dtype=np.uint8)
    if data.size < 64:
        raise CalibrationError(f"{path}: {data.size} bytes, shorter than a list-mode file header")
    head = data[:FILE_HEADER.itemsize].view(FILE_HEADER)[0]
    if head["magic"] != FILE_MAGIC or head["version"] != 1:
        raise CalibrationError(f"{path}: not a petdaq list-mode file (magic or version)")
    pos = int(head["header_size"])
    parts = []
    while pos < data.size:
        if pos + 64 > data.size:
            raise CalibrationError(f"{path}: truncated message header at byte {pos}")
        mh = data[pos:pos + 64].view(MESSAGE_HEADER)[0]
        if mh["magic"] != MESSAGE_MAGIC:
            raise CalibrationError(f"{path}: bad message magic at byte {pos}")
        size = int(mh["count"]) * int(mh["record_size"])
        # Other kinds (singles, ...) are skipped by their size; coincidences must be 32 bytes.
        coincidences = mh["kind"] in (PROMPTS, DELAYED)
        if (coincidences and mh["record_size"] != COINCIDENCE.itemsize) or pos + 64 + size > data.size:
            raise CalibrationError(f"{path}: bad or truncated message at byte {pos}")
        if mh["kind"] == kind and mh["count"]:
            parts.append(data[pos + 64:pos + 64 + size].view(COINCIDENCE))
        pos += 64 + size
    records = np.concatenate(parts) if parts else np.zeros(0, dtype=COINCIDENCE)
    return records, head
