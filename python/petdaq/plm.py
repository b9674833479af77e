"""Reading a list-mode (.plm) file (DESIGN section 7): a 64-byte file header, then the
messages exactly as published (message header + records): prompts and delayed, singles where
the writer was asked to record them, the dead intervals the daemon shed under overload
(deadtime, DESIGN section 6), and any other kind, which is skipped and counted."""

import os
from dataclasses import dataclass

import numpy as np

from .formats import (DEAD_INTERVAL, FILE_HEADER, FILE_MAGIC, KIND_DEADTIME, KIND_DELAYED,
                      KIND_DTYPES, KIND_PROMPTS, KIND_SINGLES, MESSAGE_HEADER, MESSAGE_MAGIC,
                      MESSAGE_VERSIONS, RECORD, SINGLE)


@dataclass
class PlmFile:
    """A list-mode file read into memory."""
    header: dict             # the file header's fields (tick_ps, crystal_count, ...)
    messages: np.ndarray     # MESSAGE_HEADER per message read (skipped kinds too), in file order
    prompts: np.ndarray      # RECORD, every prompt in file order
    delayed: np.ndarray      # RECORD, every delayed coincidence in file order
    partial_tail_bytes: int  # bytes of a last message not complete yet (a file being written)
    singles: np.ndarray = None  # SINGLE, every single in file order (empty without kind 3)
    skipped: dict = None     # {kind: messages} of kinds this reader does not decode
    dead: np.ndarray = None  # DEAD_INTERVAL, every dead interval in file order

    def dead_ticks(self):
        """Acquisition time shed as dead time, ticks (the intervals do not overlap)."""
        if self.dead is None or self.dead.size == 0:
            return 0
        return int(np.sum(self.dead["t_end"] - self.dead["t_begin"]))

    @property
    def tick_ps(self):
        return self.header["tick_ps"]


class PlmError(ValueError):
    pass


def read_plm(path):
    """Reads a .plm file up to its last complete message.

    A file petdaqd or petdaq-record is still writing ends inside a message: that message is
    left out and its bytes counted in `partial_tail_bytes`; a file with no complete message
    but such a tail raises PlmError (its first record count is corrupt, or it has only just
    been created). Anything else wrong (bad magic, version, record size of a known kind)
    raises PlmError naming the byte offset. Messages of a kind this reader does not decode
    are skipped and counted in `skipped`.
    """
    data = np.fromfile(path, dtype=np.uint8)
    name = os.fspath(path)
    if data.size < FILE_HEADER.itemsize:
        raise PlmError(f"{name}: truncated file header ({data.size} of 64 bytes)")
    fh = data[:FILE_HEADER.itemsize].view(FILE_HEADER)[0]
    if fh["magic"] != FILE_MAGIC:
        raise PlmError(f"{name}: not a petdaq list-mode file (magic 0x{int(fh['magic']):08x})")
    if fh["version"] != 1 or fh["header_size"] != FILE_HEADER.itemsize:
        raise PlmError(f"{name}: list-mode file version {int(fh['version'])} is not supported")
    header = {k: fh[k].item() for k in FILE_HEADER.names if k != "zeros"}

    headers, bodies, kinds = [], [], []
    at, end = FILE_HEADER.itemsize, data.size
    partial = 0
    while at < end:
        if end - at < MESSAGE_HEADER.itemsize:
            partial = end - at
            break
        mh = data[at:at + MESSAGE_HEADER.itemsize].view(MESSAGE_HEADER)[0]
        where = f"{name}: message at byte {at}"
        if mh["magic"] != MESSAGE_MAGIC or mh["version"] not in MESSAGE_VERSIONS:
            raise PlmError(f"{where}: bad message magic or version")
        dtype = KIND_DTYPES.get(int(mh["kind"]))
        if dtype is not None and mh["record_size"] != dtype.itemsize:
            raise PlmError(f"{where}: record size {int(mh['record_size'])} for kind "
                           f"{int(mh['kind'])}, expected {dtype.itemsize}")
        body = int(mh["record_count"]) * int(mh["record_size"])
        start = at + MESSAGE_HEADER.itemsize
        if start + body > end:
            partial = end - at
            break
        headers.append(mh)
        kinds.append(int(mh["kind"]))
        bodies.append(data[start:start + body])
        at = start + body

    messages = np.array(headers, dtype=MESSAGE_HEADER)
    kinds = np.array(kinds, dtype=np.int64)

    def records(kind, dtype):
        chosen = [b for b, k in zip(bodies, kinds) if k == kind]
        if not chosen:
            return np.zeros(0, dtype=dtype)
        return np.concatenate(chosen).view(dtype)

    if partial and not headers:
        # Nothing complete at all: a corrupt first record_count reads as an empty file otherwise.
        raise PlmError(f"{name}: no complete message: the first one, at byte 64, needs more than "
                       f"the {partial} bytes that follow (corrupt, or still being written)")
    skipped = {}
    for k in kinds:
        if int(k) not in KIND_DTYPES:
            skipped[int(k)] = skipped.get(int(k), 0) + 1
    return PlmFile(header, messages, records(KIND_PROMPTS, RECORD), records(KIND_DELAYED, RECORD),
                   partial, records(KIND_SINGLES, SINGLE), skipped,
                   records(KIND_DEADTIME, DEAD_INTERVAL))
