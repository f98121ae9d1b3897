"""The judge-free answers' typed results and their wording (``judge_free_prose``): each result's
fields hold the numbers its sentences say (checked against values computed here: the reference
implementation of the statistics, plain loops over the turns, the counts of the run), the
``Answer`` keeps the result its text was rendered from, and each render function alone (no run)
writes the expected sentences from a hand-made result. RQ3's prompts vs the humans, RQ4 and the
generalization answer keep their ``HumanComparison``."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import analyses, detectability, turntaking
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.convstats import STATISTICS
from cocoeval.analysis.judge_free_prose import (
    ClassifierTest,
    DetectabilityResult,
    JudgeFreeComparison,
    MeasuredOn,
    RunLength,
    SanityCheck,
    SetupSource,
    SetupVsHumanStatistics,
    SpeakerAccuracy,
    StatisticDiff,
    StatisticMean,
    TurnTakingMeasured,
    render_detectability,
    render_judge_free,
    render_measured_on,
    render_turn_taking_measured,
)
from cocoeval.analysis.rq_prose import Estimate, HumanComparison, Intervals, render_human_comparison

from . import convstats_reference as ref
from .test_convstats import _run as convstats_run
from .test_detectability import _run as detectability_run
from .test_turntaking import _instances, _plain_runs, _run_with_setups

IV = Intervals(resamples=200, seed=3, min_n=10)


def test_judge_free_fields_hold_the_statistics_measured_by_the_reference_implementation():
    run = convstats_run(12)
    a = analyses.compute("judge_free", run, Params(resamples=200, seed=3))
    x = a.result
    assert isinstance(x, JudgeFreeComparison) and a.text == render_judge_free(x)
    assert x.measured_on == MeasuredOn((SetupSource("loop", "local/smollm2"),), demo_data=False, pipeline_check=False)
    plain = ref.conversation_frame(run)
    humans = plain.filter(pl.col("target") == "reference")
    assert x.references == humans.height == 12 and x.n_statistics == len(STATISTICS)
    assert x.intervals == Intervals(200, 3, 10) and x.correction == "bh"
    for s in x.human:  # each human mean is the plain mean over the references where defined
        values = humans[s.statistic].drop_nulls()
        assert s.name == STATISTICS[s.statistic]
        assert s.mean.value == (pytest.approx(values.mean()) if len(values) else None)
    by = {s.target: s for s in x.setups}
    assert set(by) == {"loop", "copy"} and by["copy"].tested and by["copy"].higher == by["copy"].lower == ()
    loop = plain.filter(pl.col("target") == "loop")
    diffs = by["loop"].higher + by["loop"].lower
    assert by["loop"].n == 12 and diffs  # one speaker repeating herself differs from the humans
    for d in diffs:
        assert d.mean_sim == pytest.approx(loop[d.statistic].drop_nulls().mean())
        assert d.mean_human == pytest.approx(humans[d.statistic].drop_nulls().mean())
        assert (d in by["loop"].higher) == (d.mean_sim > d.mean_human) and d.p_adj <= 0.05
    assert x.turn_taking is not None
    copy = next(t for t in x.turn_taking.setups if t.target == "copy")
    assert [m.estimate.value for m in copy.measures] == [0.0, 0.0]  # the reference itself: no distance
    assert x.sanity is not None and {c.judge for c in x.sanity} == {"J"}
    tiny = analyses.compute("judge_free", convstats_run(12, "pipeline-check"), Params(resamples=200)).result
    assert tiny.measured_on.pipeline_check and "models are tiny" in render_measured_on(tiny.measured_on)


def test_detectability_fields_hold_the_tests_and_counts_of_the_run():
    a = analyses.compute("detectability", detectability_run(), Params(resamples=200))
    x = a.result
    assert isinstance(x, DetectabilityResult) and a.text == render_detectability(x)
    assert (x.folds, x.permutations, x.min_conversations) == (
        detectability.FOLDS,
        detectability.PERMUTATIONS,
        detectability.MIN_CONVERSATIONS,
    )
    assert x.floor is not None and x.floor.target == detectability.FLOOR and x.floor.n == 12
    copy, bot = x.setups
    assert (copy.target, copy.auc, copy.invalid) == ("copy", 0.5, 0)  # the humans' own words: every score tied
    assert (bot.target, bot.auc, bot.continuations_ok, bot.continuations, bot.invalid) == ("bot", 1.0, 23, 24, 1)
    assert "; 1 invalid continuation(s) left out." in a.text[2]


def test_turn_taking_fields_agree_with_plain_loops_over_the_turns():
    insts = _instances(seed=4)
    run = _run_with_setups(insts, random.Random(6))
    a = analyses.compute("turn_taking_measured", run, Params(resamples=100, min_n=2))
    x = a.result
    assert isinstance(x, TurnTakingMeasured) and a.text == render_turn_taking_measured(x)
    targets = {
        "reference": [i.reference for i in insts],
        **{k: [c.turns for c in v] for k, v in run.continuations.items()},
    }
    for r in x.run_lengths:
        lengths = [n for turns in targets[r.target] for _, n in _plain_runs(turns)]
        assert (r.runs, r.longest) == (len(lengths), max(lengths)) and r.mean_run == pytest.approx(np.mean(lengths))
    assert {r.target for r in x.run_lengths} == set(targets)
    assert {r.predictor for r in x.rules} <= set(turntaking.POLICIES)
    assert all(r.label == turntaking.POLICIES[r.predictor] for r in x.rules)
    agree = {s.predictor: s for s in x.setups}
    assert agree["copy"].accuracy == 1.0  # the reference's own speakers
    mono = sum(t.speaker == "Alice" for i in insts for t in i.reference) / sum(len(i.reference) for i in insts)
    assert agree["mono"].accuracy == pytest.approx(mono)
    assert (x.fidelity_scored, x.fidelity_unscored) == (0, 0) and x.intervals == Intervals(100, 0, 2)


@pytest.mark.parametrize("name", ["rq3_vs_humans", "rq4", "generalization"])
def test_the_comparisons_with_the_humans_keep_the_result_their_text_is_rendered_from(name):
    a = analyses.compute(name, convstats_run(12), Params(judge="J", resamples=200))
    assert isinstance(a.result, HumanComparison) and a.text == render_human_comparison(a.result)
    if name != "rq3_vs_humans":  # none fine-tuned, none human–AI: not run, and the viewer shows every setup
        assert a.result.missing is not None and a.setups is None


def test_each_render_writes_its_sentences_from_a_hand_made_result():
    on = MeasuredOn((SetupSource("s_1", "m"),), demo_data=True, pipeline_check=False)
    assert render_measured_on(on) == (
        "No model judges these: the human reference's values are measured on the benchmark's reference turns "
        "(what the people said next), each setup's on its continuations (s\\_1 = m). This run's references include "
        "cocoeval's illustrative demo conversations, which are generated from templates, not human data."
    )
    assert render_judge_free(JudgeFreeComparison(on, IV, "bh", empty=True)) == []
    jf = JudgeFreeComparison(
        on,
        IV,
        "holm",
        references=14,
        family=2,
        n_statistics=3,
        human=(
            StatisticMean("a", "statistic a", Estimate(1.0, 0.5, 1.5, 14)),
            StatisticMean("b", "statistic b", Estimate(None, None, None, 0, "undefined")),
        ),
        setups=(
            SetupVsHumanStatistics("few", 3, tested=False),
            SetupVsHumanStatistics("s", 14, tested=True, higher=(StatisticDiff("a", "statistic a", 2.0, 1.0, 0.001),)),
        ),
        sanity=(SanityCheck("J", "repetition", "rep_any", "+", None, None, "n < 10"),),
    )
    text = render_judge_free(jf)
    assert text[0] == render_measured_on(on) and text[1].startswith("Method: 14 human references;")
    assert "(the family: 3 statistics × the setups)." in text[1]
    assert text[2] == "Human reference: statistic a 1.00 (95% CI 0.50–1.50, n = 14)."  # undefined ones left out
    assert text[3] == "- **few**: not tested (n = 3 < 10 instances)."
    assert text[4] == "- **s** (n = 14): higher than humans: statistic a (2.00 vs 1.00, p_adj 0.001); lower: none."
    assert text[5].endswith("J repetition ~ rep_any (+): no interval: n < 10.") and len(text) == 6
    det = DetectabilityResult(IV, 5, 199, 10)
    assert render_detectability(det) == []
    floor = ClassifierTest("floor", "humans vs humans", None, None, None, None, 4, 4, "fewer than 10 instances")
    s = ClassifierTest("s", "vs", 0.75, 0.6, 0.9, 0.02, 20, 12, None, continuations_ok=20, continuations=22)
    text = render_detectability(DetectabilityResult(IV, 5, 199, 10, floor=floor, setups=(s,)))
    assert "cross-validated in 5 folds" in text[0] and "(199 permutations). No AUC below 10 instances" in text[0]
    assert text[1] == "Floor, humans vs humans: no AUC (fewer than 10 instances)."
    assert text[2] == (
        "- **s**: AUC 0.75 (95% interval 0.60–0.90; p = 0.02 for AUC > 0.5; n = 20 from 12 conversations) "
        "[20 of 22 continuations ok]; 2 invalid continuation(s) left out."
    )
    tt = TurnTakingMeasured(IV, "forced", "free", 5, empty=True)
    assert render_turn_taking_measured(tt) == []
    rule = SpeakerAccuracy("same_as_previous", "same speaker", None, 0.4, 0.3, 0.5, 12, None)
    tt = TurnTakingMeasured(IV, "forced", "free", 5, rules=(rule,), run_lengths=(RunLength("reference", 1.5, 8, 3),))
    text = render_turn_taking_measured(tt)
    assert text[0].startswith("Beyond the paper. Next-speaker accuracy, forced:")
    assert text[0].endswith(
        "(200 resamples, seed 3; none below 10 conversations). same speaker: 0.40 (95% CI 0.30–0.50, conversations = 12)."
    )
    assert (
        text[1]
        == "Run lengths (consecutive turns by one speaker), mean per target: reference 1.50 turns (8 runs, longest 3)."
    )
    assert len(text) == 2  # no free-running setup, no self-selection, no fidelity rows
