"""A leaderboard of simulators: every setup of a run (simulated, imported, plugin) ranked, per
judge, by how far its behaviour profile is from the humans' on the same instances.

- **Per behaviour** the paired difference in mean occurrences per conversation, setup minus human
  reference, over the instances where both have a valid fine-grained judgment by the judge (the
  ``n`` of the row), with a 95% percentile bootstrap interval over those instances (pairs
  resampled together: the same draws as ``stats.paired_vs_human``, so the same intervals).
- **The aggregate distance** over the K behaviours is the root mean square of the true
  per-behaviour paired differences, √(Σ_b δ_b² / K): in the unit of the bars (occurrences per
  conversation); a mean, so a taxonomy with more behaviours does not inflate it; and the square
  weighs one behaviour far off more than several a little off. Squaring the *observed* mean
  differences would add each one's sampling variance (a simulator drawn from the humans' own rates
  would sit well above 0 on 12 instances), so the estimate is unbiased for the square:
  mean_b(d̄_b² − s_b²/n) (``unbiased_square``; kept as ``distance_square``, negative when the
  differences are mostly noise), and the distance shown is its square root clipped at 0. Its
  interval: the same estimate in each bootstrap resample, the resamples shifted by their own bias
  (their mean minus the estimate), their spread scaled by √(n/(n − 1))·t_{n−1}/z (a small-sample
  correction), and read at 2.5% and 97.5%
  (``recentred_interval``), then the
  clipped square root of the ends: an interval at 0 when the simulator is as human as the humans.
  Coverage on worlds with known truth: ``benchmarks/known_truth.py``, figures in docs/testing.md.
  The profile distance D = Σ|d_b| (L1, plug-in, so biased upwards on few instances) is beside it
  (``D``), with the percentile interval of its resamples. Ranks: by the distance's point estimate;
  equal distances (several at 0) share a rank ("min").
- **The floor**: the same unbiased distance between two random halves of the judge's n valid human
  references, drawn by source conversation (each resample draws the C conversations with
  replacement and splits the draw into two halves of ⌊C/2⌋, every window of a drawn conversation
  coming along; the square from products of different conversations only: ``floor``), its mean
  over the resamples and its 2.5–97.5 percentile range: 0 on average, and the range shows how far
  two independent sets of C/2 human conversations land from each other by chance.
- Beside them: the Likert gap (consistency and collaborativeness, setup minus human on the
  instances both have a valid overall judgment, ``paper_stats.likert_vs_human``) and the
  judge-free turn-taking distances (``convcompare.turn_taking``: the same for every judge).
- Setups judged by different judges are never ranked together: one ranking per judge (LLM judges
  only; annotators' samples are the agreement's). A setup is ranked when its distance rests on at
  least ``min_n`` instances; the others are listed below, unranked, with the reason, as is a
  setup with no valid judgment (n = 0). Continuations and judgments are counted: ok or valid of
  every one present or expected (``frames.invalid_rates``), never dropped silently, with the share
  of the ok continuations' turns said by speakers who are not participants
  (``unknown_speaker_share``; above ``simulate.validity.MAX_UNKNOWN_SPEAKER_SHARE`` a continuation
  is invalid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from cocoeval.core.targets import REFERENCE

from . import inference, paper_stats, stats
from .answer import Answer, setup_labels
from .convstats import HISTORY
from .coverage import HOW
from .frames import Frames, invalid_rates, judges_of, setups_of, validity_note
from .leaderboard_prose import (
    BoardEntry,
    Counted,
    FloorDistance,
    JudgeBoard,
    Leaderboard,
    render_leaderboard,
    render_stopping,
)
from .paired import distance_of, recentred_interval
from .rq_prose import Estimate, Intervals, NotRun
from .store import derived_frame, made_for_run

if TYPE_CHECKING:
    from .store import RunLike

FLOOR = "floor: two halves of the humans"
"""The floor row's setup (not a setup name: those are file names, with no space or colon)."""
ORIGIN_FLOOR = "floor"
LIKERT = ("consistency", "collaborativeness")
TURNS = ("transition_distance", "speaker_entropy_diff")

_F, _I, _S = pl.Float64, pl.Int64, pl.Utf8
BOARD_SCHEMA: dict[str, Any] = {
    "judge": _S,
    "rank": _I,
    "rank_low": _I,
    "rank_high": _I,
    "setup": _S,
    "group": _S,
    "origin": _S,
    "n": _I,
    "distance": _F,
    "distance_square": _F,
    "ci_low": _F,
    "ci_high": _F,
    "ci_note": _S,
    "D": _F,
    "D_ci_low": _F,
    "D_ci_high": _F,
    **{f"{s}_gap{x}": t for s in LIKERT for x, t in (("", _F), ("_ci_low", _F), ("_ci_high", _F))},
    "likert_n": _I,
    **{f"{m}{x}": t for m in TURNS for x, t in (("", _F), ("_ci_low", _F), ("_ci_high", _F), ("_n", _I))},
    **{f"auc{x}": t for x, t in (("", _F), ("_ci_low", _F), ("_ci_high", _F), ("_p", _F), ("_n", _I))},
    "continuations_ok": _I,
    "continuations": _I,
    "unknown_speaker_share": _F,
    "judgments_valid": _I,
    "judgments": _I,
    "note": _S,
}
BEHAVIOUR_SCHEMA: dict[str, Any] = {
    "judge": _S,
    "setup": _S,
    "behaviour": _S,
    "mean_sim": _F,
    "mean_human": _F,
    "diff": _F,
    "diff_ci_low": _F,
    "diff_ci_high": _F,
    "ci_note": _S,
    "n": _I,
}


Interval = tuple[float | None, float | None, float | None, str | None]
"""(estimate, its 95% interval's ends, why the interval or the estimate is undefined)."""


@dataclass(frozen=True)
class Profile:
    """One setup against the human reference on the instances both have (``paired_profiles``): per
    behaviour (arrays over the K behaviours) the paired difference in mean occurrences per
    conversation with its interval's ends and why undefined; over them the distance (unbiased for
    its square, ``square``; None below two instances or source conversations) and D (L1, plug-in),
    each an ``Interval`` (D: ``l1``)."""

    diff: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    notes: list[str | None]
    n: int
    square: float | None
    distance: Interval
    l1: Interval
    """D, the absolute sum of the per-behaviour differences (L1, plug-in), with its interval."""
    clusters: int | None = None
    """The source conversations resampled (None: the instances were resampled one by one)."""


def unbiased_square(m1: np.ndarray, m2: np.ndarray, n: int) -> np.ndarray:
    """The unbiased estimate of the mean over behaviours (last axis) of the squared true mean
    difference, from the per-behaviour means ``m1`` and means of squares ``m2`` of n ≥ 2 paired
    differences: mean_b (d̄_b² − s_b²/n), s_b² the sample variance (ddof 1). The same as the
    U-statistic Σ_{i≠j} D_i·D_j / (n(n − 1)K); negative when the differences are mostly noise."""
    return np.mean((n * np.square(m1) - m2) / (n - 1), axis=-1)


def floor(
    h: np.ndarray, resamples: int = 1000, seed: int = 0, codes: np.ndarray | None = None, *, squares: bool = False
) -> np.ndarray:
    """The distance between two random halves of the human references ``h`` (n, K), one per
    resample (B,), drawn by **source conversation** (``codes``: each reference's conversation,
    0..C−1; None: one per reference): each resample draws C conversations with replacement
    (``paired.cluster_weights``) and splits the draw into its first and second ⌊C/2⌋ = m, every
    window of a drawn conversation coming along. The windows of one meeting are correlated, so
    halves that split them would be closer than two independent sets of humans. The distance is
    unbiased for the square of the two halves' mean difference by using only products of
    different conversations: Q_A + Q_B − 2·ā·b̄ per behaviour, Q_A the cross-conversation
    square of half A (``paired.cluster_square``, each drawn copy a conversation of its own) and
    ā, b̄ the halves' means, √max(mean_b(…), 0); 0 on average when the halves come from the
    same humans. With one reference per conversation it is the two-sample
    √max(mean_b((ā_b − b̄_b)² − s²_{a,b}/m − s²_{b,b}/m), 0) on the same draws as resampling the
    references one by one (tested). Empty below four conversations (each half needs two). With
    ``squares`` the unbiased squares themselves, unclipped (their mean is the one that is 0 on
    average; benchmarks/paired.py)."""
    from . import paired

    if codes is None:
        codes = np.arange(len(h), dtype=np.int64)
    if not len(h):
        return np.empty(0)
    sums, sizes = paired.cluster_sums(h, codes)
    c = len(sizes)
    m = c // 2
    if m < 2:
        return np.empty(0)
    idx = stats.boot_index(c, resamples, seed)
    b = len(idx)
    rows = np.arange(b)[:, None] * c

    def weights(part: np.ndarray) -> np.ndarray:
        return np.bincount((part + rows).ravel(), minlength=b * c).reshape(b, c).astype(np.float64)

    wa, wb = weights(idx[:, :m]), weights(idx[:, m : 2 * m])
    qa, qb = paired.cluster_square(sums, sizes, wa), paired.cluster_square(sums, sizes, wb)
    ma, mb = (wa @ sums) / (wa @ sizes)[:, None], (wb @ sums) / (wb @ sizes)[:, None]
    sq = qa + qb - 2 * np.mean(ma * mb, axis=-1)
    return sq if squares else distance_of(sq)


def _interval(point: float, boot: np.ndarray, n: int, min_n: int) -> tuple[float | None, float | None, str | None]:
    note = inference.ci_notes(n, boot[:, None], min_n)[0]
    lo, hi = np.percentile(boot, stats.PERCENTILES)
    a, b = inference.interval(lo, hi, note)
    return a, b, note


def _distance(
    square: float, boot: np.ndarray, n: int, min_n: int
) -> tuple[float, float | None, float | None, str | None]:
    """(distance, its interval's ends, why undefined) from the unbiased square and its resamples."""
    note = inference.ci_notes(n, boot[:, None], min_n)[0]
    lo, hi = recentred_interval(square, boot, n)
    a, b = inference.interval(float(distance_of(lo)), float(distance_of(hi)), note)
    return float(distance_of(square)), a, b, note


STOP_SCHEMA: dict[str, Any] = {
    "setup": _S,
    "status": _S,
    **dict.fromkeys(
        ("round", "rounds_planned", "conversations", "conversations_planned", "instances", "instances_planned"), _I
    ),
    "observations": _I,
    "reason": _S,
    "method": _S,
}
"""``stopping_table``: where each setup of a run with a ``stopping:`` section stopped and why."""


def clustered_profile(
    s: np.ndarray,
    h: np.ndarray,
    codes: np.ndarray,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = inference.MIN_N,
) -> Profile:
    """``paired_profiles``'s entry for one setup whose instances (rows of ``s`` and ``h``) come
    from the source conversations ``codes`` (0..C−1, in order of first appearance), some with
    several windows: every resample draws C conversations with all their windows
    (``paired.cluster_weights``, the draws of ``stats.boot_index`` over conversations), the
    per-behaviour mean difference of a resample is its sum over its number of instances, the
    square is estimated from products of differences of different conversations
    (``paired.cluster_square``), and the small-sample scaling of ``recentred_interval`` counts
    conversations. With one instance per conversation it is the instance bootstrap of
    ``paired_profiles`` (tested)."""
    from . import paired

    n = len(s)
    d = s - h
    sums, sizes = paired.cluster_sums(d, codes)
    c = len(sizes)
    w = paired.cluster_weights(c, resamples, seed)
    boot = (w @ sums) / (w @ sizes)[:, None]
    point = d.mean(axis=0)
    lo, hi = np.percentile(boot, stats.PERCENTILES, axis=0)
    notes = inference.ci_notes(n, boot, min_n)
    d_point = float(np.abs(point).sum())
    d1 = (d_point, *_interval(d_point, np.abs(boot).sum(axis=1), n, min_n))
    if c < 2:
        none: Interval = (
            None,
            None,
            None,
            "one source conversation: no distance (its square's estimate needs two conversations)",
        )
        return Profile(point, lo, hi, notes, n, None, none, d1, c)
    square = float(paired.cluster_square(sums, sizes))
    qb = paired.cluster_square(sums, sizes, w)
    note = inference.ci_notes(n, qb[:, None], min_n)[0]
    qlo, qhi = recentred_interval(square, qb, c)
    a, b = inference.interval(float(distance_of(qlo)), float(distance_of(qhi)), note)
    return Profile(point, lo, hi, notes, n, square, (float(distance_of(square)), a, b, note), d1, c)


def paired_profiles(
    pairs: dict[str, tuple[np.ndarray, np.ndarray]],
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = inference.MIN_N,
    clusters: dict[str, np.ndarray] | None = None,
) -> dict[str, Profile]:
    """For each setup's (setup counts, human counts) on the same instances, both (n, K): the
    per-behaviour paired differences with their intervals, the distance (unbiased for its square,
    ``unbiased_square``; interval: ``recentred_interval`` of the resamples' unbiased squares) and
    D (L1, plug-in) with theirs. Setups of the same n share the seeded draws (drawn by n and seed
    only, so one setup's interval never depends on another's) and are resampled in one matrix
    product. ``clusters``: per setup, the source conversation of each instance (codes 0..C−1 in
    order of first appearance); a setup with several instances of one conversation is resampled
    by conversation (``clustered_profile``: the windows of one meeting are not independent, and
    resampling them one by one made the distance's interval cover the truth 0.68–0.69 of the time
    instead of 0.95 in benchmarks/paired.py's clustered worlds)."""
    out: dict[str, Profile] = {}
    by_n: dict[int, list[str]] = {}
    for name, (s, h) in pairs.items():
        codes = (clusters or {}).get(name)
        if codes is not None and len(codes) and int(codes.max()) + 1 < len(codes):
            out[name] = clustered_profile(s, h, codes, resamples, seed, min_n=min_n)
            continue
        by_n.setdefault(len(s), []).append(name)
    for n, names in by_n.items():
        k = pairs[names[0]][0].shape[1]
        d = np.hstack([pairs[x][0] - pairs[x][1] for x in names])  # (n, setups * K): pairs stay pairs
        idx = stats.boot_index(n, resamples, seed)
        boot = stats.resample_means(d, idx).reshape(resamples, len(names), k)
        boot2 = stats.resample_means(np.square(d), idx).reshape(resamples, len(names), k) if n >= 2 else None
        point = d.mean(axis=0).reshape(len(names), k)
        point2 = np.square(d).mean(axis=0).reshape(len(names), k)
        for j, name in enumerate(names):
            bj = boot[:, j, :]
            lo, hi = np.percentile(bj, stats.PERCENTILES, axis=0)
            notes = inference.ci_notes(n, bj, min_n)
            d_point = float(np.abs(point[j]).sum())
            if boot2 is None:
                distance: Interval = (
                    None,
                    None,
                    None,
                    "one instance: no distance (its square's estimate needs a variance, two instances at least)",
                )
                square = None
            else:
                square = float(unbiased_square(point[j], point2[j], n))
                distance = _distance(square, unbiased_square(bj, boot2[:, j, :], n), n, min_n)
            d1 = (d_point, *_interval(d_point, np.abs(bj).sum(axis=1), n, min_n))
            out[name] = Profile(point[j], lo, hi, notes, n, square, distance, d1)
    return out


def _counts(rates: pl.DataFrame, judge: str, target: str) -> dict[str, Any]:
    """Continuations ok of all, the share of their turns by speakers who are not participants,
    judgments valid of all (present or expected) of one setup."""

    def row(stage: str, **where: Any) -> dict[str, Any] | None:
        r = rates.filter(
            (pl.col("stage") == stage)
            & (pl.col("target") == target)
            & pl.all_horizontal([pl.col(k) == v for k, v in where.items()] or [pl.lit(True)])
        )
        return r.row(0, named=True) if r.height else None

    c, j = row("simulate"), row("judge", judge=judge, kind="fine_grained")
    out: dict[str, Any] = {
        "continuations_ok": None,
        "continuations": None,
        "unknown_speaker_share": None,
        "judgments_valid": None,
        "judgments": None,
    }
    if c is not None:
        out.update(
            continuations_ok=c["n"] - c["invalid"],
            continuations=c["n"] + (c["missing"] or 0),
            unknown_speaker_share=c.get("unknown_speaker_share"),
        )
    if j is not None:
        out.update(
            judgments_valid=j["n"] - j["invalid"] - j["skipped"], judgments=j["n"] - j["skipped"] + (j["missing"] or 0)
        )
    return out


def conversations(f: Frames) -> dict[str, str]:
    """Each instance's source conversation (``Frames.instances``; an instance without one is a
    conversation of its own)."""
    if "conversation" not in f.instances.columns:
        return {}
    return {i: c for i, c in f.instances.select("instance_id", "conversation").iter_rows() if c is not None}


def conversation_codes(ids: list[str], conv_of: dict[str, str]) -> np.ndarray:
    """The conversation of each of ``ids`` as codes 0..C−1 in order of first appearance."""
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(conv_of.get(i, "\0" + i), len(seen)) for i in ids], dtype=np.int64)


def leaderboard(
    f: Frames,
    cond: pl.DataFrame | None = None,
    turn_taking: pl.DataFrame | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    judges: list[str] | None = None,
    detectability: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The leaderboard (one row per judge and setup, the floor row first in each judge's block, then
    the ranked setups, then the unranked ones) and its per-behaviour differences. ``cond``:
    ``paper_stats.conditions`` (the group labels; None: no labels); ``turn_taking``:
    ``convcompare.turn_taking`` (None: no judge-free columns); ``detectability``:
    ``detectability.detectability`` (beyond the paper: the columns ``auc``…, the floor row's from
    its humans-vs-humans row; None: none)."""
    inference.check_params(resamples=resamples, min_n=min_n)
    beh = f.taxonomy.ids
    groups = {} if cond is None else dict(zip(cond["setup"], cond["model_group"], strict=True))
    origins = {} if cond is None else dict(zip(cond["setup"], cond["origin"], strict=True))
    setups = setups_of(f, cond)
    rates = invalid_rates(f)
    turns: dict[str, dict[str, Any]] = {}
    if turn_taking is not None:
        for r in turn_taking.iter_rows(named=True):
            m = r["statistic"]
            turns.setdefault(r["target"], {}).update(
                {m: r["mean"], f"{m}_ci_low": r["ci_low"], f"{m}_ci_high": r["ci_high"], f"{m}_n": r["n"]}
            )
    aucs: dict[str, dict[str, Any]] = {}
    if detectability is not None:
        from .detectability import FLOOR as AUC_FLOOR

        for r in detectability.iter_rows(named=True):
            aucs[HISTORY if r["target"] == AUC_FLOOR else r["target"]] = {
                "auc": r["auc"],
                "auc_ci_low": r["ci_low"],
                "auc_ci_high": r["ci_high"],
                "auc_p": r["p"],
                "auc_n": r["n"],
            }
    board: list[dict[str, Any]] = []
    per_b: list[dict[str, Any]] = []
    conv_of = conversations(f)
    for judge in judges if judges is not None else judges_of(f):
        c = f.counts.filter(pl.col("judge") == judge)
        ref_ids, ref = (
            stats.count_matrix(c.filter(pl.col("target") == REFERENCE), beh)
            if c.filter(pl.col("target") == REFERENCE).height
            else ([], np.empty((0, len(beh))))
        )
        pos = {i: k for k, i in enumerate(ref_ids)}
        mats = {t: stats.count_matrix(g, beh) for (t,), g in c.filter(pl.col("target") != REFERENCE).group_by("target")}
        pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        codes: dict[str, np.ndarray] = {}
        for s in setups:
            if s in mats:
                ids, x = mats[s]
                keep = [k for k, i in enumerate(ids) if i in pos]
                if keep:
                    pairs[s] = (x[keep], ref[[pos[ids[k]] for k in keep]])
                    codes[s] = conversation_codes([ids[k] for k in keep], conv_of)
        prof = paired_profiles(pairs, resamples, seed, min_n=min_n, clusters=codes)
        lk = paper_stats.likert_vs_human(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)
        gaps: dict[str, dict[str, Any]] = {}
        for r in lk.filter(pl.col("series") == paper_stats.DIFFERENCE).iter_rows(named=True):
            gaps.setdefault(r["target"], {}).update(
                {
                    f"{r['score']}_gap": r["mean"],
                    f"{r['score']}_gap_ci_low": r["ci_low"],
                    f"{r['score']}_gap_ci_high": r["ci_high"],
                    "likert_n": r["n"],
                }
            )
        ref_codes = conversation_codes(ref_ids, conv_of)
        ref_convs = int(ref_codes.max()) + 1 if len(ref_codes) else 0
        fl = floor(ref, resamples, seed, ref_codes)
        ref_counts = _counts(rates, judge, REFERENCE)
        if len(fl):
            lo, hi, note = _interval(float(fl.mean()), fl, len(ref), min_n)
        else:
            lo = hi = None
            note = (
                f"fewer than four source conversations with a valid human reference ({ref_convs}; "
                f"{validity_note(f, judge, REFERENCE)})"
            )
        board.append(
            {
                "judge": judge,
                "setup": FLOOR,
                "group": "human references",
                "origin": ORIGIN_FLOOR,
                "n": len(ref),
                "distance": float(fl.mean()) if len(fl) else None,
                "ci_low": lo,
                "ci_high": hi,
                "ci_note": note,
                "judgments_valid": ref_counts["judgments_valid"],
                "judgments": ref_counts["judgments"],
                **turns.get(HISTORY, {}),
                **aucs.get(HISTORY, {}),
                "note": f"two halves of {ref_convs // 2} of the {ref_convs} source conversations of the {len(ref)} "
                "valid human references per resample (every window of a drawn conversation); "
                "0 on average for a simulator as human as the humans",
            }
        )
        rows = []
        for s in setups:
            row = {
                "judge": judge,
                "setup": s,
                "group": groups.get(s),
                "origin": origins.get(s),
                **_counts(rates, judge, s),
                **gaps.get(s, {}),
                **turns.get(s, {}),
                **aucs.get(s, {}),
            }
            if s not in prof:
                why = (
                    f"no instance where both {s} and the human reference have a valid judgment by {judge} "
                    f"({validity_note(f, judge, s)}; {validity_note(f, judge, REFERENCE)})"
                )
                rows.append({**row, "n": 0, "ci_note": why, "note": f"not ranked: {why}"})
                per_b += [{"judge": judge, "setup": s, "behaviour": b, "ci_note": why, "n": 0} for b in beh]
                continue
            p = prof[s]
            (dist, lo, hi, note), (d1, d1_lo, d1_hi, _) = p.distance, p.l1
            rows.append(
                {
                    **row,
                    "n": p.n,
                    "distance": dist,
                    "distance_square": p.square,
                    "ci_low": lo,
                    "ci_high": hi,
                    "ci_note": note,
                    "D": d1,
                    "D_ci_low": d1_lo,
                    "D_ci_high": d1_hi,
                    "note": f"not ranked: {inference.too_small(p.n, min_n)}" if p.n < min_n else None,
                }
            )
            s_mat, h_mat = pairs[s]
            for k, b in enumerate(beh):
                a, z = inference.interval(p.lo[k], p.hi[k], p.notes[k])
                per_b.append(
                    {
                        "judge": judge,
                        "setup": s,
                        "behaviour": b,
                        "mean_sim": float(s_mat[:, k].mean()),
                        "mean_human": float(h_mat[:, k].mean()),
                        "diff": float(p.diff[k]),
                        "diff_ci_low": a,
                        "diff_ci_high": z,
                        "ci_note": p.notes[k],
                        "n": p.n,
                    }
                )
        ranked = sorted(
            (r for r in rows if r["n"] >= min_n and r.get("distance") is not None),
            key=lambda r: (r["distance"], r["setup"]),
        )
        last, rank = None, 0
        for i, r in enumerate(ranked):  # ties share a rank ("min")
            if r["distance"] != last:
                rank, last = i + 1, r["distance"]
            r["rank"] = rank
        if ranked:  # beyond the paper: the ranks the data support (``paired.rank_intervals``)
            from . import paired

            intervals = paired.rank_table(
                paired.counts_of(f.counts, f.instances, judge),
                beh,
                judge=judge,
                setups=[r["setup"] for r in ranked],
                resamples=resamples,
                seed=seed,
                min_n=min_n,
            )
            by_setup = {ri.setup: ri for ri in intervals}
            for r in ranked:
                got = by_setup.get(r["setup"])
                if got is not None:
                    r["rank_low"], r["rank_high"] = min(got.rank_low, r["rank"]), max(got.rank_high, r["rank"])
        board += ranked + [r for r in rows if r.get("rank") is None]
    return (
        pl.DataFrame(board, schema=BOARD_SCHEMA) if board else pl.DataFrame(schema=BOARD_SCHEMA),
        pl.DataFrame(per_b, schema=BEHAVIOUR_SCHEMA) if per_b else pl.DataFrame(schema=BEHAVIOUR_SCHEMA),
    )


def _board(run: RunLike, f: Frames, *, resamples: int, seed: int, min_n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``leaderboard`` of every LLM judge of ``f`` with the run's labels, judge-free turn-taking
    distances and classifier test (beyond the paper)."""
    from .convcompare import turn_taking
    from .convstats import turn_taking_frame  # judge-free: the turns themselves
    from .detectability import detectability

    tt = turn_taking(turn_taking_frame(run), resamples=resamples, seed=seed, min_n=min_n)
    det = detectability(run, resamples=resamples, seed=seed, min_n=min_n)
    return leaderboard(
        f,
        paper_stats.conditions(run),
        tt,
        resamples=resamples,
        seed=seed,
        min_n=min_n,
        judges=judges_of(f),
        detectability=det,
    )


def _run_board(run: RunLike, f: Frames, *, resamples: int, seed: int, min_n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``_board`` of the frames ``f``, once per frames and settings (the two tables share it)."""
    return made_for_run(
        run,
        f,
        ("leaderboard tables", resamples, seed, min_n),
        lambda: _board(run, f, resamples=resamples, seed=seed, min_n=min_n),
    )


@derived_frame("leaderboard", BOARD_SCHEMA, by_taxonomy=True, lazy=True)
def leaderboard_table(
    run: RunLike, f: Frames, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """The leaderboard of the run in ``f`` (``_board``); for the run's own frames, that of the
    default settings kept with them (``store.derived_frame``)."""
    return _run_board(run, f, resamples=resamples, seed=seed, min_n=min_n)[0]


@derived_frame("leaderboard_behaviours", BEHAVIOUR_SCHEMA, by_taxonomy=True, lazy=True)
def leaderboard_behaviours(
    run: RunLike, f: Frames, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """The leaderboard's per-behaviour differences in ``f`` (``_board``); for the run's own frames,
    those of the default settings kept with them."""
    return _run_board(run, f, resamples=resamples, seed=seed, min_n=min_n)[1]


def stopping_table(run: RunLike) -> pl.DataFrame | None:
    """Where each setup of a run with a ``stopping:`` section stopped and why (beyond the paper;
    ``cocoeval.run.stopping``): one row per setup; None for a run without one."""
    rec = run.manifest.stopping
    if rec is None:
        return None
    rows = [
        {
            "setup": name,
            "status": st.status,
            "round": st.round,
            "rounds_planned": rec.rounds_planned,
            "conversations": st.conversations,
            "conversations_planned": rec.conversations_planned,
            "instances": st.instances,
            "instances_planned": rec.instances_planned,
            "observations": st.observations,
            "reason": st.reason,
            "method": rec.method,
        }
        for name, st in rec.setups.items()
    ]
    return pl.DataFrame(rows, schema=STOP_SCHEMA)


def stopping_text(run: RunLike) -> list[str]:
    """The report's paragraph on where each setup stopped and why (``render_stopping``); empty for
    a run without a ``stopping:`` section."""
    return render_stopping(run.manifest.stopping)


def answer(run: RunLike, f: Frames, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N) -> Answer:
    """The leaderboard answer: tables ``leaderboard`` and ``behaviours``, one chart, and the text
    rendered (``render_leaderboard``) from its result, a ``Leaderboard`` in ``Answer.result``."""
    a = Answer("Which simulator behaves most like the humans, on the same instances?")
    x = _answer(a, run, f, Intervals(resamples, seed, min_n))
    a.text, a.result = render_leaderboard(x), x
    return a


def _answer(a: Answer, run: RunLike, f: Frames, iv: Intervals) -> Leaderboard:
    """The leaderboard's result; its tables and chart added to ``a``."""
    from .convcompare import turn_taking
    from .convstats import turn_taking_frame  # judge-free: the turns themselves

    resamples, seed, min_n = iv.resamples, iv.seed, iv.min_n
    k = len(f.taxonomy.ids)
    cond = paper_stats.conditions(run)
    setups = setups_of(f, cond)
    if not setups:
        none = NotRun(
            "this run has no setup to rank",
            HOW["setup"].format(s="s", example="gpt41-vanilla-30, or a setup of imported continuations"),
        )
        return Leaderboard(None, none, k, iv)
    judges = judges_of(f)
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "min_n": min_n}
    board, per_b = leaderboard_table(run, f, **kw), leaderboard_behaviours(run, f, **kw)
    stopping = run.manifest.stopping
    if (stops := stopping_table(run)) is not None:  # beyond the paper: where each setup stopped, and why
        a.tables["stopping"] = stops
    if not judges or board.filter(pl.col("origin").ne_missing(ORIGIN_FLOOR))["distance"].is_null().all():
        paired = board.filter((pl.col("setup") != FLOOR) & (pl.col("n") > 0)) if not board.is_empty() else board
        why = (
            "this run has no LLM judge with fine-grained judgments"
            if not judges
            else "no setup has a valid fine-grained judgment paired with a judged human reference (see invalid_rates)"
            if paired.is_empty()
            else "every setup rests on one instance judged validly beside its human reference, and a distance needs two "
            "(its square's estimate subtracts the differences' variance; the table lists each setup's n and D)"
        )
        how = (
            HOW["judge"]
            if not judges or paired.is_empty()
            else "judge at least two instances of each setup and their human references (the judge's max_per_dataset "
            "or datasets in the params), then `cocoeval run PARAMS --stage judge`"
        )
        tt = turn_taking(turn_taking_frame(run), **kw)
        if not tt.is_empty():  # the judge-free part stands without a judge
            a.tables["turn_taking"] = tt
        if not board.is_empty():
            a.tables["leaderboard"] = board
        return Leaderboard(stopping, NotRun(f"the leaderboard of simulators: {why}", how), k, iv)
    a.tables["leaderboard"] = board
    a.tables["behaviours"] = per_b
    names = setup_labels(f)
    boards = []
    for judge in board["judge"].unique(maintain_order=True).to_list():
        part = board.filter(pl.col("judge") == judge)
        fl = part.filter(pl.col("origin") == ORIGIN_FLOOR).row(0, named=True)
        entries = []
        for r in part.filter(pl.col("origin").ne_missing(ORIGIN_FLOOR)).iter_rows(named=True):
            farthest = None
            if r["distance"] is not None:
                b = per_b.filter((pl.col("judge") == judge) & (pl.col("setup") == r["setup"])).sort(
                    pl.col("diff").abs(), descending=True
                )
                if b.height:
                    worst = b.row(0, named=True)
                    farthest = (names.get(worst["behaviour"], worst["behaviour"]), worst["diff"])
            entries.append(
                BoardEntry(
                    setup=r["setup"],
                    group=r["group"],
                    rank=r["rank"],
                    rank_low=r["rank_low"],
                    rank_high=r["rank_high"],
                    distance=Estimate.of(r, "distance"),
                    farthest=farthest,
                    consistency_gap=r["consistency_gap"],
                    collaborativeness_gap=r["collaborativeness_gap"],
                    likert_n=r["likert_n"],
                    auc=None
                    if r["auc"] is None
                    else Estimate(r["auc"], r["auc_ci_low"], r["auc_ci_high"], r["auc_n"] or 0),
                    counts=Counted(
                        r["continuations_ok"],
                        r["continuations"],
                        r["unknown_speaker_share"],
                        r["judgments_valid"],
                        r["judgments"],
                    ),
                    note=r["note"],
                )
            )
        floor_of = FloorDistance(fl["n"], fl["distance"], fl["ci_low"], fl["ci_high"], fl["ci_note"])
        boards.append(JudgeBoard(judge, floor_of, tuple(entries)))
    from . import charts

    a.charts["leaderboard"] = charts.leaderboard_chart(board)
    return Leaderboard(stopping, None, k, iv, tuple(boards))
