"""The leaderboard's, the paired comparison's and notebook 13's typed results and their wording:
each result's fields hold the numbers its sentences say (checked against values worked out here
from the judgments, not by the analysis), the ``Answer`` keeps the result its text was rendered
from, and each render function alone (no run) writes the expected sentences from a hand-made
result."""

from __future__ import annotations

import math

import pytest

from cocoeval.analysis import analyses
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.leaderboard_prose import (
    BoardEntry,
    Counted,
    FloorDistance,
    JudgeBoard,
    Leaderboard,
    render_leaderboard,
)
from cocoeval.analysis.paired_prose import MAX_LINES, CloserPair, JudgePairs, SetupPairs, render_setup_pairs
from cocoeval.analysis.rq_prose import Estimate, Intervals, NotRun
from cocoeval.analysis.runcompare_prose import BEYOND, RunsCompared, render_runs_compared

from .test_leaderboard import _run, simulated
from .test_rq import reps
from .test_stats import TAX

K = len(TAX.ids)


def _near_far_run():
    """12 instances, one per source conversation: the humans repeat once; ``far`` four times on
    every instance (+3), ``near`` once or twice (+0 or +1, alternately); ``few`` is judged on 3."""
    js = []
    for i in range(12):
        iid = f"d/c{i}/0"
        js += [reps(iid, "reference", 1), reps(iid, "far", 4), reps(iid, "near", 1 + i % 2)]
        if i < 3:
            js.append(reps(iid, "few", 1))
    return _run(js, [simulated("far"), simulated("near"), simulated("few")], n=12)


# the distances worked out by hand: mean over the K behaviours of d̄² − s²/n (only repetition differs)
FAR = math.sqrt(9 / K)  # +3 on every instance: no variance
NEAR = math.sqrt((0.25 - (6 * 0.25 * 2 / 11) / 12) / K)  # d = 0,1,0,1,…: d̄ = 1/2, s² = 3/11


def rendered_then_gate(a, text):
    """The answer's text is ``text`` and then, from the registry, the judge's validation gate."""
    return a.text[: len(text)] == text and all(
        x.startswith("Beyond the paper: not validated") for x in a.text[len(text) :]
    )


def test_the_leaderboards_result_holds_the_distances_and_ranks_worked_out_by_hand():
    a = analyses.compute("leaderboard", _near_far_run(), Params(judge="J", resamples=200))
    x = a.result
    assert isinstance(x, Leaderboard) and rendered_then_gate(a, render_leaderboard(x))
    assert x.not_run is None and x.behaviours == K and x.intervals == Intervals(200, 0, 10)
    (board,) = x.boards
    assert board.judge == "J" and board.floor.n == 12
    by = {e.setup: e for e in board.entries}
    assert [e.setup for e in board.entries] == ["near", "far", "few"]
    assert (by["near"].rank, by["far"].rank, by["few"].rank) == (1, 2, None)
    assert by["far"].distance.value == pytest.approx(FAR) and by["far"].distance.n == 12
    assert by["near"].distance.value == pytest.approx(NEAR)
    names = {b.id: b.name for b in TAX.behaviours}
    assert by["far"].farthest == (names["repetition"], pytest.approx(3.0))
    assert by["near"].farthest == (names["repetition"], pytest.approx(0.5))
    assert by["few"].note is not None and "n too small (n=3 < 10)" in by["few"].note
    lines = a.text[len(render_leaderboard(x)) - 1].splitlines()
    assert lines[0].startswith("1. ") and "**near** (" in lines[0] and f"distance {NEAR:.2f}" in lines[0]
    assert f"farthest: {names['repetition']} +3.00" in lines[1] and lines[2].startswith("- (unranked) **few**")
    assert a.text[len(render_leaderboard(x)) - 2].startswith(
        "**Judged by J** — floor (two halves of the 12 valid human references): "
    )


def test_a_leaderboard_without_setups_or_judges_is_not_run_in_its_result():
    a = analyses.compute("leaderboard", _run([], []), Params())
    assert isinstance(a.result, Leaderboard) and a.result.not_run is not None and not a.result.boards
    assert a.text == [a.result.not_run.text()] and a.text[0].startswith("**Not run**: this run has no setup to rank")


def test_the_leaderboard_renderer_writes_each_kind_of_line_from_a_hand_made_result():
    iv = Intervals(200, 3, 10)
    entry = BoardEntry(
        setup="s_1",
        group=None,
        rank=2,
        rank_low=1,
        rank_high=3,
        distance=Estimate(0.5, 0.25, 0.75, 12),
        farthest=("Repetition", -0.4),
        consistency_gap=0.1,
        collaborativeness_gap=-0.2,
        likert_n=11,
        auc=Estimate(0.61, 0.5, 0.7, 24),
        counts=Counted(12, 12, 0.25, 11, 12),
        note=None,
    )
    empty = BoardEntry(
        "z", "g", None, None, None, Estimate(None, None, None, 0, "none"), None, None, None, None, None,
        Counted(None, None, None, None, None), "not ranked: nothing",
    )  # fmt: skip
    x = Leaderboard(None, None, 5, iv, (JudgeBoard("J", FloorDistance(12, 0.05, 0.0, 0.2, None), (entry, empty)),))
    text = render_leaderboard(x)
    assert "the root mean square of the 5 true differences" in text[0] and iv.text() in text[0]
    assert (
        text[1] == "**Judged by J** — floor (two halves of the 12 valid human references): 0.05 (95% range 0.00–0.20)."
    )
    assert text[2].splitlines() == [
        f"2. (rank 1–3, unsettled) **s\\_1** (?): distance {Estimate(0.5, 0.25, 0.75, 12).text()}; farthest: "
        "Repetition -0.40; consistency gap +0.10, collaborativeness gap -0.20 (n = 11); judge-free AUC 0.61 "
        "(0.50–0.70) [12 of 12 continuations ok; 25% of their turns by non-participants; 11 of 12 judgments valid].",
        "- (unranked) **z**: n = 0 (nothing judged); not ranked: nothing.",
    ]
    no_floor = Leaderboard(None, None, 5, iv, (JudgeBoard("J", FloorDistance(2, None, None, None, "too few"), ()),))
    assert render_leaderboard(no_floor)[1].endswith("references): none (too few).")
    assert render_leaderboard(Leaderboard(None, NotRun("why", "how"), 5, iv)) == [NotRun("why", "how").text()]


def test_the_paired_result_holds_the_gap_worked_out_by_hand_and_its_text_is_rendered_from_it():
    a = analyses.compute("paired", _near_far_run(), Params(resamples=200))
    x = a.result
    assert isinstance(x, SetupPairs) and rendered_then_gate(a, render_setup_pairs(x))
    (j,) = x.judges
    assert j.judge == "J" and j.pairs == 3 and x.correction == "holm"  # far–near, far–few, near–few
    held = {(p.closer, p.farther): p for p in j.held}
    p = held[("near", "far")]
    assert p.gap == pytest.approx(FAR - NEAR) and (p.n, p.clusters) == (12, 12)
    assert p.low is not None and p.high is not None and p.low <= p.gap <= p.high
    assert a.text[1].startswith(f"**Judged by J**: {len(j.held)} of 3 pairs differ")
    assert f"- **near** is closer to the humans than **far** by {FAR - NEAR:.2f} (95% CI" in a.text[1]
    bh = analyses.compute("paired", _near_far_run(), Params(resamples=200, options={"paired_correction": "bh"}))
    assert bh.result.correction == "bh" and "(Benjamini–Hochberg over the behaviours of each pair)" in bh.text[1]


def test_the_paired_renderer_lists_at_most_max_lines_pairs_and_counts_the_untested():
    pairs = tuple(CloserPair(f"a{i}", f"b{i}", 0.5, None, None, 0.01, 20, 10) for i in range(MAX_LINES + 2))
    x = SetupPairs(None, "the method", "holm", (JudgePairs("J", 30, pairs, 4, 2),))
    text = render_setup_pairs(x)
    assert text[0] == "Method (beyond the paper): the method."
    head, *lines = text[1].splitlines()
    assert head == (
        f"**Judged by J**: {MAX_LINES + 2} of 30 pairs differ in their distance to the humans (Holm over the pairs); "
        "4 behaviour differences hold (Holm over the behaviours of each pair); 2 pairs untested (the note says why)."
    )
    assert len(lines) == MAX_LINES + 1 and lines[-1] == "- and 2 more pairs (table paired)"
    assert (
        lines[0]
        == "- **a0** is closer to the humans than **b0** by 0.50, p_adj = 0.01, n = 20 instances of 10 conversations"
    )
    assert render_setup_pairs(SetupPairs(NotRun("why", "how"))) == [NotRun("why", "how").text()]


def test_runs_not_compared_and_an_unoffered_correction_are_rendered_from_the_result():
    assert render_runs_compared(RunsCompared(None, error="no_judge")) == [BEYOND, "**Not compared.** no\\_judge"]
    a = analyses.compute("compare_runs", _near_far_run(), Params(resamples=50, correction="none"))
    x = a.result
    assert isinstance(x, RunsCompared) and a.text == render_runs_compared(x)
    assert x.comparison is None or (x.correction_offered is False and x.asked_correction == "none")
