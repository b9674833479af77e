#!/usr/bin/env python3
"""Splits the CPU samples of petdaq-offline's threads by what they were doing.

The main thread (the slicer's) is what limits the tool on many cores: its work outside the
backend's thread-pool tasks is serial. Usage (docs/offline.md, "The main thread"):

    perf record -F 4999 --call-graph dwarf,32768 -o offline.data \\
        petdaq-offline --config petdaq.yaml --input frames.bin --output out.plm \\
        --backend cpu --threads 2 --quiet
    perf script -F pid,tid,ip,sym -i offline.data | main_thread_profile.py --frames N

Main-thread samples are "pool task" when a frame of the stack is a task of the pool
(ParallelEngine, the take's pieces: the main thread runs its share of them), "serial" when
they are the processing's (slicer, backend, sink, reader hand-over) and "start-up, exit"
otherwise. With --frames the serial time is also given per frame.
"""
import argparse
import collections
import re
import sys

POOL = ("_FUN", "ParallelEngine::", "take_in_pieces")
START_UP = ("CpuBackend::CpuBackend", "CpuBackend::Impl::Impl", "~CpuBackend",
            "Slicer::Slicer", "Slicer::Impl::Impl", "~Slicer", "PlmSink::PlmSink",
            "PlmWriter::PlmWriter", "PlmThreadWriter::PlmThreadWriter", "~PlmThreadWriter")
PROCESSING = ("Slicer::", "PlmSink", "PlmThreadWriter", "PlmWriter::write", "BatchReader::next",
              "SpanSink", "chunk_time", "CpuBackend")


def samples(lines):
    """(tid, [frame symbols, leaf first]) per sample of `perf script -F pid,tid,ip,sym`."""
    tid, frames = None, []
    for line in lines:
        head = re.match(r"^\s*\d+/(\d+)", line)
        if head:
            if tid is not None:
                yield tid, frames
            tid, frames = head.group(1), []
        elif line.strip() and tid is not None:
            parts = line.strip().split(None, 1)
            frames.append(parts[1].replace(" (inlined)", "") if len(parts) > 1 else parts[0])
    if tid is not None:
        yield tid, frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=0, help="frames the run processed")
    parser.add_argument("--rate", type=float, default=4999, help="perf record -F (Hz)")
    parser.add_argument("--top", type=int, default=12, help="serial stacks to list")
    args = parser.parse_args()

    main_tid = None
    main_kinds = collections.Counter()
    threads = collections.Counter()
    serial = collections.Counter()
    for tid, frames in samples(sys.stdin):
        main_tid = main_tid or tid  # the first sample is the process's start
        stack = "\n".join(frames)
        if tid != main_tid:
            if "BatchReader::run" in stack:
                threads["reader threads"] += 1
            elif "PlmThreadWriter::run" in stack:
                threads["writer thread"] += 1
            else:
                threads["pool threads"] += 1
            continue
        if any(s in stack for s in POOL):
            kind = "pool task"
        elif any(s in stack for s in START_UP):
            kind = "start-up, exit"
        elif any(s in stack for s in PROCESSING):
            kind = "serial"
            own = next((f for f in frames if "petdaq" in f), "?").split("(")[0]
            serial[own + " <- " + (frames[0].split("(")[0] if frames else "?")] += 1
        else:
            kind = "start-up, exit"
        main_kinds[kind] += 1

    def ms(n):
        return 1e3 * n / args.rate

    for kind in ("serial", "pool task", "start-up, exit"):
        line = f"main thread, {kind:15s} {main_kinds[kind]:6d} samples {ms(main_kinds[kind]):8.1f} ms"
        if kind == "serial" and args.frames:
            line += f"  {1e6 * ms(main_kinds[kind]) / args.frames:.2f} ns/frame"
        print(line)
    for name, n in sorted(threads.items()):
        print(f"{name:28s} {n:6d} samples {ms(n):8.1f} ms")
    print("serial, by function <- leaf:")
    for key, n in serial.most_common(args.top):
        print(f"  {n:6d}  {key[:140]}")


if __name__ == "__main__":
    main()
