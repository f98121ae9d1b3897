"""Known-truth worlds for the corrected rates of random and active label draws (beyond the paper;
``cocoeval.analysis.active``): how often the corrected 95% interval covers the humans' true rate,
and how wide it is, when the labels come from two uniform random rounds (``annotate-export
--random``, then ``--random --exclude-annotated``) or from a uniform round and an active one
(``annotate-next``) at the same budget. Every number is computed by cocoeval's own functions
(``design_estimate``, ``error_scores``, ``inclusion_probabilities``, ``systematic_draw``) on data
drawn from a world whose truth is known; nothing is timed.

A world, per target (the reference and one setup, each with its own judge error): ``meetings``
source conversations of ``windows`` windows each; a meeting's rate μ = rate·Gamma(4, 1/4) (so the
windows of one meeting are alike: clustered), the humans' count of a window Poisson(μ); the judge
finds 90% of them and, on a share ``hard`` of the windows (hard ones, the same for every window
of a meeting with probability 1/2), adds Poisson(k·μ) false ones — its errors concentrate there,
and a high count betrays them. The truth is the humans' true rate E[y] = rate. Printed per
design: coverage of the 95% interval and its mean width; "random, unclustered" is the random
design with each window its own unit (what ignoring the meetings would give); "no interval": the
share of worlds whose labels came from fewer than ``MIN_CLUSTERS`` source conversations (no
interval given; coverage and width are over the rest). ``--few-meetings`` adds the same 300
windows as fewer meetings of more windows each.

    python benchmarks/active_labels.py [--worlds 2000] [--budget 40] [--meetings 60] [--windows 5] [--few-meetings]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

from cocoeval.analysis.active import Round, design_estimate, error_scores, inclusion_probabilities, systematic_draw

TARGETS = {"reference": (2.0, 0.2, 4.0), "setup": (1.0, 0.1, 8.0)}
"""target: (true rate, share of hard windows, k: the judge's false ones on a hard window, Poisson(k·μ))."""
FEW = ((20, 15), (10, 30), (6, 50), (2, 150))
"""Shapes of ``--few-meetings``: meetings x windows, 300 windows each as in the default 60 x 5."""


def world(rng: np.random.Generator, meetings: int, windows: int, rate: float, hard: float, k: float):
    mu = np.repeat(rate * rng.gamma(4, 1 / 4, meetings), windows)
    y = rng.poisson(mu).astype(float)
    meeting_hard = np.repeat(rng.random(meetings) < hard, windows)
    is_hard = np.where(rng.random(len(y)) < 0.5, meeting_hard, rng.random(len(y)) < hard)
    f = rng.binomial(y.astype(int), 0.9) + np.where(is_hard, rng.poisson(k * mu), 0)
    return y, f.astype(float), np.repeat(np.arange(meetings), windows)


def run(worlds: int, budget: int, meetings: int, windows: int) -> None:
    n = meetings * windows
    units = [f"w{i}" for i in range(n)]
    designs = ("random", "active", "random, unclustered")
    cover = {(t, d): 0 for t in TARGETS for d in designs}
    width: dict[tuple[str, str], list[float]] = {(t, d): [] for t in TARGETS for d in designs}
    for w in range(worlds):
        for ti, (target, (rate, hard, k)) in enumerate(TARGETS.items()):
            rng = np.random.default_rng([w, ti])
            pyr = random.Random(f"{w}|{ti}")
            y, f, cl = world(rng, meetings, windows, rate, hard, k)
            clusters = [str(c) for c in cl]
            first = sorted(pyr.sample(range(n), budget))
            r1 = Round(frozenset(units), dict.fromkeys(units, budget / n), frozenset(units[i] for i in first))
            rest = [i for i in range(n) if i not in set(first)]
            pool = frozenset(units[i] for i in rest)
            # a second uniform round of the same size from the rest
            second = pyr.sample(rest, budget)
            r2 = Round(pool, dict.fromkeys(pool, budget / len(rest)), frozenset(units[i] for i in second))
            # an active second round: probabilities from the error model fitted on the first round
            scores, _ = error_scores(f[first], (y[first] - f[first]) ** 2, f[rest])
            pi = inclusion_probabilities(scores, budget)
            picked = [rest[j] for j in systematic_draw(pi, pyr)]
            r2a = Round(
                pool, {units[i]: float(p) for i, p in zip(rest, pi, strict=True)}, frozenset(units[i] for i in picked)
            )
            for d, rounds, cls in (
                ("random", [r1, r2], clusters),
                ("active", [r1, r2a], clusters),
                ("random, unclustered", [r1, r2], units),
            ):
                drawn = set().union(*(r.drawn for r in rounds))
                labels = {units[i]: y[i] for i in range(n) if units[i] in drawn}
                e = design_estimate(units, cls, f, labels, rounds)
                if e.low is None or e.high is None:  # too few source conversations hold a label
                    continue
                cover[target, d] += e.low <= rate <= e.high
                width[target, d].append(e.high - e.low)
    print(
        f"Corrected rates: {meetings} meetings x {windows} windows per target, {budget} uniform labels then "
        f"{budget} more (random or active), {worlds} worlds"
    )
    print(f"{'target':>10} {'design':>20} {'coverage':>9} {'mean width':>11} {'no interval':>12}")
    for t in TARGETS:
        for d in designs:
            got = len(width[t, d])
            cov = f"{cover[t, d] / got:>9.3f}" if got else f"{'-':>9}"
            wid = f"{np.mean(width[t, d]):>11.3f}" if got else f"{'-':>11}"
            print(f"{t:>10} {d:>20} {cov} {wid} {(worlds - got) / worlds:>12.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=2000, help="worlds per target")
    ap.add_argument("--budget", type=int, default=40, help="labels per round (two rounds)")
    ap.add_argument("--meetings", type=int, default=60, help="source conversations per target")
    ap.add_argument("--windows", type=int, default=5, help="windows (instances) per source conversation")
    ap.add_argument(
        "--few-meetings",
        action="store_true",
        help="also the same 300 windows as 20 x 15, 10 x 30, 6 x 50 and 2 x 150 (few meetings, many windows)",
    )
    a = ap.parse_args()
    t0 = time.perf_counter()
    run(a.worlds, a.budget, a.meetings, a.windows)
    if a.few_meetings:
        for meetings, windows in FEW:
            print()
            run(a.worlds, a.budget, meetings, windows)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
