"""What the tests missed (issue #24): number-changing one-line bugs a mutation probe found the
suite did not catch. Each test below fails on its mutation (named in its docstring) and passes on
the correct code."""

from __future__ import annotations

import statistics

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import agreement, studies
from cocoeval.analysis.frames import invalid_rates, run_frames, validity_note
from cocoeval.analysis.inference import (
    ALPHA,
    NO_DIFF,
    OVER,
    UNDER,
    adjust_pvalues,
    describe_test,
    sign_flip_pvalues,
    verdict,
)
from cocoeval.analysis.stats import likert_means, mean_occurrences
from cocoeval.core.schema import Judgment
from cocoeval.run import Run

from ..sim_helpers import instance
from .test_agreement import (
    COLLAB,
    CONSISTENCY,
    COUNTS,
    REP,
    TAX,
    _fine,
    _overall,
    inter_human_by_hand,
    judge_by_hand,
)
from .test_agreement import frames as agreement_frames
from .test_rq import G41, _with_people, insts, make, mp, reps


def _invalid(j: Judgment) -> Judgment:
    return j.model_copy(update={"status": "invalid", "reason": "bad answer"})


def _repaired(j: Judgment) -> Judgment:
    return j.model_copy(update={"status": "repaired", "repairs": ["'repetitions' read as repetition"]})


def _frames(js: list[Judgment], n: int):
    ids = [instance(f"d/c{i:02d}/0", n_hist=2, n_ref=6) for i in range(n)]
    return run_frames(Run.model_validate({"instances": ids, "continuations": {}, "judgments": {"x": js}})), ids


def _annotated(bad: dict[tuple[str, int], object] | None = None):
    """Annotators A, B, C (``human:<name>``) and the LLM judge J as in test_agreement (J alone
    judges c5); ``bad`` maps (rater, conversation) to _invalid or _repaired, both kinds."""
    bad = bad or {}
    n = max(len(v) for v in COUNTS.values())
    ids = [f"d/c{i:02d}/0" for i in range(n)]
    js = []
    for r, ks in COUNTS.items():
        js += [bad.get((r, i), lambda j: j)(_fine(ids[i], r, k)) for i, k in enumerate(ks)]  # type: ignore[operator]
    for r in CONSISTENCY:
        js += [
            bad.get((r, i), lambda j: j)(_overall(ids[i], r, c, k))  # type: ignore[operator]
            for i, (c, k) in enumerate(zip(CONSISTENCY[r], COLLAB[r], strict=True))
        ]
    return _frames(js, n)[0]


# --- 1. detection totals and the agreement over one set of conversations ----------------------
def test_detection_totals_are_over_one_set_of_conversations_for_every_source():
    """Mutation: detection_units' ``k == len(sources)`` dropped (or ``k == len(humans)``, the
    annotators only): a source's total over the conversations it alone judged validly."""
    f = _annotated({("A", 1): _invalid, ("J", 3): _invalid})  # A's c1 and J's c3 invalid; c5: J only
    assert agreement.annotators(f) == ["A", "B", "C"]
    d = agreement.detection_totals(f)
    # c0, c2 and c4 only, for every source: A 0+2+4, B 1+3+4, C 0+1+3, J 0+3+5
    rep = d.filter(pl.col("behaviour") == REP)
    assert dict(zip(rep["source"], rep["total"], strict=True)) == {
        "A": 6,
        "B": 8,
        "C": 4,
        "annotators (mean of 3)": 6,
        "J": 8,
    }
    assert set(d["conversations"]) == {3}  # every source, every behaviour and all
    assert d.filter(pl.col("behaviour") == "all")["total"].to_list() == rep["total"].to_list()
    units, sources = agreement.detection_units(f)
    assert units["instance_id"].to_list() == ["d/c00/0", "d/c02/0", "d/c04/0"] and sources == ["A", "B", "C", "J"]
    note = agreement.detection_note(f)
    assert "same 3 conversation(s) for every source" in note and "2 of 5 left out" in note
    assert "A 1" in note and "J 1" in note and "B " not in note
    text = "\n".join(studies.agreement_answer(f, resamples=20, min_n=2).text)
    assert note in text


def test_agreement_uses_only_the_conversations_every_rater_of_the_comparison_rated_validly():
    """Mutation: scores' ``drop_nulls`` replaced by ``fill_null(0)`` (an invalid judgment read as
    zero detections) or dropped (NaN in the ranks)."""
    f = _annotated({("A", 1): _invalid, ("J", 3): _invalid})
    inter = agreement.agreement(f, resamples=20, item=REP, min_n=2)
    avg = inter.filter(pl.col("rater") == agreement.AVERAGE).row(0, named=True)
    keep = [0, 2, 3, 4]  # A's c1 invalid: out of the inter-human comparison
    assert avg["n"] == 4
    assert avg["rho"] == pytest.approx(inter_human_by_hand({r: [COUNTS[r][i] for i in keep] for r in "ABC"}))
    jr = agreement.judge_vs_humans(f, "J", resamples=20, min_n=2, items=[REP]).row(0, named=True)
    keep = [0, 2, 4]  # and J's c3: out of the judge's comparison
    assert jr["n"] == 3
    assert jr["rho"] == pytest.approx(
        judge_by_hand([COUNTS["J"][i] for i in keep], {r: [COUNTS[r][i] for i in keep] for r in "ABC"})
    )


# --- 2. the Monte Carlo sign-flip p never 0 ----------------------------------------------------
def test_monte_carlo_sign_flip_p_when_the_observed_sum_is_the_most_extreme():
    """Mutation: ``(1.0 + hits) / (flips + 1.0)`` without the +1s (p = 0 printed) or over
    ``flips``."""
    flips = 999
    d40 = np.ones((40, 1))  # n >= 30: random flips; |S| = 40 is the largest any sign vector gives
    p = sign_flip_pvalues(d40, flips=flips, seed=0)
    assert p[0] >= 1 / (flips + 1) and p[0] == pytest.approx(1 / (flips + 1), rel=1e-12)
    # n = 12 < 30 but 2**12 > flips: random flips too; the formula exactly, counted by replaying the draws
    rng = np.random.default_rng(4)
    d = np.column_stack([np.ones(12), rng.integers(-3, 4, size=12), rng.integers(0, 3, size=12)]).astype(float)
    assert flips < 2**12
    p = sign_flip_pvalues(d, flips=flips, seed=5)
    signs = np.random.default_rng(5).integers(0, 2, size=(flips, 12)).astype(np.float64) * 2.0 - 1.0
    obs = np.abs(d.sum(axis=0))
    count = (np.abs(signs @ d) >= obs - 1e-9 * np.maximum(1.0, obs)).sum(axis=0)
    assert p == pytest.approx((1 + count) / (flips + 1), rel=1e-12)
    assert np.all(p >= 1 / (flips + 1)) and count[0] <= 2  # column 0: the most extreme sum there is


# --- 3. a verdict at p_adj exactly alpha -------------------------------------------------------
def test_a_verdict_at_an_adjusted_p_exactly_alpha():
    """The documented rule is p_adj <= alpha (inference's docstring, describe_test, docs).
    Mutation: ``p_adj <= alpha`` made ``p_adj < alpha``."""
    assert verdict(0.5, ALPHA) == OVER and verdict(-0.5, ALPHA) == UNDER
    assert verdict(0.5, float(np.nextafter(ALPHA, 0))) == OVER
    assert verdict(0.5, float(np.nextafter(ALPHA, 1))) == NO_DIFF
    assert verdict(0.0, ALPHA) == NO_DIFF and verdict(0.5, None) is None
    for method in ("bh", "holm"):  # 0.025 * 2 and 0.05: both adjusted to exactly 0.05
        q = adjust_pvalues(np.array([0.025, 0.05]), method)
        assert q.tolist() == [ALPHA, ALPHA]
        assert [verdict(1.0, x) for x in q] == [OVER, OVER]
    assert "a verdict when p_adj ≤ α" in describe_test("bh", 2)


# --- 4. repaired judgments count as valid ------------------------------------------------------
def test_repaired_judgments_count_in_the_frames():
    """Mutation: run_frames skipping status "repaired" (``if status in ("invalid", "stale",
    "skipped", "repaired")``), or validity_note counting only "ok"."""
    js = [
        _fine("d/c00/0", "J", 1),
        _repaired(_fine("d/c01/0", "J", 2)),
        _overall("d/c00/0", "J", 7, 6),
        _repaired(_overall("d/c01/0", "J", 3, 4)),
    ]
    f, _ = _frames(js, 2)
    assert f.judgments["status"].to_list().count("repaired") == 2
    c = f.counts.filter(pl.col("instance_id") == "d/c01/0")
    assert c.height == len(TAX.ids) and c.filter(pl.col("behaviour") == REP)["count"].item() == 2
    assert f.likert.sort("instance_id").select("consistency", "collaborativeness").rows() == [(7, 6), (3, 4)]
    assert validity_note(f, "J", "reference") == "reference: 2 of 2 fine-grained judgments by J valid"
    assert validity_note(f, "J", "reference", "overall") == "reference: 2 of 2 overall judgments by J valid"
    assert set(invalid_rates(f)["invalid"]) == {0}


def test_repaired_judgments_count_in_the_behaviour_and_likert_means():
    """Mutation: as above (repaired judgments dropped): n 6 instead of 12, other means."""
    js = []
    for i in range(12):
        j, o = _fine(f"d/c{i:02d}/0", "J", i % 4), _overall(f"d/c{i:02d}/0", "J", 1 + i % 10, 5)
        js += [_repaired(j), _repaired(o)] if i % 2 else [j, o]
    f, _ = _frames(js, 12)
    m = mean_occurrences(f, resamples=50, min_n=5).filter(pl.col("behaviour") == REP).row(0, named=True)
    assert (m["n"], m["mean"]) == (12, pytest.approx(statistics.mean(i % 4 for i in range(12))))
    lk = likert_means(f, resamples=50, min_n=5)
    cons = lk.filter(pl.col("score") == "consistency").row(0, named=True)
    assert (cons["n"], cons["mean"]) == (12, pytest.approx(statistics.mean(1 + i % 10 for i in range(12))))


def test_repaired_annotations_count_in_the_agreement_and_the_totals():
    """Mutation: as above, or taxonomy_coverage / _too_few counting only status "ok"."""
    ok, rep = agreement_frames(), _annotated({("B", 2): _repaired, ("J", 1): _repaired, ("A", 4): _repaired})
    for item in (REP, "consistency"):
        a, b = (agreement.agreement(x, resamples=20, item=item, min_n=2) for x in (ok, rep))
        assert b["n"].to_list() == [5] * 4 and b["rho"].to_list() == pytest.approx(a["rho"].to_list())
    a, b = (agreement.judge_vs_humans(x, "J", resamples=20, min_n=2, items=[REP, "consistency"]) for x in (ok, rep))
    assert b["n"].to_list() == [5, 5] and b["rho"].to_list() == pytest.approx(a["rho"].to_list())
    d = agreement.detection_totals(rep).filter(pl.col("behaviour") == REP)
    assert set(d["conversations"]) == {5} and d.filter(pl.col("source") == "J")["total"].item() == 11
    cov = agreement.taxonomy_coverage(rep)
    assert cov["conversations"].to_list() == [5, 5, 5] and cov["turns"].to_list() == [30, 30, 30]


# --- 5. Table 12 says which datasets it picked, and why ---------------------------------------
def test_table12_prints_every_datasets_variance_and_the_two_picked():
    """Mutation: picked_datasets' ``[:top]`` made ``[1:top + 1]``, or participant_variance sorted
    smallest first: the text and the table show the variances and the pick a reader can check."""
    spread = {"flat": [4] * 12, "mid": [3, 4] * 6, "wide": [2 + i % 6 for i in range(12)], "one": [5]}
    insts_, js = [], []
    for ds, counts in spread.items():
        for i, m in enumerate(counts):
            inst = _with_people(insts(1, ds)[0].model_copy(update={"id": f"{ds}/c{i}/0"}), m, 2 + i % 2)
            insts_.append(inst)
            js += [reps(inst.id, "reference", i % 4), reps(inst.id, "sim", (i * 3) % 4)]
    run = make(insts_, js, mp(("sim", G41, "vanilla", 1)))
    f = run_frames(run)
    var = {ds: statistics.variance(v) for ds, v in spread.items() if len(v) > 1}
    top2 = sorted(var, key=lambda d: -var[d])[:2]
    assert top2 == ["wide", "mid"]
    a = studies.participants(f, "J", run, min_n=5)
    t = a.tables["participant_variance"]
    assert dict(zip(t["dataset"], t["picked"], strict=True)) == {"wide": True, "mid": True, "flat": False, "one": False}
    got = dict(zip(t["dataset"], t["variance"], strict=True))
    assert got["one"] is None and {d: got[d] for d in var} == pytest.approx(var)
    line = a.text[0]
    for ds, v in var.items():
        assert f"{ds} {v:.3g}" + (" (picked)" if ds in top2 else ";") in line + ";"
    assert "one none (1 instance(s) with a count)" in line and "the 2 largest picked" in line
    assert set(a.tables["spearman"]["dataset"]) == set(top2)
    given = studies.participants(f, "J", run, datasets=["flat"], min_n=5)
    assert given.tables["participant_variance"].filter(pl.col("picked"))["dataset"].to_list() == ["flat"]
    assert "the datasets given: " in given.text[0] and "flat 0 (picked)" in given.text[0]
