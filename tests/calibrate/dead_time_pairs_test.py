#!/usr/bin/python3
"""The coincidence correlation of petdaq-calibrate dead-time on constructed data
(tools/calibrate/petdaq_calibrate/dead_time.py): pair_counts against a pair-by-pair count,
and fit_correlation recovering a planted kappa exactly from noise-free pair rates.
Exit 1 on a failure, 77 without NumPy."""
import os
import sys

try:
    import numpy as np
except ImportError as e:
    print(f"skipped: {e} (python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "tools", "calibrate"))
from petdaq_calibrate import dead_time  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


# pair_counts: every pair (i, j) on different boards with t_j - t_i in (0, W] and in (D, D + W],
# counted one by one; ties at 0 and same-board pairs excluded; input in any order.
rng = np.random.default_rng(3)
t = np.sort(rng.integers(0, 20000, 3000))
t[100:110] = t[100]                     # ties
board = rng.integers(0, 4, t.size)
perm = rng.permutation(t.size)
W, D = 7, 40
prompt, delayed = dead_time.pair_counts(t[perm], board[perm], W, D)
dt = t[None, :] - t[:, None]
other = board[None, :] != board[:, None]
check(prompt == int(np.sum((dt > 0) & (dt <= W) & other)), f"prompt pairs {prompt}")
check(delayed == int(np.sum((dt > D) & (dt <= D + W) & other)), f"delayed pairs {delayed}")

# fit_correlation: pair rates k A singles^2 (1 + kappa x) give back kappa and k.
kappa, k = 0.045, 30000.0
tau = np.full(4, 400e-9)
activities = np.array([2.0, 10, 40, 80])
n = np.outer(activities, np.full(4, 8e4))                 # lossless singles per board
m = n / (1 + n * tau)                                      # non-paralysable
live = m.sum(axis=1) / n.sum(axis=1)
x = (n * n * tau).sum(axis=1) / n.sum(axis=1)
rate = k * activities * live ** 2 * (1 + kappa * x)
acqs = [dead_time.Acquisition("a", a, 1.0, None, 0, pairs=r, pairs_variance=r, pairs_duration_s=1.0)
        for a, r in zip(activities, rate)]
result = dict(acquisitions=acqs, activities=activities, rates=m, lossless=n, tau=tau)
fit = dead_time.fit_correlation(result)
check(abs(fit["kappa"] - kappa) < 1e-9, f"kappa {fit['kappa']:.6f} = {kappa}")
check(abs(fit["pairs_per_MBq"] / k - 1) < 1e-9, "k recovered")
lc = dead_time.coincidence_live(live, x, fit["kappa"])
check(np.allclose(rate / activities / lc, k), "rate / (A * coincidence live) flat")
# Without pairs: kappa 0, the table as before.
for q in acqs:
    q.pairs = 0.0
check(dead_time.fit_correlation(result)["kappa"] == 0.0, "no pairs: kappa 0")
sys.exit(1 if failures else 0)
