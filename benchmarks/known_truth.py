"""Known-truth worlds for the statistics beyond the paper: how often each interval covers the
truth, how often the validation gate passes a judge that guesses, and how often it passes one
that agrees. Every number is computed by cocoeval's own functions on data drawn from a world
whose truth is known; nothing is timed.

- **Leaderboard distance** (``leaderboard.paired_profiles``): human counts per conversation and
  behaviour Poisson(30·p_b·g), the simulator's Poisson(30·c·p_b·g) on the same instance (g a
  shared Gamma(4, 1/4) instance effect), so the true per-behaviour difference is 30·(c − 1)·p_b
  and the true distance √mean_b δ_b². c = 1 (a simulator drawn from the humans' own rates:
  distance 0), 1.1, 1.5 and 3; n = 12, 40 and 150 instances. Printed: coverage of the 95%
  interval, the share of intervals that hold their own point, and the mean estimate against the
  truth (with the plug-in RMS of the old estimator beside it).
- **Validation gate** (``judge_check.gate_rows``): 10 behaviours with per-turn rates 2–12%,
  conversations of 30 turns with a Gamma(2, 1/2) rate multiplier each, three annotators who miss
  20% of the true positives and add 1% false ones, and a judge that does the same at 30% and 2%
  except for one behaviour it labels at random (at its true rate, independently of the turn).
  Printed: how often the random behaviour is validated (the false validation rate; target ≤ 5%),
  how often its uncorrected permutation p is ≤ 0.05 (the test's own level), and the share of the
  nine agreeing behaviours validated (the power; target ≥ 0.8 at 40 conversations).
- **Corrected rates** (``judge_check.ppi_estimate``, ``humans_mean``): 300 conversations, the
  humans' count Poisson(λ_c) with λ_c = 2·Gamma(2, 1/2) (true rate 2), a judge that misses 30% of
  them and adds Poisson(0.4·λ_c); n = 12, 30, 40 and 150 of them labelled, drawn at random.
  Printed: coverage of the PPI++ interval and of the humans-only interval, and their mean widths
  (below ``MIN_LABELLED`` labelled conversations the report shows no interval; the row says so).

    python benchmarks/known_truth.py [--seeds 1000] [--gate-seeds 1000] [--ppi-seeds 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cocoeval.analysis import judge_check as jc
from cocoeval.analysis import leaderboard

RATES = np.array([0.02, 0.03, 0.05, 0.08, 0.1, 0.04, 0.06, 0.12, 0.02, 0.07])
TURNS = 30


def distance_world(n: int, c: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    g = rng.gamma(4, 1 / 4, size=(n, 1))
    return rng.poisson(TURNS * c * RATES * g).astype(float), rng.poisson(TURNS * RATES * g).astype(float)


def distance_coverage(seeds: int, resamples: int) -> None:
    print(f"Leaderboard distance, 95% intervals ({seeds} seeds, {resamples} resamples each)")
    print(f"{'n':>4} {'c':>4} {'truth':>7} {'coverage':>9} {'holds pt':>9} {'mean est':>9} {'plug-in':>8}")
    for n in (12, 40, 150):
        for c in (1.0, 1.1, 1.5, 3.0):
            truth = float(np.sqrt(np.mean((TURNS * (c - 1) * RATES) ** 2)))
            cover = holds = 0
            est, plug = [], []
            for seed in range(seeds):
                rng = np.random.default_rng([seed, n, int(c * 10)])
                s, h = distance_world(n, c, rng)
                p = leaderboard.paired_profiles({"x": (s, h)}, resamples, seed, min_n=10)["x"]
                d, lo, hi, _ = p.distance
                assert d is not None and lo is not None and hi is not None  # n ≥ 10: every interval defined
                cover += lo <= truth <= hi
                holds += lo <= d <= hi
                est.append(d)
                plug.append(float(np.sqrt(np.mean(np.square(p.diff)))))  # the plug-in RMS used before
            print(
                f"{n:>4} {c:>4} {truth:>7.3f} {cover / seeds:>9.3f} {holds / seeds:>9.3f} {np.mean(est):>9.3f} "
                f"{np.mean(plug):>8.3f}"
            )


def gate_world(n_conv: int, rng: np.random.Generator, random_behaviour: int) -> jc.TurnLabels:
    t = n_conv * TURNS
    conv = np.repeat(np.arange(n_conv), TURNS)
    rate = np.minimum(RATES[None, :] * rng.gamma(2, 1 / 2, size=(n_conv, 1)), 1.0)[conv]
    truth = rng.random((t, len(RATES))) < rate

    def rater(miss: float, extra: float) -> np.ndarray:
        return (truth & (rng.random(truth.shape) >= miss)) | (rng.random(truth.shape) < extra)

    x = {h: rater(0.2, 0.01) for h in ("A", "B", "C")}
    judge = rater(0.3, 0.02)
    judge[:, random_behaviour] = rng.random(t) < RATES[random_behaviour]
    x["J"] = judge
    raters = ["J", "A", "B", "C"]
    present = {r: np.ones(t, dtype=bool) for r in raters}
    names = [f"b{i}" for i in range(len(RATES))]
    return jc.TurnLabels(raters, names, [("t", str(i)) for i in range(n_conv)], conv, x, present, 3 * n_conv, [])


def gate_rates(seeds: int) -> None:
    print(f"\nValidation gate: one behaviour labelled at random, nine agreeing ({seeds} seeds each)")
    print(
        f"{'conversations':>13} {'false validation':>17} {'raw p<=.05':>11} {'power (9 agreeing)':>19} {'too rare':>9}"
    )
    for n_conv in (30, 40, 60):
        false = raw = 0
        power: list[float] = []
        rare = 0
        for seed in range(seeds):
            rng = np.random.default_rng([seed, n_conv])
            rb = seed % len(RATES)
            rows = jc.gate_rows(gate_world(n_conv, rng, rb), {}, seed)
            false += rows[rb]["validated"]
            raw += rows[rb].get("p") is not None and rows[rb]["p"] <= 0.05
            rare += sum(r["status"] == jc.TOO_RARE for r in rows)
            power.append(np.mean([r["validated"] for i, r in enumerate(rows) if i != rb]))
        print(f"{n_conv:>13} {false / seeds:>17.3f} {raw / seeds:>11.3f} {np.mean(power):>19.3f} {rare / seeds:>9.2f}")


def ppi_coverage(seeds: int) -> None:
    print(f"\nCorrected rates of 300 conversations, true rate 2 ({seeds} seeds each)")
    print(f"{'labelled':>8} {'PPI++ cover':>12} {'humans cover':>13} {'PPI++ width':>12} {'humans width':>13}")
    for n in (12, 30, 40, 150):
        cp = ch = 0
        wp, wh = [], []
        for seed in range(seeds):
            rng = np.random.default_rng([seed, n])
            lam = 2 * rng.gamma(2, 1 / 2, 300)
            human = rng.poisson(lam).astype(float)
            judge = (rng.binomial(human.astype(int), 0.7) + rng.poisson(0.4 * lam)).astype(float)
            lab = rng.choice(300, n, replace=False)
            unl = np.setdiff1d(np.arange(300), lab)
            _, lo, hi = jc.ppi_estimate(human[lab], judge[lab], judge[unl])
            _, hlo, hhi = jc.humans_mean(human[lab])
            cp += lo <= 2 <= hi
            ch += hlo <= 2 <= hhi
            wp.append(hi - lo)
            wh.append(hhi - hlo)
        shown = "" if n >= jc.MIN_LABELLED else f"  (not shown: below {jc.MIN_LABELLED} labelled)"
        print(f"{n:>8} {cp / seeds:>12.3f} {ch / seeds:>13.3f} {np.mean(wp):>12.3f} {np.mean(wh):>13.3f}{shown}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1000, help="worlds per cell of the distance table")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval")
    ap.add_argument("--gate-seeds", type=int, default=1000, help="worlds per row of the gate table")
    ap.add_argument("--ppi-seeds", type=int, default=2000, help="worlds per row of the corrected-rates table")
    a = ap.parse_args()
    t0 = time.perf_counter()
    distance_coverage(a.seeds, a.resamples)
    gate_rates(a.gate_seeds)
    ppi_coverage(a.ppi_seeds)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
