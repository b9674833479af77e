"""Step dead-time: the front end's dead-time model from acquisitions at several activities.

Per BDM, the in-window singles rate S (the daemon's `bdm.singles_per_s`: frames on a crystal
of the flood map with a calibrated energy in the window) is measured in each acquisition and
fitted, against the activity A, with the lossless rate n = k A + b (b: the crystals' own
176Lu background, which does not scale with the source) and one effective dead time tau: S = n / (1 + n tau) (non-paralysable) or S = n exp(-n tau) (paralysable). The table
(dead_time.yaml) holds tau per BDM; the daemon inverts the model on the measured rates to
publish live-time fractions (docs/dead_time.md).

The coincidences' live fraction is not the singles' squared: the two photons of one decay
make both their boards dead at once, so the boards of a later true pair are dead together
more often than apart. The same frames give the coincident pairs of in-window frames on
different boards (prompt window minus a delayed one: the true pairs); the table's
coincidence_correlation kappa makes their rate per MBq, divided by singles^2 (1 + kappa x),
flat in activity (x = sum n_b (n_b tau_b) / sum n_b)."""
import math
import os
from dataclasses import dataclass

import numpy as np
import yaml

from . import CalibrationError

FORMAT = "petdaq dead-time 1"
MODELS = ("non-paralysable", "paralysable")


PAIR_WINDOW_PS = 2000.0     # true pairs: both frames within 2 ns (TOF, resolution, delays)
PAIR_DELAY_PS = 20000.0     # randoms: the same window 20 ns later, inside any shaping time
PAIR_FRAMES = 20_000_000    # in-window frames kept for the pairs per acquisition (memory)


@dataclass
class Acquisition:
    frames: str
    activity_MBq: float
    duration_s: float = 0.0
    singles: np.ndarray = None        # in-window singles per BDM
    frame_count: int = 0
    pairs: float = 0.0                # true pairs of in-window frames on two boards (prompt - delayed)
    pairs_variance: float = 0.0       # prompt + delayed
    pairs_duration_s: float = 0.0     # the span of the frames the pairs were counted in


def pair_counts(t, board, window, delay):
    """Pairs of frames on different boards with t_j - t_i in (0, window] (prompt) and in
    (delay, delay + window] (delayed); t in ticks. Both windows are open at the same end, so
    the random pairs they hold have the same mean."""
    order = np.argsort(t, kind="stable")
    t = np.asarray(t, dtype=np.int64)[order]
    b = np.asarray(board)[order]
    counts = []
    for lo_off, hi_off in ((0, window), (delay, delay + window)):
        lo = np.searchsorted(t, t + lo_off, side="right")   # first j with t_j > t_i + lo_off
        hi = np.searchsorted(t, t + hi_off, side="right")   # past the last j with t_j <= t_i + hi_off
        n = 0
        k = 0
        while True:
            j = lo + k
            live = j < hi
            if not live.any():
                break
            i = np.nonzero(live)[0]
            n += int(np.count_nonzero(b[j[i]] != b[i]))
            k += 1
        counts.append(n)
    return counts


def measure(acq, frame_file, scanner, lut, energy_table):
    """In-window singles per BDM and the acquisition's length (first to last frame time)."""
    n = scanner.position_size
    per_du = scanner.crystals_per_du
    flat_lut = lut.reshape(scanner.du_count, n * n)
    bins = energy_table.shape[-1]
    gains = energy_table.reshape(scanner.crystal_count, bins)
    low, high = scanner.energy_window_keV
    singles = np.zeros(scanner.bdm_count, dtype=np.int64)
    t_min, t_max = None, None
    times, boards = [], []
    for du, x, y, raw, t in frame_file.chunks(with_time=True):
        label = flat_lut[du, y * n + x].astype(np.int64)
        keep = label < per_du
        local = scanner.label_to_local(label[keep])
        gain = gains[du[keep] * per_du + local, np.minimum(raw[keep] // scanner.energy_bin_width, bins - 1)]
        e = (raw[keep] * gain).astype(np.float32)
        good = (e >= np.float32(low)) & (e <= np.float32(high))
        singles += np.bincount(du[keep][good] // scanner.du_per_bdm, minlength=scanner.bdm_count)
        room = PAIR_FRAMES - sum(x.size for x in times)   # the first frames only: memory
        if room > 0:
            times.append(t[keep][good][:room].astype(np.int64))
            boards.append((du[keep][good][:room] // scanner.du_per_bdm).astype(np.int16))
        if t.size:
            lo, hi = int(t.min()), int(t.max())
            t_min = lo if t_min is None else min(t_min, lo)
            t_max = hi if t_max is None else max(t_max, hi)
    if t_min is None or t_max <= t_min:
        raise CalibrationError(f"{acq.frames}: no frames with a time span")
    acq.duration_s = (t_max - t_min) * scanner.tick_ps * 1e-12
    acq.singles = singles
    acq.frame_count = frame_file.counts["frames"]
    set_pairs(acq, np.concatenate(times), np.concatenate(boards), scanner)
    return acq


def set_pairs(acq, t, board, scanner):
    window = int(round(PAIR_WINDOW_PS / scanner.tick_ps))
    delay = int(round(PAIR_DELAY_PS / scanner.tick_ps))
    prompt, delayed = pair_counts(t, board, window, delay)
    acq.pairs = float(prompt - delayed)
    acq.pairs_variance = float(prompt + delayed)
    acq.pairs_duration_s = float(t.max() - t.min()) * scanner.tick_ps * 1e-12 if t.size > 1 else 0.0


def measure_decaying(path, a0_MBq, half_life_s, intervals, frame_file, scanner, lut, energy_table):
    """A decaying source: the file cut into equal time intervals, each an acquisition at the
    interval's mean activity A0 2^(-t / T_half), t from the first frame."""
    t_min, t_max = None, None
    for *_, t in frame_file.chunks(with_time=True):
        if t.size:
            lo, hi = int(t.min()), int(t.max())
            t_min = lo if t_min is None else min(t_min, lo)
            t_max = hi if t_max is None else max(t_max, hi)
    if t_min is None or t_max <= t_min:
        raise CalibrationError(f"{path}: no frames with a time span")
    n = scanner.position_size
    per_du = scanner.crystals_per_du
    flat_lut = lut.reshape(scanner.du_count, n * n)
    bins = energy_table.shape[-1]
    gains = energy_table.reshape(scanner.crystal_count, bins)
    low, high = scanner.energy_window_keV
    span = t_max - t_min + 1
    counts = np.zeros((intervals, scanner.bdm_count), dtype=np.int64)
    times, boards = [[] for _ in range(intervals)], [[] for _ in range(intervals)]
    kept = np.zeros(intervals, dtype=np.int64)
    for du, x, y, raw, t in frame_file.chunks(with_time=True):
        label = flat_lut[du, y * n + x].astype(np.int64)
        keep = label < per_du
        local = scanner.label_to_local(label[keep])
        gain = gains[du[keep] * per_du + local, np.minimum(raw[keep] // scanner.energy_bin_width, bins - 1)]
        e = (raw[keep] * gain).astype(np.float32)
        good = (e >= np.float32(low)) & (e <= np.float32(high))
        k = ((t[keep][good] - np.uint64(t_min)).astype(np.float64) * intervals / span).astype(np.int64)
        k = np.minimum(k, intervals - 1)
        np.add.at(counts, (k, du[keep][good] // scanner.du_per_bdm), 1)
        # For the pairs, each interval's first PAIR_FRAMES frames (memory).
        tg, bg = t[keep][good].astype(np.int64), (du[keep][good] // scanner.du_per_bdm).astype(np.int16)
        for i in np.unique(k):
            sel = np.nonzero(k == i)[0][:max(PAIR_FRAMES - kept[i], 0)]
            kept[i] += sel.size
            times[i].append(tg[sel])
            boards[i].append(bg[sel])
    tick_s = scanner.tick_ps * 1e-12
    width_s = span * tick_s / intervals
    lam = math.log(2) / half_life_s
    out = []
    for i in range(intervals):
        t1, t2 = i * width_s, (i + 1) * width_s
        mean = a0_MBq * (math.exp(-lam * t1) - math.exp(-lam * t2)) / (lam * width_s)
        acq = Acquisition(f"{path} [{t1:.4g}, {t2:.4g}) s", mean, width_s, counts[i], 0)
        if kept[i]:  # pairs by the interval of their first frame
            set_pairs(acq, np.concatenate(times[i]), np.concatenate(boards[i]), scanner)
        out.append(acq)
    return out


def model_rate(model, n, tau):
    return n / (1 + n * tau) if model == "non-paralysable" else n * np.exp(-n * tau)


def lossless_rate(model, m, tau):
    """Inverse of model_rate on its lower branch (the daemon's core/dead_time.cpp)."""
    m = np.asarray(m, dtype=float)
    if tau <= 0:
        return m.copy()
    if model == "non-paralysable":
        return m / (1 - np.minimum(m * tau, 0.99))
    out = np.empty_like(m)
    for i, v in np.ndenumerate(m):
        lo, hi = v, 1 / tau
        if v >= 1 / (math.e * tau):
            out[i] = hi
            continue
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if mid * math.exp(-mid * tau) < v:
                lo = mid
            else:
                hi = mid
        out[i] = 0.5 * (lo + hi)
    return out


def fit_board(model, activity, rate, sigma):
    """Lossless rate per MBq k, background rate b and dead time tau of one board (least
    squares, weights 1/sigma); b is fixed at 0 with fewer than 4 activities."""
    from scipy.optimize import least_squares
    # Start from the linear form of the non-paralysable model: 1/S = 1/(k A) + tau.
    slope, intercept = np.polyfit(1 / activity, 1 / rate, 1)
    k0 = 1 / slope if slope > 0 else rate[0] / activity[0]
    tau0 = max(intercept, 1e-9)
    free_b = activity.size >= 4
    scale = np.array([1e5, 1e4, 1e-6])  # k per MBq, b, tau: parameters of order 1

    def unpack(p):
        return p[0] * scale[0], (p[1] * scale[1] if free_b else 0.0), p[-1] * scale[2]

    def resid(p):
        k, b, tau = unpack(p)
        return (model_rate(model, k * activity + b, tau) - rate) / sigma

    start = [k0 / scale[0]] + ([0.0] if free_b else []) + [tau0 / scale[2]]
    lower = [0] + ([0] if free_b else []) + [0]
    upper = [np.inf] + ([np.inf] if free_b else []) + [1e3]
    fit = least_squares(resid, start, bounds=(lower, upper), x_scale="jac")
    if not fit.success:
        raise CalibrationError(f"the dead-time fit did not converge: {fit.message}")
    k, b, tau = unpack(fit.x)
    chi2 = float(np.sum(fit.fun ** 2))
    return k, b, tau, chi2


def make_dead_time(acquisitions, scanner, model):
    if len(acquisitions) < 3:
        raise CalibrationError("dead-time needs acquisitions at 3 or more activities")
    activities = np.array([a.activity_MBq for a in acquisitions], dtype=float)
    if len(set(activities)) < 3:
        raise CalibrationError("dead-time needs 3 or more different activities")
    order = np.argsort(activities)
    acquisitions = [acquisitions[i] for i in order]
    activities = activities[order]
    counts = np.array([a.singles for a in acquisitions], dtype=float)  # [acq][bdm]
    durations = np.array([a.duration_s for a in acquisitions])
    rates = counts / durations[:, None]
    k = np.zeros(scanner.bdm_count)
    b_rate = np.zeros(scanner.bdm_count)
    tau = np.zeros(scanner.bdm_count)
    chi2 = np.zeros(scanner.bdm_count)
    for b in range(scanner.bdm_count):
        if np.any(counts[:, b] < 100):
            raise CalibrationError(f"BDM {b}: fewer than 100 in-window singles in an acquisition "
                                   "(longer acquisitions, or a source the board sees)")
        sigma = np.sqrt(counts[:, b]) / durations
        k[b], b_rate[b], tau[b], chi2[b] = fit_board(model, activities, rates[:, b], sigma)
    lossless = np.array([[lossless_rate(model, rates[i, b], tau[b]) for b in range(scanner.bdm_count)]
                         for i in range(len(acquisitions))])
    result = dict(acquisitions=acquisitions, activities=activities, rates=rates, k=k, b=b_rate, tau=tau, chi2=chi2,
                  lossless=lossless, model=model)
    result.update(fit_correlation(result))
    return result


def coincidence_live(singles_live, load, kappa):
    """The daemon's coincidence live fraction (core/dead_time.cpp): singles^2 (1 + kappa x)."""
    return np.clip(singles_live ** 2 * (1 + kappa * load), 0.0, 1.0)


def fit_correlation(result):
    """kappa from the true pairs: their rate per MBq over singles^2 is k (1 + kappa x); a
    weighted straight line in x gives k and k kappa. Without pairs (no acquisition holds
    any), kappa = 0."""
    acqs = result["acquisitions"]
    a = result["activities"]
    n = result["lossless"]
    singles_live = result["rates"].sum(axis=1) / n.sum(axis=1)
    load = (n * n * result["tau"][None, :]).sum(axis=1) / n.sum(axis=1)
    pairs = np.array([q.pairs for q in acqs])
    var = np.array([q.pairs_variance for q in acqs])
    dur = np.array([q.pairs_duration_s for q in acqs])
    out = dict(singles_live=singles_live, load=load, kappa=0.0, kappa_sigma=float("nan"),
               pairs_per_s=np.divide(pairs, dur, out=np.zeros_like(pairs), where=dur > 0),
               pairs_per_MBq=float("nan"))
    if not np.all((pairs > 100) & (dur > 0)):
        return out
    y = pairs / dur / a / singles_live ** 2
    sy = np.sqrt(var) / dur / a / singles_live ** 2
    w = 1 / sy ** 2
    A = np.stack([np.ones_like(load), load], axis=1)
    cov = np.linalg.inv(A.T @ (A * w[:, None]))
    c0, c1 = cov @ (A.T @ (w * y))
    if c0 > 0:
        kappa = c1 / c0
        # first-order error of a ratio
        var_k = (cov[1, 1] / c0 ** 2 + c1 ** 2 * cov[0, 0] / c0 ** 4 - 2 * c1 * cov[0, 1] / c0 ** 3)
        out.update(kappa=float(np.clip(kappa, -1, 10)), kappa_sigma=float(np.sqrt(max(var_k, 0))),
                   pairs_per_MBq=float(c0))
    return out


def write_table(path, result):
    doc = {
        "format": FORMAT,
        "model": result["model"].replace("-", "_"),
        "rate": "in-window singles per BDM, per second (rates document: bdm.singles_per_s)",
        "tau_s": [float(t) for t in result["tau"]],
        "coincidence_correlation": float(result["kappa"]),
        "lossless_singles_per_s_per_MBq": [float(v) for v in result["k"]],
        "lossless_background_singles_per_s": [float(v) for v in result["b"]],
        "acquisitions": [{"frames": a.frames, "activity_MBq": float(a.activity_MBq),
                          "duration_s": float(a.duration_s)} for a in result["acquisitions"]],
    }
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Written by petdaq-calibrate dead-time (docs/dead_time.md)\n")
        yaml.safe_dump(doc, f, sort_keys=False, width=1000)
    return path


def report_text(result):
    a = result["activities"]
    live = result["rates"].sum(axis=1) / result["lossless"].sum(axis=1)
    per_mbq = (result["lossless"].sum(axis=1) - result["b"].sum()) / a
    ref = per_mbq[0]
    lines = [f"dead-time model: {result['model']}, fitted per BDM on the in-window singles rate",
             f"background (source-independent) singles: {result['b'].sum():.4g} /s over all BDMs",
             f"tau: median {np.median(result['tau']) * 1e9:.1f} ns, range {result['tau'].min() * 1e9:.1f}"
             f"-{result['tau'].max() * 1e9:.1f} ns over {len(result['tau'])} BDMs",
             f"chi2 per board: median {np.median(result['chi2']):.2f} "
             f"({len(a)} activities, {3 if len(a) >= 4 else 2} parameters)",
             f"coincidence correlation kappa: {result['kappa']:.4f} +- {result['kappa_sigma']:.4f} "
             "(coincidence live fraction = singles^2 (1 + kappa x))", "",
             "activity MBq | duration s | singles/s | live fraction (singles) | lossless singles/s per MBq "
             "(background removed) | relative to the lowest activity | x | true pairs/s | "
             "true pairs/s per MBq / coincidence live fraction, relative to the fit's",
             "---|---|---|---|---|---|---|---|---"]
    lc = coincidence_live(result["singles_live"], result["load"], result["kappa"])
    pairs = result["pairs_per_s"] / a / lc
    for i, acq in enumerate(result["acquisitions"]):
        lines.append(f"{a[i]:g} | {acq.duration_s:.4g} | {result['rates'][i].sum():.4g} | {live[i]:.4f} | "
                     f"{per_mbq[i]:.5g} | {per_mbq[i] / ref:.4f} | {result['load'][i]:.4f} | "
                     f"{result['pairs_per_s'][i]:.4g} | {pairs[i] / result['pairs_per_MBq']:.4f}")
    return "\n".join(lines) + "\n"


def plots(path, result):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = result["activities"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    grid = np.linspace(0, a.max() * 1.05, 200)
    total_fit = sum(model_rate(result["model"], result["k"][b] * grid + result["b"][b], result["tau"][b])
                    for b in range(len(result["k"])))
    axes[0].plot(a, result["rates"].sum(axis=1), "o", label="measured")
    axes[0].plot(grid, total_fit, "-", label=f"{result['model']} fit")
    axes[0].plot(grid, result["k"].sum() * grid + result["b"].sum(), "--", color="gray", label="lossless")
    axes[0].set_xlabel("activity (MBq)")
    axes[0].set_ylabel("in-window singles/s (all BDMs)")
    axes[0].legend()
    live = result["rates"] / result["lossless"]
    for b in range(live.shape[1]):
        axes[1].plot(a, live[:, b], "-", color="C0", alpha=0.3)
    axes[1].plot(a, result["rates"].sum(axis=1) / result["lossless"].sum(axis=1), "o-", color="C1",
                 label="scanner")
    axes[1].set_xlabel("activity (MBq)")
    axes[1].set_ylabel("live fraction (singles)")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
