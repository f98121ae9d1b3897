"""A judge's change across versions is called by an interval (beyond the paper): the per-conversation
statistics a history entry keeps give, summed, the same α, κ, F1, ECE and Brier score as the
turn-level agreement, the calibration and independent computations (the krippendorff package,
scikit-learn's κ, F1 counted by hand); the paired cluster-bootstrap interval of a change equals a
plain-Python bootstrap drawing the same source conversations, recentred and widened for few
conversations; too few conversations give no
interval and say why; an earlier entry without the statistics gets the threshold rule, labelled so."""

from __future__ import annotations

import copy
import json

import krippendorff
import numpy as np
import polars as pl
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from cocoeval.analysis import judge_check as jc
from cocoeval.analysis.calibration import (
    ANY,
    BOOTSTRAP_RULE,
    NO_CLEAR_CHANGE,
    POOLED,
    THRESHOLD_RULE,
    ConversationStats,
    agreement_measures,
    calibration,
    calibration_measures,
    conversation_stats,
    history_entry,
    history_table,
)
from cocoeval.analysis.calibration_prose import History, JudgeReliability, Move, Reliability, render_reliability
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.inference import rng_for
from cocoeval.core.schema import Judgment
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

from ..sim_helpers import fine_reference, instance

TAX = load_taxonomy()
BEH = TAX.ids[:2]
TURNS = 6


def fine(iid: str, rater: str, marks: dict[int, list[str]]) -> Judgment:
    return fine_reference(iid, rater, marks, range(TURNS))


Labels = dict[str, dict[str, dict[int, list[str]]]]
"""rater -> instance -> turn -> behaviours marked."""


def world(sources: int, windows: int = 2, seed: int = 3) -> tuple[list[str], Labels]:
    """Two annotators A and B who mostly agree with a truth, and two judge versions (J1 flips 25%
    of the truth's labels, J2 10%), on ``sources`` × ``windows`` conversations."""
    rng = np.random.default_rng(seed)
    iids = [f"d/c{s}/{w}" for s in range(sources) for w in range(windows)]
    labels: Labels = {r: {} for r in ("A", "B", "J1", "J2")}
    for iid in iids:
        truth = rng.random((TURNS, len(BEH))) < 0.3
        for r, flip in (("A", 0.05), ("B", 0.1), ("J1", 0.25), ("J2", 0.1)):
            x = truth ^ (rng.random(truth.shape) < flip)
            labels[r][iid] = {t: [b for k, b in enumerate(BEH) if x[t, k]] for t in range(TURNS)}
    return iids, labels


def run_of(iids: list[str], labels: Labels, judge: str) -> Run:
    insts = [instance(i, n_hist=2, n_ref=TURNS) for i in iids]
    js = {r: [fine(i, r, labels[src][i]) for i in iids] for r, src in (("J", judge), ("A", "A"), ("B", "B"))}
    return Run.model_validate({"instances": insts, "continuations": {}, "judgments": js})


def entry_of(iids: list[str], labels: Labels, judge: str, date: str) -> tuple[dict, Run]:
    run = run_of(iids, labels, judge)
    f = run_frames(run)
    cal = calibration(run, f, "J", resamples=20, min_n=2)
    turns = jc.turn_agreement(f, "J", resamples=1)
    e = history_entry(run, "J", turns, cal, date=date, stats=conversation_stats(f, "J", cal))
    assert e is not None
    return {**e, "judge_id": judge}, run


def marked(labels: Labels, rater: str, iids: list[str], b: str | None) -> list[int]:
    """0/1 per turn of ``iids`` in order: ``rater`` marks behaviour ``b`` (None: any behaviour)."""
    return [
        int(bool(labels[rater][i][t]) if b is None else b in labels[rater][i][t]) for i in iids for t in range(TURNS)
    ]


def f1_by_hand(labels: Labels, judge: str, iids: list[str], b: str | None) -> float:
    j, a, bb = (marked(labels, r, iids, b) for r in (judge, "A", "B"))
    major = [x and y for x, y in zip(a, bb, strict=True)]  # of two annotators, both are the majority
    tp = sum(1 for x, y in zip(j, major, strict=True) if x and y)
    fp = sum(1 for x, y in zip(j, major, strict=True) if x and not y)
    fn = sum(1 for x, y in zip(j, major, strict=True) if not x and y)
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")


def test_the_summed_statistics_give_the_entrys_measures_and_independent_computations():
    iids, labels = world(sources=6)
    e, _ = entry_of(iids, labels, "J1", "1")
    s = ConversationStats.from_json(json.loads(json.dumps(e["per_conversation"])))  # through the file's JSON
    assert s is not None and s.annotators == ("A", "B") and len(s.conversations) == len(iids)
    assert set(s.units) == {f"d/c{k}" for k in range(6)}  # the source conversation of each window
    got = agreement_measures(s.agreement.sum(axis=0), len(s.annotators))
    for k, name in enumerate(s.behaviours):
        for m in ("alpha_with_judge", "kappa", "f1"):
            want = e["measures"][name][m]
            assert (want is None and np.isnan(got[m][k])) or got[m][k] == pytest.approx(want, abs=1e-6), (name, m)
    for b in (BEH[0], None):  # independently of judge_check: the packages and a count by hand
        k = s.behaviours.index(ANY if b is None else b)
        rel = np.array([marked(labels, r, iids, b) for r in ("A", "B", "J1")], dtype=float)
        alpha = krippendorff.alpha(reliability_data=rel, level_of_measurement="nominal")
        assert got["alpha_with_judge"][k] == pytest.approx(alpha, abs=1e-9)
        kappa = np.mean([cohen_kappa_score(rel[2], rel[h]) for h in (0, 1)])
        assert got["kappa"][k] == pytest.approx(kappa, abs=1e-9)
        assert got["f1"][k] == pytest.approx(f1_by_hand(labels, "J1", iids, b), abs=1e-12)
    assert s.calibration is not None
    cal = calibration_measures(s.calibration.sum(axis=0))
    assert cal["ece"] == pytest.approx(e["measures"][POOLED]["ece"], abs=1e-6)
    assert cal["brier"] == pytest.approx(e["measures"][POOLED]["brier"], abs=1e-6)


def test_the_interval_of_a_change_equals_a_plain_bootstrap_of_the_same_source_conversations():
    iids, labels = world(sources=12)
    old, _ = entry_of(iids, labels, "J1", "1")
    new, _ = entry_of(iids, labels, "J2", "2")
    assert old["design"] == new["design"]
    resamples = 300
    t = history_table([old, new], "J", "J2", resamples=resamples, seed=4)
    row = t.filter((pl.col("behaviour") == ANY) & (pl.col("measure") == "f1")).row(0, named=True)
    assert row["n_conversations"] == 12 and row["rule"] == BOOTSTRAP_RULE
    # by hand: the same draws of the 12 source conversations (each with its two windows), F1 counted
    rng = rng_for(4, "judge_history", "J")
    draws = rng.integers(0, 12, size=(resamples, 12))
    source = {i: "/".join(i.split("/")[:2]) for i in iids}  # the window's meeting
    units = sorted(set(source.values()))  # the draw's order: the sorted source names
    diffs = []
    for d in draws:
        chosen = [i for u in d for i in iids if source[i] == units[u]]
        diffs.append(f1_by_hand(labels, "J2", chosen, None) - f1_by_hand(labels, "J1", chosen, None))
    point = f1_by_hand(labels, "J2", iids, None) - f1_by_hand(labels, "J1", iids, None)
    # centred on the sample's change, widened for 12 conversations by √(12/11)·t₁₁/z
    widen = np.sqrt(12 / 11) * stats.t.ppf(0.975, 11) / stats.norm.ppf(0.975)
    lo, hi = np.percentile([point + (d - np.mean(diffs)) * widen for d in diffs], [2.5, 97.5])
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(lo, abs=1e-6), pytest.approx(hi, abs=1e-6))
    assert row["change"] == pytest.approx(point, abs=2e-6)  # the entries keep 6 decimals
    want = "rose" if lo > 0 else ("fell" if hi < 0 else NO_CLEAR_CHANGE)
    assert row["direction"] == want == "rose"  # J2 flips 10% of the labels, J1 25%
    pooled = t.filter(pl.col("behaviour") == POOLED)
    assert set(pooled["measure"]) == {"ece", "brier"} and pooled["ci_low"].null_count() == 0
    assert all(d.endswith("(lower is better)") or d == NO_CLEAR_CHANGE for d in pooled["direction"])
    # the same judge again: every resample's change is 0, no clear change
    same = history_table([old, {**old, "judge_id": "J1b", "date": "2"}], "J", "J1b", resamples=50)
    assert set(same["direction"].drop_nulls()) <= {NO_CLEAR_CHANGE, "not comparable"}


def test_too_few_conversations_give_no_interval_and_an_earlier_entry_without_statistics_the_threshold_rule():
    iids, labels = world(sources=4)
    old, _ = entry_of(iids, labels, "J1", "1")
    new, _ = entry_of(iids, labels, "J2", "2")
    row = history_table([old, new], "J", "J2").filter(pl.col("behaviour") == ANY).row(0, named=True)
    assert row["ci_low"] is None and row["n_conversations"] == 4
    assert row["direction"] == "no interval: n too small (n=4 < 10)"
    assert history_table([old, new], "J", "J2", min_n=4).filter(pl.col("behaviour") == ANY)["ci_low"].null_count() == 0
    bare = {k: v for k, v in old.items() if k != "per_conversation"}
    t = history_table([bare, new], "J", "J2")
    assert set(t["rule"].drop_nulls()) == {THRESHOLD_RULE.format("earlier")}  # null: a measure undefined
    assert t["ci_low"].null_count() == len(t) and set(t["direction"]) <= {"rose", "fell", "within ±0.05"} | {
        "rose (lower is better)",
        "fell (lower is better)",
        "not comparable",
    }
    broken = copy.deepcopy(old)
    broken["per_conversation"]["conversations"][0]["agreement"] = "x"  # a damaged line: read as no statistics
    assert ConversationStats.from_json(broken["per_conversation"]) is None
    assert set(history_table([broken, new], "J", "J2")["rule"].drop_nulls()) == {THRESHOLD_RULE.format("earlier")}
    other = copy.deepcopy(new)
    other["design"] = "elsewhere"
    t = history_table([old, other], "J", "J2")
    assert t["rule"].null_count() == len(t) and t["ci_low"].null_count() == len(t)


def test_the_prose_says_what_the_verdict_means_and_gives_the_interval_or_the_rule():
    def text(*moves: Move) -> str:
        h = History(True, "old", "p@1", "2026-01-01", moves)
        return "\n".join(render_reliability(Reliability(10, 0.05, (JudgeReliability("J", None, None, h),), True)))

    t = text(Move("f1", "fell", -0.08, -0.12, -0.04, BOOTSTRAP_RULE), Move("kappa", NO_CLEAR_CHANGE, 0.01, -0.03, 0.05))
    assert "excludes 0" in t and "no clear change" in t and "no interval under 10 conversations" in t
    assert "f1 fell (-0.080; 95% CI -0.120 to -0.040), kappa no clear change (+0.010; 95% CI -0.030 to +0.050)." in t
    rule = THRESHOLD_RULE.format("earlier")
    assert f"f1 fell (-0.080) ({rule})." in text(Move("f1", "fell", -0.08, None, None, rule))
