"""Paired setup-vs-setup comparisons and rank intervals (beyond the paper): is simulator a
closer to the humans than simulator b, behaviour by behaviour and in the profile distance, and
which ranks of the leaderboard are settled?

Every comparison is made under one judge, on the instances both setups have a valid fine-grained
judgment for (``n``), and its uncertainty is clustered by **source conversation** (the windows of
one meeting share its speakers, topic and style, so they are not independent draws):

- **Per behaviour**: the mean paired difference a − b in occurrences per conversation. Interval:
  the 95% bootstrap that resamples source conversations (every window of a drawn conversation
  comes along; the estimate in a resample is its sum of differences over its number of
  instances), re-centred on the estimate and widened by √(C/(C − 1))·t_{C−1}/z for C
  conversations (``recentred``, as the leaderboard's distance interval). Test: the two-sided
  sign-flip test of the per-conversation sums of differences (``inference.sign_flip_pvalues`` on
  one sum per conversation): under the null that a and b are exchangeable within each
  conversation (the same simulator under two names), swapping a and b throughout a conversation
  flips that conversation's sum and leaves the others alone, so the test is exact whatever the
  correlation between the windows of a conversation; when they are not exchangeable but their
  means are equal, the sums are independent with mean 0 and the test holds its level as the
  conversations grow (the randomization variance Σ S_c² estimates the sum's). With one window per
  conversation it is the workbench's paired sign-flip test. Corrected over the behaviours of the
  pair (Holm by default, Benjamini–Hochberg available; named in ``PairedComparison.correction`` and
  in every output).
- **The profile distance** to the humans (the leaderboard's root mean square of the true
  per-behaviour differences from the human reference): on the instances a, b and the humans all
  share, distance(a) − distance(b). Each square is estimated without the upward bias of squared
  noise by the products of differences from *different* conversations only,
  mean_k [(Σ_c A_ck)² − Σ_c A_ck²] / (n² − Σ_c n_c²) (A_c the conversation's sums of setup −
  human, n_c its windows; ``cluster_square``): unbiased when conversations are independent, however
  their windows are correlated, and ``leaderboard.unbiased_square`` when every conversation gives
  one instance. Interval: the conversation bootstrap of the difference of the distances, re-centred
  on the estimate and widened for few conversations (``recentred``). Test: of the difference of the
  squares Q_a − Q_b (``square_diff``: smooth near 0, where a distance's estimate sits above a true
  0), studentized by the standard deviation of its conversation resamples, against Student's t
  with C − 1 degrees of freedom (``square_test``), with the matching interval of the difference of
  the squares (it excludes 0 exactly when p < 0.05; the distances' interval, on another scale and
  biased near 0, may not agree with the test: the verdict is the test's). Not a sign-flip
  test: swapping a and b within a conversation is exact only when they are exchangeable, and two
  setups can be equally far from the humans in different ways (one under-producing what the other
  over-produces), where a swap test rejects almost always; the studentized test holds its level
  there too. The distance rows of one judge are Holm-corrected over all its pairs (the family of
  the rank intervals).
- **Rank intervals** (Mogstad, Romano, Shaikh & Wilhelm 2024, "Inference for ranks", by
  simultaneous pairwise tests): for the K setups the leaderboard ranks, every pair's distance test
  above, Holm over the K(K − 1)/2 pairs; a rejection with Q_a < Q_b says a is confidently closer to
  the humans. rank_low = 1 + #setups confidently closer, rank_high = K − #setups confidently
  farther. All K true ranks lie in their intervals at once with probability ≥ 95% when the tests
  hold their level (ties share the smallest rank, "min"); a setup whose interval spans more than
  one rank is unsettled ("2–4").

Known truth (level, power, coverage): ``benchmarks/paired.py``; figures in docs/testing.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from cocoeval.core.targets import REFERENCE

from . import inference, stats
from .frames import judges_of, setups_of
from .paired_prose import CloserPair, JudgePairs, SetupPairs, render_setup_pairs
from .paper_stats import conditions
from .rq_prose import NotRun
from .store import derived_frame, made_for_run

if TYPE_CHECKING:
    from .answer import Answer
    from .frames import Frames
    from .store import RunLike

DISTANCE = "distance"
"""The ``behaviour`` of a pair's row for the profile distance to the humans."""
A_HIGHER, B_HIGHER, NO_DIFF = "a higher", "b higher", "no significant difference"
A_FARTHER, B_FARTHER = "a farther", "b farther"
"""The distance rows' verdicts: which setup is confidently farther from the humans."""
DEGENERATE_SE = 1e-12
"""A resampled spread under this share of the estimate's size is no spread (``square_test``)."""
MIN_CLUSTERS = 5
"""Fewest source conversations behind a pair's interval and test: below it a conversation
bootstrap has almost nothing to resample and a sign-flip test of 4 sums cannot reach p ≤ 0.05."""

METHOD = (
    "paired differences a − b on the instances both setups have (for the distance: also the humans), 95% "
    "bootstrap intervals resampling source conversations ({resamples} resamples, seed {seed}); two-sided sign-flip "
    "tests of the per-conversation sums of differences; for the distance: the difference of the squares (unbiased "
    "by products across conversations) studentized by its conversation resamples, Student's t; "
    "{correction} over the behaviours of each pair, Holm over the pairs for the distance; rank intervals: "
    "simultaneous pairwise distance tests (Holm over all pairs; Mogstad, Romano, Shaikh & Wilhelm 2024); "
    "beyond the paper"
)


@dataclass(frozen=True)
class PairRow:
    """One comparison of setup a against setup b under one judge: per behaviour (mean
    occurrences per conversation) or for the profile distance to the humans (``DISTANCE``)."""

    judge: str
    a: str
    b: str
    behaviour: str
    n: int
    clusters: int
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None
    p_adj: float | None
    verdict: str | None
    note: str | None
    mean_a: float | None = None
    """a's mean (per behaviour) or distance to the humans, on these instances."""
    mean_b: float | None = None
    square_diff: float | None = None
    """The distance row only: the difference of the unbiased squares Q_a − Q_b (what its test is
    of; smooth near 0, so its interval covers where the distances' difference is biased: a setup at
    distance 0 is estimated above it), with its 95% interval."""
    square_ci_low: float | None = None
    square_ci_high: float | None = None


@dataclass(frozen=True)
class RankInterval:
    judge: str
    setup: str
    rank: int
    rank_low: int
    rank_high: int
    settled: bool
    distance: float | None = None
    n: int = 0

    @property
    def text(self) -> str:
        """ "2" when settled, "2–4" when not."""
        return str(self.rank) if self.settled else f"{self.rank_low}–{self.rank_high}"


PAIR_SCHEMA: dict[str, Any] = {
    "judge": pl.Utf8,
    "a": pl.Utf8,
    "b": pl.Utf8,
    "behaviour": pl.Utf8,
    "n": pl.Int64,
    "clusters": pl.Int64,
    "diff": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p": pl.Float64,
    "p_adj": pl.Float64,
    "verdict": pl.Utf8,
    "note": pl.Utf8,
    "mean_a": pl.Float64,
    "mean_b": pl.Float64,
    "square_diff": pl.Float64,
    "square_ci_low": pl.Float64,
    "square_ci_high": pl.Float64,
}
RANK_SCHEMA: dict[str, Any] = {
    "judge": pl.Utf8,
    "setup": pl.Utf8,
    "rank": pl.Int64,
    "rank_low": pl.Int64,
    "rank_high": pl.Int64,
    "settled": pl.Boolean,
    "distance": pl.Float64,
    "n": pl.Int64,
}


@dataclass(frozen=True)
class PairedComparison:
    rows: list[PairRow]
    ranks: list[RankInterval]
    correction: str
    """"holm" or "bh": over the behaviours of each pair (the distance rows: Holm over the pairs)."""
    method: str

    def frame(self) -> pl.DataFrame:
        return (
            pl.DataFrame([asdict(r) for r in self.rows], schema=PAIR_SCHEMA, orient="row")
            if self.rows
            else (pl.DataFrame(schema=PAIR_SCHEMA))
        )

    def rank_frame(self) -> pl.DataFrame:
        rows = [asdict(r) for r in self.ranks]
        return pl.DataFrame(rows, schema=RANK_SCHEMA, orient="row") if rows else pl.DataFrame(schema=RANK_SCHEMA)


# ------------------------------------------------------------------ the statistics on arrays


def cluster_sums(x: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(C, k) sums of the rows of ``x`` (n, k) per cluster code in ``groups`` (n,) with codes
    0..C−1, and the (C,) sizes."""
    c = int(groups.max()) + 1 if len(groups) else 0
    out = np.zeros((c, x.shape[1]))
    np.add.at(out, groups, x)
    return out, np.bincount(groups, minlength=c).astype(float)


def cluster_square(sums: np.ndarray, sizes: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """The estimate of mean_k δ_k² (δ the true mean of the differences) from the per-cluster sums
    ``sums`` (C, K) of the differences and the cluster sizes (C,), using only products of
    differences from different clusters: mean_k [(Σ_c S_ck)² − Σ_c S_ck²] / (n² − Σ_c n_c²).
    With one instance per cluster it is ``leaderboard.unbiased_square``. With ``w`` (B, C) cluster
    weights (how often a resample draws each cluster) one estimate per resample (B,), each drawn
    copy of a cluster counted as a cluster of its own (a resample is a sample of conversations):
    [(Σ w S)² − Σ w S²] / ((Σ w n)² − Σ w n²), which with one instance per cluster is the
    leaderboard's unbiased square of the resampled instances. NaN when there is one cluster."""
    if w is None:
        w = np.ones((1, len(sizes)))
        one = True
    else:
        one = False
    tot = w @ sums  # (B, K)
    within = w @ np.square(sums)
    n2 = np.square(w @ sizes) - w @ np.square(sizes)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(n2 > 0, np.mean(np.square(tot) - within, axis=1) / np.where(n2 > 0, n2, 1.0), np.nan)
    return np.asarray(q[0]) if one else q


def recentred(point: np.ndarray | float, boot: np.ndarray, clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval (per column of ``boot``, (B,) or (B, k)) of ``recentred_interval``
    with the number of conversations in place of n: the resamples shifted to centre on ``point``
    and their spread scaled by √(C/(C − 1))·t_{C−1}/z (a resample's variance is the sample's with
    ddof 0, and Student's t for few conversations), read at 2.5% and 97.5%."""
    from scipy.special import ndtri, stdtrit  # scipy.stats' norm.ppf and t.ppf, without importing scipy.stats

    widen = np.sqrt(clusters / (clusters - 1)) * stdtrit(clusters - 1, 0.975) / ndtri(0.975)
    shifted = np.asarray(point) + (boot - boot.mean(axis=0)) * widen
    lo, hi = np.percentile(shifted, stats.PERCENTILES, axis=0)
    return lo, hi


def cluster_weights(clusters: int, resamples: int, seed: int) -> np.ndarray:
    """(B, C) how often each resample draws each of ``clusters`` conversations: the draws of
    ``stats.boot_index`` over conversations, so with one instance per conversation the resamples
    are the leaderboard's resamples of instances."""
    idx = stats.boot_index(clusters, resamples, seed)
    b = len(idx)
    return (
        np.bincount((idx + np.arange(b)[:, None] * clusters).ravel(), minlength=b * clusters)
        .reshape(b, clusters)
        .astype(np.float64)
    )


def square_test(point: float, boot: np.ndarray, clusters: int) -> tuple[float, float | None, float | None]:
    """The two-sided p of the difference of two unbiased squares ``point`` (Q_a − Q_b) being 0,
    and its 95% interval: studentized by the standard deviation of its conversation-bootstrap
    resamples ``boot`` (ddof 1, times √(C/(C − 1)): a resample's variance is the sample's with
    ddof 0), against Student's t with C − 1 degrees of freedom; the interval point ± t·se, so that
    it excludes 0 exactly when p < 0.05. p 1 when the resamples do not vary and the point is 0,
    NaN when they do not vary and it is not (no spread to judge it by); no interval then."""
    from scipy.special import stdtr, stdtrit  # scipy.stats' t.sf and t.ppf, without importing scipy.stats

    se = float(np.std(boot, ddof=1)) * np.sqrt(clusters / (clusters - 1)) if len(boot) > 1 else 0.0
    if not se > DEGENERATE_SE * max(1.0, abs(point)):
        return (1.0 if point == 0 else float("nan")), None, None
    half = float(stdtrit(clusters - 1, 0.975)) * se
    return float(2 * stdtr(clusters - 1, -abs(point) / se)), point - half, point + half


def _codes(conv: list[str]) -> np.ndarray:
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(c, len(seen)) for c in conv], dtype=np.int64)


@dataclass(frozen=True)
class _Target:
    ids: list[str]
    x: np.ndarray  # (n, K)
    pos: dict[str, int]


def _matrices(counts: pl.DataFrame, behaviours: list[str]) -> tuple[dict[str, _Target], dict[str, str]]:
    mats: dict[str, _Target] = {}
    conv: dict[str, str] = {}
    if counts.is_empty():
        return mats, conv
    for r in counts.select("instance_id", "conversation").unique().iter_rows():
        conv[r[0]] = r[1]
    for (t,), g in counts.group_by("target", maintain_order=True):
        ids, x = stats.count_matrix(g.select("instance_id", "behaviour", "count"), behaviours)
        mats[str(t)] = _Target(ids, x, {i: k for k, i in enumerate(ids)})
    return mats, conv


def _note(n: int, clusters: int, min_n: int) -> str | None:
    if n < min_n:
        return inference.too_small(n, min_n)
    if clusters < MIN_CLUSTERS:
        return f"too few source conversations ({clusters} < {MIN_CLUSTERS})"
    return None


class _Shared:
    """What the pairs of one judge share, computed once (the same operations on the same arrays as
    one pair alone, so the same numbers): the conversation weights of each number of
    conversations, each setup's per-conversation sums of differences from the humans (and their
    squares, resampled) on a set of instances, and each pair's distance comparison (the rank
    intervals test the pairs the table has already tested)."""

    def __init__(self, resamples: int, seed: int) -> None:
        self.resamples, self.seed = resamples, seed
        self.weights: dict[int, np.ndarray] = {}
        self.squares: dict[tuple[int, int, tuple[str, ...]], list[Any]] = {}
        self.pairs: dict[tuple[str, str], dict[str, Any]] = {}

    def w(self, clusters: int) -> np.ndarray:
        if clusters not in self.weights:
            self.weights[clusters] = cluster_weights(clusters, self.resamples, self.seed)
        return self.weights[clusters]

    def square(self, t: _Target, h: _Target, ids: list[str], codes: np.ndarray) -> list[Any]:
        """[sums, sizes, Q, resampled Q (None until asked)] of ``t`` − the humans on ``ids``."""
        key = (id(t), id(h), tuple(ids))
        hit = self.squares.get(key)
        if hit is None:
            d, sizes = cluster_sums(t.x[[t.pos[i] for i in ids]] - h.x[[h.pos[i] for i in ids]], codes)
            hit = self.squares[key] = [d, sizes, float(cluster_square(d, sizes)), None]
        return hit

    def square_boot(self, hit: list[Any], clusters: int) -> np.ndarray:
        if hit[3] is None:
            hit[3] = cluster_square(hit[0], hit[1], self.w(clusters))
        return hit[3]


def _distance_pair(
    ta: _Target,
    tb: _Target,
    th: _Target,
    conv: dict[str, str],
    resamples: int,
    seed: int,
    min_n: int,
    *,
    with_interval: bool = True,
    shared: _Shared | None = None,
) -> dict[str, Any]:
    """The distance comparison of a and b on the instances a, b and the humans share (without
    ``with_interval``: the estimate and the test only, as the rank intervals need); ``shared``:
    what the pairs of one judge share (``_Shared``)."""
    sh = shared if shared is not None else _Shared(resamples, seed)
    ids = [i for i in ta.ids if i in tb.pos and i in th.pos]
    codes = _codes([conv[i] for i in ids])
    n, clusters = len(ids), (int(codes.max()) + 1 if ids else 0)
    out: dict[str, Any] = {"n": n, "clusters": clusters, "note": _note(n, clusters, min_n)}
    if n == 0 or clusters < 2:
        out["note"] = out["note"] or "one source conversation: no distance (its square needs two)"
        return out
    sa, sb = sh.square(ta, th, ids, codes), sh.square(tb, th, ids, codes)
    qa, qb = sa[2], sb[2]
    dist_a, dist_b = float(np.sqrt(max(qa, 0.0))), float(np.sqrt(max(qb, 0.0)))
    out.update(diff=dist_a - dist_b, mean_a=dist_a, mean_b=dist_b, square_diff=qa - qb)
    if out["note"]:
        return out
    qa_b, qb_b = sh.square_boot(sa, clusters), sh.square_boot(sb, clusters)
    out["p"], slo, shi = square_test(qa - qb, qa_b - qb_b, clusters)
    if not with_interval:
        return out
    boot = np.sqrt(np.maximum(qa_b, 0)) - np.sqrt(np.maximum(qb_b, 0))
    note = inference.ci_notes(n, boot[:, None], min_n)[0]
    lo, hi = recentred(out["diff"], boot, clusters)
    if slo is not None and shi is not None:
        out["square_ci_low"], out["square_ci_high"] = inference.interval(slo, shi, note)
    out["ci_low"], out["ci_high"] = inference.interval(float(lo), float(hi), note)
    return out


def _verdict(
    diff: float | None,
    p_adj: float | None,
    alpha: float = inference.ALPHA,
    words: tuple[str, str] = (A_HIGHER, B_HIGHER),
) -> str | None:
    if diff is None or p_adj is None or not np.isfinite(p_adj):
        return None
    if p_adj <= alpha and diff != 0:
        return words[0] if diff > 0 else words[1]
    return NO_DIFF


def _opt(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def compare_setups(
    counts: pl.DataFrame,
    behaviours: list[str],
    *,
    judge: str,
    setups: list[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    correction: str = "holm",
    min_n: int = inference.MIN_N,
) -> PairedComparison:
    """Every pair (a, b) of ``setups`` (default: every target of ``counts`` but the human
    reference, in order of appearance; a before b in that order) compared per behaviour and in
    the distance to the humans, and the rank interval of every setup whose distance rests on at
    least ``min_n`` instances (module docstring). ``counts``: one judge's valid fine-grained
    judgments, columns target, instance_id, conversation, behaviour, count (``counts_of``)."""
    inference.check_params(resamples=resamples, min_n=min_n, correction=correction)
    if correction not in ("holm", "bh"):
        from cocoeval.core.errors import ConfigError

        raise ConfigError(f"unknown correction {correction!r} for paired comparisons", hint="use holm or bh")
    mats, conv = _matrices(counts, behaviours)
    names = setups if setups is not None else [t for t in mats if t != REFERENCE]
    human = mats.get(REFERENCE)
    empty = _Target([], np.empty((0, len(behaviours))), {})
    shared = _Shared(resamples, seed)
    pairs: list[dict[str, Any]] = []
    for a, b in combinations(names, 2):  # the estimates and intervals, pair by pair
        ta, tb = mats.get(a, empty), mats.get(b, empty)
        ids = [i for i in ta.ids if i in tb.pos]
        codes = _codes([conv[i] for i in ids])
        n, clusters = len(ids), (int(codes.max()) + 1 if ids else 0)
        note = _note(n, clusters, min_n) if n else f"no instance where both {a} and {b} have a valid judgment"
        xa = ta.x[[ta.pos[i] for i in ids]] if n else np.empty((0, len(behaviours)))
        xb = tb.x[[tb.pos[i] for i in ids]] if n else np.empty((0, len(behaviours)))
        d = xa - xb
        pair: dict[str, Any] = {"a": a, "b": b, "n": n, "clusters": clusters, "xa": xa, "xb": xb, "sums": None}
        pair["diff"] = d.mean(axis=0) if n else np.full(len(behaviours), np.nan)
        pair["lo"] = pair["hi"] = np.full(len(behaviours), np.nan)
        pair["notes"] = [note] * len(behaviours)
        if note is None:
            s, sizes = cluster_sums(d, codes)
            w = shared.w(clusters)
            boot = (w @ s) / (w @ sizes)[:, None]
            pair["lo"], pair["hi"] = recentred(pair["diff"], boot, clusters)
            pair["notes"] = inference.ci_notes(n, boot, min_n)
            pair["sums"] = s
        pairs.append(pair)
    tested = [x for x in pairs if x["sums"] is not None]
    # the sign-flip tests of every pair at once, those with as many conversations together: the
    # same sign vectors as one pair alone (differences of counts: their sums are exact)
    for x, p in zip(tested, inference.sign_flip_blocks([x["sums"] for x in tested], seed=seed), strict=True):
        x["p"] = p
    rows: list[PairRow] = []
    dist_rows: list[dict[str, Any]] = []
    for x in pairs:
        a, b, n, clusters, xa, xb, diff, lo, hi = (
            x[k] for k in ("a", "b", "n", "clusters", "xa", "xb", "diff", "lo", "hi")
        )
        notes: list[str | None] = x["notes"]
        p = np.full(len(behaviours), np.nan)
        if x["sums"] is not None:
            p = np.where([v is None for v in notes], x["p"], np.nan)  # a degenerate difference is not tested
        p_adj = inference.adjust_pvalues(p, correction)
        for k, beh in enumerate(behaviours):
            ci = inference.interval(lo[k], hi[k], notes[k]) if np.isfinite(lo[k]) else (None, None)
            rows.append(
                PairRow(
                    judge=judge,
                    a=a,
                    b=b,
                    behaviour=beh,
                    n=n,
                    clusters=clusters,
                    diff=_opt(diff[k]) if n else None,
                    ci_low=ci[0],
                    ci_high=ci[1],
                    p=_opt(p[k]),
                    p_adj=_opt(p_adj[k]),
                    verdict=_verdict(_opt(diff[k]) if n else None, _opt(p_adj[k])),
                    note=notes[k] if ci[0] is None else None,
                    mean_a=_opt(xa[:, k].mean()) if n else None,
                    mean_b=_opt(xb[:, k].mean()) if n else None,
                )
            )
        dist = (
            _distance_pair(mats.get(a, empty), mats.get(b, empty), human, conv, resamples, seed, min_n, shared=shared)
            if human is not None
            else {"n": 0, "clusters": 0, "note": "no valid human reference judged by this judge"}
        )
        shared.pairs[(a, b)] = dist
        dist_rows.append({"a": a, "b": b, **dist})
    p_all = inference.adjust_pvalues(np.array([r.get("p", np.nan) for r in dist_rows], dtype=float), "holm")
    for r, q in zip(dist_rows, p_all, strict=True):
        rows.append(
            PairRow(
                judge=judge,
                a=r["a"],
                b=r["b"],
                behaviour=DISTANCE,
                n=r["n"],
                clusters=r["clusters"],
                diff=_opt(r.get("diff")),
                ci_low=r.get("ci_low"),
                ci_high=r.get("ci_high"),
                p=_opt(r.get("p")),
                p_adj=_opt(q),
                verdict=_verdict(_opt(r.get("square_diff")), _opt(q), words=(A_FARTHER, B_FARTHER)),
                note=r["note"],
                mean_a=_opt(r.get("mean_a")),
                mean_b=_opt(r.get("mean_b")),
                square_diff=_opt(r.get("square_diff")),
                square_ci_low=r.get("square_ci_low"),
                square_ci_high=r.get("square_ci_high"),
            )
        )
    ranks = rank_intervals(mats, conv, names, judge=judge, resamples=resamples, seed=seed, min_n=min_n, shared=shared)
    return PairedComparison(
        rows=rows,
        ranks=ranks,
        correction=correction,
        method=METHOD.format(resamples=resamples, seed=seed, correction=inference.CORRECTION_NAMES[correction]),
    )


def distance_of(square: np.ndarray | float) -> np.ndarray:
    """The distance shown for an unbiased square: √max(square, 0)."""
    return np.sqrt(np.maximum(square, 0.0))


def recentred_interval(point: float, boot: np.ndarray, n: int) -> tuple[float, float]:
    """The 95% percentile interval of the resampled estimates ``boot`` after removing the
    bootstrap's own bias and narrowness: shifted so that they centre on ``point`` (for the
    unbiased square, the resamples' mean exceeds it by about Σ_b s_b²/(nK): a resample is the
    sample plus noise) and their spread scaled by √(n/(n − 1))·t_{n−1}/z (a resample's variance is
    the sample's with ddof 0, and Student's t for the few instances a leaderboard may rest on).
    Without the shift the interval of a simulator drawn from the humans excludes 0; without the
    scaling a far simulator on 12 instances is covered 0.90 of the time instead of 0.93
    (benchmarks/known_truth.py). One column of ``recentred`` (n in place of its conversations)."""
    lo, hi = recentred(point, boot, n)
    return float(lo), float(hi)


def setup_distance(t: _Target, h: _Target, conv: dict[str, str]) -> tuple[float | None, int]:
    """A setup's distance to the humans on the instances both have (``cluster_square``), and n."""
    ids = [i for i in t.ids if i in h.pos]
    if not ids:
        return None, 0
    codes = _codes([conv[i] for i in ids])
    s, sizes = cluster_sums(t.x[[t.pos[i] for i in ids]] - h.x[[h.pos[i] for i in ids]], codes)
    q = float(cluster_square(s, sizes))
    return (float(np.sqrt(max(q, 0.0))) if np.isfinite(q) else None), len(ids)


def rank_rule(distances: list[float], closer: set[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(rank, rank_low, rank_high) of each of K setups from their distances (ties share the
    smallest rank) and the pairs (i, j) where i is confidently closer to the humans than j:
    rank_low = 1 + #{j: (j, i) in closer}, rank_high = K − #{j: (i, j) in closer}."""
    k = len(distances)
    out = []
    for i, d in enumerate(distances):
        rank = 1 + sum(x < d for x in distances)
        low = 1 + sum((j, i) in closer for j in range(k))
        high = k - sum((i, j) in closer for j in range(k))
        out.append((rank, min(low, rank), max(high, rank)))
    return out


def rank_intervals(
    mats: dict[str, _Target],
    conv: dict[str, str],
    setups: list[str],
    *,
    judge: str,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    alpha: float = inference.ALPHA,
    shared: _Shared | None = None,
) -> list[RankInterval]:
    """The rank interval of every setup whose distance to the humans rests on at least ``min_n``
    instances (module docstring): pairwise distance tests, Holm over all pairs (a pair that
    ``shared`` has tested already is not tested again)."""
    human = mats.get(REFERENCE)
    if human is None:
        return []
    ranked: list[tuple[str, float, int]] = []
    for s in setups:
        if s in mats:
            d, n = setup_distance(mats[s], human, conv)
            if d is not None and n >= min_n:
                ranked.append((s, d, n))
    pairs = list(combinations(range(len(ranked)), 2))
    ps, signs = np.full(len(pairs), np.nan), []
    sh = shared if shared is not None else _Shared(resamples, seed)
    for m, (i, j) in enumerate(pairs):
        r = sh.pairs.get((ranked[i][0], ranked[j][0])) or _distance_pair(
            mats[ranked[i][0]], mats[ranked[j][0]], human, conv, resamples, seed, min_n, with_interval=False, shared=sh
        )
        signs.append(r.get("square_diff", 0.0))
        ps[m] = r.get("p", np.nan)
    p_adj = inference.adjust_pvalues(ps, "holm") if pairs else np.empty(0)
    closer: set[tuple[int, int]] = set()
    for (i, j), q, sgn in zip(pairs, p_adj, signs, strict=True):
        if np.isfinite(q) and q <= alpha and sgn != 0:
            closer.add((i, j) if sgn < 0 else (j, i))
    out = []
    for (s, d, n), (rank, low, high) in zip(ranked, rank_rule([d for _, d, _ in ranked], closer), strict=True):
        out.append(RankInterval(judge, s, rank, low, high, low == high, d, n))
    return out


def rank_table(
    counts: pl.DataFrame,
    behaviours: list[str],
    *,
    judge: str,
    setups: list[str],
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
) -> list[RankInterval]:
    """The rank intervals of ``setups`` alone (``rank_intervals``) from one judge's counts with
    their conversations (``counts_of``): what the leaderboard shows beside each rank."""
    mats, conv = _matrices(counts.filter(pl.col("target").is_in([*setups, REFERENCE])), behaviours)
    return rank_intervals(mats, conv, setups, judge=judge, resamples=resamples, seed=seed, min_n=min_n)


def counts_of(counts: pl.DataFrame, instances: pl.DataFrame, judge: str) -> pl.DataFrame:
    """One LLM judge's valid fine-grained counts (``Frames.counts``) with each instance's source
    conversation (``Frames.instances``), the input of ``compare_setups``."""
    c = counts.filter((pl.col("judge") == judge) & ~pl.col("human"))
    return c.join(instances.select("instance_id", "conversation"), on="instance_id", how="left").select(
        "target", "instance_id", pl.col("conversation").fill_null(pl.col("instance_id")), "behaviour", "count"
    )


def answer(
    f: Frames,
    judges: list[str],
    setups: list[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    correction: str = "holm",
    tables: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> Answer:
    """The paired answer: per LLM judge, every pair of ``setups`` compared (``compare_setups``):
    tables ``paired`` (every row, with the correction named) and ``rank_intervals``, the chart
    ``paired`` (``charts.paired_chart``) and the pairs that hold, in words, rendered
    (``render_setup_pairs``) from its result, a ``SetupPairs`` in ``Answer.result``."""
    from .answer import Answer

    a = Answer("Which simulator differs from which, on the same instances, and which ranks are settled?")
    x = _answer(a, f, judges, setups, resamples=resamples, seed=seed, min_n=min_n, correction=correction, tables=tables)
    a.text, a.result = render_setup_pairs(x), x
    return a


def run_answer(
    run: RunLike,
    f: Frames,
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    correction: str = "holm",
) -> Answer:
    """``answer`` for every LLM judge and every setup of ``run`` (``frames.judges_of``,
    ``frames.setups_of``): the ``paired`` analysis. Its tables are ``paired_table`` and
    ``rank_interval_table`` (for the run's own frames, those of the default settings kept beside
    the run)."""
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "min_n": min_n}
    tables = (
        paired_table(run, f, **kw, correction=correction),
        rank_interval_table(run, f, **kw, correction=correction),
    )
    return answer(f, judges_of(f), setups_of(f, conditions(run)), **kw, correction=correction, tables=tables)


def _tables(
    f: Frames, judges: list[str], setups: list[str], *, resamples: int, seed: int, min_n: int, correction: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per judge of ``judges``, every pair of ``setups`` compared (``compare_setups``): the pairs
    (with the correction named) and the rank intervals, each judge's rows after the last's."""
    frames, ranks = [pl.DataFrame(schema={**PAIR_SCHEMA, "correction": pl.Utf8})], [pl.DataFrame(schema=RANK_SCHEMA)]
    for judge in judges if len(setups) >= 2 else []:
        cmp = compare_setups(
            counts_of(f.counts, f.instances, judge),
            f.taxonomy.ids,
            judge=judge,
            setups=setups,
            resamples=resamples,
            seed=seed,
            correction=correction,
            min_n=min_n,
        )
        frames.append(cmp.frame().with_columns(correction=pl.lit(cmp.correction)))
        ranks.append(cmp.rank_frame())
    return pl.concat(frames), pl.concat(ranks)


def _run_tables(
    run: RunLike, f: Frames, *, resamples: int, seed: int, min_n: int, correction: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``_tables`` of every LLM judge and setup of the run in the frames ``f``, once per frames
    and settings (``paired_table`` and ``rank_interval_table`` share them)."""
    return made_for_run(
        run,
        f,
        ("paired tables", resamples, seed, min_n, correction),
        lambda: _tables(
            f,
            judges_of(f),
            setups_of(f, conditions(run)),
            resamples=resamples,
            seed=seed,
            min_n=min_n,
            correction=correction,
        ),
    )


@derived_frame("paired", {**PAIR_SCHEMA, "correction": pl.Utf8}, by_taxonomy=True, lazy=True)
def paired_table(
    run: RunLike,
    f: Frames,
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    correction: str = "holm",
) -> pl.DataFrame:
    """The ``paired`` table of every LLM judge and setup of the run in ``f``; for the run's own
    frames, that of the default settings kept with them (``store.derived_frame``)."""
    return _run_tables(run, f, resamples=resamples, seed=seed, min_n=min_n, correction=correction)[0]


@derived_frame("rank_intervals", RANK_SCHEMA, by_taxonomy=True, lazy=True)
def rank_interval_table(
    run: RunLike,
    f: Frames,
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    correction: str = "holm",
) -> pl.DataFrame:
    """The rank intervals of every LLM judge's setups, computed beside the pairs of ``correction``
    (``paired_table``: one computation for both; the intervals do not depend on it); those of the
    default settings kept with the run's own frames."""
    return _run_tables(run, f, resamples=resamples, seed=seed, min_n=min_n, correction=correction)[1]


def _answer(
    a: Answer,
    f: Frames,
    judges: list[str],
    setups: list[str],
    *,
    resamples: int,
    seed: int,
    min_n: int,
    correction: str,
    tables: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> SetupPairs:
    """The paired answer's result; its tables and chart added to ``a`` (``tables``: those of
    ``_tables``, made already)."""
    from . import charts
    from .coverage import HOW

    if len(setups) < 2 or not judges:
        return SetupPairs(
            NotRun(
                "the paired comparison of setups needs two setups judged by an LLM judge"
                if judges
                else "this run has no LLM judge with fine-grained judgments",
                HOW["setup"].format(s="s", example="gpt41-vanilla-30 and gpt41-vanilla-1") if judges else HOW["judge"],
            )
        )
    if tables is None:
        tables = _tables(f, judges, setups, resamples=resamples, seed=seed, min_n=min_n, correction=correction)
    table = a.tables["paired"] = tables[0]
    a.tables["rank_intervals"] = tables[1]
    method = METHOD.format(resamples=resamples, seed=seed, correction=inference.CORRECTION_NAMES[correction])
    out = []
    for judge in judges:
        part = table.filter((pl.col("judge") == judge) & (pl.col("behaviour") == DISTANCE))
        held = []
        for r in part.filter(pl.col("verdict").is_in([A_FARTHER, B_FARTHER])).iter_rows(named=True):
            flip = r["verdict"] == B_FARTHER  # the gap as the farther one's distance minus the closer one's
            far, near = (r["b"], r["a"]) if flip else (r["a"], r["b"])
            lo, hi = r["ci_low"], r["ci_high"]
            if flip:
                lo, hi = (None if hi is None else -hi), (None if lo is None else -lo)
            held.append(
                CloserPair(near, far, -r["diff"] if flip else r["diff"], lo, hi, r["p_adj"], r["n"], r["clusters"])
            )
        beh = table.filter(
            (pl.col("judge") == judge)
            & (pl.col("behaviour") != DISTANCE)
            & pl.col("verdict").is_in([A_HIGHER, B_HIGHER])
        )
        untested = part.filter(pl.col("p").is_null()).height
        out.append(JudgePairs(judge, part.height, tuple(held), beh.height, untested))
    a.charts["paired"] = charts.paired_chart(table)
    return SetupPairs(None, method, correction, tuple(out))
