"""Corrected rates that fit the draw (beyond the paper, issue #46 items 2-3): the design-based
PPI++ estimator against a plain computation, the probabilities and the draw of annotate-next, and
corrected_rates reading an active draw's recorded inclusion probabilities."""

from __future__ import annotations

import json
import random

import numpy as np
import polars as pl
import pytest
from scipy.stats import t as student

from cocoeval.analysis import active
from cocoeval.analysis import judge_check as jc
from cocoeval.analysis.frames import run_frames
from cocoeval.run import Run
from cocoeval.run.humans import RANDOM_DRAWS

from ..sim_helpers import instance
from .test_judge_check import TURNS, B, fine


def plain_estimate(units, clusters, f, labels, rounds, alpha=0.05, fixed=None):
    """The estimator written out with loops: ψ per conversation, round by round; λ by a search
    over [0, 1] for the smallest variance of ψ over conversations (PPI++'s plug-in, not the closed
    form); the clustered variance; the t interval with (source conversations holding a label) − 1
    degrees of freedom."""
    total = sum(sum(1 for u in units if u in r.drawn and u in labels) for r in rounds)

    sizes = []
    for r in rounds:
        drawn = [x for x in units if x in r.drawn]
        sizes.append((len(drawn), set(x for x in drawn if x in labels)))

    def psi(lam):
        out = []
        for i, u in enumerate(units):
            v = 0.0
            for r, (n_drawn, got) in zip(rounds, sizes, strict=True):
                if not got:
                    continue
                w = len(got) / total
                if u in r.pool:
                    pi = r.probability[u] * len(got) / n_drawn
                    v += w * (lam * f[i] + ((labels[u] - lam * f[i]) / pi if u in got else 0.0))
                else:
                    v += w * (labels[u] if u in labels else f[i])
            out.append(v)
        return out

    def variance(lam):
        p = psi(lam)
        est = sum(p) / len(p)
        sums: dict[str, float] = {}
        for c, v in zip(clusters, p, strict=True):
            sums[c] = sums.get(c, 0.0) + v - est
        k = len(sums)
        return sum(s * s for s in sums.values()) * k / (k - 1) / len(p) ** 2

    def spread(lam):
        p = psi(lam)
        est = sum(p) / len(p)
        return sum((v - est) ** 2 for v in p)

    lo_, hi_ = 0.0, 1.0  # the spread is convex in λ: ternary search over [0, 1]
    for _ in range(60):
        a, b = lo_ + (hi_ - lo_) / 3, hi_ - (hi_ - lo_) / 3
        lo_, hi_ = (lo_, b) if spread(a) <= spread(b) else (a, hi_)
    lam = (lo_ + hi_) / 2 if fixed is None else fixed
    p = psi(lam)
    est = sum(p) / len(p)
    se = variance(lam) ** 0.5
    held = {c for u, c in zip(units, clusters, strict=True) if u in labels and any(u in r.drawn for r in rounds)}
    q = student.ppf(1 - alpha / 2, len(held) - 1)
    return est, est - q * se, est + q * se, lam


def test_the_design_based_estimate_equals_a_plain_computation():
    rng = np.random.default_rng(4)
    n = 90
    units = [f"u{i}" for i in range(n)]
    clusters = [f"m{i // 3}" for i in range(n)]
    y = rng.poisson(np.repeat(rng.gamma(2, 1, n // 3), 3)).astype(float)
    f = y + rng.poisson(1.0, n) * (rng.random(n) < 0.3)
    first = set(rng.choice(units, 20, replace=False))
    r1 = active.Round(frozenset(units), dict.fromkeys(units, 20 / n), frozenset(first))
    rest = [u for u in units if u not in first]
    pi = active.inclusion_probabilities(rng.random(len(rest)) + 0.1, 15)
    second = {rest[j] for j in active.systematic_draw(pi, random.Random(1))}
    r2 = active.Round(frozenset(rest), dict(zip(rest, pi, strict=True)), frozenset(second), "active")
    labels = {u: y[i] for i, u in enumerate(units) if u in first | second}
    del labels[sorted(second)[0]]  # one drawn conversation not labelled yet: missing at random
    got = active.design_estimate(units, clusters, f, labels, [r1, r2])
    est, lo, hi, lam = plain_estimate(units, clusters, f, labels, [r1, r2])
    assert got.lam == pytest.approx(lam, abs=1e-4)
    assert (got.estimate, got.low, got.high) == pytest.approx((est, lo, hi), rel=1e-4)
    assert any("not labelled yet" in x for x in got.notes)


def test_one_uniform_round_is_the_ppi_point_estimate_and_lambda_0_the_humans_mean():
    rng = np.random.default_rng(0)
    n = 200
    units = [f"u{i}" for i in range(n)]
    y = rng.poisson(2, n).astype(float)
    f = y + rng.poisson(1, n)
    lab = sorted(rng.choice(n, 40, replace=False))
    labels = {units[i]: y[i] for i in lab}
    r = active.Round(frozenset(units), dict.fromkeys(units, 40 / n), frozenset(labels))
    for lam in (0.0, 0.6, 1.0):
        e = active.design_estimate(units, units, f, labels, [r], lam=lam)
        assert e.estimate == pytest.approx(lam * f.mean() + (y[lab] - lam * f[lab]).mean())
    assert active.design_estimate(units, units, f, labels, [r], lam=0.0).estimate == pytest.approx(y[lab].mean())


def test_probabilities_sum_to_the_budget_stay_above_the_floor_and_the_draw_keeps_them():
    rng = np.random.default_rng(1)
    scores = np.concatenate([rng.random(40) * 0.1, [50.0, 30.0], rng.random(18) * 5])
    pi = active.inclusion_probabilities(scores, 10)
    assert pi.sum() == pytest.approx(10) and pi.max() <= 1 + 1e-12
    assert pi.min() >= active.FLOOR * 10 / len(scores) - 1e-12
    assert (pi == 1).sum() == 2  # the two large scores are certain, the rest spread again
    counts = np.zeros(len(pi))
    r = random.Random(0)
    reps = 4000
    for _ in range(reps):
        d = active.systematic_draw(pi, r)
        assert len(d) == 10 and len(set(d)) == 10
        counts[d] += 1
    assert np.abs(counts / reps - pi).max() < 0.03
    assert np.allclose(active.inclusion_probabilities(np.zeros(5), 2), 0.4)  # no scores: uniform


def test_active_draws_cover_the_true_rate_on_known_truth_worlds():
    """As benchmarks/active_labels.py, fewer worlds: the interval of a uniform then an active
    round covers the humans' true rate about 95% of the time."""
    rng = np.random.default_rng(7)
    n, rate, covered, worlds = 200, 2.0, 0, 200
    units = [f"u{i}" for i in range(n)]
    clusters = [f"m{i // 4}" for i in range(n)]
    r = random.Random(3)
    for _ in range(worlds):
        y = rng.poisson(np.repeat(rate * rng.gamma(4, 1 / 4, n // 4), 4)).astype(float)
        f = rng.binomial(y.astype(int), 0.9) + (rng.random(n) < 0.2) * rng.poisson(4 * rate, n)
        first = r.sample(range(n), 30)
        rest = [i for i in range(n) if i not in first]
        scores, _ = active.error_scores(f[first], (y[first] - f[first]) ** 2, f[rest])
        pi = active.inclusion_probabilities(scores, 30)
        second = [rest[j] for j in active.systematic_draw(pi, r)]
        rounds = [
            active.Round(frozenset(units), dict.fromkeys(units, 30 / n), frozenset(units[i] for i in first)),
            active.Round(
                frozenset(units[i] for i in rest),
                {units[i]: p for i, p in zip(rest, pi, strict=True)},
                frozenset(units[i] for i in second),
                "active",
            ),
        ]
        labels = {units[i]: y[i] for i in first + second}
        e = active.design_estimate(units, clusters, f, labels, rounds)
        covered += e.low <= rate <= e.high
    assert 0.9 <= covered / worlds <= 0.99


def test_corrected_rates_weight_an_active_draw_by_its_recorded_probabilities(tmp_path):
    rng = np.random.default_rng(2)
    n = 120  # 40 meetings of 3 windows
    insts = [instance(f"d/c{i // 3:03d}/{i % 3}", n_hist=2, n_ref=TURNS) for i in range(n)]
    ids = [x.id for x in insts]
    judge = rng.random((n * TURNS, len(B))) < 0.3
    human = judge & (rng.random(judge.shape) < 0.6)
    first = sorted(rng.choice(n, 40, replace=False).tolist())
    rest = [i for i in range(n) if i not in first]
    pi = active.inclusion_probabilities(np.linspace(0.1, 2, len(rest)), 20)
    second = [rest[j] for j in active.systematic_draw(pi, random.Random(0))]
    labelled = first + second
    js = [fine(ids[i], "J", judge[i * TURNS : (i + 1) * TURNS]) for i in range(n)]
    js += [fine(ids[i], "A", human[i * TURNS : (i + 1) * TURNS]) for i in labelled]
    run = Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"x": js}, "path": tmp_path})
    (tmp_path / "annotation").mkdir()
    draws = [
        {
            "task": "fine_grained",
            "targets": [[ids[i], "reference"] for i in first],
            "per_stratum": {"reference|d": [40, n]},
        },
        {
            "task": "fine_grained",
            "mode": "active",
            "targets": [[ids[i], "reference"] for i in second],
            "inclusion": {"reference": {ids[i]: float(p) for i, p in zip(rest, pi, strict=True)}},
        },
    ]
    (tmp_path / RANDOM_DRAWS).write_text(json.dumps({"draws": draws}))
    f = run_frames(run)
    row = (
        jc.corrected_rates(f, "J", run, resamples=200)
        .filter((pl.col("behaviour") == B[0]) & (pl.col("target") == "reference"))
        .row(0, named=True)
    )
    assert row["draw"] == "active (recorded)" and row["n_labelled"] == 60
    assert "weighted by 1/π" in row["note"] and "clustered by source conversation" in row["note"]
    per = lambda x: np.array([x[i * TURNS : (i + 1) * TURNS, 0].sum() for i in range(n)], dtype=float)  # noqa: E731
    yh, yj = per(human), per(judge)
    rounds = [
        active.Round(frozenset(ids), dict.fromkeys(ids, 40 / n), frozenset(ids[i] for i in first)),
        active.Round(
            frozenset(ids[i] for i in rest),
            {ids[i]: float(p) for i, p in zip(rest, pi, strict=True)},
            frozenset(ids[i] for i in second),
            "active",
        ),
    ]
    est, lo, hi, _ = plain_estimate(ids, [i.split("/")[1] for i in ids], yj, {ids[i]: yh[i] for i in labelled}, rounds)
    assert (row["corrected_raw"], row["corrected_high"]) == pytest.approx((est, hi), rel=1e-3)
    assert row["corrected_low"] == pytest.approx(max(0.0, lo), rel=1e-3, abs=1e-9)
    # the humans' own mean under the same design: λ = 0, each label weighted by 1/π
    h, hlo, hhi, _ = plain_estimate(
        ids, [i.split("/")[1] for i in ids], yj, {ids[i]: yh[i] for i in labelled}, rounds, fixed=0.0
    )
    assert (row["humans_only"], row["humans_only_high"]) == pytest.approx((h, hhi), rel=1e-9)
    assert row["humans_only_low"] == pytest.approx(max(0.0, hlo), rel=1e-9, abs=1e-12)


def test_plan_next_follows_the_judges_vote_fractions_and_keeps_a_floor():
    rng = np.random.default_rng(5)
    n = 60
    insts = [instance(f"d/c{i // 2:03d}/{i % 2}", n_hist=2, n_ref=TURNS) for i in range(n)]
    ids = [x.id for x in insts]
    judge = rng.random((n * TURNS, len(B))) < 0.3
    js = [fine(ids[i], "J", judge[i * TURNS : (i + 1) * TURNS]) for i in range(n)]
    js += [fine(ids[i], "A", judge[i * TURNS : (i + 1) * TURNS]) for i in range(10)]
    f = run_frames(Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"x": js}}))
    unsure = ids[50:]  # the judge's 3 samples split 2-1 on every turn of these
    votes = pl.DataFrame(
        [
            {"target": "reference", "instance_id": i, "turn": t, "behaviour": B[0], "fraction": 2 / 3}
            for i in unsure
            for t in range(TURNS)
        ]
    )
    plan = active.plan_next(f, "J", 10, seed=1, votes=votes)
    [t] = plan.targets
    assert t.pool == 50 and len(t.drawn) == 10 and "vote fractions" in t.scores
    pi = plan.record.inclusion["reference"]
    assert set(pi) == set(ids[10:]) and sum(pi.values()) == pytest.approx(10)
    assert min(pi[i] for i in unsure) > 5 * max(pi[i] for i in ids[10:50])
    assert min(pi.values()) == pytest.approx(active.FLOOR * 10 / 50)
    assert plan.record.mode == "active" and sorted(plan.record.targets) == sorted((i, "reference") for i in t.drawn)
    # the judge's samples agree everywhere: the error model (here every error 0: uniform)
    same = votes.with_columns(pl.lit(1.0).alias("fraction"))
    [t] = active.plan_next(f, "J", 10, seed=1, votes=same).targets
    assert t.scores.startswith("uniform")
    # the draw's number joins the seed: two rounds with one --seed do not repeat one stream
    again = active.plan_next(f, "J", 10, seed=1, votes=same, draw_number=1).targets[0].drawn
    assert active.plan_next(f, "J", 10, seed=1, votes=same, draw_number=2).targets[0].drawn != again


def test_labelled_conversations_the_judge_did_not_judge_validly_are_counted_in_a_note():
    rng = np.random.default_rng(9)
    n = 60
    insts = [instance(f"d/c{i:03d}/0", n_hist=2, n_ref=TURNS) for i in range(n)]
    ids = [x.id for x in insts]
    marks = rng.random((n * TURNS, len(B))) < 0.3
    js = [fine(ids[i], "J", marks[i * TURNS : (i + 1) * TURNS]) for i in range(n)]
    for i in (0, 1, 2):  # the judge's answer on 3 labelled conversations was invalid
        js[i] = js[i].model_copy(update={"status": "invalid", "reason": "malformed", "labels": []})
    js += [fine(ids[i], "A", marks[i * TURNS : (i + 1) * TURNS]) for i in range(45)]
    f = run_frames(Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"x": js}}))
    rows = jc.corrected_rates(f, "J", resamples=50)
    assert rows.height and (rows["n_labelled"] == 42).all()
    assert all(
        "3 labelled conversation(s) of this target have no valid judgment of this judge" in x for x in rows["note"]
    )


def test_labels_from_too_few_source_conversations_give_no_interval_and_say_why():
    """The reviewer's case: 120 windows of 2 meetings, 60 drawn at random. The clustered variance
    of 2 cluster totals can be 0; no interval is given, and the note names how many are needed."""
    rng = np.random.default_rng(5)
    n = 120
    units = [f"u{i}" for i in range(n)]
    clusters = [f"m{i // 60}" for i in range(n)]
    y = rng.poisson(np.repeat([1.0, 3.0], 60)).astype(float)
    f = y + rng.poisson(0.5, n)
    lab = sorted(random.Random(0).sample(range(n), 60))
    labels = {units[i]: y[i] for i in lab}
    r = active.Round(frozenset(units), dict.fromkeys(units, 0.5), frozenset(labels))
    e = active.design_estimate(units, clusters, f, labels, [r])
    assert e.low is None and e.high is None and e.labelled_clusters == 2
    assert any(f"at least {active.MIN_CLUSTERS}" in x and "2 source conversation" in x for x in e.notes)
    assert active.MIN_CLUSTERS >= 3


def test_the_degrees_of_freedom_count_only_source_conversations_that_hold_a_label():
    rng = np.random.default_rng(6)
    n = 120
    units = [f"u{i}" for i in range(n)]
    clusters = [f"m{i // 10}" for i in range(n)]  # 12 meetings; labels in the first 7 only
    y = rng.poisson(2, n).astype(float)
    f = y + rng.poisson(1, n)
    lab = [i for i in range(70) if i % 2 == 0]
    labels = {units[i]: y[i] for i in lab}
    r = active.Round(frozenset(units), dict.fromkeys(units, len(lab) / n), frozenset(labels))
    e = active.design_estimate(units, clusters, f, labels, [r])
    assert e.labelled_clusters == 7 and e.clusters == 12
    assert e.high is not None
    assert (e.high - e.estimate) / e.se == pytest.approx(student.ppf(0.975, 6))


def test_lambda_is_the_plug_in_over_conversations_not_the_minimum_of_the_clustered_variance():
    rng = np.random.default_rng(8)
    n = 150
    units = [f"u{i}" for i in range(n)]
    clusters = [f"m{i // 25}" for i in range(n)]
    y = rng.poisson(np.repeat(rng.gamma(2, 1, 6), 25)).astype(float)
    f = y + rng.poisson(1.0, n)
    lab = sorted(random.Random(2).sample(range(n), 50))
    labels = {units[i]: y[i] for i in lab}
    r = active.Round(frozenset(units), dict.fromkeys(units, 50 / n), frozenset(labels))
    e = active.design_estimate(units, clusters, f, labels, [r])
    # one uniform round: ψ_i = λ f_i + ξ_i (y_i − λ f_i)/π, so λ = −Cov(a, b)/Var(b) over conversations
    xi = np.isin(np.arange(n), lab)
    a = np.where(xi, y / (50 / n), 0.0)
    b = f - np.where(xi, f / (50 / n), 0.0)
    want = -np.cov(a, b)[0, 1] / np.var(b, ddof=1)
    assert e.lam == pytest.approx(min(1.0, max(0.0, want)))


def test_kish_effective_n_is_the_count_for_equal_weights_and_less_for_unequal_ones():
    assert active.kish_n(np.full(8, 0.25)) == pytest.approx(8)
    assert active.kish_n(np.array([1.0, 0.1])) == pytest.approx((1 + 10) ** 2 / (1 + 100))
