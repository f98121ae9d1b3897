"""The paper's study groupings on hand-made runs with known answers: RQ3 per model and k, RQ5
within model x prompt, RQ1 without human–AI chats, participants (D.4), Tables 4 and 11."""

from __future__ import annotations

import polars as pl
import pytest
from scipy import stats as sps

from cocoeval.analysis import charts, paper_stats, rq, studies
from cocoeval.analysis.frames import run_frames
from cocoeval.core.schema import Participant, Turn, is_human_ai
from cocoeval.run import Run

from ..sim_helpers import instance, judged_continuations
from .test_stats import TAX, fine, overall

G41, OPUS = "openai/gpt-4.1", "anthropic/claude-opus-4"
FT1, FT5 = "openai/ft:gpt-4.1-2025-04-14:org:k1:a", "openai/ft:gpt-4.1-2025-04-14:org:k5:b"


def reps(inst_id, target, n_rep, n_off=0, judge="J"):
    """A judgment with ``n_rep`` repetition turns and ``n_off`` off-topic turns out of 4."""
    per = [["repetition"]] * n_rep + [["off_topic"]] * n_off
    return fine(inst_id, target, judge, per + [[]] * (4 - len(per)))


def manifest(*setups):
    return {
        "params": {
            "setups": [
                {"name": n, "model": m, "prompt": p, "turns_per_call": k, "kind": kind} for n, m, p, k, kind in setups
            ]
        }
    }


def mp(setup):
    return (*setup, "multiparty")


def make(insts, judgments, *setups):
    return Run.model_validate(
        {
            "instances": insts,
            "continuations": judged_continuations(judgments),
            "judgments": {"J": judgments},
            "manifest": manifest(*setups),
        }
    )


def insts(n, dataset="d", chat=False):
    return [
        instance(f"{dataset}/c{i}/0", n_hist=2, n_ref=4, chat=chat).model_copy(update={"dataset": dataset})
        for i in range(n)
    ]


def test_conditions_group_fine_tuned_models_by_base():
    run = make([], [], mp(("a", FT1, "vanilla", 1)), mp(("b", FT5, "vanilla", 5)), mp(("c", G41, "vanilla", 1)))
    cond = paper_stats.conditions(run)
    assert cond.filter(pl.col("setup") == "a")["model_group"].item() == "openai/gpt-4.1-2025-04-14 SFT"
    assert paper_stats.figure_groups(cond) == {
        "openai/gpt-4.1 · vanilla": ["c"],
        "openai/gpt-4.1-2025-04-14 SFT · vanilla": ["a", "b"],
    }


def test_rq3_contrasts_each_model_and_k_with_both_prompts_only():
    it = insts(12)
    js = []
    for i, inst in enumerate(it):
        js += [
            reps(inst.id, "v1", 0),
            reps(inst.id, "v30", 1),
            reps(inst.id, "t30", 1),
            reps(inst.id, "o1", 0),
            reps(inst.id, "ot5", 3),
        ]
        if i >= 2:  # taxonomy k=1 judged validly on 10 instances only
            js.append(reps(inst.id, "t1", 2))
    run = make(
        it,
        js,
        mp(("v1", G41, "vanilla", 1)),
        mp(("t1", G41, "taxonomy", 1)),
        mp(("v30", G41, "vanilla", 30)),
        mp(("t30", G41, "taxonomy", 30)),
        mp(("o1", OPUS, "vanilla", 1)),
        mp(("ot5", OPUS, "taxonomy", 5)),  # k differs: no pair
        mp(("c1", G41, "copy_then_continue", 1)),
    )
    pairs = paper_stats.rq3_pairs(paper_stats.conditions(run))
    assert sorted((a, b, k["turns_per_call"]) for a, b, k in pairs) == [("v1", "t1", 1), ("v30", "t30", 30)]
    f = run_frames(run)
    a = rq.prompting(f, run, "J", resamples=200)
    c = a.tables["contrasts"]
    r1 = c.filter((pl.col("setup_b") == "t1") & (pl.col("behaviour") == "repetition")).row(0, named=True)
    assert (r1["n"], r1["mean_a"], r1["mean_b"], r1["diff"]) == (10, 0.0, 2.0, 2.0)
    assert r1["direction"] == "higher" and r1["p_adj"] <= 0.05
    r30 = c.filter((pl.col("setup_b") == "t30") & (pl.col("behaviour") == "repetition")).row(0, named=True)
    assert r30["diff"] == 0 and r30["direction"] == "no significant difference"
    assert c["family"].unique().to_list() == [2 * len(TAX.ids)]  # behaviours x the two (model, k) pairs
    assert set(c["model_group"]) == {G41}
    assert list(a.charts) == ["rq3_openai-gpt-4.1"]
    assert a.charts["rq3_openai-gpt-4.1"].to_dict()["facet"]["field"] == "comparison"
    assert any("k = 1" in t and "Repetition" in t for t in a.text)


def test_rq5_compares_k_within_model_and_prompt_never_pooled():
    it = insts(12)
    counts = {"g1": 3, "g5": 2, "g30": 0, "o1": 4, "o5": 1, "gt1": 2}
    js = [reps(inst.id, s, n) for inst in it for s, n in counts.items()]
    js += [reps(inst.id, "reference", 1) for inst in it]
    run = make(
        it,
        js,
        mp(("g1", G41, "vanilla", 1)),
        mp(("g5", G41, "vanilla", 5)),
        mp(("g30", G41, "vanilla", 30)),
        mp(("o1", OPUS, "vanilla", 1)),
        mp(("o5", OPUS, "vanilla", 5)),
        mp(("gt1", G41, "taxonomy", 1)),
    )
    pairs = paper_stats.rq5_pairs(paper_stats.conditions(run))
    got = sorted((k["model_group"], k["prompt"], k["k_a"], k["k_b"], a, b) for a, b, k in pairs)
    assert got == [
        (OPUS, "vanilla", 1, 5, "o1", "o5"),
        (G41, "vanilla", 1, 5, "g1", "g5"),
        (G41, "vanilla", 1, 30, "g1", "g30"),
        (G41, "vanilla", 5, 30, "g5", "g30"),
    ]
    f = run_frames(run)
    a = rq.by_turns_per_call(f, run, "J", resamples=200)
    kp = a.tables["k_pairs"].filter(pl.col("behaviour") == "repetition")
    opus = kp.filter(pl.col("model_group") == OPUS).row(0, named=True)
    assert (opus["mean_a"], opus["mean_b"], opus["diff"], opus["direction"]) == (4.0, 1.0, -3.0, "lower")
    g = kp.filter((pl.col("k_a") == 5) & (pl.col("k_b") == 30)).row(0, named=True)
    assert (g["mean_a"], g["mean_b"]) == (2.0, 0.0)
    assert kp.height == 4 and kp["family"][0] == 4 * len(TAX.ids)
    assert any("only k = 1" in t and "taxonomy" in t for t in a.text)  # one k: not compared
    km = a.tables["k_means"].filter((pl.col("behaviour") == "repetition") & (pl.col("series") == "simulated"))
    assert dict(zip(km["panel"], km["mean"], strict=True)) == {s: float(n) for s, n in counts.items()}
    d = a.tables["distance_by_k"]
    assert d.filter(pl.col("target") == "g30")["distance"].item() == pytest.approx(1.0)
    assert {
        "rq5_openai-gpt-4.1-vanilla",
        "rq5_anthropic-claude-opus-4-vanilla",
        "figure3_openai-gpt-4.1-vanilla",
    } <= set(a.charts)
    fig = a.charts["figure3_openai-gpt-4.1-vanilla"].to_dict()
    assert fig["title"] == "openai/gpt-4.1 · vanilla"


def test_rq1_leaves_out_human_ai_chats():
    multi, chat = insts(12), insts(5, dataset="sharechat", chat=True)
    assert not any(is_human_ai(i) for i in multi) and all(is_human_ai(i) for i in chat)
    js = [reps(i.id, "reference", 1) for i in multi] + [reps(i.id, "reference", 4) for i in chat]
    js += [overall(i.id, "reference", "J", 6, 5) for i in multi] + [overall(i.id, "reference", "J", 1, 1) for i in chat]
    f = run_frames(make([*multi, *chat], js))
    a = rq.human_rates(f, "J", resamples=200)
    rep = a.tables["human_means"].filter(pl.col("behaviour") == "repetition").row(0, named=True)
    assert (rep["mean"], rep["n"]) == (1.0, 12)
    assert a.tables["human_likert"].filter(pl.col("score") == "consistency")["mean"].item() == 6.0
    assert "5 human–AI chat instance(s)" in a.text[0]


def _with_people(inst, n_meta, n_window):
    speakers = [f"P{j}" for j in range(n_window)]
    turns = [Turn(speaker=speakers[j % n_window], text="x") for j in range(6)]
    return inst.model_copy(
        update={
            "history": turns[:2],
            "reference": turns[2:],
            "metadata": inst.metadata.model_copy(
                update={"participants": [Participant(name=f"P{j}") for j in range(n_meta)]}
            ),
        }
    )


def test_participants_for_humans_and_every_setup_on_the_widest_datasets():
    insts_, js, meta, tot_h, tot_s = [], [], [], [], []
    spread = {"flat": [4] * 12, "mid": [3, 4] * 6, "wide": [2 + i % 6 for i in range(12)]}
    for ds, counts in spread.items():
        for i, m in enumerate(counts):
            inst = _with_people(insts(1, ds)[0].model_copy(update={"id": f"{ds}/c{i}/0"}), m, 2 + i % 2)
            insts_.append(inst)
            h, s = (i * 7) % 5 % 5, (i * 3) % 4
            js += [reps(inst.id, "reference", min(h, 4)), reps(inst.id, "sim", s)]
            if ds == "wide":
                meta.append(m)
                tot_h.append(min(h, 4))
                tot_s.append(s)
    js += [reps(i.id, "reference", 2) for i in insts(3, "sharechat", chat=True)]  # never in the table
    run = make(insts_, js, mp(("sim", G41, "vanilla", 1)))
    f = run_frames(run)
    var = paper_stats.participant_variance(f)
    assert var["dataset"].to_list()[:2] == ["wide", "mid"] and "sharechat" not in var["dataset"].to_list()
    sp = paper_stats.participants_spearman(f, "J")
    assert set(sp["dataset"]) == {"wide", "mid"} and set(sp["target"]) == {"reference", "sim"}
    for target, tot in (("reference", tot_h), ("sim", tot_s)):
        row = sp.filter(
            (pl.col("dataset") == "wide") & (pl.col("target") == target) & (pl.col("behaviour") == "all")
        ).row(0, named=True)
        ref = sps.spearmanr(meta, tot)
        assert row["rho"] == pytest.approx(ref.statistic) and row["p_value"] == pytest.approx(ref.pvalue)
    # the window count (distinct speakers in x + r) is another predictor, asked for explicitly
    win = paper_stats.participants_spearman(f, "J", datasets=["wide"], count="window")
    w = win.filter((pl.col("target") == "reference") & (pl.col("behaviour") == "all")).row(0, named=True)
    assert w["rho"] == pytest.approx(sps.spearmanr([2 + i % 2 for i in range(12)], tot_h).statistic)
    # constant participants: no rho, the reason said
    flat = paper_stats.participants_spearman(f, "J", datasets=["flat"])
    assert flat["rho"].is_null().all() and flat["note"].str.contains("constant").all()
    a = studies.participants(f, "J", run)
    assert "wide" in a.text[0] and "mid" in a.text[0] and "metadata" in a.text[1]
    assert set(a.tables["table12"].columns) == {"dataset", "behaviour", "reference", "sim"}
    assert a.charts["table12"].to_dict()["facet"]["field"] == "dataset"


def test_tables_4_and_11_and_figure3_grouping():
    it = [*insts(12, "a"), *insts(12, "b")]
    js = []
    for k, inst in enumerate(it):
        js += [reps(inst.id, "reference", 1), reps(inst.id, "v1", 2), reps(inst.id, "v30", 0, 1 if k < 12 else 3)]
        js += [overall(inst.id, "reference", "J", 5, 6), overall(inst.id, "v1", "J", 8, 9)]
    chat = insts(4, "sharechat", chat=True)
    js += [reps(i.id, "reference", 4) for i in chat] + [overall(i.id, "reference", "J", 1, 1) for i in chat]
    run = make(
        [*it, *chat],
        js,
        mp(("v30", G41, "vanilla", 30)),
        mp(("v1", G41, "vanilla", 1)),
        mp(("t1", G41, "taxonomy", 1)),
        ("u", G41, "user_simulator", 1, "human_ai"),
    )
    f = run_frames(run)
    a = studies.paper_tables(f, run, "J", resamples=200)
    t4 = a.tables["table4"]
    assert t4["target"].to_list() == ["reference", "v1"]  # human first; chats left out of the human row
    assert t4.row(0, named=True)["consistency_mean"] == 5.0 and t4.row(0, named=True)["n"] == 24
    assert t4.row(1, named=True)["collaborativeness_mean"] == 9.0
    t11 = a.tables["table11"]
    assert t11.select("dataset", "target").rows() == [
        ("a", "reference"),
        ("a", "v1"),
        ("a", "v30"),
        ("b", "reference"),
        ("b", "v1"),
        ("b", "v30"),
    ]
    assert t11.filter((pl.col("dataset") == "b") & (pl.col("target") == "v30"))["off_topic"].item() == 3.0
    assert t11["n"].to_list() == [12] * 6 and "sharechat" not in t11["dataset"].to_list()
    assert set(a.charts) == {"figure3_human", "figure3_openai-gpt-4.1-vanilla"}  # t1 has no judgments
    fig = a.charts["figure3_openai-gpt-4.1-vanilla"].to_dict()
    assert fig["facet"]["sort"] == ["v1", "v30"]  # panels by k


def test_compare_to_humans_with_the_run_draws_one_figure_per_condition():
    it = insts(12)
    js = [reps(i.id, t, n) for i in it for t, n in (("reference", 1), ("v1", 2), ("t1", 3), ("o1", 0))]
    run = make(it, js, mp(("v1", G41, "vanilla", 1)), mp(("t1", G41, "taxonomy", 1)), mp(("o1", OPUS, "vanilla", 1)))
    f = run_frames(run)
    a = rq.compare_to_humans(f, "J", ["v1", "t1", "o1"], "q", resamples=100, run=run)
    assert set(a.charts) == {
        "figure3_openai-gpt-4.1-vanilla",
        "figure3_openai-gpt-4.1-taxonomy",
        "figure3_anthropic-claude-opus-4-vanilla",
    }
    groups = charts.figure3_groups(a.tables["figure3"], TAX, {"x": ["nope"]})
    assert groups == {}


@pytest.mark.parametrize(
    "params", [{"setups": [1]}, {"setups": [{"model": "m"}]}, [1], {"setups": [{"name": "a", "turns_per_call": "5"}]}]
)
def test_a_malformed_manifest_is_a_clear_error(params, tmp_path):
    # the recorded params are typed when the run is opened: a setup without a name or with a turns
    # per call that is no whole number never reaches the analyses
    from cocoeval.core.errors import InputError
    from cocoeval.core.jsonio import write_json

    write_json(tmp_path / "manifest.json", {"status": "complete", "params": params})
    (tmp_path / "instances.jsonl").write_text("")
    with pytest.raises(InputError, match=r"manifest\.json") as e:
        Run.open(tmp_path)
    assert "params" in str(e.value)
