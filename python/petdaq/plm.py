"""Reading a list-mode (.plm) file (DESIGN section 7): a 64-byte file header, then the
coincidence messages exactly as published (message header + records, prompts and delayed),
and the dead intervals the daemon shed under overload (deadtime, DESIGN section 6)."""

import os
from dataclasses import dataclass

import numpy as np

from .formats import (DEAD_INTERVAL, FILE_HEADER, FILE_MAGIC, KIND_DEADTIME, KIND_DELAYED,
                      KIND_PROMPTS, MESSAGE_HEADER, MESSAGE_MAGIC, RECORD)


@dataclass
class PlmFile:
    """A list-mode file read into memory."""
    header: dict             # the file header's fields (tick_ps, crystal_count, ...)
    messages: np.ndarray     # MESSAGE_HEADER per message, in file order
    prompts: np.ndarray      # RECORD, every prompt in file order
    delayed: np.ndarray      # RECORD, every delayed coincidence in file order
    partial_tail_bytes: int  # bytes of a last message not complete yet (a file being written)
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
    left out and its bytes counted in `partial_tail_bytes`. Anything else wrong (bad magic,
    version, kind or record size) raises PlmError naming the byte offset.
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
        if mh["magic"] != MESSAGE_MAGIC or mh["version"] != 1:
            raise PlmError(f"{where}: bad message magic or version")
        if mh["kind"] not in (KIND_PROMPTS, KIND_DELAYED, KIND_DEADTIME):
            raise PlmError(f"{where}: kind {int(mh['kind'])} (prompts, delayed and deadtime only)")
        size = DEAD_INTERVAL.itemsize if mh["kind"] == KIND_DEADTIME else RECORD.itemsize
        if mh["record_size"] != size:
            raise PlmError(f"{where}: record size {int(mh['record_size'])}, expected {size}")
        body = int(mh["record_count"]) * size
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

    def records(kind):
        chosen = [b for b, k in zip(bodies, kinds) if k == kind]
        if not chosen:
            return np.zeros(0, dtype=RECORD)
        return np.concatenate(chosen).view(RECORD)

    dead = [b for b, k in zip(bodies, kinds) if k == KIND_DEADTIME]
    dead = np.concatenate(dead).view(DEAD_INTERVAL) if dead else np.zeros(0, dtype=DEAD_INTERVAL)
    return PlmFile(header, messages, records(KIND_PROMPTS), records(KIND_DELAYED), partial, dead)
