"""The other studies' typed results and their wording: each result's fields hold the numbers its
sentences say (checked against figures computed here: numpy, scipy, counts by hand), the
``Answer`` keeps the result its text was rendered from, and each render function alone (no run)
writes the expected sentences from a hand-made result."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from cocoeval.analysis import studies
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.inference import CORRECTION_NAMES
from cocoeval.analysis.paper_stats import COUNT_NAMES
from cocoeval.analysis.rq_prose import Intervals, NotRun
from cocoeval.analysis.studies_prose import (
    Agreement,
    AgreementRho,
    BenchSummary,
    DatasetCorrelations,
    DatasetVariance,
    PaperTables,
    ParticipantsStudy,
    Rho,
    SkippedConversation,
    TaxonomyCoverage,
    render_agreement,
    render_bench_summary,
    render_paper_tables,
    render_participants,
)

from .test_agreement import frames as agreement_frames
from .test_rq import G41, _with_people, insts, make, mp, reps
from .test_stats import overall


def test_participants_fields_hold_the_variances_and_correlations_computed_by_hand():
    spread = {"flat": [4] * 12, "mid": [3, 4] * 6, "wide": [2 + i % 6 for i in range(12)]}
    insts_, js, tot_h = [], [], {}
    for ds, counts in spread.items():
        for i, m in enumerate(counts):
            inst = _with_people(insts(1, ds)[0].model_copy(update={"id": f"{ds}/c{i}/0"}), m, 2 + i % 2)
            insts_.append(inst)
            h = (i * 7) % 5 % 5
            js += [reps(inst.id, "reference", min(h, 4)), reps(inst.id, "sim", (i * 3) % 4)]
            tot_h.setdefault(ds, []).append(min(h, 4))
    run = make(insts_, js, mp(("sim", G41, "vanilla", 1)))
    a = studies.participants(run_frames(run), "J", run)
    x = a.result
    assert isinstance(x, ParticipantsStudy) and a.text == render_participants(x)
    var = {v.dataset: v for v in x.variances}
    for ds, counts in spread.items():
        assert var[ds].variance == pytest.approx(np.var(counts, ddof=1))
        assert (var[ds].instances, var[ds].low, var[ds].high) == (12, min(counts), max(counts))
    assert x.chosen == ("wide", "mid") and {d for d, v in var.items() if v.picked} == {"wide", "mid"}
    wide = next(d for d in x.datasets if d.dataset == "wide")
    assert wide.human_no_rho is None and wide.human_all is not None
    assert wide.human_all.rho == pytest.approx(sps.spearmanr(spread["wide"], tot_h["wide"]).statistic)
    assert wide.human_all.n == 12 and wide.human_all.behaviour == "all behaviours"
    assert all(r.p_adj is not None and r.p_adj <= 0.05 for d in x.datasets for r in d.significant)
    assert x.n_tested == int(a.tables["spearman"]["p_adj"].is_not_null().sum())
    assert f"{wide.human_all.rho:.2f} (n = 12)" in a.text[2]


def test_render_participants_alone_writes_its_sentences_from_a_hand_made_result():
    variances = (
        DatasetVariance("w_1", 2.5, 12, 2, 7, True),
        DatasetVariance("flat", 0.0, 12, 4, 4, False),
        DatasetVariance("one", None, 1, 3, 3, False),
    )
    x = ParticipantsStudy(
        "J",
        "conversation",
        False,
        1,
        10,
        "bh",
        variances,
        chosen=("w_1",),
        n_tested=22,
        datasets=(
            DatasetCorrelations(
                "w_1",
                None,
                human_all=Rho("reference", "all behaviours", 0.5, 0.1, 12),
                human_strongest=Rho("reference", "Repetition", -0.625, 0.0312, 12),
                significant=(Rho("sim_1", "Off topic", 0.75, 0.01, 12),),
            ),
        ),
    )
    variance_line = (
        "Variance of participant counts per dataset (table participant_variance), the 1 largest picked: "
        "w\\_1 2.5 (picked); flat 0; one none (1 instance(s) with a count)."
    )
    assert render_participants(x) == [
        "Datasets (the 1 with the largest variance of participant counts, as the paper picks them): w\\_1 "
        "(variance 2.50, 2–7 participants, 12 instances). " + variance_line,
        f'Method: participants counted as the {COUNT_NAMES["conversation"]} (count = "conversation"); Spearman '
        "ρ per dataset, target and behaviour over the instances judged validly by J; scipy's p, "
        f"{CORRECTION_NAMES['bh']} over the 22 correlations of the table (p_adj); no ρ below n = 10 or when a "
        "side is constant (note says why). Human–AI chat instances are left out.",
        "- **w\\_1**: human reference ρ(all) = 0.50 (n = 12); strongest: Repetition ρ = -0.62 (p_adj 0.0312); "
        "significant after the correction: sim\\_1/Off topic ρ = 0.75.",
    ]
    unjudged = ParticipantsStudy(
        "J",
        "conversation",
        True,
        2,
        10,
        "bh",
        variances,
        chosen=("flat",),
        datasets=(DatasetCorrelations("flat", "constant"),),
    )
    assert render_participants(unjudged)[2] == (
        "- **flat**: human reference: no ρ (constant); significant after the correction: none."
    )
    missing = ParticipantsStudy("J", "conversation", False, 1, 10, "bh", variances, missing=NotRun("none", "judge"))
    assert render_participants(missing) == ["**Not run**: none. To add it: judge.", variance_line]


def test_paper_tables_fields_say_which_figures_and_tables_the_answer_holds():
    it = [*insts(12, "a"), *insts(12, "b")]
    js = [reps(i.id, t, n) for i in it for t, n in (("reference", 1), ("v1", 2))]
    js += [overall(i.id, "reference", "J", 5, 6) for i in it]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)))
    a = studies.paper_tables(run_frames(run), run, "J", resamples=100, seed=3)
    x = a.result
    assert isinstance(x, PaperTables) and a.text == render_paper_tables(x)
    assert (x.figures, x.table4, x.table11) == (len(a.charts), True, True) and x.figures == 2
    empty = make(it, [], mp(("v1", G41, "vanilla", 1)))
    b = studies.paper_tables(run_frames(empty), empty, "J", resamples=100)
    assert isinstance(b.result, PaperTables) and b.result.missing is not None and b.result.figures == 0


def test_render_paper_tables_alone_writes_its_sentence_from_a_hand_made_result():
    (text,) = render_paper_tables(PaperTables("J_1", Intervals(200, 3, 10), figures=3, table4=True, table11=True))
    assert text.startswith("Judge **J\\_1**, multi-party instances only") and "Figure 3: 3 figure(s)" in text
    assert "(200 resamples, seed 3)" in text
    assert render_paper_tables(PaperTables("J", Intervals(200, 3, 10), missing=NotRun("no data", "judge"))) == [
        "**Not run**: no data. To add it: judge."
    ]


def test_agreement_fields_hold_the_raters_and_the_rho_computed_by_hand():
    a = studies.agreement_answer(agreement_frames(), resamples=50, min_n=5)
    x = a.result
    assert isinstance(x, Agreement) and a.text == render_agreement(x)
    assert (x.humans, x.judges, x.resamples, x.min_n) == (("A", "B", "C"), 1, 50, 5)
    inter = next(r for r in x.rhos if r.judge is None and r.item == "all")
    assert inter.rho == pytest.approx((1 + 11 / math.sqrt(90)) / 3) and inter.n == 5  # as test_agreement has it
    assert {r.judge for r in x.rhos} == {None, "J"} and x.detections is not None and x.missing is None
    none = studies.agreement_answer(agreement_frames({"J": [0, 1, 3]}, {}, {}), resamples=20).result
    assert isinstance(none, Agreement) and none.humans == () and none.missing is not None


def test_render_agreement_alone_writes_its_sentences_from_a_hand_made_result():
    def rho(judge, item, value, significant, p5, note=None, ci_note=None):
        return AgreementRho(judge, 3, item, value, 8, note, significant, p5, ci_note)

    x = Agreement(
        100,
        7,
        5,
        ("A_1", "B"),
        1,
        detections="Totals over 8 conversations.",
        rhos=(
            rho(None, "all", 0.5, True, 0.125),
            rho("J", "consistency", 0.25, False, None, ci_note="degenerate"),
            rho("J", "collaborativeness", None, None, None, note="constant"),
            rho("J", "all", 0.5, None, None, ci_note="n too small"),
        ),
        coverage=(TaxonomyCoverage("A_1", 2, 40, 0.05), TaxonomyCoverage("B", 0, 0, None)),
    )
    text = render_agreement(x)
    assert text[0].startswith("Method (") and text[0].endswith(
        "); 100 resamples, seed 7; conversations that every rater of a comparison rated validly; not tested "
        "below n = 5. 2 human annotators: A\\_1, B."
    )
    assert text[1:] == [
        "Totals over 8 conversations.",
        "- inter-human, all behaviours (counts): ρ = 0.50 (n = 8; 5th percentile 0.12: significant).",
        "- J vs 3 annotator(s), consistency: ρ = 0.25 (n = 8; no range: degenerate: not significant).",
        "- J vs 3 annotator(s), collaborativeness: ρ = undefined (n = 8; undefined: constant).",
        "- J vs 3 annotator(s), all behaviours (counts): ρ = 0.50 (n = 8; not tested: n too small).",
        "Behaviours not in the taxonomy (Appendix B.3), share of labelled turns: A\\_1 2 of 40 turns (5.0%); "
        "B 0 of 0 turns.",
    ]
    nobody = Agreement(100, 7, 5, (), 2, detections="Totals.", missing=NotRun("no annotator", "annotate"))
    assert render_agreement(nobody) == ["**Not run**: no annotator. To add it: annotate.", "Totals."]
    too_few = Agreement(100, 7, 5, ("A",), 1, no_comparison=NotRun("too few", "annotate more"))
    assert render_agreement(too_few)[1:] == ["**Not run**: too few. To add it: annotate more."]


def test_bench_summary_fields_hold_the_counts_of_the_instances_and_the_builders_report(tmp_path):
    it = [*insts(3, "a"), *insts(2, "b")]
    it[0] = it[0].model_copy(update={"history": it[0].history[:1]})
    skipped = [{"conversation": f"c{i}", "reason": "too short"} for i in range(12)]
    (tmp_path / "report.json").write_text(json.dumps({"skipped_conversations": skipped}), encoding="utf-8")
    a = studies.bench_summary(it, tmp_path)
    x = a.result
    assert isinstance(x, BenchSummary) and a.text == render_bench_summary(x)
    assert (x.instances, x.datasets) == (5, len({i.dataset for i in it}))
    assert x.history_turns == (min(len(i.history) for i in it), max(len(i.history) for i in it)) == (1, 2)
    assert x.reference_turns == (4, 4)
    assert x.skipped is not None and [s.conversation for s in x.skipped] == [f"c{i}" for i in range(12)]
    assert a.tables["skipped"].height == 12
    assert studies.bench_summary(it, tmp_path / "none").result.skipped is None  # type: ignore[union-attr]


def test_render_bench_summary_alone_writes_its_sentences_from_a_hand_made_result():
    skipped = tuple(SkippedConversation(f"c_{i}", "too short") for i in range(11))
    text = render_bench_summary(BenchSummary(5, 2, (1, 2), (4, 4), skipped))
    assert text[0] == "5 instances in 2 datasets; each has 1–2 history turns and 4–4 reference turns."
    assert text[1] == "The builder skipped 11 conversation(s): " + "; ".join(
        f"c\\_{i} (too short)" for i in range(10)
    )  # the first 10 named
    assert render_bench_summary(BenchSummary(5, 2, (1, 2), (4, 4), ()))[1] == "The builder skipped 0 conversation(s)."
    assert render_bench_summary(BenchSummary(5, 2, (1, 2), (4, 4))) == [text[0]]
