"""Known-truth worlds for the paired setup-vs-setup comparisons and the rank intervals
(``analysis.paired``), and for the leaderboard's distance interval when instances are windows of
the same conversations. Every number is computed by cocoeval's own functions on data drawn from
a world whose truth is known; nothing is timed.

The worlds: 10 behaviours with per-turn rates 2–12% (``RATES``), conversations of 30 turns. A
source conversation c has a shared effect g_c ~ Gamma(4, 1/4) (its speakers talk more or less),
each of its windows i a shared effect u_i ~ Gamma(4, 1/4), and each simulated setup t its own
reaction to the conversation e_tc ~ Gamma(4, 1/4) (a simulator that over-produces in one meeting
does so in all its windows): the count of behaviour k is Poisson(30·p_k·m_tk·g_c·u_i·e_tc), m_tk
the setup's multiplier (1 for the humans, whose e is 1). So the windows of a conversation are
correlated, and so are a setup's differences from another setup within a conversation. The true
mean occurrences per conversation of t are 30·p_k·m_tk, the true difference a − b is
30·p_k·(m_ak − m_bk) and a setup's true distance √mean_k (30·p_k·(m_tk − 1))².

- **Level** (a and b equal: m = 1 for both, drawn from the humans, and m = 1.3 for both, both
  far): the familywise false-positive rate over the 10 behaviours (any Holm-adjusted p ≤ 0.05)
  and the distance test's (its p ≤ 0.05), with the coverage of the per-behaviour intervals
  (their mean over behaviours) and of the distance-difference interval.
- **Power** at 300 instances (a = the humans' rates): b with one behaviour (the most frequent,
  p = 0.12) at 1.5× and at 1.6× the humans' rate, and b with all behaviours at 1.3×: the share of worlds where
  behaviour b7 is called "b higher" (Holm over the 10), and where the distance test calls b
  farther (p ≤ 0.05, the right direction); coverage as above, and of the interval of the
  difference of the squares (``square_ci_low``–``square_ci_high``).
- Both in two shapes of 300 instances: 60 conversations of 5 windows, and 300 conversations of
  one window each.
- **The leaderboard's distance interval** (``leaderboard.paired_profiles``) for a setup with all
  m = 1, 1.3 and 1.5 against the humans, in both shapes: its coverage of the true distance when it
  resamples source conversations (the leaderboard now) and when it resamples instances (before).
- **The leaderboard's floor** (``leaderboard.floor``, two halves of the humans) in both shapes,
  drawn by source conversation (the leaderboard now) and by instance (before): the mean of its
  unbiased squares (0 is the truth), the mean of its distances and its 2.5–97.5% range (means over
  the worlds), against what it stands for, the same distance between two independent sets of C/2
  human conversations (``fresh_halves`` on another world's humans; "fresh in": the share of worlds
  whose fresh distance lies in the floor's range, 0.95 is the aim); and the leaderboard distance of
  a setup drawn from the humans' own process on the same instances (``twin``: m = 1, no reaction of
  its own) and of a setup at m = 1 with its own reaction e (``m=1``), with the share inside the
  floor's range.
- **Rank intervals**: K = 6 setups with all multipliers m = 1, 1, 1.15, 0.7, 1.3, 1.6 (true
  distances 0, 0, 0.15·s, 0.3·s, 0.3·s, 0.6·s with s = √mean_k (30·p_k)²; two ties, one of them
  between a setup under-producing and one over-producing), in both shapes: the joint coverage (every true rank, ties sharing the smallest, inside its interval) and
  the share of worlds in which each setup's rank is settled.

    python benchmarks/paired.py [--seeds 500] [--rank-seeds 500] [--resamples 1000] [--only TEXT]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from cocoeval.analysis import leaderboard, paired
from cocoeval.core.targets import REFERENCE

RATES = np.array([0.02, 0.03, 0.05, 0.08, 0.1, 0.04, 0.06, 0.12, 0.02, 0.07])
TURNS = 30
BEH = [f"b{k}" for k in range(len(RATES))]
SHAPES = ((60, 5), (300, 1))


def world(
    rng: np.random.Generator, convs: int, windows: int, mult: dict[str, np.ndarray], own: tuple[str, ...] = ()
) -> pl.DataFrame:
    """One world's counts (the frame ``paired.compare_setups`` takes): the humans and each setup
    of ``mult`` (name → its multipliers, one per behaviour) on convs × windows instances; a setup
    named in ``own`` has no reaction of its own (e = 1: drawn from the humans' own process at m = 1)."""
    n = convs * windows
    conv = np.repeat(np.arange(convs), windows)
    g = rng.gamma(4, 1 / 4, convs)[conv] * rng.gamma(4, 1 / 4, n)  # conversation and window effects
    targets = [REFERENCE, *mult]
    x = np.empty((len(targets), n, len(RATES)))
    for j, t in enumerate(targets):
        e = 1.0 if t == REFERENCE or t in own else rng.gamma(4, 1 / 4, convs)[conv]
        m = np.ones(len(RATES)) if t == REFERENCE else mult[t]
        x[j] = rng.poisson(TURNS * RATES[None, :] * m[None, :] * (g * e)[:, None])
    ids = np.array([f"d/c{c}/{i % windows}" for i, c in enumerate(conv)])
    convs_ = np.array([f"d/c{c}" for c in conv])
    t_col = np.repeat(np.array(targets), n * len(RATES))
    return pl.DataFrame(
        {
            "target": t_col,
            "instance_id": np.tile(np.repeat(ids, len(RATES)), len(targets)),
            "conversation": np.tile(np.repeat(convs_, len(RATES)), len(targets)),
            "behaviour": np.tile(np.array(BEH), n * len(targets)),
            "count": x.reshape(-1).astype(np.int64),
        }
    )


def true_distance(m: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(TURNS * RATES * (m - 1)))))


def _pair_cells(seeds: int, resamples: int, convs: int, windows: int, ma: np.ndarray, mb: np.ndarray) -> dict:
    fw = dist_fp = 0
    hit_beh: list[float] = []
    cover = cover_d = cover_q = 0.0
    called = np.zeros(len(RATES))
    dist_called = 0
    true = TURNS * RATES * (ma - mb)
    true_d = true_distance(ma) - true_distance(mb)
    true_q = true_distance(ma) ** 2 - true_distance(mb) ** 2
    for seed in range(seeds):
        rng = np.random.default_rng([seed, convs, windows, int(ma.sum() * 100), int(mb.sum() * 100)])
        df = world(rng, convs, windows, {"a": ma, "b": mb})
        r = paired.compare_setups(df, BEH, judge="j", resamples=resamples, seed=seed).frame()
        beh = r.filter(pl.col("behaviour") != paired.DISTANCE)
        dist = r.filter(pl.col("behaviour") == paired.DISTANCE).row(0, named=True)
        p_adj = beh["p_adj"].fill_null(1.0).to_numpy()
        fw += bool((p_adj <= 0.05).any())
        called += np.array([v == paired.B_HIGHER for v in beh["verdict"].to_list()])
        lo, hi = beh["ci_low"].to_numpy(), beh["ci_high"].to_numpy()
        hit_beh.append(float(np.mean((lo <= true) & (true <= hi))))
        cover_d += dist["ci_low"] is not None and dist["ci_low"] <= true_d <= dist["ci_high"]
        cover_q += dist["square_ci_low"] is not None and dist["square_ci_low"] <= true_q <= dist["square_ci_high"]
        dist_fp += dist["p"] is not None and dist["p"] <= 0.05
        dist_called += dist["p"] is not None and dist["p"] <= 0.05 and dist["verdict"] == paired.B_FARTHER
    cover = float(np.mean(hit_beh))
    return {
        "fw": fw / seeds,
        "dist_p": dist_fp / seeds,
        "called": called / seeds,
        "dist_called": dist_called / seeds,
        "cover": cover,
        "cover_d": cover_d / seeds,
        "cover_q": cover_q / seeds,
    }


def level_and_power(seeds: int, resamples: int, only: str = "") -> None:
    ones = np.ones(len(RATES))
    one_b, one_b6 = ones.copy(), ones.copy()
    one_b[7] = 1.5  # the most frequent behaviour (p = 0.12) at 1.5x
    one_b6[7] = 1.6
    print(f"Paired comparisons a vs b, 300 instances ({seeds} seeds each, {resamples} resamples)")
    print(
        f"{'world':<28} {'shape':>7} {'familywise':>10} {'dist p<=.05':>11} {'b7 b higher':>11} "
        f"{'dist b farther':>14} {'cover beh':>9} {'cover dist':>10} {'cover sq':>8}"
    )
    for label, ma, mb in (
        ("equal, both m = 1", ones, ones),
        ("equal, both m = 1.3", 1.3 * ones, 1.3 * ones),
        ("b: behaviour b7 at 1.5x", ones, one_b),
        ("b: behaviour b7 at 1.6x", ones, one_b6),
        ("b: all behaviours at 1.3x", ones, 1.3 * ones),
    ):
        if only not in label:
            continue
        for convs, windows in SHAPES:
            c = _pair_cells(seeds, resamples, convs, windows, ma, mb)
            print(
                f"{label:<28} {convs:>4}x{windows:<2} {c['fw']:>10.3f} {c['dist_p']:>11.3f} {c['called'][7]:>11.3f} "
                f"{c['dist_called']:>14.3f} {c['cover']:>9.3f} {c['cover_d']:>10.3f} {c['cover_q']:>8.3f}"
            )


def leaderboard_coverage(seeds: int, resamples: int) -> None:
    print(f"\nThe leaderboard's distance interval in the clustered worlds ({seeds} seeds each)")
    print(f"{'m':>4} {'shape':>7} {'truth':>7} {'by conversation':>15} {'by instance':>11}")
    for m in (1.0, 1.3, 1.5):
        for convs, windows in SHAPES:
            truth = true_distance(m * np.ones(len(RATES)))
            cover = [0, 0]
            for seed in range(seeds):
                rng = np.random.default_rng([seed, convs, windows, int(m * 10)])
                df = world(rng, convs, windows, {"s": m * np.ones(len(RATES))})
                mats, conv = paired._matrices(df, BEH)
                s, h = mats["s"].x, mats[REFERENCE].x
                groups = paired._codes([conv[i] for i in mats["s"].ids])
                for j, clusters in enumerate(({"s": groups}, None)):  # the leaderboard now; as it was before
                    p = leaderboard.paired_profiles({"s": (s, h)}, resamples, seed, min_n=10, clusters=clusters)["s"]
                    _, lo, hi, _ = p.distance
                    cover[j] += lo is not None and hi is not None and lo <= truth <= hi
            print(f"{m:>4} {convs:>4}x{windows:<2} {truth:>7.3f} {cover[0] / seeds:>15.3f} {cover[1] / seeds:>11.3f}")


def fresh_halves(h: np.ndarray, codes: np.ndarray) -> float:
    """The floor's distance between the first and the second half of the conversations of ``h``
    themselves (no resampling): what two independent sets of C/2 human conversations give."""
    sums, sizes = paired.cluster_sums(h, codes)
    c = len(sizes)
    wa = np.zeros((1, c))
    wa[0, : c // 2] = 1
    wb = np.zeros((1, c))
    wb[0, c // 2 : 2 * (c // 2)] = 1
    qa, qb = paired.cluster_square(sums, sizes, wa), paired.cluster_square(sums, sizes, wb)
    ma, mb = (wa @ sums) / (wa @ sizes)[:, None], (wb @ sums) / (wb @ sizes)[:, None]
    return float(paired.distance_of(qa + qb - 2 * np.mean(ma * mb, axis=-1))[0])


def floor_coverage(seeds: int, resamples: int) -> None:
    print(f"\nThe leaderboard's floor (two halves of the humans) in the clustered worlds ({seeds} seeds each)")
    print(
        f"{'shape':>7} {'floor':>15} {'mean sq':>8} {'mean':>6} {'range':>11} {'fresh':>6} {'2.5-97.5%':>11} "
        f"{'fresh in':>8} {'twin':>6} {'twin in':>7} {'m=1':>6} {'m=1 in':>6}"
    )
    for convs, windows in SHAPES:
        cells: dict[str, dict[str, list[float]]] = {}
        dists: dict[str, list[float]] = {"fresh": [], "twin": [], "m1": []}
        for seed in range(seeds):
            rng = np.random.default_rng([seed, convs, windows, 11])
            ones = np.ones(len(RATES))
            df = world(rng, convs, windows, {"twin": ones, "m1": ones}, own=("twin",))
            mats, conv = paired._matrices(df, BEH)
            h = mats[REFERENCE].x
            groups = paired._codes([conv[i] for i in mats[REFERENCE].ids])
            for name in ("twin", "m1"):
                assert mats[name].ids == mats[REFERENCE].ids
                p = leaderboard.paired_profiles(
                    {name: (mats[name].x, h)}, resamples, seed, min_n=10, clusters={name: groups}
                )[name]
                d = p.distance[0]
                assert d is not None  # two conversations or more: a distance
                dists[name].append(d)
            other, conv2 = paired._matrices(world(rng, convs, windows, {}), BEH)  # another sample of humans
            dists["fresh"].append(
                fresh_halves(other[REFERENCE].x, paired._codes([conv2[i] for i in other[REFERENCE].ids]))
            )
            for label, codes in (("by conversation", groups), ("by instance", None)):
                fl = leaderboard.floor(h, resamples, seed, codes)
                sq = leaderboard.floor(h, resamples, seed, codes, squares=True)
                lo, hi = np.percentile(fl, [2.5, 97.5])
                c = cells.setdefault(
                    label, {"sq": [], "mean": [], "lo": [], "hi": [], "fresh": [], "twin": [], "m1": []}
                )
                c["sq"].append(float(sq.mean()))
                c["mean"].append(float(fl.mean()))
                c["lo"].append(float(lo))
                c["hi"].append(float(hi))
                for name in dists:
                    c[name].append(float(lo <= dists[name][-1] <= hi))
        fr = np.array(dists["fresh"])
        for label, c in cells.items():
            print(
                f"{convs:>4}x{windows:<2} {label:>15} {np.mean(c['sq']):>8.3f} {np.mean(c['mean']):>6.3f} "
                f"{np.mean(c['lo']):>5.3f}-{np.mean(c['hi']):<5.3f} {fr.mean():>6.3f} "
                f"{np.percentile(fr, 2.5):>5.3f}-{np.percentile(fr, 97.5):<5.3f} {np.mean(c['fresh']):>8.3f} "
                f"{np.mean(dists['twin']):>6.3f} {np.mean(c['twin']):>7.3f} {np.mean(dists['m1']):>6.3f} "
                f"{np.mean(c['m1']):>6.3f}"
            )


RANK_M = (1.0, 1.0, 1.15, 0.7, 1.3, 1.6)


def rank_coverage(seeds: int, resamples: int) -> None:
    dist = [abs(m - 1) for m in RANK_M]  # proportional to the true distances
    true_rank = [1 + sum(x < d - 1e-12 for x in dist) for d in dist]
    print(f"\nRank intervals, K = {len(RANK_M)} setups with all multipliers {RANK_M} ({seeds} seeds each)")
    print(f"true ranks {true_rank}")
    print(f"{'shape':>7} {'joint coverage':>14} {'mean width':>10}  settled share per setup")
    for convs, windows in SHAPES:
        joint = 0
        settled = np.zeros(len(RANK_M))
        width = []
        for seed in range(seeds):
            rng = np.random.default_rng([seed, convs, windows, 7])
            df = world(rng, convs, windows, {f"s{j}": m * np.ones(len(RATES)) for j, m in enumerate(RANK_M)})
            r = paired.rank_table(
                df, BEH, judge="j", setups=[f"s{j}" for j in range(len(RANK_M))], resamples=resamples, seed=seed
            )
            by = {x.setup: x for x in r}
            ok = all(by[f"s{j}"].rank_low <= true_rank[j] <= by[f"s{j}"].rank_high for j in range(len(RANK_M)))
            joint += ok
            settled += [by[f"s{j}"].settled for j in range(len(RANK_M))]
            width.append(np.mean([x.rank_high - x.rank_low for x in r]))
        shares = " ".join(f"{s / seeds:.2f}" for s in settled)
        print(f"{convs:>4}x{windows:<2} {joint / seeds:>14.3f} {np.mean(width):>10.2f}  {shares}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500, help="worlds per row of the paired and leaderboard tables")
    ap.add_argument("--rank-seeds", type=int, default=500, help="worlds per row of the rank table")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval")
    ap.add_argument("--only", default="", help="only the paired rows whose world contains this text (no other table)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    level_and_power(a.seeds, a.resamples, a.only)
    if not a.only:
        leaderboard_coverage(a.seeds, a.resamples)
        floor_coverage(a.seeds, a.resamples)
        rank_coverage(a.rank_seeds, a.resamples)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
