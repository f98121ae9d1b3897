"""Corrected rates that fit how the labels were drawn, and which conversations to label next
(beyond the paper; issue #46 items 2-3).

**The estimator** (``design_estimate``): the power-tuned prediction-powered mean (PPI++,
Angelopoulos, Duchi and Zrnic 2023) written with inverse-probability weights, as in *Active
Statistical Inference* (Zrnic and Candès 2024), so that it stays unbiased for any draw whose
inclusion probabilities are known: a uniform random draw (every probability n/N, or drawn/of per
dataset stratum), a further round from the conversations not yet labelled, or an active draw that
favours the conversations where the judge is least reliable. One target (the human reference or
one setup) at a time: the judge errs differently on LLM text than on human text, so each target
has its own correction and λ. For round r of R (its pool U_r: the conversations it could draw),
each conversation i of the target contributes

    ψ_i = Σ_r w_r · [ i ∉ U_r: y_i (labelled before) | i ∈ U_r: λ f_i + ξ_ri (y_i − λ f_i) / π_ri ]

(f: the judge's count, y: the annotators' mean count, ξ: drawn and labelled, π: the recorded
inclusion probability times the share of the round's draw labelled so far, w_r: the round's share
of the labels), and the estimate is the mean of ψ. Each round is unbiased given the rounds before
it, so their weighted mean is too. The variance is the cluster-robust (sandwich) variance of that
mean over **source conversations** (``schema.conversation_of``: the windows of one meeting are not
independent). λ is PPI++'s plug-in: it minimises the variance of ψ over conversations (clipped to
[0, 1]: λ = 0 is the humans' own inverse-probability mean), not the clustered estimate the interval
uses, whose in-sample minimum can be 0 with 2 source conversations. The interval uses Student's t
with (source conversations holding a label) − 1 degrees of freedom, as
``judge_check.small_sample_factor`` does for skewed counts, and none is given below
``MIN_CLUSTERS`` such source conversations.

``ppi-python`` (0.2.3) has ``ppi_mean_ci`` with importance weights for covariate shift, but no
inclusion probabilities over one population and no clusters, hence this short implementation;
``judge_check`` keeps ``ppi-python`` where its assumptions hold (one uniform draw, one window per
source conversation). An independent plain computation agrees in ``tests/analysis/test_active.py``;
coverage of random and active draws on worlds with known truth: ``benchmarks/active_labels.py``.

**The next draw** (``plan_next``): per target, probabilities proportional to the judge's expected
error on each conversation not yet labelled — the square root of the predicted squared residual
(y − f)² (Zrnic and Candès: the variance-optimal probabilities), predicted from the judge's total
count by least squares on the conversations already labelled, else uniform — mixed with a uniform
floor so that no probability is near 0 (``FLOOR``), drawn with exactly ``budget`` conversations
by systematic sampling in random order (which keeps each conversation's probability as given).
The error model is fitted on the judge's total count over behaviours, so a draw favours the
conversations where that total errs: a behaviour whose errors are spread evenly gets no gain and
can get a slightly wider interval than a random draw of the same size.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import polars as pl

    from cocoeval.run.humans import DrawRecord

    from .frames import Frames

METHOD = (
    "design-based PPI++ (inverse-probability weighted, power-tuned; Zrnic and Candès 2024, Active Statistical "
    "Inference), variance clustered by source conversation"
)
FLOOR = 0.3
"""Share of each target's budget spread uniformly over its pool in an active draw: every
probability is at least FLOOR · budget / pool, so no weight 1/π is extreme."""
ACTIVE = "active"
MIN_CLUSTERS = 5
"""Source conversations that must hold a label before a design-based interval is given: with 1
the clustered variance is 0 and with 2 the residuals of the two cluster totals mirror each other;
in ``benchmarks/active_labels.py --few-meetings`` coverage is about 0.93 from 3 to 20 meetings,
and 5 leaves a margin, since a variance from a handful of cluster totals leans on their being
near normal. The ppi path's ``judge_check.MIN_LABELLED`` (labelled windows) applies as well."""


@dataclass(frozen=True)
class Round:
    """One recorded draw of one target's conversations."""

    pool: frozenset[str]
    """The conversations the round could draw."""
    probability: Mapping[str, float]
    """Each pool conversation's inclusion probability as recorded (before the missing-at-random
    adjustment for drawn conversations not yet labelled)."""
    drawn: frozenset[str]
    """The conversations the round drew."""
    mode: str = "random"


@dataclass(frozen=True)
class DesignEstimate:
    """``design_estimate``'s result."""

    estimate: float
    low: float | None
    high: float | None
    se: float
    lam: float
    n_labelled: int
    clusters: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    labelled_clusters: int = 0
    """Source conversations holding at least one label."""


def design_estimate(
    units: Sequence[str],
    clusters: Sequence[str],
    yhat: np.ndarray,
    labels: Mapping[str, float],
    rounds: Sequence[Round],
    alpha: float = 0.05,
    lam: float | None = None,
) -> DesignEstimate:
    """The estimator of the module docstring for one target and behaviour: ``units`` its
    conversations, ``clusters`` their source conversations, ``yhat`` the judge's counts,
    ``labels`` the annotators' mean count of each labelled conversation, ``rounds`` the draws in
    the order made. ``lam`` fixes λ (None: tuned)."""
    from scipy.stats import t as student

    n = len(units)
    f = np.asarray(yhat, dtype=float)
    a, b = np.zeros(n), np.zeros(n)
    notes: list[str] = []
    used: set[str] = set()
    per_round = []
    for r in rounds:
        drawn = [u for u in units if u in r.drawn]
        got = [u for u in drawn if u in labels]
        if got:
            per_round.append((r, len(got) / len(drawn), set(got)))
            if len(got) < len(drawn):
                notes.append(
                    f"{len(drawn) - len(got)} of the {len(drawn)} conversations drawn in a {r.mode} round are not "
                    "labelled yet: the round's probabilities are scaled by the share labelled (missing at random)"
                )
    total = sum(len(g) for _, _, g in per_round)
    guessed = 0
    for r, share, got_set in per_round:
        w = len(got_set) / total
        for i, u in enumerate(units):
            if u in r.pool:
                p = r.probability.get(u)
                if p is None or p <= 0:
                    raise ValueError(f"conversation {u} of a round's pool has no inclusion probability")
                b[i] += w * f[i]
                if u in got_set:
                    pi = min(1.0, p * share)
                    a[i] += w * labels[u] / pi
                    b[i] -= w * f[i] / pi
                    used.add(u)
            elif u in labels:
                a[i] += w * labels[u]
            else:  # neither in the round's pool nor labelled: the judge's count is all there is
                a[i] += w * f[i]
                guessed += 1
    if guessed:
        notes.append(f"{guessed} conversation-round(s) outside a round's pool and unlabelled counted by the judge")
    cl = np.unique(np.asarray(clusters), return_inverse=True)[1]
    k = int(cl.max()) + 1 if n else 0
    m = np.bincount(cl, minlength=k).astype(float)
    ac, bc = np.bincount(cl, a, k), np.bincount(cl, b, k)
    # residuals of the cluster totals around the mean: linear in λ
    ra, rb = ac - a.mean() * m, bc - b.mean() * m
    if lam is None:
        # the plug-in λ of PPI++: it minimises the variance of ψ over conversations, not the
        # clustered estimate the interval uses (minimising that one in-sample can drive it to 0
        # with 2 source conversations, whose residuals sum to 0)
        ua, ub = a - a.mean(), b - b.mean()
        lam = float(np.clip(-(ua @ ub) / (ub @ ub), 0.0, 1.0)) if ub @ ub > 0 else 0.0
    psi = a + lam * b
    est = float(psi.mean())
    var = float(((ra + lam * rb) ** 2).sum() * k / max(k - 1, 1) / n**2) if n else math.nan
    se = math.sqrt(max(var, 0.0))
    held = len({int(cl[i]) for i, u in enumerate(units) if u in used})
    """source conversations that hold a label: the interval's degrees of freedom rest on them"""
    dof = max(1, held - 1)
    if not used:
        return DesignEstimate(est, None, None, se, lam, 0, k, (*notes, "no labelled conversation"), 0)
    if held < MIN_CLUSTERS:
        notes.append(
            f"no interval: the labels come from {held} source conversation(s), and a variance clustered by "
            f"source conversation needs at least {MIN_CLUSTERS} (label windows of more meetings)"
        )
        return DesignEstimate(est, None, None, se, lam, len(used), k, tuple(notes), held)
    q = float(student.ppf(1 - alpha / 2, dof))
    return DesignEstimate(est, est - q * se, est + q * se, se, lam, len(used), k, tuple(notes), held)


def rounds_for(
    records: Sequence[DrawRecord] | None,
    target: str,
    units: Sequence[str],
    dataset: Mapping[str, str],
    labelled: set[str],
) -> list[Round]:
    """The rounds of ``target`` in the run's recorded draws (``run.humans.recorded_draws``), oldest
    first; a random round's probabilities are drawn/of of each dataset stratum it records (else
    its size over its pool), an active round's are the ones it recorded. With no record, the
    labelled conversations are one uniform random draw (what ``judge_check`` assumes, and says)."""
    us = set(units)
    if not records:
        return [Round(frozenset(us), dict.fromkeys(us, len(labelled & us) / len(us)), frozenset(labelled & us))]
    out = []
    for d in records:
        drawn = frozenset(i for i, t in d.targets if t == target)
        if not drawn:
            continue
        excluded = {i for i, t in d.excluded or [] if t == target}
        if d.mode == ACTIVE:
            probs = dict(d.inclusion.get(target) or {})
            out.append(Round(frozenset(us & set(probs)), probs, drawn, ACTIVE))
            continue
        pool = frozenset(us - excluded)
        strata = {k.split("|", 1)[1]: v for k, v in d.per_stratum.items() if k.split("|", 1)[0] == target}
        if strata:
            probs = {u: strata[dataset[u]][0] / strata[dataset[u]][1] for u in pool if dataset[u] in strata}
            pool = frozenset(probs)
        else:
            probs = dict.fromkeys(pool, len(drawn & pool) / max(1, len(pool)))
        out.append(Round(pool, probs, drawn))
    return out


# ---------------------------------------------------------------- the next draw


def inclusion_probabilities(scores: np.ndarray, budget: int, floor: float = FLOOR) -> np.ndarray:
    """Probabilities summing to ``budget`` over a pool: ``floor`` of it uniform, the rest
    proportional to ``scores`` (uniform where every score is 0), none above 1 (a capped
    conversation is certain; the rest is spread again)."""
    s = np.asarray(scores, dtype=float)
    n = len(s)
    if budget >= n:
        return np.ones(n)
    share = s / s.sum() if s.sum() > 0 else np.full(n, 1 / n)
    w = floor / n + (1 - floor) * share
    pi = np.zeros(n)
    fixed = np.zeros(n, dtype=bool)
    left = float(budget)
    for _ in range(n):
        free = ~fixed
        pi[free] = left * w[free] / w[free].sum()
        over = free & (pi >= 1)
        if not over.any():
            break
        fixed |= over
        pi[over] = 1.0
        left = budget - fixed.sum()
    return pi


def systematic_draw(pi: np.ndarray, rng: random.Random) -> list[int]:
    """Indices drawn by systematic sampling in a random order: exactly round(Σπ) of them, each
    with its probability π (Madow's method)."""
    order = list(range(len(pi)))
    rng.shuffle(order)
    cum = np.cumsum([pi[i] for i in order])
    start = rng.random()
    points = start + np.arange(round(float(cum[-1]))) if len(cum) else np.array([])
    hit = np.searchsorted(cum, points - 1e-12, side="right")
    return sorted(order[j] for j in hit if j < len(order))


def error_scores(f_labelled: np.ndarray, e2_labelled: np.ndarray, f_pool: np.ndarray) -> tuple[np.ndarray, str]:
    """How far the judge is expected to be from the humans on each pool conversation: the square
    root of the squared residual (y − f)² predicted from the judge's count f by least squares on
    the labelled conversations (clipped at 0), and what that was; uniform with fewer than 2
    labelled conversations or when every residual is the same."""
    x, e2 = np.asarray(f_labelled, dtype=float), np.asarray(e2_labelled, dtype=float)
    fx = np.asarray(f_pool, dtype=float)
    if len(x) < 2 or np.ptp(e2) == 0:
        return np.ones(len(fx)), "uniform (fewer than 2 labelled conversations, or every error equal)"
    if np.ptp(x) == 0:
        return np.ones(len(fx)), "uniform (the judge gave every labelled conversation the same count)"
    slope, icept = np.polyfit(x, e2, 1)
    scores = np.sqrt(np.clip(icept + slope * fx, 0.0, None))
    return scores, "the judge's predicted error (sqrt of the squared residual fitted on its count)"


def vote_scores(votes: pl.DataFrame, ids: Sequence[str]) -> np.ndarray | None:
    """√Σ p(1 − p) per conversation of ``ids`` over the turns and behaviours of its vote fractions
    (``calibration.judge_votes``: a turn and behaviour not listed has p = 0); None when the
    judge's samples agree everywhere (one sample, or k that never differ): nothing to tell apart."""
    import polars as pl

    if votes.is_empty():
        return None
    per = dict(
        votes.group_by("instance_id").agg((pl.col("fraction") * (1 - pl.col("fraction"))).sum().alias("v")).iter_rows()
    )
    v = np.array([float(per.get(i, 0.0)) for i in ids])
    return np.sqrt(v) if v.max() > 0 else None


@dataclass(frozen=True)
class TargetPlan:
    """What ``plan_next`` chose for one target, and how wide its corrected rates are."""

    target: str
    pool: int
    """Conversations judged and not yet labelled by a human."""
    labelled: int
    drawn: list[str]
    scores: str
    """What the probabilities follow: "the judge's predicted error" or "uniform (why)"."""
    widest: str | None
    """The behaviour whose corrected interval is widest now (None: no interval yet)."""
    half_width: float | None
    """Half the width of that interval now."""
    after: float | None
    """Its half-width expected after this draw is labelled, approximately: the variance scales as
    1/n, with this draw's labels counted by Kish's effective number (Σw)²/Σw² of their weights 1/π."""
    min_probability: float
    max_probability: float


@dataclass(frozen=True)
class NextDraw:
    """The draw of ``plan_next``, ready to record (``record``) and export."""

    judge: str
    budget: int
    seed: int
    targets: list[TargetPlan]
    record: DrawRecord
    """The draw as the run records it (``annotate.exchange.export_items(active=...)`` exports and
    records it): each pool conversation's inclusion probability, which the corrected rates weight by."""


def plan_next(
    f: Frames,
    judge: str,
    budget: int,
    seed: int = 0,
    targets: Sequence[str] | None = None,
    floor: float = FLOOR,
    conversations: Sequence[tuple[str, str]] | None = None,
    rates: pl.DataFrame | None = None,
    votes: pl.DataFrame | None = None,
    draw_number: int = 1,
) -> NextDraw:
    """Per target, ``budget`` conversations to label next with the probabilities of the module
    docstring, among ``conversations`` ((instance id, target) pairs that can be exported; default
    every judged one) not yet labelled by a human; ``rates``, the current corrected rates
    (``judge_check.corrected_rates``), give the widths printed. ``votes`` (``calibration.judge_votes``
    of a judge with ``samples: k``) replaces the error model where its samples disagree somewhere:
    a conversation's score is then √Σ p(1 − p) over its turns and behaviours (the variance of its
    count over the judge's samples; ``vote_scores``). ``draw_number`` (the draw's number in the
    run's record) joins the seed, so that rounds drawn with one --seed do not repeat one stream."""
    import polars as pl

    from . import agreement

    rng = random.Random(f"{seed}|active|{draw_number}")
    humans = [h for h in agreement.annotators(f, "counts") if h != judge]
    c = f.counts
    jc = c.filter(pl.col("judge") == judge)
    per_conv = jc.group_by("target", "instance_id").agg(pl.col("count").sum().alias("f"))
    hc = (
        c.filter(pl.col("judge").is_in(humans))
        .group_by("target", "instance_id", "behaviour")
        .agg(pl.col("count").mean().alias("y"))
    )
    resid = (
        jc.join(hc, on=["target", "instance_id", "behaviour"], how="inner")
        .with_columns(((pl.col("y") - pl.col("count")) ** 2).alias("e2"))
        .group_by("target", "instance_id")
        .agg(pl.col("e2").sum())
        .join(per_conv, on=["target", "instance_id"])
    )
    allowed = None if conversations is None else set(conversations)
    names = sorted(set(per_conv["target"]) if targets is None else targets)
    plans, drawn_pairs, inclusion, pools = [], [], {}, {}
    for target in names:
        part = per_conv.filter(pl.col("target") == target).sort("instance_id")
        done = set(resid.filter(pl.col("target") == target)["instance_id"])
        done |= set(hc.filter(pl.col("target") == target)["instance_id"])
        pool = part.filter(~pl.col("instance_id").is_in(list(done)))
        if allowed is not None:
            pool = pool.filter(pl.col("instance_id").is_in([i for i, t in allowed if t == target]))
        ids = pool["instance_id"].to_list()
        fx = pool["f"].to_numpy().astype(float)
        r = resid.filter(pl.col("target") == target)
        if r.height < 2:
            r = resid  # too few of this target labelled: the error model of every target
        scores, how = error_scores(r["f"].to_numpy(), r["e2"].to_numpy(), fx)
        if votes is not None and ids:
            from_votes = vote_scores(votes.filter(pl.col("target") == target), ids)
            if from_votes is not None:
                scores, how = from_votes, "the judge's vote fractions (√Σ p(1 − p) over its samples)"
        pi = inclusion_probabilities(scores, min(budget, len(ids)), floor) if ids else np.zeros(0)
        picked = [ids[i] for i in systematic_draw(pi, rng)] if ids else []
        drawn_pairs += [(str(i), str(target)) for i in picked]
        inclusion[target] = {i: round(float(p), 12) for i, p in zip(ids, pi, strict=True)}
        pools[target] = len(ids)
        widest = half = after = None
        n_lab = len(done)
        if rates is not None:
            rt = rates.filter(
                (pl.col("target") == target)
                & pl.col("corrected_low").is_not_null()
                & pl.col("corrected_high").is_not_null()
            )
            if not rt.is_empty():
                rt = rt.with_columns(((pl.col("corrected_high") - pl.col("corrected_low")) / 2).alias("hw"))
                top = rt.sort("hw", descending=True).row(0, named=True)
                widest, half = top["behaviour"], float(top["hw"])
                n_lab = n_now = int(top["n_labelled"])
                after = half * math.sqrt(n_now / (n_now + kish_n(pi[[ids.index(i) for i in picked]])))
        plans.append(
            TargetPlan(
                target=target,
                pool=len(ids),
                labelled=n_lab,
                drawn=picked,
                scores=how,
                widest=widest,
                half_width=half,
                after=after,
                min_probability=float(pi.min()) if len(pi) else 0.0,
                max_probability=float(pi.max()) if len(pi) else 0.0,
            )
        )
    from cocoeval.run.humans import DrawRecord

    record = DrawRecord(
        mode=ACTIVE,
        method=METHOD,
        judge=judge,
        seed=seed,
        per_target=budget,
        targets_drawn=names,
        floor=floor,
        targets=sorted(drawn_pairs, key=lambda p: (p[1], p[0])),
        inclusion=inclusion,
        per_stratum={},
        pool=pools,
    )
    return NextDraw(judge=judge, budget=budget, seed=seed, targets=plans, record=record)


def kish_n(pi: np.ndarray) -> float:
    """Kish's effective number of labels drawn with inclusion probabilities ``pi``: (Σw)²/Σw²
    with w = 1/π (the count itself when every probability is equal)."""
    w = 1 / np.asarray(pi, dtype=float)
    return float(w.sum() ** 2 / (w**2).sum()) if len(w) else 0.0


def more_labels_for(half_width: float, n_now: int, goal: float) -> int:
    """Labels to add to ``n_now`` for a half-width of ``goal`` when the width scales as 1/√n."""
    return max(0, math.ceil(n_now * (half_width / goal) ** 2) - n_now)


def format_plan(p: NextDraw) -> str:
    """Per target: how many drawn, the range of probabilities, and "±x now; about n more labels for ±y"."""
    lines = [
        f"annotate-next (beyond the paper): {p.budget} conversation(s) of each target for judge {p.judge}, "
        f"drawn with recorded inclusion probabilities (active statistical inference; seed {p.seed})"
    ]
    for t in p.targets:
        head = (
            f"  {t.target}: {len(t.drawn)} of {t.pool} not yet labelled "
            f"(probabilities {t.min_probability:.3f}-{t.max_probability:.3f}, following {t.scores})"
        )
        if t.half_width is None or t.after is None:
            lines.append(f"{head}; no corrected interval yet ({t.labelled} labelled)")
        elif t.half_width <= 0:
            lines.append(f"{head}; ±0 now: every corrected interval is a point ({t.labelled} labelled)")
        else:
            goal = t.half_width / 2
            more = more_labels_for(t.half_width, t.labelled, goal)
            lines.append(
                f"{head}; ±{t.half_width:.2f} now (widest: {t.widest}, {t.labelled} labelled); "
                f"about ±{t.after:.2f} after these {len(t.drawn)} (approximate: Kish's effective n of their "
                f"weights); about {more} more labels for ±{goal:.2f} (if drawn uniformly)"
            )
    return "\n".join(lines)
