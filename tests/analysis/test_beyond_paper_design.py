"""The design of the statistics beyond the paper, each against an independent computation or a
case whose answer is known: every annotator's labels used, the annotators' majority, the gate's
floor of conversations and positive turns, its permutation test and Holm's correction, corrected
rates clipped at 0, intervals that depend only on what they are of, a stale judge never replaced
by an annotator, ties that share a rank, and D's interval of a sum."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import judge_check as jc
from cocoeval.analysis import leaderboard, stats
from cocoeval.analysis.frames import run_frames
from cocoeval.analysis.inference import rng_for
from cocoeval.analysis.report import default_judge
from cocoeval.core.schema import Judgment
from cocoeval.run import Run

from ..sim_helpers import instance
from .test_judge_check import TAX, TURNS, B, fine, synthetic


def _run(js, n_conv, manifest=None, path=None) -> Run:
    insts = [instance(f"d/c{i:03d}/0", n_hist=2, n_ref=TURNS) for i in range(n_conv)]
    return Run.model_validate(
        {
            "instances": insts,
            "continuations": {},
            "judgments": {"x": js},
            "manifest": manifest or {},
            **({"path": path} if path else {}),
        }
    )


def _labels(x, i):
    return x[i * TURNS : (i + 1) * TURNS]


def _agreeing(n_conv, seed=1):
    rng = np.random.default_rng(seed)
    return rng.random((n_conv * TURNS, len(B))) < np.array([0.3, 0.2, 0.25])


def test_two_annotators_who_split_the_conversations_both_count():
    n = 40
    truth = _agreeing(n)
    js = [fine(f"d/c{i:03d}/0", "J", _labels(truth, i)) for i in range(n)]
    js += [fine(f"d/c{i:03d}/0", "A" if i < 20 else "B", _labels(truth, i)) for i in range(n)]
    f = run_frames(_run(js, n))
    gate = jc.validation(f, "J")
    assert (gate["conversations"] == 40).all() and gate.filter(pl.col("behaviour").is_in(B))["validated"].all()
    assert jc.corrected_rates(f, "J").filter(pl.col("behaviour") == B[0])["n_labelled"].item() == 40
    assert jc.turn_agreement(f, "J", resamples=50).filter(pl.col("behaviour") == B[0])["conversations"].item() == 40


def test_a_third_annotator_of_one_conversation_takes_nothing_away():
    n = 40
    truth = _agreeing(n)
    js = [fine(f"d/c{i:03d}/0", r, _labels(truth, i)) for i in range(n) for r in ("J", "A", "B")]
    before = jc.validation(run_frames(_run(js, n)), "J")
    js.append(fine("d/c000/0", "C", _labels(truth, 0)))
    after = jc.validation(run_frames(_run(js, n)), "J")
    assert before["validated"].to_list() == after["validated"].to_list() and after["validated"].sum() == len(B)
    assert (after["conversations"] == 40).all()


def test_the_annotators_majority_is_strictly_more_than_half_of_those_who_labelled():
    x = np.array([[[True], [True], [False]], [[False], [True], [False]]])  # (2 annotators, 3 turns, 1 behaviour)
    both = np.ones((2, 3), dtype=bool)
    assert jc.majority(x, both)[:, 0].tolist() == [False, True, False]  # one of two is no majority
    only_first = np.array([[True, True, True], [False, False, False]])
    assert jc.majority(x, only_first)[:, 0].tolist() == [True, True, False]  # one of one is
    three = np.array([[[True]], [[True]], [[False]]])
    assert jc.majority(three, np.ones((3, 1), dtype=bool))[0, 0]


def _gate_for(n_conv, positive_turns):
    """A judge and two annotators in full agreement on behaviour B[0], marked on exactly
    ``positive_turns`` turns spread over the conversations (the rest unmarked)."""
    x = np.zeros((n_conv * TURNS, len(B)), dtype=bool)
    rng = np.random.default_rng(0)
    x[rng.choice(n_conv * TURNS, positive_turns, replace=False), 0] = True
    js = [fine(f"d/c{i:03d}/0", r, _labels(x, i)) for i in range(n_conv) for r in ("J", "A", "B")]
    return jc.validation(run_frames(_run(js, n_conv)), "J").filter(pl.col("behaviour") == B[0]).row(0, named=True)


def test_the_gate_says_too_rare_below_eleven_positive_turns_and_tests_at_eleven():
    rare = _gate_for(40, 10)
    assert rare["status"] == jc.TOO_RARE and not rare["validated"] and rare["p"] is None
    assert "10 positive turn(s)" in rare["why"] and "too rare to validate here" in rare["why"]
    tested = _gate_for(40, 11)
    assert tested["positive_turns"] == 11 and tested["p"] is not None and tested["status"] == jc.VALIDATED


def test_the_gate_tests_at_exactly_thirty_conversations_and_not_at_twenty_nine():
    assert _gate_for(30, 40)["status"] == jc.VALIDATED
    few = _gate_for(29, 40)
    assert few["status"] == jc.TOO_FEW and "only 29 annotated conversation(s)" in few["why"]


def test_the_gate_p_is_a_one_sided_permutation_test_and_holm_corrects_over_the_behaviours_tested():
    from scipy.stats import permutation_test, spearmanr

    n = 40
    rng = np.random.default_rng(3)
    truth = _agreeing(n, seed=3)
    judge = truth ^ (rng.random(truth.shape) < np.array([0.05, 0.4, 0.6]))  # agreeing less and less
    js = [fine(f"d/c{i:03d}/0", "J", _labels(judge, i)) for i in range(n)]
    js += [fine(f"d/c{i:03d}/0", r, _labels(truth, i)) for i in range(n) for r in ("A", "B")]
    gate = jc.validation(run_frames(_run(js, n)), "J")
    rows = {r["behaviour"]: r for r in gate.iter_rows(named=True)}
    per = lambda x, k: np.array([_labels(x, i)[:, k].sum() for i in range(n)], dtype=float)  # noqa: E731
    for k, b in enumerate(B):
        rho = spearmanr(per(judge, k), per(truth, k)).statistic
        assert rows[b]["rho"] == pytest.approx(rho)
        humans = per(truth, k)
        ref = permutation_test(
            (per(judge, k),),
            lambda a, h=humans: spearmanr(a, h).statistic,
            permutation_type="pairings",
            alternative="greater",
            n_resamples=1999,
            random_state=0,
        ).pvalue
        assert rows[b]["p"] == pytest.approx(ref, abs=0.02)
    tested = [rows[b] for b in B]  # the other behaviours never occur: too rare, not in the family
    assert all(rows[b]["status"] == jc.TOO_RARE for b in TAX.ids if b not in B)
    order = sorted(tested, key=lambda r: r["p"])
    running = 0.0
    for i, r in enumerate(order):  # Holm by hand: step-down, monotone
        running = max(running, min(1.0, r["p"] * (len(order) - i)))
        assert r["p_holm"] == pytest.approx(running)
        assert r["validated"] == (running <= 0.05)


def test_a_judge_that_labels_a_behaviour_at_random_is_not_validated_for_it():
    n = 40
    rng = np.random.default_rng(5)
    truth = _agreeing(n, seed=5)
    judge = truth.copy()
    judge[:, 1] = rng.random(len(judge)) < 0.2
    js = [fine(f"d/c{i:03d}/0", "J", _labels(judge, i)) for i in range(n)]
    js += [fine(f"d/c{i:03d}/0", r, _labels(truth, i)) for i in range(n) for r in ("A", "B")]
    ok = dict(jc.validation(run_frames(_run(js, n)), "J").select("behaviour", "validated").iter_rows())
    assert ok[B[0]] and ok[B[2]] and not ok[B[1]]
    line = jc.not_validated_line(jc.validation(run_frames(_run(js, n)), "J"))
    assert B[1] in line and "too rare to validate here: " in line and B[0] not in line


def test_the_judge_only_interval_is_a_full_size_95_percent_bootstrap_drawn_by_its_own_seed():
    n = 40
    x = synthetic(seed=4, n_conv=n)
    js = [fine(f"d/c{i:03d}/0", r, _labels(x[r], i)) for i in range(n) for r in ("J", "A")]
    f = run_frames(_run(js, n))
    row = jc.corrected_rates(f, "J", resamples=300, seed=7).filter(pl.col("behaviour") == B[0]).row(0, named=True)
    y = np.array([_labels(x["J"], i)[:, 0].sum() for i in range(n)], dtype=float)
    idx = rng_for(7, "corrected_rates", "J", "reference", B[0]).integers(0, n, size=(300, n))
    lo, hi = np.percentile(y[idx].mean(axis=1), [2.5, 97.5])
    assert (row["judge_only"], row["judge_only_low"], row["judge_only_high"]) == pytest.approx((y.mean(), lo, hi))


def test_one_targets_intervals_do_not_depend_on_the_other_targets():
    n = 40
    x = synthetic(seed=6, n_conv=n)
    ref = [fine(f"d/c{i:03d}/0", r, _labels(x[r], i)) for i in range(n) for r in ("J", "A", "B")]
    alone = jc.corrected_rates(run_frames(_run(ref, n)), "J", resamples=200)
    other = [Judgment(**{**j.model_dump(), "target": "zz", "target_name": "aa"}) for j in ref if j.judge_name == "J"]
    f = run_frames(_run([*other, *ref], n))
    both = jc.corrected_rates(f, "J", resamples=200).filter(pl.col("target") == "reference")
    cols = ["behaviour", "judge_only_low", "judge_only_high", "corrected_low", "corrected_high"]
    assert alone.select(cols).equals(both.select(cols))


def test_each_likert_item_is_resampled_by_its_own_seed_over_each_conversations_annotators():
    import krippendorff

    rng = np.random.default_rng(0)
    n = 20
    insts = [instance(f"d/c{i:03d}/0", n_hist=2, n_ref=TURNS) for i in range(n)]
    truth = rng.integers(3, 9, size=n)
    scores = {r: np.clip(truth + rng.integers(-1, 2, size=n), 1, 10) for r in ("A", "B", "J")}
    js = [
        Judgment(
            instance_id=insts[i].id,
            target="reference",
            target_name="reference",
            judge_id=f"human:{r}" if r != "J" else "jid",
            judge_name=r,
            kind="overall",
            taxonomy_hash=TAX.hash,
            consistency=int(v[i]),
            collaborativeness=int(v[(i + 1) % n]),
        )
        for r, v in scores.items()
        for i in range(n)
        if not (r == "B" and i < 5)
    ]  # B scored 15 of them
    f = run_frames(Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"x": js}}))
    row = (
        jc.likert_agreement(f, "J", resamples=200, seed=3)
        .filter(pl.col("item") == "collaborativeness")
        .row(0, named=True)
    )
    x = np.array(
        [[scores[r][(i + 1) % n] if not (r == "B" and i < 5) else np.nan for r in ("J", "A", "B")] for i in range(n)]
    )  # sorted as the frames sort the conversations: by instance id
    assert row["conversations"] == n  # B's missing scores are missing, not a reason to drop a conversation

    def alpha(m):
        return krippendorff.alpha(reliability_data=m.T, level_of_measurement="ordinal")

    idx = rng_for(3, "likert_agreement", "J", "collaborativeness").integers(0, n, size=(200, n))
    boot = [alpha(x[i]) for i in idx]
    assert row["alpha_with_judge"] == pytest.approx(alpha(x))
    assert (row["alpha_with_judge_low"], row["alpha_with_judge_high"]) == pytest.approx(
        tuple(np.percentile(boot, [2.5, 97.5]))
    )


def test_corrected_rates_are_shown_clipped_at_zero_with_the_raw_estimate_kept():
    n_lab, n_unl = 40, 300
    rng = np.random.default_rng(0)
    x = np.zeros(((n_lab + n_unl) * TURNS, len(B)), dtype=bool)
    h = np.zeros_like(x)
    for i in range(n_lab):  # labelled: the judge marks 4-6 turns, the humans that many minus 4
        k = int(rng.integers(4, 7))
        x[i * TURNS : i * TURNS + k, 0] = True
        h[i * TURNS : i * TURNS + k - 4, 0] = True
    js = [fine(f"d/c{i:03d}/0", "J", _labels(x, i)) for i in range(n_lab + n_unl)]
    js += [fine(f"d/c{i:03d}/0", "A", _labels(h, i)) for i in range(n_lab)]
    f = run_frames(_run(js, n_lab + n_unl))
    row = jc.corrected_rates(f, "J", resamples=100).filter(pl.col("behaviour") == B[0]).row(0, named=True)
    assert row["corrected_raw"] < 0 and row["corrected"] == 0.0 and row["corrected_low"] == 0.0
    assert "clipped at 0 (raw estimate" in row["note"]
    humans = [int(_labels(h, i)[:, 0].sum()) for i in range(n_lab)]
    assert row["humans_only"] == pytest.approx(np.mean(humans)) and row["disagree"] is not None


def test_every_conversation_labelled_gives_the_humans_mean_as_the_answer():
    n = 40
    x = synthetic(seed=8, n_conv=n)
    js = [fine(f"d/c{i:03d}/0", r, _labels(x[r], i)) for i in range(n) for r in ("J", "A")]
    row = jc.corrected_rates(run_frames(_run(js, n)), "J").filter(pl.col("behaviour") == B[0]).row(0, named=True)
    assert row["n_unlabelled"] == 0 and "the humans' mean is the answer" in row["note"]
    assert (row["corrected"], row["corrected_low"], row["corrected_high"]) == pytest.approx(
        (row["humans_only"], row["humans_only_low"], row["humans_only_high"])
    )


def test_the_text_says_no_corrected_interval_when_none_exists_and_names_disagreements():
    t = pl.DataFrame(
        {
            "behaviour": ["a", "b"],
            "target": ["r", "r"],
            "judge_only": [1.0, 2.0],
            "corrected": [1.0, 1.0],
            "corrected_low": [None, None],
            "corrected_high": [None, None],
            "disagree": [None, None],
        },
        schema_overrides={"corrected_low": pl.Float64, "corrected_high": pl.Float64, "disagree": pl.Boolean},
    )
    assert jc.corrected_line(t, {}).startswith("no corrected interval")
    t = t.with_columns(corrected_low=pl.lit(0.5), corrected_high=pl.lit(1.5), disagree=pl.Series([False, True]))
    line = jc.corrected_line(t, {"b": "Bee"})
    assert "outside" in line and "Bee of r (2.00 vs 1.00)" in line and "a of r" not in line


def test_undefined_intervals_say_why():
    n = 30
    x = synthetic(seed=9, n_conv=n)["A"]
    js = [fine(f"d/c{i:03d}/0", r, _labels(x, i)) for i in range(n) for r in ("J", "A", "B")]
    t = jc.turn_agreement(run_frames(_run(js, n)), "J", resamples=100)
    row = t.filter(pl.col("behaviour") == B[0]).row(0, named=True)
    assert row["recall"] == 1.0 and row["recall_low"] is None
    assert "recall: no interval: 1.00 in every resample" in row["note"]
    assert "alpha with judge: no interval: 1.00 in every resample" in row["note"]


def test_a_stale_judge_is_never_replaced_by_an_annotator():
    n = 12
    x = synthetic(seed=10, n_conv=n)
    js = [fine(f"d/c{i:03d}/0", r, _labels(x[r], i)) for i in range(n) for r in ("J", "A")]
    run = _run(js, n, manifest={"judges": {"x": {"fine_grained": "a-newer-judge-id"}}})
    f = run_frames(run)
    assert default_judge(f) is None
    stale = jc.stale_judges(f)
    assert len(stale) == 1 and "LLM judge J is stale" in stale[0] and "cocoeval run" in stale[0]
    assert jc.llm_judges(f) == []


def test_equal_distances_share_a_rank_and_the_next_rank_skips():
    from .test_leaderboard import _run as board_run
    from .test_leaderboard import simulated
    from .test_rq import reps

    js = []
    for i in range(12):
        iid = f"d/c{i}/0"  # a and b say exactly what the humans say (distance 0), c one repetition more
        js += [reps(iid, "reference", 1), reps(iid, "a", 1), reps(iid, "b", 1), reps(iid, "c", 2)]
    run = board_run(js, [simulated("a"), simulated("b"), simulated("c")], n=12)
    board, _ = leaderboard.leaderboard(run_frames(run), None, resamples=100)
    ranked = board.filter(pl.col("setup") != leaderboard.FLOOR)
    assert dict(zip(ranked["setup"], ranked["rank"], strict=True)) == {"a": 1, "b": 1, "c": 3}
    assert ranked.filter(pl.col("setup") == "c")["distance"].item() == pytest.approx(1 / math.sqrt(len(TAX.ids)))


def test_d_has_the_percentile_interval_of_the_resampled_absolute_sums():
    rng = np.random.default_rng(2)
    s, h = rng.poisson(2, (15, len(TAX.ids))).astype(float), rng.poisson(1.5, (15, len(TAX.ids))).astype(float)
    p = leaderboard.paired_profiles({"a": (s, h)}, 200, 3)["a"]
    d = s - h
    loop = [np.abs(d[r].mean(axis=0)).sum() for r in stats.boot_index(15, 200, 3)]
    assert p.l1[0] == pytest.approx(np.abs(d.mean(axis=0)).sum())
    assert (p.l1[1], p.l1[2]) == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])))


def test_a_judge_that_sees_twice_what_the_humans_see_disagrees_with_the_corrected_rate():
    n = 120
    rng = np.random.default_rng(11)
    judge = rng.random((n * TURNS, len(B))) < 0.4
    human = judge & (rng.random(judge.shape) < 0.5)  # the humans see half of what the judge marks
    js = [fine(f"d/c{i:03d}/0", "J", _labels(judge, i)) for i in range(n)]
    js += [fine(f"d/c{i:03d}/0", "A", _labels(human, i)) for i in range(0, n, 2)]  # every other one labelled
    t = jc.corrected_rates(run_frames(_run(js, n)), "J", resamples=200)
    row = t.filter(pl.col("behaviour") == B[0]).row(0, named=True)
    assert row["n_labelled"] == 60 and row["corrected_low"] is not None
    assert row["judge_only"] > row["corrected_high"] and row["disagree"] is True
    assert row["corrected"] == pytest.approx(row["humans_only"], abs=0.3)  # about half the judge's rate
    assert "outside the corrected 95% interval" in jc.corrected_line(t, {})


def test_the_leaderboard_shows_the_share_of_turns_by_non_participants():
    from cocoeval.core.schema import Continuation, Turn

    from .test_leaderboard import _run as board_run
    from .test_leaderboard import simulated
    from .test_rq import reps

    js = [x for i in range(12) for x in (reps(f"d/c{i}/0", "reference", 1), reps(f"d/c{i}/0", "a", 1))]
    odd = [Turn(speaker="Goals", text="a heading"), *instance("d/c0/0", n_hist=2, n_ref=4).reference[1:]]
    conts = {"a": [Continuation(instance_id=f"d/c{i}/0", setup_id="a", turns=odd if i == 0 else []) for i in range(12)]}
    run = board_run(js, [simulated("a")], n=12, conts=conts)
    board, _ = leaderboard.leaderboard(run_frames(run), None, resamples=50)
    row = board.filter(pl.col("setup") == "a").row(0, named=True)
    assert row["unknown_speaker_share"] == pytest.approx(1 / 48)  # 1 of 12 continuations' 4 turns each
    text = "\n".join(leaderboard.answer(run, run_frames(run), resamples=50).text)
    assert "2% of their turns by non-participants" in text


def test_cocoeval_report_on_a_stale_judge_names_it_and_never_shows_an_annotator_as_the_judge(tmp_path):
    from cocoeval.cli import main

    from ..sim_helpers import write_run_dir

    n = 12
    x = synthetic(seed=12, n_conv=n)
    js = [fine(f"d/c{i:03d}/0", r, _labels(x[r], i)) for i in range(n) for r in ("J", "A")]
    from cocoeval.core.jsonio import write_jsonl

    run = _run([j for j in js if j.judge_name == "J"], n)
    d = tmp_path / "run"
    write_run_dir(d, run, {"judges": {"x": {"fine_grained": "a-newer-judge-id"}}})
    write_jsonl(d / "judgments" / "human" / "A.jsonl", [j for j in js if j.judge_name == "A"])
    assert main(["report", str(d), "--out", str(tmp_path / "report")]) == 0
    index = (tmp_path / "report" / "index.md").read_text()
    assert "**Stale judge:** every one of the" in index and "LLM judge J is stale" in index
    assert "No LLM judge with valid judgments" in index and "Judge shown in the figures: A" not in index
    assert "no human annotations" not in index
    gate_csv = tmp_path / "report" / "judge_validation.csv"
    assert not gate_csv.exists() or "A" not in pl.read_csv(gate_csv)["judge"].to_list()  # no annotator gated


def test_a_leaderboard_of_one_instance_per_setup_says_a_distance_needs_two():
    from .test_leaderboard import _run as board_run
    from .test_leaderboard import simulated
    from .test_rq import reps

    run = board_run([reps("d/c0/0", "reference", 1), reps("d/c0/0", "a", 3)], [simulated("a")], n=1)
    a = leaderboard.answer(run, run_frames(run), resamples=50)
    text = "\n".join(a.text)
    assert "a distance needs two" in text and "no setup has a valid" not in text
    row = a.tables["leaderboard"].filter(pl.col("setup") == "a").row(0, named=True)
    assert row["n"] == 1 and row["distance"] is None and row["D"] == pytest.approx(2.0)
