#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/): small valid
inputs of each format, laid out as DESIGN sections 2 and 7 and the .npy and pcap formats
say, plus a few broken ones. Run from anywhere; it rewrites the corpus."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(du=0, bdm=0, time=1000, x=10, y=20, energy=2000, temp=30, frac=4):
    # DESIGN 2: head marker 0xA | DU, BDM, time (u64 BE), x, y, energy (u16 BE),
    # temperature integer, fraction 16ths | tail marker 0x5.
    return bytes([0xA0 | du, bdm]) + struct.pack(">Q", time) + bytes([x, y]) + \
        struct.pack(">H", energy) + bytes([temp & 0xFF, (frac << 4) | 0x5])


def sequenced(source, seq, frames, claimed=None):
    # DESIGN 2, sequenced framing: the 16-byte little-endian header of proto/datagram.h.
    n = len(frames) if claimed is None else claimed
    return struct.pack("<IHHII", MAGIC, 1, source, seq, n) + b"".join(frames)


# proto/datagram.h: kSequencedMagic
MAGIC = None
with open(os.path.join(ROOT, "proto", "datagram.h")) as f:
    for line in f:
        if "kSequencedMagic" in line and "=" in line:
            MAGIC = int(line.split("=")[1].split(";")[0].strip().rstrip("u"), 0)
            break
assert MAGIC is not None

# datagram: first byte 0 raw, 1 sequenced; then the datagram; the bytes also feed the
# sequence tracker as 6-byte (source, sequence) records.
fr = [frame(time=1000 + 17 * i, bdm=i % 3) for i in range(4)]
put("datagram", "raw4", b"\x00" + b"".join(fr))
put("datagram", "raw_trailing", b"\x00" + b"".join(fr) + b"\x01\x02\x03")
put("datagram", "seq", b"\x01" + sequenced(2, 7, fr))
put("datagram", "seq_short_claim", b"\x01" + sequenced(2, 8, fr, claimed=9))
put("datagram", "seq_jump", b"\x01" + b"".join(
    bytes([1, 0]) + struct.pack("<I", s) for s in [0, 1, 2, 1000, 3, 4, 4, 0, 1]))

# frame: whole frames, then table bytes.
put("frame", "frames", b"".join(fr) + bytes(range(64)))
put("frame", "bad_markers", bytes(16) + b"\xff" * 16)

# settings: the commented default and small documents.
with open(os.path.join(ROOT, "config", "petdaq.yaml"), "rb") as f:
    put("settings", "default.yaml", f.read())
put("settings", "small.yaml", b"coincidence:\n  window_ps: 3000\n  policy: take_all_goods\n"
    b"input:\n  endpoints: [\"127.0.0.1:5600\"]\n  framing: sequenced\n")
put("settings", "bad_type.yaml", b"stream:\n  max_slice_frames: [1, 2]\n")


def npy(dtype, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype, "".join("%d," % s for s in shape))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


put("npy", "f4_2x3", npy("<f4", (2, 3), struct.pack("<6f", 1, 2, 3, 4, float("nan"), 6)))
put("npy", "u1_4", npy("|u1", (4,), bytes([0, 1, 2, 255])))
put("npy", "i4_2", npy("<i4", (2,), struct.pack("<2i", -5, 7)))
put("npy", "short", npy("<f4", (8,), b"\x00" * 5))

# plm: DESIGN 7 file header, then messages (64-byte header + 32-byte records).
plm_header = struct.pack("<IHHdIIQQ", 0x4C514450, 1, 64, 15.625, 1248, 156, 0x1234, 0)
plm_header += bytes(64 - len(plm_header))


def message(kind, mid, records):
    h = struct.pack("<IHHQQQQQIIII", 0x31514450, 1, kind, mid, 0, mid, 100 * mid,
                    100 * mid + 100, len(records), 32, 0, 0)
    return h + b"".join(records)


rec = bytes(range(32))
put("plm", "two_messages", plm_header + message(1, 0, [rec, rec]) + message(2, 0, []))
put("plm", "cut", plm_header + message(1, 0, [rec])[:70])

# pcap: first byte 0 (a file), then a classic pcap with one Ethernet/IPv4/UDP packet;
# first byte odd: a link type byte and one packet for the decoder.
payload = b"".join(fr)
udp = struct.pack(">HHHH", 40000, 5600, 8 + len(payload), 0) + payload
ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                 bytes([10, 0, 0, 2]), bytes([127, 0, 0, 1])) + udp
eth = bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip
pcap = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
pcap += struct.pack("<IIII", 1, 0, len(eth), len(eth)) + eth
put("pcap", "one_udp.pcap", b"\x00" + pcap)
put("pcap", "decode_eth", b"\x01\x01" + eth)
put("pcap", "decode_fragment", b"\x01\x01" + eth[:14] + ip[:6] + b"\x20\x00" + ip[8:])


# pdh: proto/histogram_file.h: a 64-byte header, 96-byte descriptors, the bins, JSON.
def pdh(hists, meta=b'{"run_id": 1}', version=2):
    """hists: (name, unit, element_bytes, element_type, shape, values)."""
    n = len(hists)
    at = 64 + 96 * n
    descs, bins = b"", b""
    for name, unit, eb, et, shape, values in hists:
        fmt = {(4, 0): "<I", (8, 0): "<Q", (8, 1): "<d"}[(eb, et)]
        data = b"".join(struct.pack(fmt, v) for v in values)
        full = list(shape) + [1] * (4 - len(shape))
        descs += name.encode().ljust(32, b"\0") + unit.encode().ljust(16, b"\0") + \
            struct.pack("<HHI4I", eb, et, len(shape), *full) + struct.pack("<ddQ", 0.0, 1.0, at)
        bins += data
        at += len(data)
    meta_at = 64 + 96 * n + len(bins)
    size = meta_at + len(meta)
    header = struct.pack("<IHHIIQQQQQd", 0x48514450, version, 64, n, 96, 1, 0, meta_at,
                         len(meta), size, 15.625)
    return header + descs + bins + meta


counts = ("singles_per_crystal", "", 8, 0, (4,), [5, 0, 7, 1])
spectrum = ("energy_keV", "keV", 4, 0, (2, 3), [1, 2, 3, 4, 5, 6])
estimate = ("bdm_pair_randoms", "", 8, 1, (2, 2), [0.5, 1.5, 2.5, 3.5])
put("pdh", "three", pdh([counts, spectrum, estimate]))
put("pdh", "version1", pdh([counts], version=1))
put("pdh", "cut", pdh([counts, spectrum])[:200])

# web: first byte even: intake frames (a length byte, the bytes; the fourth takes the rest);
# odd: bytes a browser sends.
head = struct.pack("<IHHQQQQQIIII", 0x31514450, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7)
rates = b'{"version": 1, "run_id": 1, "time_unix_ns": 1, "uptime_s": 1, "rates": {"prompts": 5}}'
put("web", "intake_rates", bytes([0, 5]) + b"rates" + bytes([64]) + head + bytes([len(rates)]) +
    rates)
put("web", "http_get", b"\x01GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
put("web", "http_origin", b"\x01GET /rates.json HTTP/1.1\r\nHost: evil.example\r\n"
    b"Origin: http://evil.example\r\n\r\n")
ws_frame = bytes([0x81, 0x85, 1, 2, 3, 4]) + bytes(b ^ k for b, k in zip(b"hello", b"\x01\x02\x03\x04\x01"))
put("web", "websocket", b"\x01GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\n\r\n" + ws_frame)
