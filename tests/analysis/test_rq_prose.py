"""The research questions' typed results and their wording: each result's fields hold the numbers
its sentences say (checked against counts made here from the judgments, not by the analysis), the
``Answer`` keeps the result its text was rendered from, and each render function alone (no run)
writes the expected sentences from a hand-made result."""

from __future__ import annotations

import numpy as np
import pytest

from cocoeval.analysis import rq
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.rq_prose import (
    BehaviourDiff,
    BehaviourRate,
    BehaviourVerdict,
    ContrastMethod,
    Estimate,
    HumanComparison,
    HumanRates,
    Intervals,
    KDistance,
    KGroup,
    LikertDifference,
    NotRun,
    PairContrast,
    PromptingEffect,
    ScoreMean,
    SetupVsHumans,
    SingleK,
    TurnsPerCallEffect,
    render_human_comparison,
    render_human_rates,
    render_prompting,
    render_turns_per_call,
)

from .test_rq import G41, OPUS, insts, make, mp, reps
from .test_stats import TAX, overall

IV = Intervals(resamples=200, seed=3, min_n=10)
METHOD_IV = (
    "intervals: 95% percentile bootstrap over instances (200 resamples, seed 3), undefined (not shown) below "
    "n = 10 or when every resample is equal"
)
NAMES = {b.id: b.name for b in TAX.behaviours}


def test_human_rates_fields_hold_the_numbers_counted_from_the_judgments():
    multi, chat = insts(13), insts(4, dataset="sharechat", chat=True)
    rep = {i.id: k % 3 for k, i in enumerate(multi)}  # repetition turns per reference
    off = {i.id: int(k % 4 == 0) for k, i in enumerate(multi)}  # off-topic turns per reference
    js = [reps(i.id, "reference", rep[i.id], off[i.id]) for i in multi] + [reps(i.id, "reference", 4) for i in chat]
    js += [overall(i.id, "reference", "J", 6 + k % 2, 5) for k, i in enumerate(multi)]
    a = rq.human_rates(run_frames(make([*multi, *chat], js)), "J", resamples=200, seed=3)
    x = a.result
    assert isinstance(x, HumanRates) and a.text == render_human_rates(x)
    totals = np.array([rep[i.id] + off[i.id] for i in multi], dtype=float)
    assert (x.judge, x.n, x.excluded_chats) == ("J", len(multi), len(chat))
    assert x.mean_total == pytest.approx(totals.mean()) and x.median_total == pytest.approx(np.median(totals))
    by_id = {r.behaviour: r for r in x.rates}
    assert set(by_id) == set(TAX.ids)
    assert by_id["repetition"].mean.value == pytest.approx(np.mean(list(rep.values())))
    assert by_id["off_topic"].mean.value == pytest.approx(np.mean(list(off.values())))
    assert by_id["repetition"].mean.n == len(multi)
    assert [r.mean.value for r in x.rates] == sorted((r.mean.value for r in x.rates), reverse=True)
    assert sorted(x.absent) == sorted(NAMES[b] for b in TAX.ids if b not in ("repetition", "off_topic"))
    lk = {s.score: s.mean.value for s in x.likert}
    assert lk["consistency"] == pytest.approx(np.mean([6 + k % 2 for k in range(len(multi))]))
    assert f"over {len(multi)} multi-party human references" in a.text[0]
    assert f"{totals.mean():.2f} behaviours on average" in a.text[0]


def test_render_human_rates_alone_writes_its_sentences_from_a_hand_made_result():
    x = HumanRates(
        "J_1",
        IV,
        excluded_chats=2,
        n=12,
        mean_total=1.5,
        median_total=1.0,
        rates=(
            BehaviourRate("repetition", "Repetition", "inconsistent", Estimate(1.25, 0.5, 2.0, 12)),
            BehaviourRate("off_topic", "Off topic", "uncollaborative", Estimate(0.25, None, None, 12, "degenerate")),
            BehaviourRate("interruption", "Interruption", "uncollaborative", Estimate(0.0, None, None, 12, "all 0")),
        ),
        likert=(ScoreMean("consistency", Estimate(6.5, 6.0, 7.0, 12)),),
    )
    assert x.absent == ["Interruption"]
    assert render_human_rates(x) == [
        "Judged by **J\\_1** over 12 multi-party human references, a conversation shows 1.50 behaviours on "
        "average (median 1). 2 human–AI chat instance(s) judged by J\\_1 are left out (their reference is a "
        "user talking to a chatbot; see the generalization notebook).",
        f"Method: n = 12 instances; {METHOD_IV}; no test is made here, so no correction applies.",
        "Mean occurrences per conversation, most frequent first:\n"
        "- Repetition (inconsistent): 1.25 (95% CI 0.50–2.00, n = 12)\n"
        "- Off topic (uncollaborative): 0.25 (no interval: degenerate)\n"
        "- Interruption (uncollaborative): 0.00 (no interval: all 0)",
        "Never detected in the 12 human references: Interruption.",
        "Overall scores of the human references: consistency 6.50 (95% CI 6.00–7.00, n = 12)",
    ]
    missing = HumanRates("J", IV, missing=NotRun("nothing judged", "judge it"))
    assert render_human_rates(missing) == [
        "**Not run**: nothing judged. To add it: judge it.",
        "No human–AI chat instance is among them.",
    ]
    assert render_human_rates(HumanRates(None, IV, missing=NotRun("no judge", "add one"))) == [
        "**Not run**: no judge. To add it: add one."
    ]


def test_human_comparison_fields_hold_the_distances_counted_from_the_judgments():
    it = insts(12)
    counts = {"reference": 1, "v1": 3, "t1": 1, "o1": 0}
    js = [reps(i.id, t, n) for i in it for t, n in counts.items()]
    js += [reps(i.id, "few", 2) for i in it[:4]]  # 4 instances: below min_n, no verdict
    run = make(
        it,
        js,
        mp(("v1", G41, "vanilla", 1)),
        mp(("t1", G41, "taxonomy", 1)),
        mp(("o1", OPUS, "vanilla", 1)),
        mp(("few", OPUS, "taxonomy", 1)),
    )
    a = rq.compare_to_humans(run_frames(run), "J", ["v1", "t1", "o1", "few"], "q", resamples=200, seed=3)
    x = a.result
    assert isinstance(x, HumanComparison) and a.text == render_human_comparison(x)
    # D = Σ_b |mean simulated − mean human|: only repetition differs, by |count − 1| per conversation
    d = {s.setup: s.distance.value for s in x.setups}
    assert d == pytest.approx({"t1": 0.0, "o1": 1.0, "v1": 2.0, "few": 1.0})
    assert [s.distance.value for s in x.setups] == sorted(d.values())
    n = {s.setup: (s.distance.n, s.tested) for s in x.setups}
    assert n == {"t1": (12, True), "o1": (12, True), "v1": (12, True), "few": (4, False)}
    assert x.closest is not None and x.closest.setup == "t1"
    by = {s.setup: s for s in x.setups}
    assert [v.name for v in by["v1"].over] == ["Repetition"] and by["v1"].under == ()
    assert [v.name for v in by["o1"].under] == ["Repetition"] and by["o1"].over == ()
    assert by["t1"].over == by["t1"].under == ()
    # the family: every behaviour × the setups with n ≥ min_n (three of the four)
    assert (x.family, x.n_behaviours, x.n_setups_judged) == (3 * len(TAX.ids), len(TAX.ids), 4)
    assert any(t.startswith("- **few**") and "no verdict (n too small: 4 < 10)" in t for t in a.text)


def test_render_human_comparison_alone_writes_its_sentences_from_a_hand_made_result():
    x = HumanComparison(
        "J",
        IV,
        "holm",
        setups=(
            SetupVsHumans(
                "a_1",
                Estimate(0.5, 0.25, 0.75, 12),
                tested=True,
                over=(BehaviourVerdict("Repetition", 0.0123),),
                under=(BehaviourVerdict("Off topic", 0.04), BehaviourVerdict("Interruption", 0.001)),
            ),
            SetupVsHumans("b", Estimate(0.75, None, None, 3, "n too small"), tested=False),
        ),
        family=20,
        n_behaviours=10,
        n_setups_judged=2,
        likert=(LikertDifference("a_1", "consistency", Estimate(-1.0, -2.0, 0.0, 12)),),
    )
    from cocoeval.analysis import inference

    assert render_human_comparison(x) == [
        f"Method: n = 3–12 instances per setup, each paired with its human reference; {METHOD_IV}; "
        f"over/under-production: {inference.describe_test('holm', 20)} (the family: 10 behaviours × the 2 "
        "setup(s) judged by J, those with n ≥ 10).",
        "Profile distance D to the humans (Σ|mean simulated − mean human| per conversation; 0 = human-like), "
        "judged by **J**: closest **a\\_1** D = 0.50 (95% CI 0.25–0.75, n = 12) (among setups with n ≥ 10; the "
        "smallest point estimate of D, not a tested difference between setups: compare their intervals).",
        "- **a\\_1**: D = 0.50 (95% CI 0.25–0.75, n = 12); over-produces: Repetition (p_adj 0.0123); "
        "under-produces: Off topic (p_adj 0.04), Interruption (p_adj 0.001).",
        "- **b**: D = 0.75 (no interval: n too small); no verdict (n too small: 3 < 10).",
        "Likert scores (1–10), each setup paired with the human reference on the instances both have a valid "
        "overall judgment for (n per setup); simulated − human: a\\_1 consistency -1.00 (95% CI -2.00–0.00, "
        "n = 12).",
    ]
    untested = HumanComparison("J", IV, "bh", setups=(x.setups[1],), n_behaviours=10, n_setups_judged=1)
    assert untested.closest is None
    assert render_human_comparison(untested)[1] == (
        "No setup here has at least 10 instances judged by J: no setup is called closest and no verdict is drawn."
    )
    assert render_human_comparison(HumanComparison("J", IV, "bh", missing=NotRun("none", "add"))) == [
        "**Not run**: none. To add it: add."
    ]


def test_prompting_fields_hold_the_pairs_and_differences_counted_from_the_judgments():
    it = insts(12)
    js = []
    for k, i in enumerate(it):
        js += [reps(i.id, "v1", 0), reps(i.id, "v30", 1), reps(i.id, "t30", 1)]
        if k >= 2:  # the taxonomy k = 1 setup judged on 10 instances only
            js.append(reps(i.id, "t1", 2))
        if k >= 9:  # k = 5: 3 shared instances, below min_n
            js += [reps(i.id, "v5", 0), reps(i.id, "t5", 1)]
    run = make(
        it,
        js,
        mp(("v1", G41, "vanilla", 1)),
        mp(("t1", G41, "taxonomy", 1)),
        mp(("v5", G41, "vanilla", 5)),
        mp(("t5", G41, "taxonomy", 5)),
        mp(("v30", G41, "vanilla", 30)),
        mp(("t30", G41, "taxonomy", 30)),
    )
    a = rq.prompting(run_frames(run), run, "J", resamples=200, seed=3)
    x = a.result
    assert isinstance(x, PromptingEffect) and a.text == render_prompting(x)
    by = {c.k_a: c for c in x.contrasts}
    assert set(by) == {1, 5, 30} and all(c.k_a == c.k_b and c.model_group == G41 for c in x.contrasts)
    assert (by[1].setup_a, by[1].setup_b, by[1].n, by[1].tested) == ("v1", "t1", 10, True)
    assert by[1].higher == (BehaviourDiff("Repetition", 2.0, by[1].higher[0].p_adj),) and by[1].lower == ()
    assert by[1].higher[0].p_adj <= 0.05 and by[1].same == len(TAX.ids) - 1
    assert (by[30].higher, by[30].lower, by[30].same) == ((), (), len(TAX.ids))
    assert (by[5].n, by[5].tested) == (3, False)
    m = x.method
    assert m is not None and (m.n_low, m.n_high, m.n_pairs) == (3, 12, 3)
    assert (m.family, m.n_behaviours) == (2 * len(TAX.ids), len(TAX.ids))  # the two pairs with n ≥ 10
    assert any(t.startswith("- **openai/gpt-4.1**, k = 5") and "not tested (n too small: 3 < 10)" in t for t in a.text)


def _contrast(**kw):
    base = dict(model_group="g", prompt=None, setup_a="a", setup_b="b", k_a=1, k_b=1, n=12, tested=True)
    return PairContrast(**{**base, **kw})


def test_render_prompting_alone_writes_its_sentences_from_a_hand_made_result():
    from cocoeval.analysis import inference

    m = ContrastMethod(n_low=0, n_high=12, family=10, n_behaviours=10, n_pairs=2, correction="bh", intervals=IV)
    x = PromptingEffect(
        "J",
        "vanilla",
        "tax_x",
        method=m,
        contrasts=(
            _contrast(
                higher=(BehaviourDiff("Repetition", 1.5, 0.002),),
                lower=(BehaviourDiff("Off topic", -0.25, 0.03),),
                same=8,
            ),
            _contrast(setup_a="c", setup_b="d", k_a=5, k_b=5, n=0, tested=False, untested_note="no shared instance"),
        ),
    )
    assert render_prompting(x) == [
        "Method: differences per behaviour in mean occurrences per conversation, paired over the instances both "
        f"setups have valid judgments for (n = 0–12); {METHOD_IV}; {inference.describe_test('bh', 10)} (the "
        "family: 10 behaviours × the 2 (model, k) pair(s), those with n ≥ 10). Human–AI chat instances are left "
        "out. Judge: **J**; difference = tax\\_x − vanilla.",
        "- **g**, k = 1 (a → b) (n = 12): higher with tax\\_x: Repetition (+1.50, p_adj 0.002); lower with "
        "tax\\_x: Off topic (-0.25, p_adj 0.03); no significant difference for 8 behaviour(s).",
        "- **g**, k = 5 (c → d) (n = 0): not tested (no shared instance).",
    ]
    assert render_prompting(PromptingEffect("J", "v", "t", missing=NotRun("no pair", "add one"))) == [
        "**Not run**: no pair. To add it: add one."
    ]


def test_turns_per_call_fields_hold_the_groups_distances_and_pairs_counted_from_the_judgments():
    it = insts(12)
    counts = {"reference": 1, "g1": 3, "g5": 1, "o1": 2, "o5": 2, "gt1": 0}
    js = [reps(i.id, s, n) for i in it for s, n in counts.items()]
    run = make(
        it,
        js,
        mp(("g1", G41, "vanilla", 1)),
        mp(("g5", G41, "vanilla", 5)),
        mp(("o1", OPUS, "vanilla", 1)),
        mp(("o5", OPUS, "vanilla", 5)),
        mp(("gt1", G41, "taxonomy", 1)),
    )
    a = rq.by_turns_per_call(run_frames(run), run, "J", resamples=200, seed=3)
    x = a.result
    assert isinstance(x, TurnsPerCallEffect) and a.text == render_turns_per_call(x)
    assert x.single_k == (SingleK(f"{G41} · taxonomy", 1),) and x.not_compared == ()
    groups = {g.label: g for g in x.groups}
    assert set(groups) == {f"{G41} · vanilla", f"{OPUS} · vanilla"}
    g = groups[f"{G41} · vanilla"]
    # D per k: only repetition differs from the humans' one per conversation
    assert [(d.k, d.distance.value) for d in g.distances] == [(1, pytest.approx(2.0)), (5, pytest.approx(0.0))]
    (c,) = g.contrasts
    assert (c.setup_a, c.setup_b, c.k_a, c.k_b, c.n, c.prompt) == ("g1", "g5", 1, 5, 12, "vanilla")
    assert [(b.name, b.diff) for b in c.lower] == [("Repetition", -2.0)] and c.higher == ()
    (o,) = groups[f"{OPUS} · vanilla"].contrasts
    assert (o.higher, o.lower, o.same) == ((), (), len(TAX.ids))
    assert x.method is not None and (x.method.n_pairs, x.method.family) == (2, 2 * len(TAX.ids))


def test_render_turns_per_call_alone_writes_its_sentences_from_a_hand_made_result():
    m = ContrastMethod(n_low=12, n_high=12, family=10, n_behaviours=10, n_pairs=1, correction="bh", intervals=IV)
    x = TurnsPerCallEffect(
        "J",
        not_compared=("imp_1",),
        single_k=(SingleK("m · taxonomy", 1),),
        method=m,
        groups=(
            KGroup(
                "m",
                "vanilla",
                (KDistance(1, Estimate(2.0, 1.5, 2.5, 12)), KDistance(5, Estimate(0.0, None, None, 12, "all 0"))),
                (
                    _contrast(
                        model_group="m",
                        prompt="vanilla",
                        k_a=1,
                        k_b=5,
                        lower=(BehaviourDiff("Repetition", -2.0, 0.001),),
                        same=9,
                    ),
                ),
            ),
        ),
    )
    text = render_turns_per_call(x)
    assert text[:2] == [
        "Not compared (imported or plugin setups, which have no turns per call): imp\\_1.",
        "Not compared (one k only): m · taxonomy (only k = 1).",
    ]
    assert text[2].startswith("Method: differences per behaviour") and "(n = 12)" in text[2]
    assert text[2].endswith(
        "those with n ≥ 10). Human–AI chat instances are left out. Judge: **J**; difference = larger k − smaller k."
    )
    assert "the 1 k pair(s) within model × prompt" in text[2]
    assert text[3:] == [
        "**m · vanilla** — profile distance D to the humans by k: k = 1: 2.00 (95% CI 1.50–2.50, n = 12); "
        "k = 5: 0.00 (no interval: all 0).",
        "- k = 1 → 5 (a → b) (n = 12): higher with k = 5: none; lower with k = 5: Repetition (-2.00, p_adj "
        "0.001); no significant difference for 9 behaviour(s).",
    ]
    missing = TurnsPerCallEffect("J", single_k=(SingleK("c", 5),), missing=NotRun("one k", "add k"))
    assert render_turns_per_call(missing) == [
        "Not compared (one k only): c (only k = 5).",
        "**Not run**: one k. To add it: add k.",
    ]
