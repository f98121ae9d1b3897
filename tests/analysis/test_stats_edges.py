"""Edge cases of the published numbers: a target, pair or judge whose judgments are all invalid
is a row with n = 0 and why (never left out, never 0); unknown participant counts are left out
of Table 12 (never poison it); an overall judgment without a score is invalid (never a NaN mean)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from cocoeval.analysis import agreement, frames, paper_stats, rq, stats, studies
from cocoeval.analysis.frames import invalid_rates, run_frames
from cocoeval.core.schema import Continuation, Judgment, Participant
from cocoeval.run import Run

from ..sim_helpers import instance
from .test_agreement import COUNTS, _fine
from .test_rq import insts, make, mp, reps
from .test_stats import TAX, fine, overall

G41 = "openai/gpt-4.1"


def _invalid(j: Judgment) -> Judgment:
    return j.model_copy(update={"status": "invalid", "reason": "bad answer", "labels": []})


def _two_setups(n=12, b_valid=False, ref_valid=True):
    """A and B judged on n instances: A validly, B (and the reference unless ``ref_valid``) never."""
    it = [instance(f"d/c{i:02d}/0", n_hist=2, n_ref=4) for i in range(n)]
    js = []
    for inst in it:
        ref = fine(inst.id, "reference", "J", [["repetition"]] * 2 + [[]] * 2)
        b = fine(inst.id, "B", "J", [["repetition"]] + [[]] * 3)
        js += [
            ref if ref_valid else _invalid(ref),
            fine(inst.id, "A", "J", [["repetition"]] * 3 + [[]]),
            b if b_valid else _invalid(b),
        ]
    conts = {s: [Continuation(instance_id=i.id, setup_id=s, turns=i.reference) for i in it] for s in "AB"}
    return run_frames(Run.model_validate({"instances": it, "continuations": conts, "judgments": {"J": js}}))


def test_a_setup_whose_judgments_are_all_invalid_is_a_row_with_why_never_left_out():
    f = _two_setups()
    per_b, dist = stats.paired_vs_human(f, "J", resamples=100)
    b = dist.filter(pl.col("target") == "B").row(0, named=True)
    assert b["n"] == 0 and b["distance"] is None and b["ci_low"] is None
    assert "B: 0 of 12 fine-grained judgments by J valid (12 invalid)" in b["ci_note"]
    rows = per_b.filter(pl.col("target") == "B")
    assert rows.height == len(TAX.ids) and rows["n"].to_list() == [0] * len(TAX.ids)
    assert rows["diff"].is_null().all() and rows["p"].is_null().all() and rows["verdict"].is_null().all()
    assert per_b["family"][0] == len(TAX.ids)  # only A's behaviours were tested and corrected
    a = dist.filter(pl.col("target") == "A").row(0, named=True)
    assert a["n"] == 12 and a["distance"] == pytest.approx(1.0)  # A: 3 vs the humans' 2 repetitions
    text = "\n".join(rq.compare_to_humans(f, "J", ["A", "B"], "q", resamples=100).text)
    assert "**B**: D = no estimate (no instance where both B and the human reference" in text
    # every reference invalid: every setup is a row saying so, none is called closest
    g = _two_setups(b_valid=True, ref_valid=False)
    _, dist = stats.paired_vs_human(g, "J", resamples=100)
    assert dist["n"].to_list() == [0, 0] and dist["distance"].is_null().all()
    assert all("reference: 0 of 12 fine-grained judgments by J valid (12 invalid)" in x for x in dist["ci_note"])
    text = "\n".join(rq.compare_to_humans(g, "J", ["A", "B"], "q", resamples=100).text)
    assert "no setup is called closest" in text and "**A**: D = no estimate" in text


def test_a_k_pair_without_valid_shared_instances_is_a_row_with_why():
    it = insts(12)
    js = []
    for inst in it:
        js += [reps(inst.id, "v1", 2), reps(inst.id, "v5", 1), _invalid(reps(inst.id, "v30", 0))]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)), mp(("v5", G41, "vanilla", 5)), mp(("v30", G41, "vanilla", 30)))
    f = run_frames(run)
    pairs = paper_stats.rq5_pairs(paper_stats.conditions(run))
    pr = paper_stats.paired_between(f, "J", pairs, resamples=100)
    assert set(zip(pr["setup_a"], pr["setup_b"], strict=True)) == {("v1", "v5"), ("v1", "v30"), ("v5", "v30")}
    dead = pr.filter(pl.col("setup_b") == "v30")
    assert dead["n"].to_list() == [0] * dead.height and dead["diff"].is_null().all()
    assert dead["direction"].is_null().all() and dead["p"].is_null().all()
    assert all("v30: 0 of 12 fine-grained judgments by J valid (12 invalid)" in x for x in dead["ci_note"])
    assert pr["family"][0] == len(TAX.ids)  # only v1 → v5 tested
    ok = pr.filter((pl.col("setup_b") == "v5") & (pl.col("behaviour") == "repetition")).row(0, named=True)
    assert ok["n"] == 12 and ok["diff"] == pytest.approx(-1.0)
    text = "\n".join(rq.by_turns_per_call(f, run, "J", resamples=100).text)
    assert "k = 5 → 30 (v5 → v30) (n = 0): not tested (no multi-party instance where both v5 and v30" in text


def _participants_run(unknown: int, n: int = 14):
    it, js = [], []
    for i in range(n):
        inst = instance(f"d/c{i:02d}/0", n_hist=2, n_ref=4)
        people = [] if i < unknown else [Participant(name=f"P{k}", role="m") for k in range(2 + (i * 7) % 5)]
        it.append(inst.model_copy(update={"metadata": inst.metadata.model_copy(update={"participants": people})}))
        k = (i * 3) % 5  # 0-4 repetitions in 4 turns
        js.append(fine(inst.id, "reference", "J", [["repetition"]] * k + [[]] * (4 - k)))
    return run_frames(Run.model_validate({"instances": it, "continuations": {}, "judgments": {"J": js}}))


def test_unknown_participant_counts_are_left_out_of_table_12_never_poison_it():
    f = _participants_run(unknown=3)
    var = paper_stats.participant_variance(f).row(0, named=True)
    assert var["instances"] == 11 and var["unknown"] == 3
    r = (
        paper_stats.participants_spearman(f, "J", datasets=["d"])
        .filter(pl.col("behaviour") == "all")
        .row(0, named=True)
    )
    known = f.instances.filter(pl.col("n_participants_metadata").is_not_null()).sort("instance_id")
    totals = f.counts.group_by("instance_id").agg(pl.col("count").sum()).sort("instance_id")
    y = known.join(totals, on="instance_id")
    ref = sps.spearmanr(y["n_participants_metadata"].to_numpy(), y["count"].to_numpy())
    assert r["n"] == 11 and r["rho"] == pytest.approx(ref.statistic) and r["p_value"] == pytest.approx(ref.pvalue)
    assert r["note"] == "3 instance(s) without a participant count left out"
    # too few known ones: no ρ, and both reasons
    g = _participants_run(unknown=6)
    r = (
        paper_stats.participants_spearman(g, "J", datasets=["d"])
        .filter(pl.col("behaviour") == "all")
        .row(0, named=True)
    )
    assert r["rho"] is None and r["n"] == 8
    assert r["note"] == "n too small (n=8 < 10); 6 instance(s) without a participant count left out"


def test_a_judge_whose_judgments_are_all_invalid_is_an_agreement_row_with_why():
    it = [instance(f"d/c{i:02d}/0", n_hist=2, n_ref=6) for i in range(5)]
    js = [_fine(it[i].id, r, k) for r in "AB" for i, k in enumerate(COUNTS[r])]
    js += [_invalid(_fine(i.id, "J", 1)) for i in it]
    f = run_frames(Run.model_validate({"instances": it, "continuations": {}, "judgments": {"x": js}}))
    t = agreement.agreement_table(f, resamples=20, min_n=3)
    j = t.filter((pl.col("comparison") == "J") & (pl.col("item") == "all")).row(0, named=True)
    assert j["rho"] is None and j["n"] == 0 and j["significant"] is None and j["ci_note"] == "n too small (n=0 < 3)"
    assert "J: 0 of 5 valid, A: 5 of 5 valid, B: 5 of 5 valid" in j["note"]
    assert t.filter((pl.col("comparison") == "J") & (pl.col("scale") == "likert")).is_empty()  # J made no overall
    text = "\n".join(studies.agreement_answer(f, resamples=20, min_n=3).text)
    assert "J vs 2 annotator(s), all behaviours (counts): ρ = undefined (n = 0;" in text
    # one conversation rated by every rater: no ρ, a row per comparison saying why
    one = [_fine(it[0].id, r, 1) for r in "ABJ"] + [_fine(i.id, "A", 2) for i in it[1:]]
    g = run_frames(Run.model_validate({"instances": it, "continuations": {}, "judgments": {"x": one}}))
    t = agreement.agreement_table(g, resamples=20, min_n=3).filter(pl.col("item") == "all")
    assert t["comparison"].to_list() == [agreement.INTER_HUMAN, "J"] and t["rho"].is_null().all()
    assert t["n"].to_list() == [1, 1] and all("only 1 conversation(s)" in x for x in t["note"])


def test_an_overall_judgment_without_a_score_is_invalid_never_a_nan_mean():
    it = [instance(f"d/c{i:02d}/0", n_hist=2, n_ref=4) for i in range(12)]
    js = [overall(i.id, "reference", "J", 3 + k % 4, 6) for k, i in enumerate(it)]
    js[0] = js[0].model_copy(update={"consistency": None})
    f = run_frames(Run.model_validate({"instances": it, "continuations": {}, "judgments": {"J": js}}))
    assert f.judgments.filter(pl.col("status") == "invalid")["reason"].to_list() == [frames.NO_SCORE]
    rate = invalid_rates(f).row(0, named=True)
    assert rate["n"] == 12 and rate["invalid"] == 1
    m = stats.likert_means(f, resamples=100).filter(pl.col("score") == "consistency").row(0, named=True)
    assert m["n"] == 11 and m["mean"] == pytest.approx(np.mean([3 + k % 4 for k in range(1, 12)]))
    assert m["ci_low"] is not None


def test_table_4_keeps_a_setup_whose_overall_judgments_are_all_invalid():
    it = insts(12)
    js = []
    for inst in it:
        js += [
            overall(inst.id, "reference", "J", 5, 6),
            overall(inst.id, "v1", "J", 8, 9),
            _invalid(overall(inst.id, "v30", "J", 1, 1)),
            reps(inst.id, "v30", 1),
        ]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)), mp(("v30", G41, "vanilla", 30)), mp(("t1", G41, "taxonomy", 1)))
    t4 = paper_stats.table4(run_frames(run), "J", paper_stats.conditions(run), resamples=100)
    assert t4["target"].to_list() == ["reference", "v1", "v30"]  # t1: never judged, not expected
    v30 = t4.filter(pl.col("target") == "v30").row(0, named=True)
    assert v30["n"] == 0 and v30["consistency_mean"] is None and v30["collaborativeness_mean"] is None
    assert (
        v30["consistency_ci_note"]
        == "no valid overall judgment: v30: 0 of 12 overall judgments by J valid (12 invalid)"
    )
    assert t4.filter(pl.col("target") == "v1")["consistency_mean"].item() == 8.0


def _x_or_y_title(spec: dict, axis: str) -> list[str]:
    inner = spec.get("spec", spec)
    return next(
        layer["encoding"][axis]["title"]
        for layer in inner.get("layer", [inner])
        if axis in layer.get("encoding", {}) and "title" in layer["encoding"][axis] and layer["encoding"][axis]["title"]
    )


def _same(values: list[dict], table: pl.DataFrame, keys: list[str], cols: list[str]) -> None:
    rows = {tuple(r[k] for k in keys): r for r in table.iter_rows(named=True)}
    assert len(values) == len(rows)
    for v in values:
        r = rows[tuple(v[k] for k in keys)]
        for c in cols:
            assert v[c] == pytest.approx(r[c]) if r[c] is not None else v[c] is None, (c, v, r)


def test_plotted_values_are_the_tables_and_axes_name_the_statistic_and_n():
    it = insts(12)
    js = []
    for k, inst in enumerate(it):
        js += [reps(inst.id, "reference", k % 3), reps(inst.id, "v1", 1 + k % 2, k % 3), reps(inst.id, "v30", 0)]
        js += [overall(inst.id, "reference", "J", 4 + k % 3, 5), overall(inst.id, "v1", "J", 7 + k % 2, 8)]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)), mp(("v30", G41, "vanilla", 30)))
    f = run_frames(run)
    a = rq.compare_to_humans(f, "J", ["v1", "v30"], "q", resamples=100, run=run)
    figs = [ch.to_dict() for k, ch in a.charts.items() if k.startswith("figure3")]
    assert figs
    for d in figs:
        panels = {v["panel"] for v in d["data"]["values"]}
        part = a.tables["figure3"].filter(pl.col("panel").is_in(list(panels)))
        _same(d["data"]["values"], part, ["panel", "series", "behaviour"], ["mean", "ci_low", "ci_high", "n"])
        assert _x_or_y_title(d, "y") == ["mean occurrences", "per conversation (95% CI)", "n = 12 instances"]
    lk = a.charts["likert"].to_dict()
    table = a.tables["likert"].filter(pl.col("series") != paper_stats.DIFFERENCE)
    assert sorted(v["mean"] for v in lk["data"]["values"]) == pytest.approx(sorted(table["mean"].to_list()))
    assert _x_or_y_title(lk, "x") == ["mean score (1-10), 95% CI", "n = 12 instances"]
    # agreement: the bars are the table's ρ, the axis says which ρ and over how many conversations
    from .test_agreement import frames as agreement_frames

    g = agreement_frames()
    ans = studies.agreement_answer(g, resamples=50, min_n=3)
    d = ans.charts["agreement"].to_dict()
    shown = ans.tables["agreement"].filter(pl.col("item").is_in(["all", *agreement.LIKERT]))
    _same(d["data"]["values"], shown, ["comparison", "item"], ["rho", "p5", "p95", "n"])
    assert _x_or_y_title(d, "x") == [
        "average leave-one-out Spearman ρ",
        "bootstrap 5th–95th percentile",
        "n = 5 conversations",
    ]


def test_the_invalid_rate_is_over_the_judgments_that_had_something_to_judge():
    from cocoeval.core.targets import NO_TURNS

    chats = [instance(f"chat/c{i}/0", n_hist=2, n_ref=2, chat=True) for i in range(4)]
    empty = [i.model_copy(update={"reference": [t for t in i.reference if t.speaker != "user"]}) for i in chats[:2]]
    it = [*empty, *chats[2:]]
    js = [_invalid(fine(i.id, "reference", "J", [])).model_copy(update={"reason": NO_TURNS}) for i in empty]
    js += [_invalid(fine(chats[2].id, "reference", "J", [[]])), fine(chats[3].id, "reference", "J", [["repetition"]])]
    f = run_frames(Run.model_validate({"instances": it, "continuations": {}, "judgments": {"J": js}}))
    r = invalid_rates(f).row(0, named=True)
    assert (r["n"], r["skipped"], r["invalid"]) == (4, 2, 1)
    assert r["invalid_rate"] == 0.5  # 1 of the 2 judgments that had a turn to judge; not 1 of 4
    g = run_frames(Run.model_validate({"instances": empty, "continuations": {}, "judgments": {"J": js[:2]}}))
    assert invalid_rates(g).row(0, named=True)["invalid_rate"] is None  # nothing to judge: no rate, not 0


def test_the_notebooks_linked_figure_3_plots_the_answers_own_intervals(tmp_path):
    from cocoeval.notebooks.context import RunContext

    it = insts(12)
    js = []
    for k, inst in enumerate(it):
        js += [reps(inst.id, "reference", k % 3), reps(inst.id, "v1", 1 + k % 2, k % 3), reps(inst.id, "v30", k % 2)]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)), mp(("v30", G41, "vanilla", 30)))
    ctx = RunContext(None, tmp_path, run, run_frames(run), "J")  # type: ignore[arg-type]
    answer = ctx.analysis("rq2", 500, seed=3)
    jc = ctx.linked_chart(ctx.viewer(), answer)
    values = jc.chart.to_dict()["data"]["values"]
    _same(values, answer.tables["figure3"], ["panel", "series", "behaviour"], ["mean", "ci_low", "ci_high", "n"])
    assert any(v["ci_low"] is not None for v in values)


def test_table_11_keeps_a_setup_whose_judgments_in_a_dataset_are_all_invalid():
    it = [*insts(10, "a"), *insts(10, "b")]
    js = []
    for inst in it:
        v30 = reps(inst.id, "v30", 2)
        js += [reps(inst.id, "reference", 1), reps(inst.id, "v1", 3), _invalid(v30) if inst.dataset == "b" else v30]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)), mp(("v30", G41, "vanilla", 30)))
    t11 = paper_stats.table11(run_frames(run), "J", paper_stats.conditions(run))
    assert t11.select("dataset", "target", "n").rows() == [
        ("a", "reference", 10),
        ("a", "v1", 10),
        ("a", "v30", 10),
        ("b", "reference", 10),
        ("b", "v1", 10),
        ("b", "v30", 0),
    ]
    b30 = t11.filter((pl.col("dataset") == "b") & (pl.col("target") == "v30")).row(0, named=True)
    assert b30["repetition"] is None  # no valid judgment: no mean, never 0
    assert t11.filter((pl.col("dataset") == "a") & (pl.col("target") == "v30"))["repetition"].item() == 2.0


def test_paired_likert_keeps_a_setup_whose_overall_judgments_are_all_invalid():
    it = insts(12)
    js = []
    for k, inst in enumerate(it):
        js += [
            overall(inst.id, "reference", "J", 5, 6),
            overall(inst.id, "v1", "J", 7 + k % 2, 8),
            _invalid(overall(inst.id, "v30", "J", 1, 1)),
            reps(inst.id, "reference", 1),
            reps(inst.id, "v1", 1),
            reps(inst.id, "v30", 1),
        ]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)), mp(("v30", G41, "vanilla", 30)))
    f = run_frames(run)
    lk = paper_stats.likert_vs_human(f, "J", ["v1", "v30"], resamples=100)
    dead = lk.filter(pl.col("target") == "v30")
    assert dead.height == 6 and dead["n"].to_list() == [0] * 6 and dead["mean"].is_null().all()
    assert all("v30: 0 of 12 overall judgments by J valid (12 invalid)" in x for x in dead["ci_note"])
    assert lk.filter(
        (pl.col("target") == "v1") & (pl.col("series") == paper_stats.DIFFERENCE) & (pl.col("score") == "consistency")
    )["mean"].item() == pytest.approx(2.5)
    text = "\n".join(rq.compare_to_humans(f, "J", ["v1", "v30"], "q", resamples=100).text)
    assert "v30 consistency no estimate (no instance where both v30 and the human reference" in text


def test_rq1_says_the_human_references_were_judged_but_none_validly():
    f = _two_setups(ref_valid=False)
    text = "\n".join(rq.human_rates(f, "J", resamples=100).text)
    assert "**Not run**: no multi-party human reference has a valid judgment by J" in text
    assert "reference: 0 of 12 fine-grained judgments by J valid (12 invalid)" in text


def test_the_paired_likert_figure_draws_the_human_reference_in_black():
    import vl_convert as vlc

    it = insts(12)
    js = []
    for k, inst in enumerate(it):
        js += [
            overall(inst.id, "reference", "J", 4 + k % 3, 5),
            overall(inst.id, "v1", "J", 7 + k % 2, 8),
            reps(inst.id, "reference", 1),
            reps(inst.id, "v1", 1),
        ]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)))
    a = rq.compare_to_humans(run_frames(run), "J", ["v1"], "q", resamples=100)
    svg = vlc.vegalite_to_svg(a.charts["likert"].to_json())
    # one point per score and series: the simulated ones blue, the human reference's black
    assert svg.count('fill="#2471a3"') == 2 and svg.count('fill="#111"') == 2


def test_ratio_percentiles_are_nanpercentiles_over_finite_values_bit_for_bit():
    """``stats._finite_percentiles`` (np.percentile on the columns finite throughout) gives what
    ``np.nanpercentile`` over the finite values gives, to the last bit: random resamples with
    ties, scales far apart, and NaN or infinite ratios in none, some or every row of a column."""
    import warnings

    from cocoeval.analysis.stats import PERCENTILES, _finite_percentiles

    rng = np.random.default_rng(7)
    for case in range(200):
        x = rng.normal(size=(int(rng.integers(1, 1200)), int(rng.integers(1, 12)))) * rng.choice([1, 1e-3, 1e6])
        if case % 3 == 0:
            x = np.round(x)  # ties
        x[rng.random(x.shape) < rng.choice([0, 0.01, 0.5, 1.0])] = rng.choice([np.nan, np.inf, -np.inf])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.nanpercentile(np.where(np.isfinite(x), x, np.nan), PERCENTILES, axis=0)
        assert np.array_equal(_finite_percentiles(x), expected, equal_nan=True), case
