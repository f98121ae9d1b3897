"""Agreement between human annotators and LLM judges as the paper measures it (§3.3, Appendix
B.1; Tables 3, 9, 10), detection totals per source, and the B.3 coverage check (private; import
from ``cocoeval.analysis.stats``).

- A *conversation* is one target (the human reference or a setup's continuation) of one
  instance. Its scores: the number of judged turns showing each behaviour (one item per
  behaviour), their total over all behaviours (item ``all``), and the two Likert scores
  (items ``consistency`` and ``collaborativeness``).
- **Inter-human**: for each annotator, Spearman ρ of their scores against the mean of the *other
  annotators* (humans only; LLM judges never enter it), averaged over the annotators.
- **Judge–human**: for each annotator left out, ρ of the judge against the mean of the remaining
  annotators, averaged over the annotators left out. With a single annotator nothing remains
  after leaving one out: the judge is then compared with that annotator, and the note says so.
- Only conversations that every rater of the comparison rated validly are used (``n``).
- The test is the paper's and is not corrected for multiple comparisons: a one-sided bootstrap
  over conversations (``resamples``, default 1,000, seeded); in each resample the average ρ is
  computed again; significant when its 5th percentile is above 0. Below ``min_n`` conversations
  nothing is tested.
- ρ is undefined when a rater's scores are constant (every conversation tied). An undefined ρ
  is null with a note, never 0: the average is taken over the defined ones and the note names
  the others; resamples in which no ρ is defined are left out and counted in the note.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import polars as pl

from .frames import Frames
from .inference import MIN_N, check_params, ci_notes, too_small
from .stats import with_sample

LIKERT = ("consistency", "collaborativeness")
ALL = "all"
AVERAGE = "average (leave-one-out)"
INTER_HUMAN = "inter-human"
PROCEDURE = (
    "the paper's procedure: leave-one-out Spearman ρ averaged over annotators; one-sided bootstrap over "
    "conversations, significant when the 5th percentile is above 0; not corrected for multiple comparisons"
)
AGREE_SCHEMA = {
    "comparison": pl.Utf8,
    "rater": pl.Utf8,
    "scale": pl.Utf8,
    "item": pl.Utf8,
    "rho": pl.Float64,
    "p5": pl.Float64,
    "p95": pl.Float64,
    "significant": pl.Boolean,
    "ci_note": pl.Utf8,
    "note": pl.Utf8,
    "n": pl.Int64,
    "annotators": pl.Int64,
}
_UNIT = "__conversation__"


def average_ranks(a: np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(a, axis=-1)``: the average ranks (1-based, ties share the mean of
    their ranks) along the last axis, a row holding a NaN all NaN; exact (half-integers), so
    equal to scipy's bit for bit (tested), without importing scipy.stats (0.6 s)."""
    x = np.asarray(a)
    out = np.empty(x.shape, dtype=np.float64)
    if x.size == 0:
        return out
    n = x.shape[-1]
    order = np.argsort(x, axis=-1, kind="stable")
    xs = np.take_along_axis(x, order, axis=-1)
    starts = np.ones(xs.shape, dtype=bool)  # where a run of tied values starts in sorted order
    starts[..., 1:] = xs[..., 1:] != xs[..., :-1]
    ends = np.ones(xs.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    pos = np.broadcast_to(np.arange(n), xs.shape)
    first = np.maximum.accumulate(np.where(starts, pos, 0), axis=-1)
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, pos, n - 1), axis=-1), axis=-1), axis=-1)
    np.put_along_axis(out, order, (first + last) / 2.0 + 1.0, axis=-1)
    if x.dtype.kind == "f":
        out[np.isnan(x).any(axis=-1)] = np.nan
    return out


def spearman_test(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``scipy.stats.spearmanr(x, y)`` of two 1-D samples of n >= 3 finite, non-constant values:
    ρ and its two-sided p (Student's t with n − 2 degrees of freedom), computed as scipy computes
    them (the same ranks, correlation and t; tested bit for bit against it), with
    ``scipy.special`` (0.2 s to import) instead of ``scipy.stats`` (0.6 s): ``spearman_tests``
    of the one pair."""
    return spearman_tests([(x, y)])[0]


def spearman_tests(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[tuple[float, float]]:
    """``spearman_test`` of each pair, the pairs of one length ranked and correlated together
    (Table 12 tests some 400 pairs). Average ranks are half-integers, so their centred sums of
    squares and products are exact in any order (below some 300,000 values), and the rest is
    ``np.corrcoef``'s elementwise arithmetic on them in its order: scipy's ρ and p bit for bit
    (tested)."""
    from scipy.special import stdtr

    out: list[tuple[float, float]] = [(np.nan, np.nan)] * len(pairs)
    by_n: dict[int, list[int]] = {}
    for i, (x, _) in enumerate(pairs):
        by_n.setdefault(len(x), []).append(i)
    for n, idx in by_n.items():
        ranks = average_ranks(np.vstack([pairs[i][0] for i in idx] + [pairs[i][1] for i in idx]))
        d = ranks - ranks.mean(axis=1, keepdims=True)  # exact: the ranks sum to n(n + 1)/2
        dx, dy = d[: len(idx)], d[len(idx) :]
        inv = np.true_divide(1, n - 1)  # np.cov's factor
        sx, sy = np.sqrt((dx * dx).sum(axis=1) * inv), np.sqrt((dy * dy).sum(axis=1) * inv)
        rs = np.clip((dx * dy).sum(axis=1) * inv / sy / sx, -1, 1)  # corrcoef's [1, 0]: row, then column
        dof = n - 2
        with np.errstate(divide="ignore"):
            t = rs * np.sqrt((dof / ((rs + 1.0) * (1.0 - rs))).clip(0))
        ps = 2 * stdtr(dof, -np.abs(t))
        for k, i in enumerate(idx):
            out[i] = (float(rs[k]), float(ps[k]))
    return out


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row pair of (B, n) arrays (ties get average ranks); NaN for a constant row."""
    return _pearson_of_ranks(average_ranks(a), average_ranks(b))


def spearman_boot(a: np.ndarray, b: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``spearman_rows(a[idx], b[idx])`` for two samples ``a``, ``b`` of n and a (B, n) array of
    resampled positions, bit for bit, without sorting each resample: the resample's average ranks
    come from how many times it draws each distinct value (one sort of the sample, then counts).
    ``BOOT_ROWS`` resamples at a time, so that their ranks and products stay in the CPU's cache
    (each row's sums are the same, row by row: 2.4x faster on 5,500 conversations)."""
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return spearman_rows(a[idx], b[idx])  # NaN ranks as rankdata gives them
    ga, gb = _value_groups(a), _value_groups(b)
    out = np.empty(idx.shape[0])
    for start in range(0, idx.shape[0], BOOT_ROWS):
        part = idx[start : start + BOOT_ROWS]
        out[start : start + BOOT_ROWS] = _pearson_of_ranks(_drawn_ranks(*ga, part), _drawn_ranks(*gb, part))
    return out


BOOT_ROWS = 64
"""Resamples ``spearman_boot`` ranks and correlates together (measured: 16–64 alike, 256 slower)."""


def _value_groups(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's group among the distinct values of finite ``a`` (in increasing order; ties
    share one), and the number of groups."""
    order = np.argsort(a, kind="stable")
    sa = a[order]
    group_sorted = np.cumsum(np.r_[True, sa[1:] != sa[:-1]]) - 1
    groups = int(group_sorted[-1]) + 1 if len(a) else 0
    group = np.empty(len(a), dtype=np.intp)
    group[order] = group_sorted
    return group, groups


def _drawn_ranks(group: np.ndarray, groups: int, idx: np.ndarray) -> np.ndarray:
    """``rankdata(a[idx], axis=-1)`` (average ranks) from ``_value_groups(a)``: a drawn value's
    rank is the number of drawn values below it plus (its number of draws + 1) / 2, exact in float64."""
    rows = idx.shape[0]
    flat = group[idx]  # (B, n): the group of each drawn value, then its cell in the (B, groups) counts
    flat += (np.arange(rows) * groups)[:, None]
    flat = flat.ravel()
    counts = np.bincount(flat, minlength=rows * groups).reshape(rows, groups)
    below = np.cumsum(counts, axis=1) - counts
    return (below + (counts + 1) / 2.0).ravel().take(flat).reshape(idx.shape)  # a flat take: no index grid


def _pearson_of_ranks(ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
    ra -= ra.mean(axis=-1, keepdims=True)
    rb -= rb.mean(axis=-1, keepdims=True)
    den = np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, (ra * rb).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)


def loo_inter(x: np.ndarray) -> np.ndarray:
    """(B, n, R) scores of R >= 2 raters -> (R, B): each rater against the mean of the others."""
    return np.stack([spearman_rows(x[..., r], np.delete(x, r, axis=-1).mean(axis=-1)) for r in range(x.shape[-1])])


def loo_judge(j: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(B, n) judge and (B, n, R) annotators -> (R, B): the judge against the mean of the
    annotators other than r (R = 1: against that annotator)."""
    if h.shape[-1] == 1:
        return spearman_rows(j, h[..., 0])[None]
    return np.stack([spearman_rows(j, np.delete(h, r, axis=-1).mean(axis=-1)) for r in range(h.shape[-1])])


def paper_test(per: np.ndarray, names: Sequence[str], n: int, min_n: int) -> dict:
    """The average of the per-rater ρ (``per``: (R, 1 + B), column 0 the sample, the rest the
    resamples) with the paper's one-sided test, its 5th-95th percentile range and notes."""
    sample, boot = per[:, 0], per[:, 1:]
    ok = np.isfinite(sample)
    notes = []
    if not ok.any():
        return {
            "rho": None,
            "p5": None,
            "p95": None,
            "significant": None,
            "ci_note": "ρ undefined",
            "note": "ρ undefined: constant scores (every conversation tied) for "
            + ", ".join(np.asarray(names, dtype=object)[~ok]),
        }
    if not ok.all():
        notes.append(
            f"ρ undefined for {', '.join(np.asarray(names, dtype=object)[~ok])} (constant scores); "
            f"averaged over the other {int(ok.sum())}"
        )
    with warnings.catch_warnings():  # a resample where no rho is defined: NaN, left out below
        warnings.simplefilter("ignore", RuntimeWarning)
        avg = np.nanmean(boot, axis=0) if boot.size else np.empty(0)
    fin = avg[np.isfinite(avg)]
    if len(fin) < len(avg):
        notes.append(f"{len(avg) - len(fin)} of {len(avg)} resamples had no defined ρ and were left out")
    small = too_small(n, min_n)
    ci_note = small or (ci_notes(n, fin[:, None], min_n)[0] if len(fin) else "undefined in every resample")
    p5 = float(np.percentile(fin, 5)) if len(fin) else None
    p95 = float(np.percentile(fin, 95)) if len(fin) else None
    return {
        "rho": float(sample[ok].mean()),
        "p5": None if ci_note else p5,
        "p95": None if ci_note else p95,
        "significant": None if small or p5 is None else bool(p5 > 0),
        "ci_note": ci_note,
        "note": "; ".join(notes) or None,
    }


def annotators(f: Frames, scale: str = "counts") -> list[str]:
    """The human annotators with valid scores of ``scale`` (counts or likert)."""
    d = f.counts if scale == "counts" else f.likert
    return sorted(d.filter(pl.col("human"))["judge"].unique().to_list())


def items_of(f: Frames, scale: str) -> list[str]:
    return [ALL, *f.taxonomy.ids] if scale == "counts" else list(LIKERT)


def _scale(item: str) -> str:
    return "likert" if item in LIKERT else "counts"


def _kind(item: str) -> str:
    return "overall" if item in LIKERT else "fine_grained"


def _too_few(f: Frames, raters: Sequence[str], item: str, n: int, min_n: int) -> dict:
    """The result fields of a comparison over fewer than two conversations: no ρ, and why."""
    j = f.judgments.filter((pl.col("kind") == _kind(item)) & (pl.col("status") != "stale"))
    valid = pl.col("status").is_in(["ok", "repaired"])
    counts = {
        r["judge"]: (r["valid"], r["all"])
        for r in j.group_by("judge").agg(valid=valid.sum(), all=pl.len()).iter_rows(named=True)
    }
    each = ", ".join(f"{r}: {counts.get(r, (0, 0))[0]} of {counts.get(r, (0, 0))[1]} valid" for r in raters)
    return {
        "rho": None,
        "p5": None,
        "p95": None,
        "significant": None,
        "ci_note": too_small(n, min_n),
        "note": f"only {n} conversation(s) rated validly by every rater, a ρ needs 2 ({_kind(item).replace('_', '-')} judgments {each})",
    }


def scores(f: Frames, item: str, raters: Sequence[str], *, complete: bool = True) -> np.ndarray:
    """(n, R) per-conversation scores of ``raters`` for ``item`` on the conversations all of them
    rated validly (in a fixed order); ``complete=False``: on the conversations the first rater and
    at least one other rated validly, NaN where a rater did not."""
    if item in LIKERT:
        long = f.likert.select("judge", "instance_id", "target", value=pl.col(item))
    else:
        c = f.counts if item == ALL else f.counts.filter(pl.col("behaviour") == item)
        long = c.group_by("judge", "instance_id", "target").agg(value=pl.col("count").sum())
    long = long.filter(pl.col("judge").is_in(list(raters)))
    if long.is_empty():
        return np.empty((0, len(raters)))
    wide = long.with_columns((pl.col("instance_id") + "|" + pl.col("target")).alias(_UNIT)).pivot(
        on="judge", index=_UNIT, values="value", aggregate_function="first"
    )
    for r in raters:
        if r not in wide.columns:
            if complete or r == raters[0]:
                return np.empty((0, len(raters)))
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(r))
    if complete:
        return wide.drop_nulls(list(raters)).sort(_UNIT).select(list(raters)).to_numpy().astype(float)
    some = pl.any_horizontal([pl.col(r).is_not_null() for r in raters[1:]]) if len(raters) > 1 else pl.lit(True)
    return wide.filter(pl.col(raters[0]).is_not_null() & some).sort(_UNIT).select(list(raters)).to_numpy().astype(float)


def agreement(
    f: Frames,
    raters: list[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    item: str = ALL,
    *,
    min_n: int = MIN_N,
) -> pl.DataFrame:
    """Inter-human agreement for one item: each annotator's leave-one-out ρ (against the mean of
    the others) and their average, with the paper's test. ``raters`` defaults to the run's human
    annotators (LLM judges are not annotators); empty with fewer than two."""
    check_params(resamples=resamples, min_n=min_n)
    raters = raters if raters is not None else annotators(f, _scale(item))
    if len(raters) < 2:
        return pl.DataFrame(schema=AGREE_SCHEMA)
    x = scores(f, item, raters)
    base = {"comparison": INTER_HUMAN, "scale": _scale(item), "item": item, "n": len(x), "annotators": len(raters)}
    if len(x) < 2:  # no ρ over fewer than two conversations: the average's row says why
        return pl.DataFrame(
            [{**base, "rater": AVERAGE, **_too_few(f, raters, item, len(x), min_n)}], schema=AGREE_SCHEMA
        )
    per = loo_inter(x[with_sample(len(x), resamples, seed)])
    rows = [{**base, "rater": r, **paper_test(per[k : k + 1], [r], len(x), min_n)} for k, r in enumerate(raters)]
    rows.append({**base, "rater": AVERAGE, **paper_test(per, raters, len(x), min_n)})
    return pl.DataFrame(rows, schema=AGREE_SCHEMA)


def judge_vs_humans(
    f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N, items: list[str] | None = None
) -> pl.DataFrame:
    """Judge-human agreement per item (default: all behaviours, each behaviour, each Likert score
    the judge and the annotators gave): for each annotator left out, ρ of the judge against the
    mean of the remaining annotators, averaged, with the paper's test."""
    check_params(resamples=resamples, min_n=min_n)
    rows = []
    for item in items or [*items_of(f, "counts"), *items_of(f, "likert")]:
        humans = [h for h in annotators(f, _scale(item)) if h != judge]
        if not humans:
            continue
        x = scores(f, item, [judge, *humans])
        if len(x) < 2:
            if _kind(item) in f.judgments.filter(pl.col("judge") == judge)["kind"].to_list():  # judged, none usable
                rows.append(
                    {
                        "comparison": judge,
                        "rater": judge,
                        "scale": _scale(item),
                        "item": item,
                        "n": len(x),
                        "annotators": len(humans),
                        **_too_few(f, [judge, *humans], item, len(x), min_n),
                    }
                )
            continue
        xb = x[with_sample(len(x), resamples, seed)]
        per = loo_judge(xb[..., 0], xb[..., 1:])
        res = paper_test(per, [f"without {h}" for h in humans] if len(humans) > 1 else humans, len(x), min_n)
        if len(humans) == 1:
            res["note"] = "; ".join(
                filter(
                    None,
                    [f"one annotator ({humans[0]}): the judge against that annotator, no leave-one-out", res["note"]],
                )
            )
        rows.append(
            {
                "comparison": judge,
                "rater": judge,
                "scale": _scale(item),
                "item": item,
                **res,
                "n": len(x),
                "annotators": len(humans),
            }
        )
    return pl.DataFrame(rows, schema=AGREE_SCHEMA)


def agreement_table(
    f: Frames, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N, judges: list[str] | None = None
) -> pl.DataFrame:
    """Tables 3, 9 and 10 in one frame: per item (all behaviours, each behaviour, each Likert
    score), the inter-human average and each LLM judge against the annotators."""
    parts = [
        agreement(f, None, resamples, seed, item, min_n=min_n).filter(pl.col("rater") == AVERAGE)
        for scale in ("counts", "likert")
        if len(annotators(f, scale)) >= 2
        for item in items_of(f, scale)
    ]
    llm = sorted(set(f.judgments.filter(~pl.col("human") & (pl.col("status") != "stale"))["judge"].to_list()))
    # every LLM judge with a judgment, valid or not: one whose judgments are all invalid is a row saying so
    parts += [judge_vs_humans(f, j, resamples, seed, min_n=min_n) for j in (judges or llm)]
    parts = [p for p in parts if not p.is_empty()]
    return pl.concat(parts) if parts else pl.DataFrame(schema=AGREE_SCHEMA)


def _labelled(f: Frames, c: pl.DataFrame) -> pl.DataFrame:
    """``c``'s rows of the conversations the annotators labelled (all when the run has none): an
    LLM judge's other conversations are compared with no one."""
    if not annotators(f):
        return c
    return c.join(
        f.judgments.filter(pl.col("human") & (pl.col("kind") == "fine_grained") & (pl.col("status") != "stale"))
        .select("instance_id", "target")
        .unique(),
        on=["instance_id", "target"],
        how="semi",
    )


def detection_units(f: Frames) -> tuple[pl.DataFrame, list[str]]:
    """The conversations (instance_id, target) the detection totals are over, one set for every
    source as the paper compares them (Tables 3, 9, 10: the same turns): of the conversations the
    annotators labelled (all conversations when the run has no annotator), those every source of
    the table (each annotator and each LLM judge with a valid fine-grained judgment there) judged
    validly; the sources, sorted; and the candidates, with how many sources judged each validly."""
    c = _labelled(f, f.counts)
    sources = sorted(set(c["judge"].to_list()))
    units = (
        c.group_by("instance_id", "target")
        .agg(k=pl.col("judge").n_unique())
        .filter(pl.col("k") == len(sources))
        .select("instance_id", "target")
        .sort("instance_id", "target")
    )
    return units, sources


def detection_note(f: Frames, name: Callable[[str], str] = str) -> str:
    """What the detection totals are over, in one sentence: the common set's size, the sources
    (written by ``name``), and the conversations left out because some source's fine-grained
    judgment of it is not valid (invalid, skipped or missing)."""
    units, sources = detection_units(f)
    c = _labelled(f, f.counts)
    cand = c.select("instance_id", "target").unique()
    have = c.group_by("judge").agg(n=pl.struct("instance_id", "target").n_unique())
    short = [
        f"{name(r['judge'])} {cand.height - r['n']}"
        for r in have.sort("judge").iter_rows(named=True)
        if r["n"] < cand.height
    ]
    left = cand.height - units.height
    return (
        f"Detection totals are over the same {units.height} conversation(s) for every source ({len(sources)}: "
        f"{', '.join(map(name, sources))}), those every source judged validly"
        + (
            f"; {left} of {cand.height} left out (conversations without a valid fine-grained judgment, per "
            "source: " + ", ".join(short) + ")"
            if left
            else ""
        )
        + "."
    )


def detection_totals(f: Frames) -> pl.DataFrame:
    """Detections per source (each annotator, their mean, each LLM judge) and behaviour (and
    ``all``), on one set of conversations for every source (``detection_units``: those every
    annotator and every LLM judge of the table judged validly): ``total`` detections and the
    ``conversations`` they are over (the same for every source)."""
    humans = annotators(f)
    units, _ = detection_units(f)
    c = f.counts.join(units, on=["instance_id", "target"], how="semi")
    per = c.group_by("judge", "human", "behaviour").agg(
        total=pl.col("count").sum(), conversations=pl.struct("instance_id", "target").n_unique()
    )
    per = pl.concat(
        [
            per,
            per.group_by("judge", "human")
            .agg(behaviour=pl.lit(ALL), total=pl.col("total").sum(), conversations=pl.col("conversations").max())
            .select(per.columns),
        ]
    )
    per = per.rename({"judge": "source"}).with_columns(pl.col("total").cast(pl.Float64))
    if humans:
        mean = (
            per.filter(pl.col("human"))
            .group_by("behaviour")
            .agg(total=pl.col("total").mean(), conversations=pl.col("conversations").max())
            .with_columns(source=pl.lit(f"annotators (mean of {len(humans)})"), human=pl.lit(True))
        )
        per = pl.concat([per, mean.select(per.columns)])
    order = {b: k for k, b in enumerate([ALL, *f.taxonomy.ids])}
    return (
        per.with_columns(_k=pl.col("behaviour").replace_strict(order, default=len(order)))
        .sort(pl.col("human").not_(), "source", "_k")
        .drop("_k")
    )


def taxonomy_coverage(f: Frames) -> pl.DataFrame:
    """Appendix B.3: per annotator, of the turns they labelled in valid fine-grained judgments,
    how many they marked as showing a behaviour not in the taxonomy, the rate, and in how many
    conversations."""
    j = f.judgments.filter(
        pl.col("human") & (pl.col("kind") == "fine_grained") & pl.col("status").is_in(["ok", "repaired"])
    )
    out = j.group_by("judge").agg(
        conversations=pl.len(),
        turns=pl.col("turns").sum(),
        turns_not_in_taxonomy=pl.col("not_in_taxonomy").sum(),
        conversations_not_in_taxonomy=(pl.col("not_in_taxonomy") > 0).sum(),
    )
    return (
        out.rename({"judge": "annotator"})
        .with_columns(rate=pl.when(pl.col("turns") > 0).then(pl.col("turns_not_in_taxonomy") / pl.col("turns")))
        .sort("annotator")
    )


def nominal_alpha(units_by_rater: np.ndarray) -> float:
    """Krippendorff's nominal α (the ``krippendorff`` package, as ``judge_check``'s turn-level α)
    of a (units, raters) matrix, NaN where a rater did not label a unit; NaN when undefined (one
    value only, or no unit two raters labelled). Beyond the paper: ``cocoeval annotate-import``
    reports it per behaviour among the annotators so far."""
    import krippendorff

    data = np.asarray(units_by_rater, dtype=float).T
    if np.unique(data[np.isfinite(data)]).size < 2 or not (np.isfinite(data).sum(axis=0) >= 2).any():
        return float("nan")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
