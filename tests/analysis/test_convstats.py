"""Judge-free statistics on hand-made conversations with answers worked out by hand; their
intervals, the paired test and its correction, the judge sanity table, the report section and
the pipeline-check marking."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import charts, convcompare
from cocoeval.analysis.convstats import STATISTICS, conversation_frame, conversation_stats, tokens
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.report import write_report
from cocoeval.core.schema import Continuation, Turn
from cocoeval.notebooks.widgets import ConversationViewer
from cocoeval.run import Run

from ..conftest import ROOT
from ..sim_helpers import instance, write_run_dir
from .test_stats import fine


def T(speaker: str, text: str) -> Turn:
    return Turn(speaker=speaker, text=text)


HISTORY = [T("C", "We should cut the budget.")]
TURNS = [
    T("A", "We should cut the budget now?"),  # question, answered by B; 3 of its 4 trigrams said before by C
    T("B", "Yes, we should cut the budget."),  # 3 of 4 trigrams said before
    T("B", "okay"),  # backchannel (1 token), no trigram
    T("A", "What about the marketing plan?"),  # question, followed by another question: not answered
    T("C", "Yeah yeah right okay?"),  # question and backchannel (only backchannel words); followed by a question
    T("A", "Anything else?"),  # question in the last turn: no next turn; 2 tokens: short
]


def test_tokens_are_lowercase_words():
    assert tokens("Don't STOP, mm-hmm {vocalsound}! 42") == ["don't", "stop", "mm", "hmm", "vocalsound", "42"]


def test_every_statistic_of_a_hand_made_conversation():
    s = conversation_stats(TURNS, history=HISTORY, goals=["Decide the marketing budget"], participants=3)
    assert set(s) == set(STATISTICS)
    assert s["turns"] == 6 and s["speakers"] == 3
    assert s["tokens_per_turn"] == pytest.approx((6 + 6 + 1 + 5 + 4 + 2) / 6)
    a, b, c = 13 / 24, 7 / 24, 4 / 24  # token shares: A 6+5+2, B 6+1, C 4
    assert s["balance"] == pytest.approx(-(a * math.log(a) + b * math.log(b) + c * math.log(c)) / math.log(3))
    assert s["switch_rate"] == pytest.approx(4 / 5)  # A|B B|A|C|A
    assert s["mean_run"] == pytest.approx(6 / 5)
    assert s["rep_any"] == pytest.approx((3 / 4 + 3 / 4 + 0 + 0) / 4)  # turns with a trigram: 0, 1, 3, 4
    assert s["rep_self"] == 0.0  # nobody repeats themselves
    assert s["question_share"] == pytest.approx(4 / 6)
    assert s["answered_share"] == pytest.approx(1 / 3)  # of turns 0, 3, 4 (5 is last): only 0
    assert s["backchannel_share"] == pytest.approx(3 / 6)  # turns 2, 4, 5
    # content words (>= 4 characters) found in the goals: should/budget 1/2 twice, okay 0,
    # what/about/marketing/plan 1/4, yeah yeah right okay 0, anything/else 0
    assert s["goal_overlap"] == pytest.approx((0.5 + 0.5 + 0 + 0.25 + 0 + 0) / 6)


def test_repetition_by_the_same_speaker_and_by_anyone():
    s = conversation_stats(
        [T("A", "the big red dog again"), T("B", "the big red cat")], history=[T("A", "the big red dog")]
    )
    assert s["rep_self"] == pytest.approx((2 / 3 + 0) / 2)  # A: 2 of 3 trigrams said by A; B: none by B
    assert s["rep_any"] == pytest.approx((2 / 3 + 1 / 2) / 2)  # B: "the big red" said by anyone


def test_distinct_n():
    s = conversation_stats([T("A", "a b a b"), T("B", "a c")])
    assert s["distinct_1"] == pytest.approx(3 / 6)
    assert s["distinct_2"] == pytest.approx(3 / 4)  # ab ba ab | ac: bigrams do not cross turns


def test_undefined_is_none_never_zero():
    s = conversation_stats([T("A", "I will say something here.")], participants=1)
    for k in ("balance", "switch_rate", "answered_share", "goal_overlap"):
        assert s[k] is None, k
    assert s["rep_any"] == 0.0 and s["question_share"] == 0.0  # defined: nothing repeated, no question
    mono = conversation_stats([T("A", "one two three four")] * 3, participants=3)
    assert mono["balance"] == 0.0 and mono["switch_rate"] == 0.0 and mono["mean_run"] == 3.0
    assert conversation_stats([], participants=3)["tokens_per_turn"] is None


def test_scored_turns_only_for_per_turn_statistics():
    turns = [T("user", "Can you help me?"), T("assistant", "Sure, what do you need help with today?"), T("user", "ok")]
    s = conversation_stats(turns, scored=[0, 2])
    assert s["tokens_per_turn"] == pytest.approx((4 + 1) / 2)
    assert s["question_share"] == 0.5 and s["answered_share"] == 0.0  # the assistant's reply is a question
    assert s["switch_rate"] == 1.0 and s["speakers"] == 2  # structure: every turn


def _run(n: int, label: str | None = None):
    """``n`` instances; setup "loop" repeats one speaker's words, "copy" copies the reference."""
    insts = [instance(f"d/c{i}/0", n_hist=3, n_ref=4) for i in range(n)]
    loop = [
        Continuation(
            instance_id=x.id,
            setup_id="loop",
            turns=[T("Alice", f"we must decide the budget {i} now") for _ in range(4)],
        )
        for i, x in enumerate(insts)
    ]
    copy = [Continuation(instance_id=x.id, setup_id="copy", turns=x.reference) for x in insts]
    bad = [Continuation(instance_id=insts[0].id, setup_id="b", status="invalid", reason="unparseable")]
    js = [
        fine(x.id, t, "J", [["repetition"]] * k + [[]] * (4 - k))
        for i, x in enumerate(insts)
        for t, k in (("reference", 0), ("loop", 1 + i % 3), ("copy", 0))
    ]
    params = {
        "name": "t",
        "setups": [{"name": "loop", "model": "local/smollm2"}],
        **({"label": label} if label else {}),
    }
    return Run.model_validate(
        {
            "instances": insts,
            "continuations": {"loop": loop, "copy": copy, "bad": bad},
            "judgments": {"J": js},
            "manifest": {"status": "complete", "params": params},
        }
    )


def test_conversation_frame_over_a_run():
    conv = conversation_frame(_run(3))
    assert conv.height == 3 * 3  # references, loop, copy; the invalid continuation has no row
    assert set(conv["target"].unique()) == {"reference", "loop", "copy"}
    ref = conv.filter(pl.col("target") == "reference").sort("instance_id")
    copy = conv.filter(pl.col("target") == "copy").sort("instance_id")
    assert ref.select(list(STATISTICS)).equals(copy.select(list(STATISTICS)))
    loop = conv.filter(pl.col("target") == "loop")
    assert (loop["speakers"] == 1).all() and (loop["switch_rate"] == 0).all() and (loop["balance"] == 0).all()
    assert loop["answered_share"].is_null().all()  # no question: undefined, not zero


def _frame(values: dict[str, list[float | None]], n: int) -> pl.DataFrame:
    rows = []
    for t, xs in values.items():
        for i, x in enumerate(xs):
            rows.append({"target": t, "instance_id": f"i{i:02d}", "dataset": "d", "tokens_per_turn": x})
    return pl.DataFrame(rows, schema_overrides={"tokens_per_turn": pl.Float64})


def test_means_count_undefined_conversations_and_hide_small_intervals():
    conv = _frame({"reference": [1.0, 2.0, None] + [3.0] * 9, "s": [1.0, 2.0]}, 12)
    m = convcompare.means(conv, resamples=200).sort("target")
    ref = m.filter(pl.col("target") == "reference").row(0, named=True)
    assert ref["n"] == 11 and ref["undefined"] == 1 and ref["mean"] == pytest.approx((1 + 2 + 27) / 11)
    assert ref["ci_low"] is not None and ref["ci_low"] <= ref["mean"] <= ref["ci_high"]
    small = m.filter(pl.col("target") == "s").row(0, named=True)
    assert small["ci_low"] is None and small["ci_note"] == "n too small (n=2 < 10)"


def test_paired_difference_finds_a_real_shift_and_corrects_over_the_family():
    h = [float(i) for i in range(12)]
    conv = _frame(
        {
            "reference": h,
            "longer": [x + 5 + (i % 3) for i, x in enumerate(h)],
            "same": [x + (1 if i % 2 else -1) for i, x in enumerate(h)],
            "few": h[:4],
        },
        12,
    )
    p = convcompare.paired_vs_human(conv, resamples=500)
    row = {r["target"]: r for r in p.iter_rows(named=True)}
    assert row["longer"]["diff"] == pytest.approx(6.0) and row["longer"]["verdict"] == convcompare.HIGHER
    assert 5 <= row["longer"]["diff_ci_low"] < row["longer"]["diff_ci_high"] <= 7
    assert row["same"]["diff"] == pytest.approx(0.0) and row["same"]["verdict"] == "no significant difference"
    assert row["few"]["p"] is None and row["few"]["verdict"] is None and row["few"]["n"] == 4  # not tested
    assert set(p["family"]) == {2} and (p["correction"] == "bh").all()
    lower = convcompare.paired_vs_human(conv.with_columns(pl.col("tokens_per_turn") * -1), resamples=200)
    assert lower.filter(pl.col("target") == "longer")["verdict"][0] == convcompare.LOWER


def test_judge_sanity_catches_a_judge_answering_at_random():
    conv = conversation_frame(_run(14))
    f = run_frames(_run(14))
    san = convcompare.judge_sanity(f, conv, resamples=300)
    rep = san.filter(pl.col("behaviour") == "repetition").row(0, named=True)
    assert rep["statistic"] == "rep_any" and rep["expected"] == "+" and rep["n"] == 14 * 3
    assert rep["rho"] > 0.5 and rep["check"] == "as expected"  # the loop repeats itself; the judge says so
    rng = np.random.default_rng(0)
    noise = f.counts.with_columns(count=pl.Series(rng.integers(0, 4, f.counts.height)))
    rnd = convcompare.judge_sanity(dataclasses.replace(f, counts=noise), conv, resamples=300)
    assert rnd.filter(pl.col("behaviour") == "repetition")["check"][0] == "unclear"
    few = convcompare.judge_sanity(run_frames(_run(2)), conversation_frame(_run(2)), resamples=100)
    assert few["ci_low"].is_null().all() and few["check"].is_null().all()


def test_charts_of_judge_free_statistics(tmp_path):
    conv = conversation_frame(_run(12))
    m = convcompare.means(conv, resamples=200)
    d = charts.convstats_chart(m, labels=STATISTICS).to_dict()
    assert d["facet"]["field"] == "label" and d["resolve"]["scale"]["x"] == "independent"
    layers = d["spec"]["layer"]
    assert layers[1]["encoding"]["x"]["field"] == "mean" and layers[0]["encoding"]["x"]["field"] == "ci_low"
    assert d["facet"]["sort"][0] == STATISTICS["turns"]
    p = convcompare.paired_vs_human(conv, resamples=200)
    dd = charts.convstats_diff_chart(p, labels=STATISTICS).to_dict()
    assert [x["encoding"]["x"].get("field") for x in dd["spec"]["layer"][1:3]] == ["diff_ci_low", "diff"]
    assert "not tested" in dd["spec"]["layer"][2]["encoding"]["color"]["scale"]["domain"]
    png, _ = charts.save(charts.convstats_diff_chart(p, labels=STATISTICS), tmp_path / "d")
    assert png.stat().st_size > 1000


def _write(d, run):
    write_run_dir(d, run, run.manifest.model_dump(exclude_unset=True))


def test_report_leads_with_the_judge_free_comparison_and_marks_a_pipeline_check(tmp_path):
    _write(tmp_path / "run", _run(12, label="pipeline-check"))
    rep = write_report(tmp_path / "run", tmp_path / "rep", resamples=200)
    assert rep.pipeline_check and {"convstats", "convstats_vs_human"} <= set(rep.figures)
    index = (tmp_path / "rep" / "index.md").read_text()
    assert index.index("## Judge-free statistics") < index.index("## Judge-based statistics")
    assert "**Pipeline check — tiny model, not results.**" in index
    assert "## Judge-based statistics — pipeline check — tiny model, not results" in index
    assert "loop = local/smollm2" in index and "say nothing about capable LLMs" in index
    vs = pl.read_csv(tmp_path / "rep" / "convstats_vs_human.csv")
    loop = vs.filter((pl.col("target") == "loop") & (pl.col("statistic") == "speakers")).row(0, named=True)
    assert loop["diff"] == -2 and loop["verdict"] == convcompare.LOWER
    assert vs.filter(pl.col("ci_note").is_null())["diff_ci_low"].is_not_null().all()
    # every instance of this run is alike, so each difference is a constant: no interval, and said so (its
    # resamples differ in the last bit at most)
    assert (vs["diff_ci_low"].is_not_null() | vs["ci_note"].str.contains("degenerate")).all()
    means = pl.read_csv(tmp_path / "rep" / "convstats_means.csv")
    assert (means["ci_low"].is_not_null() | means["ci_note"].is_not_null()).all()  # an interval, or why not
    judged = pl.read_csv(tmp_path / "rep" / "behaviour_means.csv")  # loop's repetitions vary (1-3): an interval
    assert (
        judged.filter((pl.col("target") == "loop") & (pl.col("behaviour") == "repetition"))["ci_low"]
        .is_not_null()
        .all()
    )
    assert "pipeline check — tiny model, not results" in (tmp_path / "rep" / "figure3_behaviours.svg").read_text()
    assert "pipeline check" not in (tmp_path / "rep" / "convstats.svg").read_text()
    assert "pipeline check" in (tmp_path / "rep" / "judge_sanity.md").read_text()
    _write(tmp_path / "plain", _run(12))
    write_report(tmp_path / "plain", tmp_path / "rep2", resamples=200)
    assert "pipeline check" not in (tmp_path / "rep2" / "index.md").read_text().lower()


def test_viewer_shows_judge_free_statistics_per_column():
    run = _run(2)
    v = ConversationViewer(run, judge="J")
    v.setups.value = ("loop",)
    v.instance.value = run.instances[0].id
    html = v.html.value
    assert html.count("judge-free statistics") == 2  # the human reference and the setup
    assert f'<td>{STATISTICS["speakers"]}</td><td style="text-align:right">1</td>' in html  # the loop
    loop = v.target(run.instances[0].id, "loop")
    assert loop is not None and v.judge_free(loop)["switch_rate"] == 0.0


def test_demo_params_are_labelled_a_pipeline_check():
    from cocoeval.run import load_params

    exp = load_params(ROOT / "params" / "demo.yaml")
    assert exp.params.label == "pipeline-check" and exp.manifest().params.label == "pipeline-check"


@pytest.mark.timeout(3600)  # the first run simulates and judges on the local model (minutes on two cores)
def test_demo_report_has_the_judge_free_comparison_with_intervals(demo_run, tmp_path):
    """The demo's report (the local model's real run) compares humans and the tiny model on the
    judge-free statistics with defined intervals (the demo needs at least 10 paired instances)."""
    rep = write_report(demo_run, tmp_path / "rep", resamples=200)
    assert rep.pipeline_check and "convstats_vs_human" in rep.figures
    vs = pl.read_csv(tmp_path / "rep" / "convstats_vs_human.csv")
    assert vs["diff_ci_low"].is_not_null().any() and vs["verdict"].is_not_null().any()
    index = (tmp_path / "rep" / "index.md").read_text()
    assert index.index("## Judge-free statistics") < index.index("pipeline check — tiny model, not results", 200)
    assert json.loads((demo_run / "manifest.json").read_text())["params"]["label"] == "pipeline-check"


@pytest.fixture(scope="module")
def demo_run():
    """The demo run, made (or brought up to date from the call cache) with the current params."""
    import subprocess
    import sys

    from ..llm.test_llm_local import HAVE_LOCAL

    if not HAVE_LOCAL:
        pytest.skip("the demo run needs the local model (make install-local)")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cocoeval",
            "run",
            str(ROOT / "params" / "demo.yaml"),
            "--no-progress",
            "--allow-invalid",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return ROOT / "runs" / "demo"


DOCUMENTED_SANITY = {
    "repetition": ("rep_any", "+"),
    "redundant_information": ("tokens_per_turn", "+"),
    "off_topic": ("goal_overlap", "−"),
    "under_answering": ("answered_share", "−"),
}
"""docs/analysis.md, "judge sanity": each pair and the sign its correlation should have."""


def test_every_judge_sanity_pair_expects_its_documented_sign():
    """30 conversations whose four statistics are 0..29 and a judge whose count of each behaviour
    follows its statistic the documented way (up for +, down for −, in steps of three: ties, so
    the resamples differ): each pair is "as expected", with ρ the Spearman correlation computed
    by scipy; the same judge with every count turned around is "opposite" for each pair."""
    from scipy.stats import spearmanr

    n = 30
    conv = pl.DataFrame(
        {
            "target": ["reference"] * n,
            "instance_id": [f"i{i:02d}" for i in range(n)],
            **{s: [float(i) for i in range(n)] for s, _ in DOCUMENTED_SANITY.values()},
        }
    )

    def judge(turned: bool):
        rows = [
            {
                "judge": "J",
                "target": "reference",
                "instance_id": f"i{i:02d}",
                "behaviour": b,
                "count": (i if (sign == "+") != turned else n - 1 - i) // 3,
            }
            for b, (_, sign) in DOCUMENTED_SANITY.items()
            for i in range(n)
        ]
        f = dataclasses.replace(run_frames(_run(2)), counts=pl.DataFrame(rows))
        return {r["behaviour"]: r for r in convcompare.judge_sanity(f, conv, resamples=300).iter_rows(named=True)}

    rise = spearmanr(range(n), [i // 3 for i in range(n)]).statistic
    assert 0.9 < rise < 1
    for turned, check in ((False, "as expected"), (True, "opposite")):
        got = judge(turned)
        assert set(got) == set(DOCUMENTED_SANITY)
        for b, (stat, sign) in DOCUMENTED_SANITY.items():
            r = got[b]
            assert (r["statistic"], r["expected"], r["n"]) == (stat, sign, n), b
            want = rise if (sign == "+") != turned else -rise
            assert r["rho"] == pytest.approx(want), b
            assert r["ci_low"] is not None and r["check"] == check, b
