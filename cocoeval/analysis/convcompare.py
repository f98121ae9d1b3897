"""Judge-free statistics (``convstats``) with honest uncertainty: means per target with bootstrap
CIs, paired human-vs-setup differences with the sign-flip test corrected over statistics x
setups, and the *judge sanity* table (each judge's per-conversation counts against the closest
judge-free statistic).

As in ``stats``: resampling is over instances (pairs kept), intervals below ``min_n`` instances or
with every resample equal are undefined (null, ``ci_note`` says why), and a conversation whose
statistic is undefined is left out of that statistic (``undefined`` counts it), never zeroed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from cocoeval.core.targets import REFERENCE

from . import agreement, inference, stats
from .convstats import HISTORY, STATISTICS, TURN_TAKING, conversation_frame
from .frames import Frames
from .store import RunLike, derived_frame

HIGHER, LOWER = "higher than humans", "lower than humans"
VERDICT_WORDS = {inference.OVER: HIGHER, inference.UNDER: LOWER, inference.NO_DIFF: inference.NO_DIFF}

MEANS_SCHEMA = {
    "target": pl.Utf8,
    "statistic": pl.Utf8,
    "mean": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "n": pl.Int64,
    "undefined": pl.Int64,
}
PAIRED_SCHEMA = {
    "target": pl.Utf8,
    "statistic": pl.Utf8,
    "mean_sim": pl.Float64,
    "mean_human": pl.Float64,
    "diff": pl.Float64,
    "diff_ci_low": pl.Float64,
    "diff_ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "n": pl.Int64,
    "p": pl.Float64,
    "p_adj": pl.Float64,
    "correction": pl.Utf8,
    "family": pl.Int64,
    "verdict": pl.Utf8,
}
SANITY_SCHEMA = {
    "judge": pl.Utf8,
    "behaviour": pl.Utf8,
    "statistic": pl.Utf8,
    "expected": pl.Utf8,
    "rho": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "n": pl.Int64,
    "check": pl.Utf8,
}

SANITY_PAIRS: list[tuple[str, str, int]] = [
    ("repetition", "rep_any", +1),  # restating what was said <-> trigrams already said by anyone
    ("redundant_information", "tokens_per_turn", +1),  # saying more than needed <-> longer turns
    ("off_topic", "goal_overlap", -1),  # departing from the goals <-> fewer goal words
    ("under_answering", "answered_share", -1),  # questions left unanswered <-> fewer answered questions
]
"""(behaviour, the closest judge-free statistic, the expected sign of their correlation)."""


@derived_frame("judge_free_means", MEANS_SCHEMA, lazy=True)
def run_means(run: RunLike, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N) -> pl.DataFrame:
    """``means`` of the run's judge-free statistics (``convstats.conversation_frame``); that of the
    default settings kept with the run's frames (``store.derived_frame``)."""
    return means(conversation_frame(run), resamples=resamples, seed=seed, min_n=min_n)


@derived_frame("judge_free_vs_human", PAIRED_SCHEMA, lazy=True)
def run_vs_human(
    run: RunLike, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N, correction: str = "bh"
) -> pl.DataFrame:
    """``paired_vs_human`` of the run's judge-free statistics; that of the default settings kept
    with the run's frames."""
    return paired_vs_human(conversation_frame(run), resamples=resamples, seed=seed, min_n=min_n, correction=correction)


@derived_frame("judge_sanity", SANITY_SCHEMA, by_taxonomy=True, lazy=True)
def run_judge_sanity(
    run: RunLike, f: Frames, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """``judge_sanity`` of the frames ``f`` and the run's judge-free statistics; for the run's own
    frames, that of the default settings kept with them."""
    return judge_sanity(f, conversation_frame(run), resamples=resamples, seed=seed, min_n=min_n)


def _stat_names(conv: pl.DataFrame, statistics: list[str] | None) -> list[str]:
    return [s for s in (statistics or list(STATISTICS)) if s in conv.columns]


def means(
    conv: pl.DataFrame,
    *,
    statistics: list[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
) -> pl.DataFrame:
    """Mean of each statistic per target over the conversations where it is defined, with a 95%
    percentile bootstrap CI over instances."""
    inference.check_params(resamples=resamples, min_n=min_n)
    rows = []
    for (target,), g in conv.group_by(["target"], maintain_order=True):
        for s in _stat_names(conv, statistics):
            col = g[s]
            x = (col.drop_nulls() if col.has_nulls() else col).to_numpy().astype(float)  # (a query when it drops)
            row = {"target": target, "statistic": s, "n": len(x), "undefined": g.height - len(x)}
            if len(x) == 0:
                rows.append(
                    {**row, "mean": None, "ci_low": None, "ci_high": None, "ci_note": "undefined in every conversation"}
                )
                continue
            boot = stats.resample_means(x[:, None], stats.boot_index(len(x), resamples, seed))
            note = inference.ci_notes(len(x), boot, min_n)[0]
            p_lo, p_hi = np.percentile(boot[:, 0], stats.PERCENTILES)
            lo, hi = inference.interval(p_lo, p_hi, note)
            rows.append({**row, "mean": float(x.mean()), "ci_low": lo, "ci_high": hi, "ci_note": note})
    out = pl.DataFrame(rows, schema=MEANS_SCHEMA) if rows else pl.DataFrame(schema=MEANS_SCHEMA)
    order = {t: k for k, t in enumerate([REFERENCE, *sorted(set(out["target"].to_list()) - {REFERENCE})])}
    return out.sort(pl.col("target").replace_strict(order, default=len(order)), maintain_order=True)


def turn_taking(
    tt: pl.DataFrame, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """Turn-taking realism per target (each setup, and ``HISTORY`` first): the mean over instances
    of each measure of ``TURN_TAKING`` (``convstats.turn_taking_frame``: each continuation against
    the human reference of its own instance, so the pairing is in every row), with a 95% percentile
    bootstrap CI over instances; ``undefined``: instances where the measure is undefined, left out."""
    m = means(tt, statistics=list(TURN_TAKING), resamples=resamples, seed=seed, min_n=min_n)
    return m.sort(pl.col("target") != HISTORY, maintain_order=True)


def paired_vs_human(
    conv: pl.DataFrame,
    *,
    statistics: list[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
    flips: int = inference.FLIPS,
    alpha: float = inference.ALPHA,
) -> pl.DataFrame:
    """Per setup and statistic, on the instances where both the setup's continuation and the human
    reference have the statistic defined: the difference of means (setup - human) with its paired
    bootstrap CI, the raw two-sided paired sign-flip ``p`` (not tested below ``min_n``), ``p_adj``
    corrected over the family of every tested statistic x setup, and the verdict (higher / lower
    than humans, no significant difference; null when not tested)."""
    inference.check_params(resamples=resamples, min_n=min_n, correction=correction, flips=flips)
    names = _stat_names(conv, statistics)
    ref = conv.filter(pl.col("target") == REFERENCE)
    rows: list[dict[str, Any]] = []
    blocks: list[tuple[int, np.ndarray, np.ndarray]] = []
    for target in sorted(set(conv["target"].unique().to_list()) - {REFERENCE}):
        sim = conv.filter(pl.col("target") == target)
        both = sim.join(ref, on="instance_id", suffix="_h").sort("instance_id")
        for s in names:
            sa, sb = both[s], both[f"{s}_h"]
            if sa.has_nulls() or sb.has_nulls():  # (a query: only then)
                pair = both.select(s, f"{s}_h").drop_nulls()
                sa, sb = pair[s], pair[f"{s}_h"]
            if sa.is_empty():
                continue
            a, b = sa.to_numpy().astype(float)[:, None], sb.to_numpy().astype(float)[:, None]
            r = stats.paired_differences(a, b, resamples, seed, min_n=min_n, flips=flips, test=False)
            blocks.append((len(rows), a, b))  # tested below, with the other statistics of its length
            lo, hi = inference.interval(r["diff_lo"][0], r["diff_hi"][0], r["notes"][0])
            rows.append(
                {
                    "target": target,
                    "statistic": s,
                    "mean_sim": float(a.mean()),
                    "mean_human": float(b.mean()),
                    "diff": float(r["diff"][0]),
                    "diff_ci_low": lo,
                    "diff_ci_high": hi,
                    "ci_note": r["notes"][0],
                    "n": len(a),
                }
            )
    stats.fill_tested(rows, blocks, flips, seed, min_n=min_n)
    p = np.array([np.nan if x["p"] is None else x["p"] for x in rows])
    p_adj = inference.adjust_pvalues(p, correction)
    family = int(np.isfinite(p).sum())
    for row, q in zip(rows, p_adj, strict=True):
        tested = bool(np.isfinite(q))
        v = inference.verdict(row["diff"], q, alpha) if tested else None
        row.update(
            p_adj=float(q) if tested else None,
            correction=correction,
            family=family,
            verdict=VERDICT_WORDS.get(v) if v else None,
        )
    return pl.DataFrame(rows, schema=PAIRED_SCHEMA) if rows else pl.DataFrame(schema=PAIRED_SCHEMA)


def judge_sanity(
    f: Frames, conv: pl.DataFrame, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """For each LLM judge (and human annotator) and each pair of ``SANITY_PAIRS`` in the taxonomy:
    Spearman rho between the judge's per-conversation count of the behaviour and the judge-free
    statistic, over every conversation (reference or continuation) the judge judged validly and
    where the statistic is defined, with a 95% percentile bootstrap CI over conversations.
    ``check``: "as expected" when the CI lies on the expected side of 0, "opposite" on the other
    side, "unclear" when it holds 0; null when undefined. A descriptive check, not a test: a judge
    answering at random gives rho near 0 on enough conversations."""
    inference.check_params(resamples=resamples, min_n=min_n)
    known = set(f.taxonomy.ids)
    rows = []
    draws: dict[int, np.ndarray] = {}  # ``stats.with_sample`` per number of conversations, drawn once
    for judge in f.counts["judge"].unique(maintain_order=True).to_list():
        c = f.counts.filter(pl.col("judge") == judge)
        for beh, s, sign in SANITY_PAIRS:
            if beh not in known or s not in conv.columns:
                continue
            d = (
                c.filter(pl.col("behaviour") == beh)
                .select("target", "instance_id", "count")
                .join(conv.select("target", "instance_id", s), on=["target", "instance_id"])
                .drop_nulls()
            )
            row = {
                "judge": judge,
                "behaviour": beh,
                "statistic": s,
                "expected": "+" if sign > 0 else "−",
                "n": d.height,
            }
            if d.height < 3:
                rows.append(
                    {
                        **row,
                        "rho": None,
                        "ci_low": None,
                        "ci_high": None,
                        "ci_note": inference.too_small(d.height, max(3, min_n)),
                        "check": None,
                    }
                )
                continue
            x, y = d["count"].to_numpy().astype(float), d[s].to_numpy().astype(float)
            idx = draws.get(len(x))
            if idx is None:
                idx = draws[len(x)] = stats.with_sample(len(x), resamples, seed)
            rho = agreement.spearman_boot(x, y, idx)  # = spearman_rows(x[idx], y[idx]), bit for bit
            boot = rho[1:][np.isfinite(rho[1:])]
            point = float(rho[0]) if np.isfinite(rho[0]) else None
            note = inference.too_small(len(x), min_n) or (
                "undefined: the judge's count or the statistic is constant"
                if point is None or not len(boot)
                else inference.ci_notes(len(x), boot[:, None], min_n)[0]
            )
            lo, hi = (None, None) if note else (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))
            check = (
                None
                if lo is None or hi is None
                else (
                    "as expected"
                    if (lo > 0 if sign > 0 else hi < 0)
                    else "opposite"
                    if (hi < 0 if sign > 0 else lo > 0)
                    else "unclear"
                )
            )
            rows.append({**row, "rho": point, "ci_low": lo, "ci_high": hi, "ci_note": note, "check": check})
    return pl.DataFrame(rows, schema=SANITY_SCHEMA) if rows else pl.DataFrame(schema=SANITY_SCHEMA)
