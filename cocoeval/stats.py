"""Statistics with honest uncertainty: bootstrap CIs over instances (vectorised, seeded),
paired human-vs-simulated comparisons, leave-one-out Spearman agreement, participant counts.

Units: a *conversation* is one target (the human reference or one continuation) of one
instance; resampling is always over instances, so paired quantities keep their pairs.
Every table carries ``n`` (instances used); invalid judgments are excluded, never zeroed
(see ``frames.invalid_rates`` for their rates).
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
from scipy import stats as sps

from .frames import REFERENCE, Frames

ALPHA = 0.05


def boot_index(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) indices drawn with replacement; the same seed gives the same draws."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def resample_means(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Means of ``x`` (n, k) over each resample of rows in ``idx`` (B, n), as (B, k): how often
    each row is drawn (bincount) times the rows, one matrix product instead of a (B, n, k) copy."""
    b, n = idx.shape
    w = np.bincount((idx + np.arange(b)[:, None] * n).ravel(), minlength=b * n).reshape(b, n)
    return (w.astype(np.float64) @ x) / n  # float: the BLAS path


def bootstrap_mean_ci(x: np.ndarray, resamples: int = 1000, seed: int = 0,
                      idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column means of ``x`` (n, k) with percentile 95% CIs from resampling rows."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if idx is None:
        idx = boot_index(len(x), resamples, seed)
    boot = resample_means(x, idx)  # (B, k)
    lo, hi = np.percentile(boot, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)], axis=0)
    return x.mean(axis=0), lo, hi


def _matrix(counts: pl.DataFrame, behaviours: list[str]) -> tuple[list[str], np.ndarray]:
    """One group's counts as (instances, behaviours)."""
    order = {b: k for k, b in enumerate(behaviours)}
    n_inst = counts["instance_id"].n_unique()
    if counts.height == n_inst * len(behaviours):  # the frames' shape: every behaviour per judgment
        g = counts.with_columns(_k=pl.col("behaviour").replace_strict(order, default=-1)).sort("instance_id", "_k")
        if g["_k"].min() == 0:
            ids = g["instance_id"].gather_every(len(behaviours)).to_list()
            return ids, g["count"].to_numpy().astype(float).reshape(n_inst, len(behaviours))
    wide = counts.pivot(on="behaviour", index="instance_id", values="count", aggregate_function="first").sort("instance_id")
    for b in behaviours:
        if b not in wide.columns:
            wide = wide.with_columns(pl.lit(0).alias(b))
    return wide["instance_id"].to_list(), wide.select(behaviours).to_numpy().astype(float)


def mean_occurrences(f: Frames, by: tuple[str, ...] = ("judge", "target"), resamples: int = 1000,
                     seed: int = 0) -> pl.DataFrame:
    """Mean occurrences per conversation of each behaviour, per group, with 95% bootstrap CIs.
    Groups of the same size share the seeded draws and are resampled in one matrix product."""
    beh = f.taxonomy.ids
    cat = {b.id: b.category for b in f.taxonomy.behaviours}
    keys = list(by)
    if f.counts.is_empty():
        return pl.DataFrame()
    order = {b: k for k, b in enumerate(beh)}
    g = f.counts.with_columns(_k=pl.col("behaviour").replace_strict(order, default=-1)) \
        .sort([*keys, "instance_id", "_k"])
    groups = g.group_by(keys, maintain_order=True).agg(n=pl.col("instance_id").n_unique(), rows=pl.len(),
                                                         kmin=pl.col("_k").min())
    mats: list[tuple[tuple, np.ndarray]] = []
    if (groups["rows"] == groups["n"] * len(beh)).all() and groups["kmin"].min() == 0:
        values = g["count"].to_numpy().astype(float)
        start = 0
        for row in groups.iter_rows(named=True):
            mats.append((tuple(row[k] for k in keys), values[start: start + row["rows"]].reshape(row["n"], len(beh))))
            start += row["rows"]
    else:  # counts not in the frames' full shape: one pivot per group
        mats = [(key, _matrix(part, beh)[1]) for key, part in f.counts.group_by(keys, maintain_order=True)]
    by_size: dict[int, list[int]] = {}
    for i, (_, m) in enumerate(mats):
        by_size.setdefault(len(m), []).append(i)
    stats_of: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for n, members in by_size.items():
        x = np.hstack([mats[i][1] for i in members])  # (n, groups * behaviours)
        mean, lo, hi = bootstrap_mean_ci(x, idx=boot_index(n, resamples, seed))
        for j, i in enumerate(members):
            sl = slice(j * len(beh), (j + 1) * len(beh))
            stats_of[i] = (mean[sl], lo[sl], hi[sl])
    rows = []
    for i, (key, m) in enumerate(mats):
        mean, lo, hi = stats_of[i]
        for k, b in enumerate(beh):
            rows.append({**dict(zip(keys, key, strict=True)), "behaviour": b, "category": cat[b], "mean": mean[k],
                         "ci_low": lo[k], "ci_high": hi[k], "n": len(m)})
    return pl.DataFrame(rows)


def figure3_means(f: Frames, judge: str, setups: list[str] | None = None, resamples: int = 1000,
                  seed: int = 0) -> pl.DataFrame:
    """Rows for Figure 3: per setup (``panel``), its mean occurrences (``series`` simulated) and
    the human reference's on the same instances (``series`` human reference), with CIs."""
    from .charts import HUMAN

    c = f.counts.filter(pl.col("judge") == judge)
    names = setups or sorted(set(c["target"].unique().to_list()) - {REFERENCE})
    parts = []
    for s in names:
        ids = c.filter(pl.col("target") == s)["instance_id"].unique()
        sub = c.filter(pl.col("instance_id").is_in(ids.implode()) & pl.col("target").is_in([s, REFERENCE]))
        m = mean_occurrences(Frames(**{**f.__dict__, "counts": sub}), resamples=resamples, seed=seed)
        if m.is_empty():
            continue
        parts.append(m.with_columns(panel=pl.lit(s), series=pl.when(pl.col("target") == REFERENCE)
                                    .then(pl.lit(HUMAN)).otherwise(pl.lit("simulated"))))
    return pl.concat(parts) if parts else pl.DataFrame()


def likert_means(f: Frames, by: tuple[str, ...] = ("judge", "target"), resamples: int = 1000,
                 seed: int = 0) -> pl.DataFrame:
    """Mean consistency and collaborativeness per group with 95% bootstrap CIs (Table 4)."""
    rows = []
    for key, g in f.likert.group_by(list(by), maintain_order=True):
        m = g.select("consistency", "collaborativeness").to_numpy().astype(float)
        mean, lo, hi = bootstrap_mean_ci(m, resamples, seed)
        for k, score in enumerate(("consistency", "collaborativeness")):
            rows.append({**dict(zip(by, key, strict=True)), "score": score, "mean": mean[k], "ci_low": lo[k],
                         "ci_high": hi[k], "n": len(m)})
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def paired_vs_human(f: Frames, judge: str, resamples: int = 1000, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """For each setup, on the instances where both it and the human reference have valid
    judgments: per-behaviour difference (sim - human) and ratio (sim / human) of means with CIs,
    and the profile distance D = sum over behaviours of |mean_sim - mean_human| (occurrences per
    conversation; 0 = the setup shows each behaviour exactly as often as the humans), with a CI.
    Instances are resampled as pairs."""
    beh = f.taxonomy.ids
    c = f.counts.filter(pl.col("judge") == judge)
    ref_ids, ref = _matrix(c.filter(pl.col("target") == REFERENCE), beh)
    ref_pos = {i: k for k, i in enumerate(ref_ids)}
    per_b, dist = [], []
    for target in sorted(set(c["target"].unique().to_list()) - {REFERENCE}):
        ids, sim = _matrix(c.filter(pl.col("target") == target), beh)
        keep = [k for k, i in enumerate(ids) if i in ref_pos]
        if not keep:
            continue
        s = sim[keep]
        h = ref[[ref_pos[ids[k]] for k in keep]]
        idx = boot_index(len(s), resamples, seed)
        bs, bh = resample_means(s, idx), resample_means(h, idx)  # the same rows for both: pairs kept
        diff = bs - bh
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bh > 0, bs / bh, np.nan)
            point_ratio = np.where(h.mean(0) > 0, s.mean(0) / h.mean(0), np.nan)
        d_lo, d_hi = np.percentile(diff, [2.5, 97.5], axis=0)
        with warnings.catch_warnings():  # a behaviour the humans never show has no ratio: NaN, said so
            warnings.simplefilter("ignore", RuntimeWarning)
            r_lo, r_hi = np.nanpercentile(np.where(np.isfinite(ratio), ratio, np.nan), [2.5, 97.5], axis=0)
        for k, b in enumerate(beh):
            per_b.append({"judge": judge, "target": target, "behaviour": b, "mean_sim": s[:, k].mean(),
                          "mean_human": h[:, k].mean(), "diff": s[:, k].mean() - h[:, k].mean(),
                          "diff_ci_low": d_lo[k], "diff_ci_high": d_hi[k], "ratio": point_ratio[k],
                          "ratio_ci_low": r_lo[k], "ratio_ci_high": r_hi[k], "n": len(s)})
        bd = np.abs(diff).sum(axis=1)
        lo, hi = np.percentile(bd, [2.5, 97.5])
        dist.append({"judge": judge, "target": target, "distance": float(np.abs(s.mean(0) - h.mean(0)).sum()),
                     "ci_low": lo, "ci_high": hi, "n": len(s)})
    return pl.DataFrame(per_b), pl.DataFrame(dist)


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Spearman correlation of (B, n) arrays (ties averaged); NaN for constant rows."""
    ra, rb = sps.rankdata(a, axis=1), sps.rankdata(b, axis=1)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    den = np.sqrt((ra * ra).sum(axis=1) * (rb * rb).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, (ra * rb).sum(axis=1) / den, np.nan)


def agreement(f: Frames, raters: list[str] | None = None, resamples: int = 1000, seed: int = 0,
              behaviour: str | None = None) -> pl.DataFrame:
    """Leave-one-out Spearman: each rater's per-conversation counts against the mean of the
    others', on the conversations all raters judged validly; averaged over raters. With a
    one-sided bootstrap over conversations: significant when the 5th percentile is above 0.
    ``behaviour=None`` correlates the total count of all behaviours."""
    c = f.counts if behaviour is None else f.counts.filter(pl.col("behaviour") == behaviour)
    tot = c.group_by("judge", "instance_id", "target").agg(pl.col("count").sum())
    raters = raters or sorted(tot["judge"].unique().to_list())
    wide = tot.with_columns(unit=pl.col("instance_id") + "|" + pl.col("target")) \
        .pivot(on="judge", index="unit", values="count", aggregate_function="first").drop_nulls(raters)
    if len(raters) < 2 or wide.height < 3:
        return pl.DataFrame()
    x = wide.select(raters).to_numpy().astype(float)  # (n_units, n_raters)
    idx = np.vstack([np.arange(len(x)), boot_index(len(x), resamples, seed)])  # row 0 = the sample itself
    xb = x[idx]  # (B+1, n, R)
    rows, per_rater = [], []
    for r in range(len(raters)):
        others = np.delete(xb, r, axis=2).mean(axis=2)
        per_rater.append(_spearman_rows(xb[:, :, r], others))
    per_rater_arr = np.array(per_rater)  # (R, B+1)
    mean_rho = np.nanmean(per_rater_arr, axis=0)
    for r, name in enumerate([*raters, "average (leave-one-out)"]):
        series = per_rater_arr[r] if r < len(raters) else mean_rho
        boot = series[1:][np.isfinite(series[1:])]
        p5 = float(np.percentile(boot, 5)) if len(boot) else np.nan
        rows.append({"rater": name, "behaviour": behaviour or "all", "rho": float(series[0]), "p5": p5,
                     "p95": float(np.percentile(boot, 95)) if len(boot) else np.nan,
                     "significant": bool(p5 > 0), "n": len(x)})
    return pl.DataFrame(rows)


def judge_vs_humans(f: Frames, judge: str, resamples: int = 1000, seed: int = 0) -> pl.DataFrame:
    """Spearman of a judge's per-conversation counts against the mean of the human annotators',
    per behaviour and overall, with the one-sided bootstrap test."""
    humans = sorted(f.counts.filter(pl.col("human"))["judge"].unique().to_list())
    out = []
    for b in [None, *f.taxonomy.ids]:
        c = f.counts if b is None else f.counts.filter(pl.col("behaviour") == b)
        tot = c.group_by("judge", "instance_id", "target").agg(pl.col("count").sum())
        wide = tot.with_columns(unit=pl.col("instance_id") + "|" + pl.col("target")) \
            .pivot(on="judge", index="unit", values="count", aggregate_function="first").drop_nulls([judge, *humans])
        if not humans or wide.height < 3:
            continue
        j = wide[judge].to_numpy().astype(float)
        h = wide.select(humans).to_numpy().astype(float).mean(axis=1)
        idx = np.vstack([np.arange(len(j)), boot_index(len(j), resamples, seed)])
        rho = _spearman_rows(j[idx], h[idx])
        boot = rho[1:][np.isfinite(rho[1:])]
        p5 = float(np.percentile(boot, 5)) if len(boot) else np.nan
        out.append({"judge": judge, "behaviour": b or "all", "rho": float(rho[0]), "p5": p5,
                    "significant": bool(p5 > 0), "n": len(j), "humans": len(humans)})
    return pl.DataFrame(out)


def detections(f: Frames) -> pl.DataFrame:
    """Total detections per behaviour per judge/annotator and target (Tables 3, 9, 10)."""
    return f.counts.group_by("judge", "target", "behaviour", "category").agg(
        total=pl.col("count").sum(), conversations=pl.col("instance_id").n_unique()).sort("judge", "target", "behaviour")


def participants_correlation(f: Frames, judge: str, target: str = REFERENCE) -> pl.DataFrame:
    """Spearman between behaviour counts and the number of participants, per dataset (Table 12);
    'all' is the total count of all behaviours."""
    c = f.counts.filter((pl.col("judge") == judge) & (pl.col("target") == target))
    c = pl.concat([c.select("instance_id", "dataset", "behaviour", "count"),
                   c.group_by("instance_id", "dataset").agg(pl.col("count").sum()).with_columns(
                       behaviour=pl.lit("all")).select("instance_id", "dataset", "behaviour", "count")])
    c = c.join(f.instances.select("instance_id", "n_participants"), on="instance_id")
    rows = []
    for (ds, b), g in c.group_by("dataset", "behaviour", maintain_order=True):
        x, y = g["n_participants"].to_numpy(), g["count"].to_numpy()
        if len(g) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
            res = sps.spearmanr(x, y)
            rho, p = float(res.statistic), float(res.pvalue)
        else:
            rho = p = float("nan")
        rows.append({"judge": judge, "target": target, "dataset": ds, "behaviour": b, "rho": rho, "p_value": p,
                     "n": len(g)})
    return pl.DataFrame(rows).sort("dataset", "behaviour") if rows else pl.DataFrame()
