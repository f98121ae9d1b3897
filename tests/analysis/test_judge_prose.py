"""The judge analyses' typed results (beyond the paper) and their wording: judge_check and
judge_reliability keep the result their text is rendered from in ``Answer.result``, its fields
hold the numbers of the tables beside it, and each render function alone (no run) writes the
expected sentences from a hand-made result."""

from __future__ import annotations

import polars as pl

from cocoeval.analysis.analyses import Params, compute
from cocoeval.analysis.calibration_prose import (
    History,
    JudgeReliability,
    Move,
    PooledCalibration,
    Reliability,
    Samples,
    render_reliability,
)
from cocoeval.analysis.judge_check import ANY
from cocoeval.analysis.judge_check_prose import (
    CorrectedSummary,
    Disagreement,
    GateSummary,
    JudgeCheck,
    render_corrected,
    render_judge_check,
    render_not_validated,
)
from cocoeval.analysis.probes_prose import PlantedFinding, ProbeCI, ProbeFindings, render_probes

from .test_judge_check import run_of, synthetic


def test_judge_check_keeps_the_result_its_text_says_and_it_holds_the_tables_numbers():
    run = run_of(synthetic(1, 45), 45)
    a = compute("judge_check", run, Params(resamples=60))
    assert a is not None
    x = a.result
    assert isinstance(x, JudgeCheck) and a.text == render_judge_check(x)
    [j] = x.judges
    gate = a.tables["validation"]
    assert j.gate.judge == "J" and len(j.gate.validated) == gate["validated"].sum()
    row = a.tables["turn_agreement"].filter(pl.col("behaviour") == ANY).row(0, named=True)
    assert j.agreement is not None
    assert (j.agreement.turns, j.agreement.conversations, j.agreement.kappa.value) == (
        row["turns"],
        row["conversations"],
        row["kappa"],
    )
    rates = a.tables["corrected_rates"]
    assert j.corrected is not None and j.corrected.rates == rates.height
    assert j.corrected.with_interval == rates["corrected_low"].is_not_null().sum()
    assert f"over {row['turns']} turns of {row['conversations']} conversations" in "\n".join(a.text)


def test_judge_reliability_keeps_the_result_its_text_says():
    a = compute("judge_reliability", run_of(synthetic(0, 30), 30), Params(options={"record_history": False}))
    assert a is not None
    assert isinstance(a.result, Reliability)
    said = render_reliability(a.result)
    assert a.text[: len(said)] == said  # then the gate's mark, added to every answer with the judge's numbers
    assert [j.judge for j in a.result.judges] == ["J"]


def test_the_gate_and_the_corrected_rates_are_worded_from_their_fields():
    g = GateSummary("J", None, ("Repetition",), ("Off topic",), ("Interruption",), True)
    assert render_not_validated(g, "HOW") == (
        "not validated for this judge (J): Off topic; too rare to validate here: Interruption "
        "(see the judge_check validation table)"
    )
    none = render_not_validated(GateSummary("J", None, (), ("Off topic",), (), False), "HOW")
    assert none is not None and none.endswith("every behaviour, no human annotations; HOW")
    assert render_not_validated(GateSummary("J", "id", ("Repetition",), (), (), True), "HOW") is None
    c = CorrectedSummary(4, 3, (Disagreement("Off topic", "reference", 2.5, 1.25),))
    assert render_corrected(c) == "the judge-only mean lies outside the corrected 95% interval for " + (
        "Off topic of reference (2.50 vs 1.25)"
    )
    assert "for all 3 behaviour rates with an interval (1 without one)" in render_corrected(CorrectedSummary(4, 3, ()))


def test_the_reliability_sentences_are_rendered_from_a_hand_made_result():
    x = Reliability(
        10,
        0.05,
        (
            JudgeReliability(
                "j",
                Samples(3, 36, 1, (("no JSON", 1),)),
                PooledCalibration(480, 12, 0.0141, 0.0102, ()),
                History(True, "abc", "p@1", "2026-01-01", (Move("f1", "fell", -0.857),)),
            ),
        ),
        True,
    )
    assert render_reliability(x)[1:] == [
        "- **j**: 3 samples per target; 1 of 36 samples invalid (1× no JSON) (counted, never read as no behaviour).",
        "- **j** calibration over 480 turn × behaviour pairs of 12 conversations: ECE 0.014, Brier 0.010.",
        "  History: against judge id abc (prompt p@1, 2026-01-01), any behaviour: f1 fell (-0.857).",
    ]
    assert "from 0.05," in render_reliability(x)[0]


def test_the_probe_lines_are_rendered_from_hand_made_findings():
    planted = PlantedFinding(
        "Repetition", "Repetition", 3, 4, 0.75, ProbeCI(0.5, 1.0, None), "none", None, ProbeCI(None, None, "n < 2")
    )
    x = ProbeFindings(False, True, False, (), (planted,), (), (), False)
    assert render_probes(x) == [
        "Judge probes (beyond the paper):",
        "names: not run: cocoeval probe PARAMS (with names in probes.kinds)",
        "planted Repetition (expected Repetition): detected 3 of 4 (75%; 95% CI 0.50 to 1.00); other labels only "
        "on none; false alarms added elsewhere unknown (n < 2)",
        "stability: not run: cocoeval probe PARAMS (with stability in probes.kinds)",
        "self-preference: not computed (needs setups of the judge's model family and of another family, judged "
        "validly beside the human reference)",
    ]
