#!/usr/bin/python3
"""Subscribe to petdaqd's coincidences (or singles) and get each batch as a NumPy structured array.

A starting point for analysis scripts, over the petdaq Python package (python/petdaq:
`pip install --no-build-isolation ./python`, or PYTHONPATH=python from a checkout). It runs with
Debian's /usr/bin/python3, which has the dependencies; another python3 needs them installed. Each batch is one published
message: its header (message_id, run_id, slice_id, t_begin, t_end in scanner ticks) and its
records (petdaq.RECORD: time_a, dt, crystal_a, crystal_b, energy_a, energy_b, flags; for the
singles topic petdaq.SINGLE: time, crystal, energy; it needs output.singles.enabled).
message_id counts up by one per kind, so a gap means messages were missed.

  ./subscribe.py --config /etc/petdaq/petdaq.yaml   # the endpoint petdaqd publishes on
  ./subscribe.py --endpoint tcp://daq:5556 --count 10 --topic coinc.prompt
  ./subscribe.py --topic singles                    # needs output.singles.enabled

Needs pyzmq and NumPy (Debian: python3-zmq python3-numpy).
"""

import argparse
import os
import re
import sys

try:
    import petdaq
except ImportError:  # run from a checkout or from the installed examples directory
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [os.path.join(here, "..", "..", "python"), os.path.join(here, "..", "python")]
    import petdaq

import numpy as np

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5556"


def config_endpoint(path):
    """output.zmq.endpoint of a petdaq configuration (PyYAML when present, else a plain scan)."""
    with open(path) as f:
        text = f.read()
    try:
        import yaml
        doc = yaml.safe_load(text) or {}
        return ((doc.get("output") or {}).get("zmq") or {}).get("endpoint", DEFAULT_ENDPOINT)
    except ImportError:
        m = re.search(r"^output:\s*\n(?:[ \t].*\n)*?[ \t]+zmq:\s*\n(?:[ \t].*\n)*?[ \t]+endpoint:\s*"
                      r"[\"']?([^\"'\s#]+)", text, re.M)
        return m.group(1) if m else DEFAULT_ENDPOINT


def main():
    parser = argparse.ArgumentParser(prog="subscribe", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version",
                        version=f"subscribe (petdaq) {petdaq.__version__}")
    parser.add_argument("-c", "--config", help="petdaq configuration: the endpoint from "
                        "output.zmq.endpoint")
    parser.add_argument("--endpoint", help="where petdaqd publishes (overrides --config; "
                        f"default {DEFAULT_ENDPOINT})")
    parser.add_argument("--topic", action="append",
                        help="coinc.prompt, coinc.delayed and/or singles (default: the two "
                             "coincidence topics)")
    parser.add_argument("--count", type=int, default=0, help="stop after N batches (0: never)")
    parser.add_argument("--timeout-s", type=float, default=0,
                        help="give up when nothing arrives for this long (0: wait forever)")
    args = parser.parse_args()
    endpoint = args.endpoint or (config_endpoint(args.config) if args.config else DEFAULT_ENDPOINT)

    batches = 0
    try:
        for batch in petdaq.subscribe(endpoint, args.topic or ("coinc.prompt", "coinc.delayed"),
                                      timeout_s=args.timeout_s or None,
                                      on_error=lambda e: print(f"skipped a message: {e}",
                                                               file=sys.stderr)):
            h, records = batch.header, batch.records
            line = (f"{batch.topic} id={h['message_id']} run={h['run_id']} "
                    f"slice={h['slice_id']} t=[{h['t_begin']},{h['t_end']}) "
                    f"records={len(records)}")
            if batch.missed > 0:
                line += f" missed={batch.missed}"
            if len(records) and batch.topic == "singles":
                first = records[0]
                line += (f" first: time={first['time']} crystal={first['crystal']} "
                         f"energy={first['energy']:.1f}"
                         f" mean_energy={float(np.mean(records['energy'])):.2f}")
            elif len(records):
                first = records[0]
                line += (f" first: time_a={first['time_a']} dt={first['dt']} "
                         f"crystals=({first['crystal_a']},{first['crystal_b']}) "
                         f"energies=({first['energy_a']:.1f},{first['energy_b']:.1f}) "
                         f"flags=0x{first['flags']:04x}"
                         f" mean_energy_sum={float(np.mean(records['energy_a'] + records['energy_b'])):.2f}")
            print(line, flush=True)
            batches += 1
            if args.count and batches >= args.count:
                break
    except TimeoutError as e:
        print(e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
