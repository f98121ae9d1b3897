"""A tried alternative for the paired distance comparison (``paired._distance_pair``), kept so that
its figures in docs/testing.md can be reprinted: the bootstrap-t (studentized bootstrap) against
the workbench's intervals and test, on the worlds of ``benchmarks/paired.py`` (10 behaviours at
per-turn rates 2–12% over 30 turns; a source conversation's and a window's Gamma(4, 1/4) effects
shared by every target, each setup's own Gamma(4, 1/4) reaction per conversation; Poisson counts;
60 meetings × 5 windows and 300 × 1), drawn here with numpy directly (the same distributions, not
the same random streams). Nothing is timed.

For each world: the workbench's distance-difference interval (``paired.recentred``) and its test of
the difference of the squares (``paired.square_test``), beside the bootstrap-t of both: every
conversation resample is studentized by its own leave-one-conversation-out jackknife standard
error (closed form for ``paired.cluster_square``, each drawn copy of a conversation a unit),
centred on the plug-in value of the sample (the truth of the bootstrap world), and the interval is
the estimate minus the 97.5% and 2.5% quantiles of those t's times the sample's jackknife SE; its
test rejects when |t| of the sample exceeds the 95% quantile of the resamples' |t|. The worlds:
a and b equal (both at the humans' rates; both at 1.3×; mirrored, a at 0.7× and b at 1.3×: equal
distances, different profiles), and b farther (the most frequent behaviour at 1.5×; all at 1.3×).
Columns: coverage of the true distance difference, the test's rejection rate (level in the equal
worlds, power in the others), coverage of the true difference of the squares.

    python benchmarks/paired_studentized.py [--seeds 500] [--resamples 500] [--only TEXT]
"""

from __future__ import annotations

import argparse

import numpy as np

from cocoeval.analysis import paired

RATES = np.array([0.02, 0.03, 0.05, 0.08, 0.1, 0.04, 0.06, 0.12, 0.02, 0.07])
TURNS = 30
K = len(RATES)
SHAPES = ((60, 5), (300, 1))


def draw(
    rng: np.random.Generator, convs: int, windows: int, ma: np.ndarray, mb: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(conversation codes, the humans' counts, a's, b's) of one world of convs × windows instances."""
    n = convs * windows
    conv = np.repeat(np.arange(convs), windows)
    g = rng.gamma(4, 1 / 4, convs)[conv] * rng.gamma(4, 1 / 4, n)
    h = rng.poisson(TURNS * RATES[None] * g[:, None]).astype(float)
    xs = []
    for m in (ma, mb):
        e = rng.gamma(4, 1 / 4, convs)[conv]
        xs.append(rng.poisson(TURNS * RATES[None] * m[None] * (g * e)[:, None]).astype(float))
    return conv, h, xs[0], xs[1]


def leave_one_out(sums: np.ndarray, sizes: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(B, C) ``paired.cluster_square`` of each resample of weights ``w`` (B, C) without one drawn
    copy of conversation c (closed form: its sum and size taken out of the totals)."""
    tot, within = w @ sums, w @ np.square(sums)
    n, n2 = w @ sizes, w @ np.square(sizes)
    tot_ = tot[:, None, :] - sums[None]
    within_ = within[:, None, :] - np.square(sums)[None]
    den = np.square(n[:, None] - sizes[None]) - (n2[:, None] - np.square(sizes)[None])
    return np.mean(np.square(tot_) - within_, axis=2) / den


def jackknife_se(loo: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(B,) the jackknife standard error from the leave-one-copy-out estimates ``loo`` (B, C), each
    conversation's weighted by how often the resample drew it."""
    c = w.sum(axis=1, keepdims=True)
    mean = (w * loo).sum(axis=1, keepdims=True) / c
    return np.sqrt((c[:, 0] - 1) / c[:, 0] * (w * np.square(loo - mean)).sum(axis=1))


def cell(seeds: int, resamples: int, convs: int, windows: int, ma: np.ndarray, mb: np.ndarray) -> dict[str, float]:
    sq_a, sq_b = np.mean(np.square(TURNS * RATES * (ma - 1))), np.mean(np.square(TURNS * RATES * (mb - 1)))
    true_d, true_q = np.sqrt(sq_a) - np.sqrt(sq_b), sq_a - sq_b
    hits = dict.fromkeys(("d_now", "d_bt", "p_now", "p_bt", "q_now", "q_bt"), 0.0)
    root = lambda x: np.sqrt(np.maximum(x, 0.0))  # noqa: E731
    for seed in range(seeds):
        rng = np.random.default_rng([seed, convs, windows, int(ma.sum() * 100), int(mb.sum() * 100), 3])
        conv, h, a, b = draw(rng, convs, windows, ma, mb)
        da, sizes = paired.cluster_sums(a - h, conv)
        db, _ = paired.cluster_sums(b - h, conv)
        c = len(sizes)
        qa, qb = float(paired.cluster_square(da, sizes)), float(paired.cluster_square(db, sizes))
        d, q = float(root(qa) - root(qb)), qa - qb
        w = paired.cluster_weights(c, resamples, seed)
        qa_b, qb_b = paired.cluster_square(da, sizes, w), paired.cluster_square(db, sizes, w)
        d_b = root(qa_b) - root(qb_b)
        lo, hi = paired.recentred(d, d_b, c)
        hits["d_now"] += float(lo <= true_d <= hi)
        p, slo, shi = paired.square_test(q, qa_b - qb_b, c)
        hits["p_now"] += float(p <= 0.05)
        hits["q_now"] += float(slo is not None and shi is not None and slo <= true_q <= shi)
        one = np.ones((1, c))
        la, lb = leave_one_out(da, sizes, one)[0], leave_one_out(db, sizes, one)[0]
        la_b, lb_b = leave_one_out(da, sizes, w), leave_one_out(db, sizes, w)
        plug_a = float(np.mean(np.square(da.sum(0) / sizes.sum())))
        plug_b = float(np.mean(np.square(db.sum(0) / sizes.sum())))
        se = jackknife_se((la - lb)[None], one)[0]
        tq = (qa_b - qb_b - (plug_a - plug_b)) / jackknife_se(la_b - lb_b, w)
        t_lo, t_hi = np.percentile(tq, [2.5, 97.5])
        hits["q_bt"] += float(q - t_hi * se <= true_q <= q - t_lo * se)
        hits["p_bt"] += float(abs(q / se) > np.percentile(np.abs(tq), 95))
        se_d = jackknife_se((root(la) - root(lb))[None], one)[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            td = (d_b - (np.sqrt(plug_a) - np.sqrt(plug_b))) / jackknife_se(root(la_b) - root(lb_b), w)
        t_lo, t_hi = np.percentile(td[np.isfinite(td)], [2.5, 97.5])
        hits["d_bt"] += float(d - t_hi * se_d <= true_d <= d - t_lo * se_d)
    return {k: v / seeds for k, v in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500, help="worlds per row")
    ap.add_argument("--resamples", type=int, default=500, help="bootstrap resamples per world")
    ap.add_argument("--only", default="", help="only the worlds whose name contains this text")
    a = ap.parse_args()
    ones = np.ones(K)
    b7 = ones.copy()
    b7[7] = 1.5
    print(f"Bootstrap-t against the workbench's distance comparison ({a.seeds} seeds each, {a.resamples} resamples)")
    print(
        f"{'world':<22} {'shape':>7} | {'cover dist':>10} {'bt':>6} | {'test p<=.05':>11} {'bt':>6} | "
        f"{'cover sq':>8} {'bt':>6}"
    )
    for label, ma, mb in (
        ("equal, both m = 1", ones, ones),
        ("equal, both m = 1.3", 1.3 * ones, 1.3 * ones),
        ("mirrored, 0.7x / 1.3x", 0.7 * ones, 1.3 * ones),
        ("b: b7 at 1.5x", ones, b7),
        ("b: all at 1.3x", ones, 1.3 * ones),
    ):
        if a.only not in label:
            continue
        for convs, windows in SHAPES:
            r = cell(a.seeds, a.resamples, convs, windows, ma, mb)
            print(
                f"{label:<22} {convs:>4}x{windows:<2} | {r['d_now']:>10.3f} {r['d_bt']:>6.3f} | {r['p_now']:>11.3f} "
                f"{r['p_bt']:>6.3f} | {r['q_now']:>8.3f} {r['q_bt']:>6.3f}"
            )


if __name__ == "__main__":
    main()
