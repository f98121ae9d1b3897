"""Statistics with honest uncertainty: bootstrap CIs over instances (vectorised, seeded),
paired human-vs-simulated comparisons, leave-one-out Spearman agreement, participant counts.

Units: a *conversation* is one target (the human reference or one continuation) of one
instance; resampling is always over instances, so paired quantities keep their pairs.
Every table carries ``n`` (instances used); invalid judgments are excluded, never zeroed
(see ``frames.invalid_rates`` for their rates). An interval over fewer than ``min_n`` instances, or
whose resamples are all equal, is undefined: ``ci_low``/``ci_high`` null and ``ci_note`` says why.
Over/under-production verdicts come from a paired sign-flip test corrected over behaviours x
setups (see ``inference``); agreement (``agreement``) is the paper's: leave-one-out Spearman among
the human annotators and of each judge against them, one-sided bootstrap, uncorrected.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, TypedDict

import numpy as np
import polars as pl

from cocoeval.core.targets import REFERENCE

from .frames import HUMAN, Frames, validity_note
from .inference import (
    ALPHA,
    FLIPS,
    MIN_N,
    adjust_pvalues,
    check_params,
    ci_notes,
    interval,
    sign_flip_blocks,
    sign_flip_pvalues,
    verdict,
)
from .store import made_once

PERCENTILES = [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)]


_DRAWS: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray | None]] = {}
"""``boot_index``'s draws by (n, resamples, seed), each with its draw counts once computed."""
_DRAWS_MAX_BYTES = 256_000_000


def boot_index(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) indices drawn with replacement; the same seed gives the same draws. Drawn
    once per process for each (n, resamples, seed) and returned read-only: a report resamples
    hundreds of tables over a few numbers of instances."""
    key = (n, resamples, seed)
    hit = _DRAWS.get(key)
    if hit is not None:
        return hit[0]
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    idx.setflags(write=False)
    while _DRAWS and sum(i.nbytes * 2 for i, _ in _DRAWS.values()) + idx.nbytes * 2 > _DRAWS_MAX_BYTES:
        del _DRAWS[next(iter(_DRAWS))]  # the oldest
    _DRAWS[key] = (idx, None)
    return idx


def with_sample(n: int, resamples: int, seed: int) -> np.ndarray:
    """(1 + resamples, n) row indices: row 0 the sample itself, then ``boot_index``'s draws (the
    point estimate and its resamples in one computation)."""
    return np.vstack([np.arange(n), boot_index(n, resamples, seed)])


def _draw_counts(idx: np.ndarray) -> np.ndarray:
    """(B, n) float64: how often each resample of ``idx`` draws each row; kept beside the draws
    of ``boot_index``, computed for any other ``idx``."""
    key = next((k for k, (i, _) in _DRAWS.items() if i is idx), None)
    w = _DRAWS[key][1] if key is not None else None
    if w is None:
        b, n = idx.shape
        w = np.bincount((idx + np.arange(b)[:, None] * n).ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
        if key is not None:
            w.setflags(write=False)
            _DRAWS[key] = (idx, w)
    return w


def resample_means(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Means of ``x`` (n, k) over each resample of rows in ``idx`` (B, n), as (B, k): how often
    each row is drawn (bincount) times the rows, one matrix product instead of a (B, n, k) copy."""
    return (_draw_counts(idx) @ x) / idx.shape[1]  # float: the BLAS path


def bootstrap_mean_ci(
    x: np.ndarray, resamples: int = 1000, seed: int = 0, idx: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column means of ``x`` (n, k) with percentile 95% CIs from resampling rows."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if idx is None:
        idx = boot_index(len(x), resamples, seed)
    boot = resample_means(x, idx)  # (B, k)
    lo, hi = np.percentile(boot, PERCENTILES, axis=0)
    return x.mean(axis=0), lo, hi


def _ci_rows(n: int, mean: np.ndarray, boot: np.ndarray, min_n: int) -> list[dict]:
    """Per column: mean, the interval (None when undefined), its note and n."""
    lo, hi = np.percentile(boot, PERCENTILES, axis=0)
    rows = []
    for k, note in enumerate(ci_notes(n, boot, min_n)):
        a, b = interval(lo[k], hi[k], note)
        rows.append({"mean": float(mean[k]), "ci_low": a, "ci_high": b, "ci_note": note, "n": n})
    return rows


CI_SCHEMA = {"mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.Utf8}


def _in_behaviour_order(counts: pl.DataFrame, behaviours: list[str], keys: list[str]) -> pl.DataFrame:
    """``counts`` sorted by ``keys``, instance and the behaviour's position in ``behaviours``
    (column ``_k``; -1 for a behaviour not in it), in one query."""
    order = {b: k for k, b in enumerate(behaviours)}
    return (
        counts.lazy()
        .with_columns(_k=pl.col("behaviour").replace_strict(order, default=-1))
        .sort([*keys, "instance_id", "_k"])
        .collect()
    )


def count_matrix(counts: pl.DataFrame, behaviours: list[str]) -> tuple[list[str], np.ndarray]:
    """One group's counts as (instances, behaviours)."""
    n_inst = counts["instance_id"].n_unique()
    if counts.height == n_inst * len(behaviours) and counts.height:  # the frames' shape: every behaviour per judgment
        # sorted by instance and the behaviour's position in numpy (called per group: hundreds in a
        # report; a polars query each cost 3 ms): NumPy orders strings by code point, as polars by UTF-8 bytes
        order = {b: k for k, b in enumerate(behaviours)}
        k = np.array([order.get(b, -1) for b in counts["behaviour"].to_list()])
        if k.min() == 0:
            ids = np.array(counts["instance_id"].to_list())
            idx = np.lexsort((k, ids))
            return ids[idx][:: len(behaviours)].tolist(), counts["count"].to_numpy()[idx].astype(float).reshape(
                n_inst, len(behaviours)
            )
    wide = counts.pivot(on="behaviour", index="instance_id", values="count", aggregate_function="first").sort(
        "instance_id"
    )
    for b in behaviours:
        if b not in wide.columns:
            wide = wide.with_columns(pl.lit(0).alias(b))
    return wide["instance_id"].to_list(), wide.select(behaviours).to_numpy().astype(float)


def mean_occurrences(
    f: Frames, by: tuple[str, ...] = ("judge", "target"), resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> pl.DataFrame:
    """Mean occurrences per conversation of each behaviour, per group, with 95% bootstrap CIs
    (undefined below ``min_n`` instances or when every resample is equal). Groups of the same
    size share the seeded draws and are resampled in one matrix product."""
    check_params(resamples=resamples, min_n=min_n)
    beh = f.taxonomy.ids
    cat = {b.id: b.category for b in f.taxonomy.behaviours}
    keys = list(by)
    if f.counts.is_empty():
        return pl.DataFrame()
    g = _in_behaviour_order(f.counts, beh, keys)
    groups = g.group_by(keys, maintain_order=True).agg(
        n=pl.col("instance_id").n_unique(), rows=pl.len(), kmin=pl.col("_k").min()
    )
    mats: list[tuple[tuple, np.ndarray]] = []
    if (groups["rows"] == groups["n"] * len(beh)).all() and groups["kmin"].min() == 0:
        values = g["count"].to_numpy().astype(float)
        start = 0
        for row in groups.iter_rows(named=True):
            mats.append((tuple(row[k] for k in keys), values[start : start + row["rows"]].reshape(row["n"], len(beh))))
            start += row["rows"]
    else:  # counts not in the frames' full shape: one pivot per group
        mats = [(key, count_matrix(part, beh)[1]) for key, part in f.counts.group_by(keys, maintain_order=True)]
    by_size: dict[int, list[int]] = {}
    for i, (_, m) in enumerate(mats):
        by_size.setdefault(len(m), []).append(i)
    stats_of: dict[int, list[dict]] = {}
    for n, members in by_size.items():
        x = np.hstack([mats[i][1] for i in members])  # (n, groups * behaviours)
        cells = _ci_rows(n, x.mean(axis=0), resample_means(x, boot_index(n, resamples, seed)), min_n)
        for j, i in enumerate(members):
            stats_of[i] = cells[j * len(beh) : (j + 1) * len(beh)]
    rows = []
    for i, (key, _) in enumerate(mats):
        for k, b in enumerate(beh):
            rows.append({**dict(zip(keys, key, strict=True)), "behaviour": b, "category": cat[b], **stats_of[i][k]})
    return pl.DataFrame(rows, schema_overrides=CI_SCHEMA)


def figure3_means(
    f: Frames, judge: str, setups: list[str] | None = None, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> pl.DataFrame:
    """Rows for Figure 3: per setup (``panel``), its mean occurrences (``series`` simulated) and
    the human reference's on the same instances (``series`` human reference), with CIs."""
    c = f.counts.filter(pl.col("judge") == judge)
    names = setups or sorted(set(c["target"].unique().to_list()) - {REFERENCE})
    with_ref = set(c.filter(pl.col("target") == REFERENCE)["instance_id"].to_list())
    parts = []
    for s in names:
        # a report asks for the same panels three times (Figure 3, RQ5, the paper's tables)
        what = ("figure3_panel", f.taxonomy.hash, judge, s, resamples, seed, min_n)
        panel = made_once(f.counts, what, functools.partial(_panel, f, c, with_ref, s, resamples, seed, min_n))
        if panel is not None:
            parts.append(panel)
    return pl.concat(parts) if parts else pl.DataFrame()


def _panel(
    f: Frames, c: pl.DataFrame, with_ref: set[str], s: str, resamples: int, seed: int, min_n: int
) -> pl.DataFrame | None:
    """Setup ``s``'s panel of Figure 3 (None: nothing to show), on the instances where both the
    setup's and the reference's judgments are valid."""
    ids = pl.Series(sorted(set(c.filter(pl.col("target") == s)["instance_id"].to_list()) & with_ref), dtype=pl.Utf8)
    sub = c.filter(pl.col("instance_id").is_in(ids.implode()) & pl.col("target").is_in([s, REFERENCE]))
    m = mean_occurrences(Frames(**{**f.__dict__, "counts": sub}), resamples=resamples, seed=seed, min_n=min_n)
    if m.is_empty():
        return None
    return m.with_columns(
        panel=pl.lit(s),
        series=pl.when(pl.col("target") == REFERENCE).then(pl.lit(HUMAN)).otherwise(pl.lit("simulated")),
    )


def likert_means(
    f: Frames, by: tuple[str, ...] = ("judge", "target"), resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> pl.DataFrame:
    """Mean consistency and collaborativeness per group with 95% bootstrap CIs (Table 4),
    undefined below ``min_n`` instances or when every resample is equal."""
    check_params(resamples=resamples, min_n=min_n)
    rows = []
    for key, g in f.likert.group_by(list(by), maintain_order=True):
        m = g.select("consistency", "collaborativeness").to_numpy().astype(float)
        cells = _ci_rows(len(m), m.mean(axis=0), resample_means(m, boot_index(len(m), resamples, seed)), min_n)
        for k, score in enumerate(("consistency", "collaborativeness")):
            rows.append({**dict(zip(by, key, strict=True)), "score": score, **cells[k]})
    return pl.DataFrame(rows, schema_overrides=CI_SCHEMA) if rows else pl.DataFrame()


PAIRED_SCHEMA = {
    "judge": pl.Utf8,
    "target": pl.Utf8,
    "behaviour": pl.Utf8,
    "mean_sim": pl.Float64,
    "mean_human": pl.Float64,
    "diff": pl.Float64,
    "diff_ci_low": pl.Float64,
    "diff_ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "ratio": pl.Float64,
    "ratio_ci_low": pl.Float64,
    "ratio_ci_high": pl.Float64,
    "ratio_ci_note": pl.Utf8,
    "n": pl.Int64,
    "p": pl.Float64,
    "p_adj": pl.Float64,
    "correction": pl.Utf8,
    "family": pl.Int64,
    "verdict": pl.Utf8,
}
DISTANCE_SCHEMA = {
    "judge": pl.Utf8,
    "target": pl.Utf8,
    "distance": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "n": pl.Int64,
}


class PairedDifferences(TypedDict):
    """What ``paired_differences`` returns: per behaviour (k,) arrays and notes; D's (B,) resamples."""

    diff: np.ndarray
    diff_lo: np.ndarray
    diff_hi: np.ndarray
    notes: list[str | None]
    ratio: np.ndarray
    ratio_lo: np.ndarray
    ratio_hi: np.ndarray
    ratio_notes: list[str | None]
    p: np.ndarray
    distance_boot: np.ndarray


def _finite_percentiles(x: np.ndarray) -> np.ndarray:
    """``PERCENTILES`` of each column of (B, k) ``x`` over its finite values (NaN for a column with
    none): ``np.nanpercentile`` with infinities as NaN, the same values, but ``np.percentile`` on
    the columns that are finite throughout (nanpercentile goes column by column in Python)."""
    finite = np.isfinite(x)
    whole = finite.all(axis=0)
    out = np.full((len(PERCENTILES), x.shape[1]), np.nan)
    if whole.any():
        out[:, whole] = np.percentile(x[:, whole], PERCENTILES, axis=0)
    if not whole.all():
        with warnings.catch_warnings():  # a behaviour the humans never show has no ratio: NaN, said so
            warnings.simplefilter("ignore", RuntimeWarning)
            out[:, ~whole] = np.nanpercentile(np.where(finite, x, np.nan)[:, ~whole], PERCENTILES, axis=0)
    return out


def paired_differences(
    s: np.ndarray,
    h: np.ndarray,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
    flips: int = FLIPS,
    test: bool = True,
) -> PairedDifferences:
    """One setup's (n, k) simulated and human counts on the same instances: per behaviour the
    difference of means with its paired bootstrap interval (rows resampled as pairs), the ratio,
    the raw sign-flip p (NaN below ``min_n``: not tested), and the profile distance D's resamples.
    ``test=False`` leaves ``p`` NaN: a caller testing many blocks tests them together
    (``fill_tested``, ``inference.sign_flip_blocks``: the same p-values)."""
    n = len(s)
    idx = boot_index(n, resamples, seed)
    bs, bh = resample_means(s, idx), resample_means(h, idx)  # the same rows for both: pairs kept
    diff = bs - bh
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(bh > 0, bs / bh, np.nan)
        point_ratio = np.where(h.mean(0) > 0, s.mean(0) / h.mean(0), np.nan)
    r_lo, r_hi = _finite_percentiles(ratio)
    d_lo, d_hi = np.percentile(diff, PERCENTILES, axis=0)
    p = sign_flip_pvalues(s - h, flips, seed) if n >= min_n and test else np.full(s.shape[1], np.nan)
    # a resample where the humans show the behaviour 0 times has no finite ratio (x/0 is unbounded,
    # 0/0 undefined): dropping those resamples would give a finite interval to an unbounded ratio
    zero = (bh <= 0).sum(axis=0)
    ratio_notes = [
        note or (f"human mean 0 in {z} of {len(bh)} resamples (ratio unbounded or undefined there)" if z else None)
        for note, z in zip(ci_notes(n, ratio, min_n), zero, strict=True)
    ]
    return {
        "diff": s.mean(0) - h.mean(0),
        "diff_lo": d_lo,
        "diff_hi": d_hi,
        "notes": ci_notes(n, diff, min_n),
        "ratio": point_ratio,
        "ratio_lo": r_lo,
        "ratio_hi": r_hi,
        "ratio_notes": ratio_notes,
        "p": p,
        "distance_boot": np.abs(diff).sum(axis=1),
    }


def fill_tested(
    rows: list[dict[str, Any]],
    blocks: list[tuple[int, np.ndarray, np.ndarray]],
    flips: int = FLIPS,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
) -> None:
    """Set ``p`` in ``rows``: for each ``(first, s, h)`` of ``blocks``, the raw sign-flip p of
    ``paired_differences(s, h)``'s k columns into ``rows[first:first + k]`` (None below ``min_n``:
    not tested), every block of one length tested in one pass (``inference.sign_flip_blocks``)."""
    todo = [b for b in blocks if len(b[1]) >= min_n]
    for (first, _s, _h), p in zip(todo, sign_flip_blocks([s - h for _, s, h in todo], flips, seed), strict=True):
        for k, v in enumerate(p):
            rows[first + k]["p"] = float(v) if np.isfinite(v) else None
    for first, s, _ in blocks:
        for row in rows[first : first + s.shape[1]]:
            row.setdefault("p", None)


def paired_vs_human(
    f: Frames,
    judge: str,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
    correction: str = "bh",
    flips: int = FLIPS,
    alpha: float = ALPHA,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """For each setup, on the instances where both it and the human reference have valid
    judgments: per-behaviour difference (sim - human) and ratio (sim / human) of means with CIs,
    and the profile distance D = sum over behaviours of |mean_sim - mean_human| (occurrences per
    conversation; 0 = the setup shows each behaviour exactly as often as the humans), with a CI.
    Instances are resampled as pairs. Each behaviour x setup with at least ``min_n`` instances is
    tested (paired sign-flip, raw ``p``); ``p_adj`` corrects the family of every tested behaviour x
    setup of this judge (``correction``: bh, holm or none) and ``verdict`` says over-produces,
    under-produces or no significant difference at ``alpha`` (null: not tested, n too small).
    Made once per ``f`` and settings in a process (``made_once``: the report and RQ5 both ask)."""
    check_params(resamples=resamples, min_n=min_n, correction=correction, flips=flips)
    what = ("paired_vs_human", judge, resamples, seed, min_n, correction, flips, alpha)
    return made_once(
        f,
        what,
        lambda: _paired_vs_human(
            f, judge, resamples, seed, min_n=min_n, correction=correction, flips=flips, alpha=alpha
        ),
    )


def _paired_vs_human(
    f: Frames, judge: str, resamples: int, seed: int, *, min_n: int, correction: str, flips: int, alpha: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    beh = f.taxonomy.ids
    c = f.counts.filter(pl.col("judge") == judge)
    ref_ids, ref = count_matrix(c.filter(pl.col("target") == REFERENCE), beh)
    ref_pos = {i: k for k, i in enumerate(ref_ids)}
    per_b: list[dict[str, Any]] = []
    dist: list[dict[str, Any]] = []
    blocks: list[tuple[int, np.ndarray, np.ndarray]] = []
    for target in _judged_targets(f, judge):
        part = c.filter(pl.col("target") == target)
        ids, sim = count_matrix(part, beh) if part.height else ([], None)
        keep = [k for k, i in enumerate(ids) if i in ref_pos]
        if not keep:  # judged (or expected) but nothing to pair: a row saying why, never left out
            why = (
                f"no instance where both {target} and the human reference have a valid judgment by {judge} ("
                f"{validity_note(f, judge, target)}; {validity_note(f, judge, REFERENCE)})"
            )
            per_b += [
                {
                    "judge": judge,
                    "target": target,
                    "behaviour": b,
                    "ci_note": why,
                    "ratio_ci_note": why,
                    "n": 0,
                    "p": None,
                }
                for b in beh
            ]
            dist.append({"judge": judge, "target": target, "ci_note": why, "n": 0})
            continue
        assert sim is not None  # keep is not empty: part has rows
        s = sim[keep]
        h = ref[[ref_pos[ids[k]] for k in keep]]
        r = paired_differences(s, h, resamples, seed, min_n=min_n, flips=flips, test=False)
        blocks.append((len(per_b), s, h))  # tested below, with the other setups of its length
        for k, b in enumerate(beh):
            d_lo, d_hi = interval(r["diff_lo"][k], r["diff_hi"][k], r["notes"][k])
            q_lo, q_hi = interval(r["ratio_lo"][k], r["ratio_hi"][k], r["ratio_notes"][k])
            per_b.append(
                {
                    "judge": judge,
                    "target": target,
                    "behaviour": b,
                    "mean_sim": s[:, k].mean(),
                    "mean_human": h[:, k].mean(),
                    "diff": r["diff"][k],
                    "diff_ci_low": d_lo,
                    "diff_ci_high": d_hi,
                    "ci_note": r["notes"][k],
                    "ratio": r["ratio"][k] if np.isfinite(r["ratio"][k]) else None,
                    "ratio_ci_low": q_lo,
                    "ratio_ci_high": q_hi,
                    "ratio_ci_note": r["ratio_notes"][k],
                    "n": len(s),
                }
            )
        note = ci_notes(len(s), r["distance_boot"][:, None], min_n)[0]
        p_lo, p_hi = np.percentile(r["distance_boot"], PERCENTILES)
        lo, hi = interval(p_lo, p_hi, note)
        dist.append(
            {
                "judge": judge,
                "target": target,
                "distance": float(np.abs(s.mean(0) - h.mean(0)).sum()),
                "ci_low": lo,
                "ci_high": hi,
                "ci_note": note,
                "n": len(s),
            }
        )
    fill_tested(per_b, blocks, flips, seed, min_n=min_n)
    p = np.array([np.nan if row["p"] is None else row["p"] for row in per_b])
    p_adj = adjust_pvalues(p, correction)
    family = int(np.isfinite(p).sum())
    for row, q in zip(per_b, p_adj, strict=True):
        tested = bool(np.isfinite(q))
        row.update(
            p_adj=float(q) if tested else None,
            correction=correction,
            family=family,
            verdict=verdict(row["diff"], q, alpha) if tested else None,
        )
    return pl.DataFrame(per_b, schema=PAIRED_SCHEMA), pl.DataFrame(dist, schema=DISTANCE_SCHEMA)


def _judged_targets(f: Frames, judge: str) -> list[str]:
    """The setups ``judge`` judged fine-grained (valid or not) or the params expect it to judge."""
    mine = (pl.col("judge") == judge) & (pl.col("kind") == "fine_grained") & (pl.col("target") != REFERENCE)
    return sorted(
        set(f.counts.filter((pl.col("judge") == judge) & (pl.col("target") != REFERENCE))["target"].to_list())
        | set(f.judgments.filter(mine & (pl.col("status") != "stale"))["target"].to_list())
        | set(f.expected.filter(mine & (pl.col("stage") == "judge"))["target"].to_list())
    )


def detections(f: Frames) -> pl.DataFrame:
    """Total detections per behaviour per judge/annotator and target (Tables 3, 9, 10)."""
    return (
        f.counts.group_by("judge", "target", "behaviour", "category")
        .agg(total=pl.col("count").sum(), conversations=pl.col("instance_id").n_unique())
        .sort("judge", "target", "behaviour")
    )
