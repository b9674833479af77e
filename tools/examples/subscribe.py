#!/usr/bin/env python3
"""Subscribe to petdaqd's coincidences and get each batch as a NumPy structured array.

A starting point for analysis scripts. Every message petdaqd publishes has three frames:

  1. the topic: b"coinc.prompt" or b"coinc.delayed", or (opt-in) b"singles"
     (also b"rates", b"histograms")
  2. a 64-byte little-endian message header (MESSAGE_HEADER below)
  3. the records: record_count x 32 bytes (RECORD below); for `singles` (kind 3,
     output.singles.enabled) record_count x 16 bytes (SINGLE below), in time order

Coincidence times are in scanner ticks (scanner.tick_ps in the daemon's configuration);
message_id counts up by one per kind, so a gap means messages were missed.

  python3 subscribe.py                                  # default endpoint, until Ctrl-C
  python3 subscribe.py --endpoint tcp://daq:5556 --count 10 --topic coinc.prompt
  python3 subscribe.py --topic singles

Needs pyzmq and NumPy (Debian: python3-zmq python3-numpy).
"""

import argparse
import struct
import sys

import numpy as np
import zmq

# One coincidence, 32 bytes, little-endian (DESIGN section 5).
RECORD = np.dtype(
    [
        ("time_a", "<u8"),     # ticks, the earlier single (the window opener for delayed)
        ("dt", "<i4"),         # time_b - time_a, ticks
        ("crystal_a", "<u4"),  # global crystal ids
        ("crystal_b", "<u4"),
        ("energy_a", "<f4"),   # keV
        ("energy_b", "<f4"),
        ("flags", "<u4"),      # bit 0 delayed, bit 1 from a multiple, bits 8-15 multiplicity
    ]
)
assert RECORD.itemsize == 32

# One single, 16 bytes, little-endian (DESIGN section 4): the `singles` topic.
SINGLE = np.dtype(
    [
        ("time", "<u8"),      # ticks, corrected
        ("crystal", "<u4"),   # global crystal id
        ("energy", "<f4"),    # keV
    ]
)
assert SINGLE.itemsize == 16

# magic, version, kind, message_id, run_id, slice_id, t_begin, t_end,
# record_count, record_size, flags, reserved
MESSAGE_HEADER = struct.Struct("<IHHQQQQQIIII")
MESSAGE_MAGIC = 0x31514450  # "PDQ1"
KIND_NAMES = {1: "prompts", 2: "delayed", 3: "singles"}


def decode(frames):
    """Turn the three frames of one coincidence message into (topic, header dict, records)."""
    if len(frames) != 3:
        raise ValueError(f"{len(frames)} frames instead of 3")
    topic, head, body = frames
    if len(head) != MESSAGE_HEADER.size:
        raise ValueError(f"header of {len(head)} bytes instead of {MESSAGE_HEADER.size}")
    (magic, version, kind, message_id, run_id, slice_id, t_begin, t_end,
     record_count, record_size, _flags, _reserved) = MESSAGE_HEADER.unpack(head)
    if magic != MESSAGE_MAGIC or version != 1:
        raise ValueError("not a petdaq message (bad magic or version)")
    dtype = SINGLE if kind == 3 else RECORD
    if record_size != dtype.itemsize or len(body) != record_count * record_size:
        raise ValueError(f"{len(body)} bytes for {record_count} records of {record_size} bytes")
    header = dict(kind=KIND_NAMES.get(kind, str(kind)), message_id=message_id, run_id=run_id,
                  slice_id=slice_id, t_begin=t_begin, t_end=t_end, record_count=record_count)
    # frombuffer does not copy: the array is a view of the received bytes.
    return topic.decode(), header, np.frombuffer(body, dtype=dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default="tcp://127.0.0.1:5556")
    parser.add_argument("--topic", action="append",
                        help="coinc.prompt, coinc.delayed and/or singles (default: the two "
                             "coincidence topics)")
    parser.add_argument("--count", type=int, default=0, help="stop after N batches (0: never)")
    parser.add_argument("--timeout-s", type=float, default=0,
                        help="give up when nothing arrives for this long (0: wait forever)")
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.connect(args.endpoint)
    for topic in args.topic or ["coinc.prompt", "coinc.delayed"]:
        socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
    if args.timeout_s > 0:
        socket.setsockopt(zmq.RCVTIMEO, int(args.timeout_s * 1000))

    expected = {}  # next message_id per kind, to count missed batches
    batches = 0
    try:
        while args.count == 0 or batches < args.count:
            try:
                frames = socket.recv_multipart(copy=True)
            except zmq.Again:
                print(f"no batch from {args.endpoint} within {args.timeout_s} s", file=sys.stderr)
                return 1
            try:
                topic, head, records = decode(frames)
            except ValueError as e:
                print(f"skipped a message: {e}", file=sys.stderr)
                continue
            missed = head["message_id"] - expected.get(topic, head["message_id"])
            expected[topic] = head["message_id"] + 1
            batches += 1
            line = (f"{topic} id={head['message_id']} run={head['run_id']} "
                    f"slice={head['slice_id']} t=[{head['t_begin']},{head['t_end']}) "
                    f"records={len(records)}")
            if missed > 0:
                line += f" missed={missed}"
            if len(records) and head["kind"] == "singles":
                first = records[0]
                line += (f" first: time={first['time']} crystal={first['crystal']} "
                         f"energy={first['energy']:.1f}")
            elif len(records):
                first = records[0]
                line += (f" first: time_a={first['time_a']} dt={first['dt']} "
                         f"crystals=({first['crystal_a']},{first['crystal_b']}) "
                         f"energies=({first['energy_a']:.1f},{first['energy_b']:.1f}) "
                         f"flags=0x{first['flags']:04x}"
                         f" mean_energy_sum={float(np.mean(records['energy_a'] + records['energy_b'])):.2f}")
            print(line, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        socket.close(linger=0)
        context.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
