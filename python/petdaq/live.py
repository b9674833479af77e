"""Subscribing to petdaqd's coincidence and singles batches (DESIGN section 7) with pyzmq."""

from dataclasses import dataclass

import numpy as np

from .formats import KIND_DTYPES, KIND_NAMES, MESSAGE_HEADER, MESSAGE_MAGIC, MESSAGE_VERSIONS, RECORD

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5556"
# The record topics; the C++ side names every topic once, in proto/topics.h.
TOPIC_PROMPTS = "coinc.prompt"
TOPIC_DELAYED = "coinc.delayed"
TOPIC_SINGLES = "singles"


@dataclass
class Batch:
    topic: str            # "coinc.prompt", "coinc.delayed" or "singles"
    header: np.void       # MESSAGE_HEADER fields: message_id, run_id, slice_id, t_begin, ...
    records: np.ndarray   # RECORD (coincidences) or SINGLE (singles) structured array, a
                          # zero-copy view of the received bytes
    missed: int           # messages of this topic missed since the previous one (message ids)
    new_publisher: bool = False  # another publisher than the previous batch's (restart, or
                                 # another process on the endpoint): its ids start afresh

    @property
    def publisher_id(self):
        return int(self.header["publisher_id"])

    @property
    def kind(self):
        return KIND_NAMES.get(int(self.header["kind"]), str(int(self.header["kind"])))


def decode(frames):
    """(topic, header, records) of one three-frame message of a record topic: RECORD for the
    coincidence kinds, SINGLE for singles; ValueError if bad."""
    if len(frames) != 3:
        raise ValueError(f"{len(frames)} frames instead of 3")
    topic, head, body = (bytes(f) if not isinstance(f, (bytes, bytearray)) else f for f in frames)
    if len(head) != MESSAGE_HEADER.itemsize:
        raise ValueError(f"header of {len(head)} bytes instead of {MESSAGE_HEADER.itemsize}")
    h = np.frombuffer(head, dtype=MESSAGE_HEADER)[0]
    if h["magic"] != MESSAGE_MAGIC or h["version"] not in MESSAGE_VERSIONS:
        raise ValueError("not a petdaq message (bad magic or version)")
    kind = int(h["kind"])
    dtype = KIND_DTYPES.get(kind)
    if dtype is None:
        raise ValueError(f"kind {kind} carries no records this reader knows")
    count, size = int(h["record_count"]), int(h["record_size"])
    if size != dtype.itemsize:
        raise ValueError(f"{KIND_NAMES[kind]} records of {size} bytes, expected {dtype.itemsize}")
    if len(body) != count * size:
        raise ValueError(f"{len(body)} bytes for {count} records of {size} bytes")
    return topic.decode(), h, np.frombuffer(body, dtype=dtype)


def subscribe(endpoint=DEFAULT_ENDPOINT, topics=(TOPIC_PROMPTS, TOPIC_DELAYED),
              timeout_s=None, on_error=None):
    """Yields a Batch per message of `topics` petdaqd publishes at `endpoint`
    (TOPIC_SINGLES needs output.singles.enabled in the daemon's configuration).

    Stops with TimeoutError when nothing arrives for `timeout_s` seconds (None: wait for
    ever). A malformed message is skipped and passed to `on_error(exception)` if given.
    """
    import zmq  # only needed here: the file readers work without pyzmq

    context = zmq.Context.instance()
    socket = context.socket(zmq.SUB)
    try:
        socket.setsockopt(zmq.LINGER, 0)
        for topic in topics:
            socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
        if timeout_s:
            socket.setsockopt(zmq.RCVTIMEO, int(timeout_s * 1000))
        socket.connect(endpoint)
        expected = {}
        publisher_seen = None
        while True:
            try:
                frames = socket.recv_multipart(copy=True)
            except zmq.Again:
                raise TimeoutError(f"no batch from {endpoint} within {timeout_s} s") from None
            try:
                topic, header, records = decode(frames)
            except ValueError as e:
                if on_error:
                    on_error(e)
                continue
            publisher = int(header["publisher_id"])
            new_publisher = publisher_seen is not None and publisher != publisher_seen
            if new_publisher:
                expected = {}  # message ids are counted per publisher
            publisher_seen = publisher
            message_id = int(header["message_id"])
            missed = max(0, message_id - expected.get(topic, message_id))
            expected[topic] = message_id + 1
            yield Batch(topic, header, records, missed, new_publisher)
    finally:
        socket.close(linger=0)
