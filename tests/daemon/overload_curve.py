#!/usr/bin/python3
"""The overload curve of petdaqd (DESIGN section 6, "Overload"; docs/daemon.md).

Runs petdaqd_bench at offered rates from 0.5x to 2x the daemon's capacity (the highest
zero-loss rate, measured first unless --capacity-mfps gives it), then plots frames taken per
second and the lost fraction against the offered rate, beside the ideal: taken = min(offered,
capacity), lost = the excess. Prints a Markdown table of the trials.

    tests/daemon/overload_curve.py --bench build/bin/petdaqd_bench --backend cpu \\
        --out docs/img/overload_cpu.png

Needs Debian's python3-matplotlib (run with /usr/bin/python3).
"""

import argparse
import json
import re
import subprocess
import sys


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=False, capture_output=True, text=True)
    sys.stderr.write(out.stdout[-4000:])
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-4000:])
        raise SystemExit(f"{cmd[0]} exited {out.returncode}")
    return out.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default="build/bin/petdaqd_bench", help="the petdaqd_bench binary")
    p.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    p.add_argument("--senders", type=int, default=1)
    p.add_argument("--duration-s", type=float, default=3.0, help="seconds of sending per trial")
    p.add_argument("--backend-threads", type=int, default=0,
                   help="the daemon's backend_threads (0: its default); 1 puts twice the "
                        "capacity within reach of one sender on a small machine")
    p.add_argument("--capacity-mfps", type=float, default=0.0,
                   help="the daemon's capacity, M frames/s (0: search it first)")
    p.add_argument("--start-mfps", type=float, default=4.0, help="the capacity search's first rate")
    p.add_argument("--factors", default="0.5,0.75,1,1.25,1.5,1.75,2",
                   help="offered rates as multiples of the capacity")
    p.add_argument("--rates-mfps", default="",
                   help="offered rates, M frames/s, instead of --factors; the capacity is then "
                        "the highest rate taken without loss among them")
    p.add_argument("--ring-chunks", type=int, default=16,
                   help="the daemon's ring: this many chunks (a small ring reaches a steady "
                        "overload within a trial)")
    p.add_argument("--ring-chunk-mib", type=int, default=4, help="of this many MiB each")
    p.add_argument("--trials", type=int, default=1, help="trials per rate")
    p.add_argument("--recovery-s", type=float, default=2.0,
                   help="then one more trial at 2x the capacity followed by this many seconds at "
                        "half of it: when the last dead interval was published (0: none)")
    p.add_argument("--bench-args", default="",
                   help="more petdaqd_bench options for every run, e.g. \"--daemon-cpus 8-15 "
                        "--sender-cpus 0-7\"")
    p.add_argument("--save", default="",
                   help="write the capacity and the trials as JSON here (to plot elsewhere)")
    p.add_argument("--load", default="",
                   help="no runs: read --save's JSON and print the table and the plot")
    p.add_argument("--out", default="", help="the plot (PNG); empty: no plot")
    p.add_argument("--machine", default="", help="the machine, for the plot's title")
    a = p.parse_args()

    if a.load:
        with open(a.load) as f:
            saved = json.load(f)
        # The run's settings, for the plot's title (a file saved before they were kept: the
        # command line's).
        for key in ("backend", "senders", "backend_threads"):
            if key in saved:
                setattr(a, key, saved[key])
        report(a, saved["capacity"], saved["trials"], saved["recovery"])
        return
    common = [a.bench, "--backend", a.backend, "--senders", str(a.senders)]
    if a.backend_threads > 0:
        common += ["--backend-threads", str(a.backend_threads)]
    common += ["--ring-chunks", str(a.ring_chunks), "--ring-chunk-mib", str(a.ring_chunk_mib)]
    common += a.bench_args.split()
    capacity = a.capacity_mfps
    if a.rates_mfps:
        capacity = -1.0
    elif capacity <= 0:
        out = run(common + ["--duration-s", str(a.duration_s), "--start-mfps", str(a.start_mfps),
                            "--max-mfps", "200", "--steps", "4"])
        m = re.search(r"highest zero-loss rate: ([0-9.]+) M frames/s", out)
        if not m:
            raise SystemExit("no zero-loss rate found: cannot place the curve")
        capacity = float(m.group(1))
    if a.rates_mfps:
        rates = [float(r) for r in a.rates_mfps.split(",")]
    else:
        print(f"capacity {capacity:.2f} M frames/s", file=sys.stderr)
        rates = [round(float(f) * capacity, 3) for f in a.factors.split(",")]
    cmd = common + ["--duration-s", str(a.duration_s), "--trials", str(a.trials),
                    "--rates", ",".join(str(r) for r in rates)]
    out = run(cmd)
    trials = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("TRIAL ")]
    if not trials:
        raise SystemExit("petdaqd_bench printed no TRIAL line")
    if capacity < 0:
        lossless = [t["taken_fps"] / 1e6 for t in trials if t["lossless"] and not t["void"]]
        if not lossless:
            raise SystemExit("no trial without loss: cannot place the capacity")
        capacity = max(lossless)
        print(f"capacity (highest rate taken without loss) {capacity:.2f} M frames/s", file=sys.stderr)
    recovery = []
    if a.recovery_s > 0:
        out = run(common + ["--duration-s", str(a.duration_s), "--trials", "1",
                            "--rates", str(round(2 * capacity, 3)),
                            "--recovery-mfps", str(round(0.5 * capacity, 3)),
                            "--recovery-s", str(a.recovery_s)])
        recovery = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("TRIAL ")]
    if a.save:
        with open(a.save, "w") as f:
            json.dump({"capacity": capacity, "trials": trials, "recovery": recovery,
                       "backend": a.backend, "senders": a.senders,
                       "backend_threads": a.backend_threads, "bench_args": a.bench_args}, f)
    report(a, capacity, trials, recovery)


def report(a, capacity, trials, recovery):
    """The table, the recovery line and (with --out) the plot."""
    print(f"| offered M/s | x capacity | sent M/s | taken M/s | taken / capacity | lost % | "
          f"excess % | dead % | live fraction | rx.ring_full | kernel drops | p99 ms | trial |")
    print("|" + "---|" * 13)
    for t in trials:
        sent = t["sent_fps"] / 1e6
        excess = max(0.0, 1.0 - capacity / sent) if sent > 0 else 0.0
        # "shed": every frame lost was dead time for every board; otherwise where the rest went.
        other = {"late": t["late"], "time jump": t["time_jump"], "kernel drops": t["kernel_drops"],
                 "ring_full": t["ring_full"], "pending_full": t.get("pending_full", 0)}
        other = ", ".join(f"{k} {v}" for k, v in other.items() if v)
        verdict = ("zero loss" if t["lossless"] else
                   "shed" if not other else f"lost beside dead time: {other}")
        if t["void"]:
            verdict = "void (the senders fell short); " + verdict
        print(f"| {t['asked_fps'] / 1e6:.2f} | {t['asked_fps'] / 1e6 / capacity:.2f} | {sent:.2f} | "
              f"{t['taken_fps'] / 1e6:.2f} | {t['taken_fps'] / 1e6 / capacity:.3f} | "
              f"{100 * t['lost_fraction']:.2f} | {100 * excess:.2f} | "
              f"{100 * t['dead'] / max(1, t['sent']):.2f} | {t['live_fraction_run']:.3f} | "
              f"{t['ring_full']} | {t['kernel_drops']} | {t['p99_ms']:.1f} | {verdict} |")
    # Above the capacity (void trials left out): how close to it the daemon stayed, and the lost
    # fraction against the excess, over the capacity and over the most it took (a capacity
    # found in trials without loss can be below what the daemon takes when it always has work).
    over = [t for t in trials if not t["void"] and t["sent_fps"] / 1e6 > capacity]
    if over:
        taken = [t["taken_fps"] / 1e6 for t in over]
        most = max(taken)

        def within(c):
            return sum(1 for t in over
                       if abs(t["lost_fraction"] - max(0.0, 1.0 - c / (t["sent_fps"] / 1e6))) <= 0.02)

        print(f"\nAbove the capacity, {len(over)} trials: taken {min(taken) / capacity:.2f}-"
              f"{most / capacity:.2f} x the capacity ({sum(1 for x in taken if x >= 0.95 * capacity)} "
              f"at >= 0.95 x); lost = the excess within 2 points in {within(capacity)}, and in "
              f"{within(most)} against the most taken ({most:.2f} M frames/s)")
    for t in recovery:
        print(f"\nRecovery: {t['asked_fps'] / 1e6:.2f} M frames/s ({t['asked_fps'] / 1e6 / capacity:.2f} x) "
              f"for {t['seconds']:.1f} s, then {0.5 * capacity:.2f} M/s for {t['recovery_seconds']:.1f} s: "
              f"the last dead interval was published {t['recovery_ms']:.0f} ms after the overload "
              f"ended; frames lost from 1 s after it: {t['recovery_lost_after_1s']}")

    if not a.out:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sent = [t["sent_fps"] / 1e6 for t in trials]
    taken = [t["taken_fps"] / 1e6 for t in trials]
    lost = [100 * t["lost_fraction"] for t in trials]
    # Trials whose every lost frame was dead time for every board, and the others.
    clean = [not (t["late"] or t["time_jump"] or t["kernel_drops"] or t["ring_full"] or
                  t.get("pending_full", 0)) for t in trials]

    def points(ax, ys):
        for ok, marker, label in ((True, "o", "petdaqd"),
                                  (False, "x", "petdaqd, lost beside dead time")):
            xs_ = [x for x, c in zip(sent, clean) if c == ok]
            ys_ = [y for y, c in zip(ys, clean) if c == ok]
            if xs_:
                ax.plot(xs_, ys_, marker, color="C0" if ok else "C3", label=label)
    top = max(sent) * 1.05
    xs = [0, capacity, top]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(xs, [min(x, capacity) for x in xs], "--", color="grey", label="ideal: min(offered, capacity)")
    ax1.plot(xs, [0.95 * min(x, capacity) for x in xs], ":", color="grey", label="0.95 x ideal")
    points(ax1, taken)
    ax1.set_xlabel("offered, M frames/s")
    ax1.set_ylabel("frames taken, M/s")
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)
    grid = [capacity + max(0.0, top - capacity) * i / 50 for i in range(0, 51)]
    ax2.plot([0, capacity] + grid, [0, 0] + [100 * (1 - capacity / x) for x in grid], "--",
             color="grey", label="ideal: the excess")
    points(ax2, lost)
    ax2.set_xlabel("offered, M frames/s")
    ax2.set_ylabel("lost, % of the frames sent")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    threads = f", backend_threads {a.backend_threads}" if a.backend_threads else ""
    title = (f"petdaqd {a.backend} backend{threads}, {a.senders} sender(s), "
             f"capacity {capacity:.1f} M frames/s")
    if a.machine:
        title += f" ({a.machine})"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"plot: {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
