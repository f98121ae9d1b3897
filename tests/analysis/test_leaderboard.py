"""The leaderboard of simulators, turn-taking realism, and setups that are imported continuations
or simulator plugins, on tiny hand-made runs whose answers are worked out by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import analyses, charts, convcompare, leaderboard, paper_stats, rq, stats
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.answer import pick_setups, setup_label
from cocoeval.analysis.convstats import (
    HISTORY,
    speaker_entropy,
    transition_distance,
    transitions,
    turn_taking_frame,
)
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.judge_free import judge_free, judge_free_note
from cocoeval.analysis.report import write_report
from cocoeval.core.schema import Continuation, Turn
from cocoeval.run import Run

from ..sim_helpers import instance, judged_continuations, write_run_dir
from .test_rq import reps
from .test_stats import TAX, overall

IMPORTED = {"name": "mine", "continuations": "mine.jsonl", "description": "my own simulator", "kind": "multiparty"}
PLUGIN = {"name": "ag", "simulator": "agents", "model": "openai/gpt-4.1", "options": {"policy": "oracle"}}


def simulated(name, prompt="vanilla", k=1, model="openai/gpt-4.1"):
    return {"name": name, "model": model, "prompt": prompt, "turns_per_call": k, "kind": "multiparty"}


def _run(judgments, setups, n=4, conts=None):
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=4) for i in range(n)]
    conts = judged_continuations(judgments, conts)
    refs = {i.id: i.reference for i in insts}
    conts = {
        k: [c.model_copy(update={"turns": refs[c.instance_id]}) if c.status == "ok" and not c.turns else c for c in cs]
        for k, cs in conts.items()
    }
    js: dict[str, list] = {}
    for j in judgments:
        js.setdefault(j.judge_name, []).append(j)
    return Run.model_validate(
        {"instances": insts, "continuations": conts, "judgments": js, "manifest": {"params": {"setups": setups}}}
    )


# ------------------------------------------------------------------ setups that are not simulated here


def _mixed_run():
    js = []
    for i in range(12):
        iid = f"d/c{i}/0"
        js += [
            reps(iid, "reference", 1),
            reps(iid, "v1", 2),
            reps(iid, "t1", 1),
            reps(iid, "v5", 3),
            reps(iid, "mine", 1),
            reps(iid, "ag", 4),
        ]
    setups = [
        simulated("v1"),
        simulated("t1", "taxonomy"),
        simulated("v5", k=5),
        {**IMPORTED, "turns_per_call": 7},
        {**PLUGIN, "prompt": "vanilla", "turns_per_call": 1},
    ]
    return _run(js, setups, n=12)


def test_imported_and_plugin_setups_have_a_group_of_their_own_and_no_prompt_or_k():
    run = _mixed_run()
    cond = paper_stats.conditions(run)  # an imported setup's stray turns_per_call is not its k
    rows = {r["setup"]: r for r in cond.iter_rows(named=True)}
    assert rows["mine"]["model_group"] == rows["mine"]["condition"] == "imported: mine"
    assert rows["ag"]["model_group"] == "plugin agents · openai/gpt-4.1"
    assert (rows["mine"]["origin"], rows["ag"]["origin"], rows["v1"]["origin"]) == ("imported", "plugin", "simulated")
    assert rows["ag"]["prompt"] is None and rows["ag"]["turns_per_call"] is None  # even though its dict has them
    assert setup_label(IMPORTED) == "imported: mine" and setup_label({**PLUGIN, "model": None}) == "plugin agents"
    # never in an RQ3 prompt pair or an RQ5 k pair, nor in the vanilla (RQ2) pick
    assert [(a, b) for a, b, _ in paper_stats.rq3_pairs(cond)] == [("v1", "t1")]
    assert [(a, b) for a, b, _ in paper_stats.rq5_pairs(cond)] == [("v1", "v5")]
    assert pick_setups(run, prompt="vanilla") == ["v1", "v5"]
    f = run_frames(run)
    a5 = rq.by_turns_per_call(f, run, "J", resamples=50)
    assert any("Not compared (imported or plugin" in t and "mine" in t and "ag" in t for t in a5.text)
    assert "imported" not in " ".join(a5.tables["distance_by_k"]["target"].to_list())
    assert set(a5.tables["k_pairs"]["setup_b"]) == {"v5"}
    # but in every comparison with the humans: Figure 3 (its own figure), the paired table, judge-free
    _, dist = stats.paired_vs_human(f, "J", resamples=50)
    assert {"mine", "ag"} <= set(dist["target"])
    paper = analyses.compute("paper", run, Params(judge="J", resamples=50))
    assert {"figure3_imported-mine", "figure3_plugin-agents-openai-gpt-4.1"} <= set(paper.charts)
    jf = judge_free(run, f, resamples=50)
    assert {"mine", "ag"} <= set(jf.tables["vs_human"]["target"]) and {"mine", "ag"} <= set(
        jf.tables["turn_taking"]["target"]
    )
    note = judge_free_note(run.manifest)
    assert "mine = imported continuations" in note and "ag = plugin agents · openai/gpt-4.1" in note
    every = analyses.compute("simulators_vs_humans", run, Params(judge="J", resamples=50))  # notebook 11's RQ2-style
    assert set(every.tables["distance"]["target"]) == {"v1", "t1", "v5", "mine", "ag"}
    assert "figure3_imported-mine" in every.charts
    board = analyses.compute("leaderboard", run, Params(judge="J", resamples=50)).tables["leaderboard"]
    assert {"mine", "ag", "v1", "t1", "v5"} <= set(board["setup"])
    assert board.filter(pl.col("setup") == "mine")["group"].item() == "imported: mine"
    # RQ4 picks fine-tuned simulated setups only; an imported setup without a model is no error
    assert analyses.compute("rq4", run, Params(judge="J", resamples=50)).setups is None


def test_a_manifest_setup_without_model_prompt_or_k_is_read():
    js = [reps(f"d/c{i}/0", t, 1) for i in range(3) for t in ("reference", "mine")]
    run = _run(
        js, [{"name": "mine", "continuations": "f.jsonl", "model": None, "prompt": None, "turns_per_call": None}], n=3
    )
    cond = paper_stats.conditions(run)
    assert cond.row(0, named=True)["condition"] == "imported: mine" and cond["model"].to_list() == [None]
    a = analyses.compute("paper", run, Params(judge="J", resamples=20, min_n=2))
    assert "table4" not in a.tables and "figure3_imported-mine" in a.charts


# ------------------------------------------------------------------ turn-taking realism


def T(speaker):
    return Turn(speaker=speaker, text="words here")


def test_turn_taking_by_hand():
    last = T("A")
    ref, sim = [T("B"), T("A"), T("B"), T("C")], [T("B"), T("B"), T("A"), T("B")]
    assert transitions(ref, last) == {("A", "B"): 2, ("B", "A"): 1, ("B", "C"): 1}
    # ref {AB .5, BA .25, BC .25}; sim {AB .5, BB .25, BA .25}: TV = (0 + 0 + .25 + .25) / 2
    assert transition_distance(transitions(sim, last), transitions(ref, last)) == pytest.approx(0.25)
    assert transition_distance(transitions([T("A")]), transitions(ref)) is None  # one turn, no transition
    assert speaker_entropy(ref) == pytest.approx(1.5)  # B 2, A 1, C 1 of 4
    assert speaker_entropy(sim) == pytest.approx(-(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)))
    assert speaker_entropy([]) is None


def test_transition_distance_is_exact_whatever_the_hash_seed():
    """The distance is the exact value, correctly rounded, in every process: the transitions form
    a set of strings, whose order changes with the hash seed, and a float sum over it once gave
    a report whose last digits changed from one run to the next."""
    import subprocess
    import sys
    from fractions import Fraction

    code = (
        "from collections import Counter; from cocoeval.analysis.convstats import transition_distance as d; "
        "import random; r = random.Random(7); s = [f'speaker {i}' for i in range(9)]; "
        "a = Counter((r.choice(s), r.choice(s)) for _ in range(97)); "
        "b = Counter((r.choice(s), r.choice(s)) for _ in range(61)); print(repr(d(a, b)))"
    )
    got = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)},
        ).stdout.strip()
        for seed in range(6)
    }
    import random
    from collections import Counter

    r = random.Random(7)
    s = [f"speaker {i}" for i in range(9)]
    a = Counter((r.choice(s), r.choice(s)) for _ in range(97))
    b = Counter((r.choice(s), r.choice(s)) for _ in range(61))
    exact = sum(abs(Fraction(a[k], 97) - Fraction(b[k], 61)) for k in a.keys() | b.keys()) / 2
    assert got == {repr(float(exact))}


def test_turn_taking_per_setup_pairs_each_continuation_with_its_own_reference():
    pattern = {0: ["Alice", "Bob", "Alice", "Bob"], 1: ["Carol", "Carol", "Carol", "Alice"]}
    insts = []
    for i in range(10):  # the last history turn is Bob's; even and odd instances take turns differently
        inst = instance(f"d/c{i}/0", n_hist=2, n_ref=4)
        insts.append(
            inst.model_copy(
                update={
                    "history": [Turn(speaker="Alice", text="x"), Turn(speaker="Bob", text="y")],
                    "reference": [Turn(speaker=sp, text="z") for sp in pattern[i % 2]],
                }
            )
        )
    # "same": each instance's own reference turns (paired with another instance's reference, TV would be > 0);
    # "mono": Bob says everything
    same = [Continuation(instance_id=i.id, setup_id="same", turns=i.reference) for i in insts]
    mono = [Continuation(instance_id=i.id, setup_id="mono", turns=[Turn(speaker="Bob", text="x")] * 4) for i in insts]
    run = Run.model_validate({"instances": insts, "continuations": {"same": same, "mono": mono}})
    tt = turn_taking_frame(run)
    assert set(tt["target"]) == {"same", "mono", HISTORY}
    assert tt.filter(pl.col("target") == "same")["transition_distance"].to_list() == [0.0] * 10
    got = convcompare.turn_taking(tt, resamples=100, min_n=2)
    row = {(r["target"], r["statistic"]): r for r in got.iter_rows(named=True)}
    # mono: Bob-Bob x4. Even references: Bob-Alice, Alice-Bob, Bob-Alice, Alice-Bob (TV 1: nothing in common);
    # odd: Bob-Carol, Carol-Carol x2, Carol-Alice (TV 1)
    assert row[("mono", "transition_distance")]["mean"] == pytest.approx(1.0)
    h_odd = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))  # Carol 3, Alice 1; even references: 1 bit
    assert row[("mono", "speaker_entropy_diff")]["mean"] == pytest.approx(-(1.0 + h_odd) / 2)  # negative: one speaker
    assert row[("same", "speaker_entropy_diff")]["mean"] == 0.0
    # the yardstick, first: x's last 4 turns are its 2 (Alice, Bob; no turn before them) against r
    assert got["target"][0] == HISTORY
    even = transition_distance(transitions(insts[0].history), transitions(insts[0].reference, insts[0].history[-1]))
    odd = transition_distance(transitions(insts[1].history), transitions(insts[1].reference, insts[1].history[-1]))
    assert row[(HISTORY, "transition_distance")]["mean"] == pytest.approx((even + odd) / 2)
    chart = charts.convstats_chart(got, labels={"transition_distance": "t", "speaker_entropy_diff": "e"}).to_dict()
    assert chart["facet"]["field"] == "label"


# ------------------------------------------------------------------ the leaderboard, by hand

REF_REP = [1, 0, 2, 4]
A_REP = [2, 1, 2, None]  # instance 3: invalid judgment (the reference's 4 there must not count)


def _board_run():
    js = []
    for i in range(4):
        iid = f"d/c{i}/0"
        js.append(reps(iid, "reference", REF_REP[i]))
        js.append(reps(iid, "reference", 1, judge="K"))
        js.append(overall(iid, "reference", "J", 5 + i, 5))
        js.append(overall(iid, "a", "J", 4, 6))
        if A_REP[i] is None:
            bad = reps(iid, "a", 0)
            js.append(bad.model_copy(update={"status": "invalid", "labels": [], "reason": "bad"}))
        else:
            js.append(reps(iid, "a", A_REP[i], n_off=1 if i == 0 else 0))
        js.append(reps(iid, "b", 3, judge="K"))  # b: judged by K only
    return _run(js, [simulated("a"), IMPORTED | {"name": "b"}])


def test_leaderboard_values_against_a_hand_computation():
    run = _board_run()
    f = run_frames(run)
    board, per_b = leaderboard.leaderboard(f, paper_stats.conditions(run), resamples=200, seed=0, min_n=2)
    j = board.filter(pl.col("judge") == "J")
    a = j.filter(pl.col("setup") == "a").row(0, named=True)
    # paired over instances 0-2: repetition (2-1, 1-0, 2-2) -> +2/3; off topic (1, 0, 0) -> +1/3; the rest 0
    rep = per_b.filter((pl.col("judge") == "J") & (pl.col("setup") == "a") & (pl.col("behaviour") == "repetition"))
    assert rep["diff"].item() == pytest.approx(2 / 3)  # unpaired (every reference) would give 5/3 - 7/4 < 0
    assert rep["mean_human"].item() == pytest.approx(1.0) and rep["mean_sim"].item() == pytest.approx(5 / 3)
    assert a["n"] == 3 and a["rank"] == 1
    # the distance: unbiased for its square, the U-statistic over ordered pairs of distinct instances
    d = np.zeros((3, len(TAX.ids)))
    d[:, TAX.ids.index("repetition")] = [1, 1, 0]
    d[0, TAX.ids.index("off_topic")] = 1

    def u_square(rows):
        m = len(rows)
        return sum(float(rows[i] @ rows[j]) for i in range(m) for j in range(m) if i != j) / (
            m * (m - 1) * rows.shape[1]
        )

    assert u_square(d) == pytest.approx(1 / 3 / len(TAX.ids))  # repetition's pairs: 1·1 twice, over 3·2
    assert a["distance"] == pytest.approx(math.sqrt(1 / 3 / len(TAX.ids))) and a["distance_square"] == pytest.approx(
        u_square(d)
    )
    assert a["D"] == pytest.approx(1.0)
    assert (a["judgments_valid"], a["judgments"], a["continuations_ok"], a["continuations"]) == (3, 4, 4, 4)
    # its interval: each resample's unbiased square by a plain loop, shifted by the resamples' bias, square root
    loop = np.array([u_square(d[row]) for row in stats.boot_index(3, 200, 0)])
    from scipy.stats import norm, t

    widen = math.sqrt(3 / 2) * t.ppf(0.975, 2) / norm.ppf(0.975)  # ddof 1 and Student's t with n - 1 = 2
    lo, hi = np.percentile(u_square(d) + (loop - loop.mean()) * widen, [2.5, 97.5])
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((math.sqrt(max(lo, 0)), math.sqrt(max(hi, 0))))
    assert a["ci_low"] <= a["distance"] <= a["ci_high"]
    # the Likert gap: consistency 4 - mean(5, 6, 7, 8) = -2.5; collaborativeness 6 - 5 = +1 (sign: setup - human)
    assert a["consistency_gap"] == pytest.approx(-2.5) and a["collaborativeness_gap"] == pytest.approx(1.0)
    # the floor: two halves of the four valid references of J, drawn with replacement; the unbiased
    # two-sample distance of each pair of halves (their variances with ddof 1), by a plain loop
    h = np.zeros((4, len(TAX.ids)))
    h[:, TAX.ids.index("repetition")] = REF_REP
    fl = j.filter(pl.col("origin") == "floor").row(0, named=True)

    def halves(r):
        x, y = h[r[:2]], h[r[2:4]]
        sq = (x.mean(0) - y.mean(0)) ** 2 - x.var(0, ddof=1) / 2 - y.var(0, ddof=1) / 2
        return math.sqrt(max(sq.mean(), 0.0))

    dist = [halves(r) for r in stats.boot_index(4, 200, 0)]
    assert fl["distance"] == pytest.approx(np.mean(dist)) and fl["n"] == 4
    assert (fl["ci_low"], fl["ci_high"]) == pytest.approx(tuple(np.percentile(dist, [2.5, 97.5])))
    assert j["setup"].to_list()[0] == leaderboard.FLOOR
    # judged by different judges: never ranked together. b is unranked under J (n = 0, why), ranked under K
    b = j.filter(pl.col("setup") == "b").row(0, named=True)
    assert b["rank"] is None and b["n"] == 0 and "no fine-grained judgment by J" in b["note"]
    k = board.filter(pl.col("judge") == "K")
    assert k.filter(pl.col("rank").is_not_null())["setup"].to_list() == ["b"]
    # b is 3 - 1 = +2 repetitions on each of the 4 instances, no spread: the unbiased square is exactly 4 / K
    assert k.filter(pl.col("setup") == "b")["distance"].item() == pytest.approx(2 / math.sqrt(len(TAX.ids)))


def _instance_floor(h: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The floor as it was (references resampled one by one), by a plain loop: two halves of
    ⌊n/2⌋ of each draw, their squared mean difference minus each half's s²/m (ddof 1)."""
    m = len(h) // 2
    out = []
    for r in stats.boot_index(len(h), resamples, seed):
        x, y = h[r[:m]], h[r[m : 2 * m]]
        sq = (x.mean(0) - y.mean(0)) ** 2 - x.var(0, ddof=1) / m - y.var(0, ddof=1) / m
        out.append(math.sqrt(max(sq.mean(), 0.0)))
    return np.array(out)


def test_the_floor_by_conversation_is_the_instance_floor_when_each_conversation_gives_one_reference():
    rng = np.random.default_rng(5)
    h = rng.poisson(1.5, (11, 4)).astype(float)
    old = _instance_floor(h, 300, 3)
    assert leaderboard.floor(h, 300, 3) == pytest.approx(old)
    assert leaderboard.floor(h, 300, 3, np.arange(11)) == pytest.approx(old)
    assert len(leaderboard.floor(h[:3], 300, 3, np.arange(3))) == 0  # one reference per half: no variance


def test_the_floor_draws_whole_conversations_into_the_halves_and_uses_products_of_different_ones():
    """A plain loop: each half is the list of drawn conversations (a conversation drawn twice is two);
    the square of half A's mean from the products of its sums over pairs of different draws, divided
    by the products of their sizes; minus twice the product of the halves' means."""
    rng = np.random.default_rng(6)
    sizes = [3, 1, 2, 4, 2, 3]
    codes = np.repeat(np.arange(len(sizes)), sizes)
    h = rng.poisson(2.0, (len(codes), 3)).astype(float)
    got = leaderboard.floor(h, 200, 9, codes)
    c, m = len(sizes), len(sizes) // 2

    def square(draw):
        num = np.zeros(3)
        den = 0.0
        for i, j in itertools.permutations(range(len(draw)), 2):
            num += h[codes == draw[i]].sum(0) * h[codes == draw[j]].sum(0)
            den += sizes[draw[i]] * sizes[draw[j]]
        return num / den

    want = []
    for r in stats.boot_index(c, 200, 9):
        a, b = list(r[:m]), list(r[m : 2 * m])
        mean_a = np.vstack([h[codes == k] for k in a]).mean(0)
        mean_b = np.vstack([h[codes == k] for k in b]).mean(0)
        want.append(math.sqrt(max(float(np.mean(square(a) + square(b) - 2 * mean_a * mean_b)), 0.0)))
    assert got == pytest.approx(np.array(want))
    assert len(leaderboard.floor(h[:5], 200, 9, codes[:5])) == 0  # three conversations: one per half
    # the draws differ from resampling the references one by one
    assert not np.allclose(got, leaderboard.floor(h, 200, 9))


def test_leaderboard_ranks_closest_first_and_leaves_small_n_unranked():
    js = []
    for i in range(12):
        iid = f"d/c{i}/0"
        js += [reps(iid, "reference", 1), reps(iid, "far", 4), reps(iid, "near", 1 + i % 2)]
        if i < 3:
            js.append(reps(iid, "few", 1))
    run = _run(js, [simulated("far"), simulated("near"), simulated("few")], n=12)
    a = analyses.compute("leaderboard", run, Params(judge="J", resamples=100))
    board = a.tables["leaderboard"].filter(pl.col("origin") != "floor")
    assert board["setup"].to_list() == ["near", "far", "few"] and board["rank"].to_list() == [1, 2, None]
    assert "n too small (n=3 < 10)" in board.filter(pl.col("setup") == "few")["note"].item()
    assert any(t.startswith("1. **near**") for t in "\n".join(a.text).splitlines())
    spec = a.charts["leaderboard"].to_dict()
    assert spec["facet"]["row"]["field"] == "judge" and len(spec["spec"]["layer"]) == 5
    # the judge-free columns ride along: near and far say everything their references say
    assert board.filter(pl.col("setup") == "near")["transition_distance"].item() == 0.0


def test_an_empty_leaderboard_says_not_run_and_how_to_add_it():
    no_judge = Run.model_validate(
        {
            "instances": [instance("d/c0/0", n_hist=2, n_ref=4)],
            "continuations": {},
            "manifest": {"params": {"setups": [simulated("a")]}},
        }
    )
    a = analyses.compute("leaderboard", no_judge, Params())
    assert a.text[0].startswith("**Not run**") and "--stage judge" in a.text[0]
    nothing = Run.model_validate({"instances": [instance("d/c0/0", n_hist=2, n_ref=4)], "continuations": {}})
    b = analyses.compute("leaderboard", nothing, Params())
    assert b.text[0].startswith("**Not run**: this run has no setup to rank") and not b.tables


def test_a_run_whose_manifest_names_no_setups_still_ranks_the_setups_it_has():
    # the setups' origin is unknown (null) there: the floor test must not drop them as if they were the floor
    run = _board_run()
    bare = Run.model_validate(
        {"instances": run.instances, "continuations": run.continuations, "judgments": run.judgments}
    )
    a = analyses.compute("leaderboard", bare, Params(judge="J", resamples=50, min_n=2))
    board = a.tables["leaderboard"]
    assert board.filter((pl.col("setup") == "a") & (pl.col("judge") == "J"))["origin"].to_list() == [None]
    assert not a.text[0].startswith("**Not run**")


def test_the_report_has_a_leaderboard_section(tmp_path):
    run = _board_run()
    write_run_dir(
        tmp_path / "run", run, {"status": "complete", "params": {"setups": [simulated("a"), IMPORTED | {"name": "b"}]}}
    )
    rep = write_report(tmp_path / "run", tmp_path / "rep", resamples=50)
    assert {"leaderboard", "leaderboard_behaviours"} <= set(rep.tables) and "leaderboard" in rep.figures
    index = (tmp_path / "rep" / "index.md").read_text()
    head = index.index("## Leaderboard of simulators")
    assert index.index("## Judge-free statistics") < head < index.index("## Judge-based statistics")
    assert "[leaderboard.csv]" in index[head : index.index("## Judge-based statistics")]
    assert "turn_taking" in rep.tables and "turn_taking" in rep.figures
    # a run without a judge: the section says not run
    bare = Run.model_validate({"instances": run.instances, "continuations": run.continuations})
    write_run_dir(tmp_path / "bare", bare, {"status": "complete", "params": {"setups": [simulated("a")]}})
    write_report(tmp_path / "bare", tmp_path / "rep2", resamples=50)
    index2 = (tmp_path / "rep2" / "index.md").read_text()
    assert "**Not run**: the leaderboard of simulators" in index2


def test_the_humans_turn_taking_yardstick_uses_the_last_r_turns_of_x_and_the_one_before_them():
    """The floor row's turn-taking columns: the last |r| turns of x, preceded by the turn of x
    before them (none when x has exactly |r| turns), against r preceded by the last turn of x.
    Worked out by hand on histories longer than r by two, by one, and as long as r."""

    def inst(k, history, reference):
        base = instance(f"d/c{k}/0", n_hist=len(history), n_ref=len(reference))
        return base.model_copy(update={"history": [T(s) for s in history], "reference": [T(s) for s in reference]})

    insts = [
        # x's last 2 turns Alice, Alice after Carol: (C, A), (A, A); r after Alice: (A, A), (A, A).
        # TV = ½ (|½ − 0| + |½ − 1|) = ½; one speaker on each side: entropies 0 and 0
        inst(0, ["Alice", "Carol", "Alice", "Alice"], ["Alice", "Alice"]),
        # x's last 2 turns Alice, Bob after Bob: (B, A), (A, B); r after Bob: the same. TV 0; 1 bit each
        inst(1, ["Bob", "Alice", "Bob"], ["Alice", "Bob"]),
        # x is r's length: its 2 turns with no turn before: (A, B); r after Bob: (B, A), (A, B).
        # TV = ½ (|1 − ½| + |0 − ½|) = ½; 1 bit each
        inst(2, ["Alice", "Bob"], ["Alice", "Bob"]),
    ]
    from .test_stats import fine

    run = Run.model_validate(
        {
            "instances": insts,
            "continuations": {},
            "judgments": {"J": [fine(i.id, "reference", "J", [[], []]) for i in insts]},
        }
    )
    tt = turn_taking_frame(run).filter(pl.col("target") == HISTORY).sort("instance_id")
    assert tt["transition_distance"].to_list() == [0.5, 0.0, 0.5]
    assert tt["speaker_entropy"].to_list() == [0.0, 1.0, 1.0]  # of x's last 2 turns only
    assert tt["speaker_entropy_human"].to_list() == [0.0, 1.0, 1.0]
    assert tt["speaker_entropy_diff"].to_list() == [0.0, 0.0, 0.0]
    got = convcompare.turn_taking(tt, resamples=50, min_n=2)
    row = {r["statistic"]: r for r in got.iter_rows(named=True)}
    assert row["transition_distance"]["mean"] == pytest.approx(1 / 3) and row["transition_distance"]["n"] == 3
    board, _ = leaderboard.leaderboard(run_frames(run), None, got, resamples=50, min_n=2)
    [floor] = board.filter(pl.col("setup") == leaderboard.FLOOR).iter_rows(named=True)
    assert floor["transition_distance"] == pytest.approx(1 / 3) and floor["transition_distance_n"] == 3
    assert floor["speaker_entropy_diff"] == 0.0
