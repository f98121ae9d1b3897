"""Known-truth worlds for a judge's calibration (beyond the paper): how close the expected
calibration error and the Brier score of ``cocoeval.analysis.calibration`` come to their true
values, for a judge whose vote fraction is calibrated and for one that is overconfident. Every
number is computed by cocoeval's own functions (``calibration.ece``, ``calibration.brier``) on data
drawn from a world whose truth is known in closed form; nothing is timed.

Each conversation and behaviour has a propensity q ~ Beta(0.3, 3) (mean 0.09: behaviours are rare),
shared by the conversation's 30 turns (turns of one conversation are alike, as in real runs); a
world has n conversations × 30 turns × 10 behaviours. The truths are expectations over q's
marginal, so the sharing changes the spread of the estimates, not the truth.

- **Calibrated judge**: its k samples label the turn independently with probability q, so its vote
  fraction is p = Binomial(k, q)/k, and the annotators' majority marks the turn with probability
  p (y ~ Bernoulli(p)): E[y | p] = p. True ECE 0; true Brier E[p(1 − p)] (a beta-binomial sum).
- **Overconfident judge**: its k samples all agree (a judge that repeats itself), labelling with
  probability q, so p is 0 or 1, while the majority marks the turn with probability q,
  independently. True Brier = P(p ≠ y) = 2E[q(1 − q)], and true ECE the same (both bins are off
  by E[q(1 − q)]), E[q(1 − q)] = ab/((a + b)(a + b + 1)).

Printed per judge, k and n: the truth, the mean estimate, its bias and RMSE over the worlds, the
coverage of the Brier score's 95% bootstrap interval over conversations (``brier_interval``, as
the report gives it; the ECE has no interval), and the share of worlds in which the calibrated
judge's ECE is below the overconfident one's (the diagram tells them apart).

    python benchmarks/calibration.py [--worlds 500] [--seed 0] [--resamples 300]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from cocoeval.analysis.calibration import brier, brier_interval, ece

A, B = 0.3, 3.0
TURNS, BEHAVIOURS = 30, 10


def truth(kind: str, k: int) -> tuple[float, float]:
    """(true ECE, true Brier score) of the judge ``kind`` with ``k`` samples."""
    qq = A * B / ((A + B) * (A + B + 1))  # E[q(1 - q)]
    if kind == "overconfident":
        return 2 * qq, 2 * qq
    x = np.arange(k + 1)
    pmf = stats.betabinom.pmf(x, k, A, B)
    p = x / k
    return 0.0, float((pmf * p * (1 - p)).sum())


def world(kind: str, k: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(vote fractions, majority labels), each (n · 30 turns, 10 behaviours), conversation by conversation."""
    m = (n, TURNS, BEHAVIOURS)
    q = np.broadcast_to(rng.beta(A, B, size=(n, 1, BEHAVIOURS)), m)
    if kind == "calibrated":
        p = rng.binomial(k, q) / k
        y = (rng.random(m) < p).astype(float)
    else:
        p = (rng.random(m) < q).astype(float)
        y = (rng.random(m) < q).astype(float)
    return p.reshape(n * TURNS, BEHAVIOURS), y.reshape(n * TURNS, BEHAVIOURS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=300, help="bootstrap resamples of the Brier interval")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    print(f"{a.worlds} worlds per row; q ~ Beta({A}, {B}); {TURNS} turns x {BEHAVIOURS} behaviours per conversation")
    print(f"{'judge':<14}{'k':>3}{'n':>5}  {'ECE true':>8} {'mean':>7} {'bias':>8} {'RMSE':>7}  "
          f"{'Brier true':>10} {'mean':>7} {'bias':>8} {'RMSE':>7}  {'coverage':>8}")  # fmt: skip
    for k in (3, 5):
        for n in (40, 150):
            est: dict[str, np.ndarray] = {}
            for kind in ("calibrated", "overconfident"):
                t_ece, t_brier = truth(kind, k)
                e = np.empty((a.worlds, 2))
                cover = np.empty(a.worlds, dtype=bool)
                conv = np.repeat(np.arange(n), TURNS)
                for w in range(a.worlds):
                    p, y = world(kind, k, n, rng)
                    e[w] = ece(p.ravel(), y.ravel()), brier(p.ravel(), y.ravel())
                    lo, hi = brier_interval(p, y, conv, a.resamples, rng)
                    cover[w] = lo <= t_brier <= hi
                est[kind] = e[:, 0]
                print(
                    f"{kind:<14}{k:>3}{n:>5}  {t_ece:>8.4f} {e[:, 0].mean():>7.4f} {e[:, 0].mean() - t_ece:>+8.4f} "
                    f"{np.sqrt(((e[:, 0] - t_ece) ** 2).mean()):>7.4f}  {t_brier:>10.4f} {e[:, 1].mean():>7.4f} "
                    f"{e[:, 1].mean() - t_brier:>+8.4f} {np.sqrt(((e[:, 1] - t_brier) ** 2).mean()):>7.4f}  "
                    f"{cover.mean():>8.3f}"
                )
            print(
                f"{'':<14}{k:>3}{n:>5}  calibrated ECE < overconfident ECE in "
                f"{(est['calibrated'] < est['overconfident']).mean():.3f} of worlds"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
