"""The Likert table beside the paired RQ results is paired too: each setup and the human reference
on the instances both have valid overall judgments for, with n."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import paper_stats, rq, stats
from cocoeval.analysis.frames import HUMAN, run_frames
from cocoeval.core.schema import Continuation, Judgment, TurnLabel
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

from ..sim_helpers import instance

TAX = load_taxonomy()


def overall(iid, target, c, k):
    return Judgment(
        instance_id=iid,
        target=target,
        target_name=target,
        judge_id="J",
        judge_name="J",
        kind="overall",
        taxonomy_hash=TAX.hash,
        consistency=c,
        collaborativeness=k,
    )


def fine(iid, target, reps):
    return Judgment(
        instance_id=iid,
        target=target,
        target_name=target,
        judge_id="J",
        judge_name="J",
        kind="fine_grained",
        taxonomy_hash=TAX.hash,
        judged_turns=[0, 1, 2],
        labels=[TurnLabel(turn=t, behaviours=["repetition"] if t < reps else []) for t in range(3)],
    )


def make_run(n=8):
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=3) for i in range(n)]
    js = []
    for k, i in enumerate(insts):
        # the reference scores 2 on instance 0, 8 elsewhere: only an unpaired mean would include the 2
        js += [fine(i.id, "reference", k % 3), overall(i.id, "reference", 2 if k == 0 else 8, 2 if k == 0 else 7)]
        js += [fine(i.id, "a", (k + 1) % 3), overall(i.id, "a", 5 + k % 3, 4 + k % 2)]
        if k:  # setup b lacks instance 0: its overall judgment is invalid, a lacks nothing
            js += [fine(i.id, "b", k % 2), overall(i.id, "b", 6, 6)]
    js.append(
        Judgment(
            instance_id=insts[0].id,
            target="b",
            target_name="b",
            judge_id="J",
            judge_name="J",
            kind="overall",
            taxonomy_hash=TAX.hash,
            status="invalid",
            reason="unusable",
        )
    )
    conts = {s: [Continuation(instance_id=i.id, setup_id=s, turns=i.reference) for i in insts] for s in ("a", "b")}
    return Run.model_validate({"instances": insts, "continuations": conts, "judgments": {"J": js}})


def test_likert_beside_paired_results_is_paired_with_n():
    f = run_frames(make_run())
    lk = paper_stats.likert_vs_human(f, "J", resamples=200, min_n=2)
    got = {(r["target"], r["series"], r["score"]): (r["mean"], r["n"]) for r in lk.iter_rows(named=True)}
    ref_c = [2] + [8] * 7
    a_c = [5 + k % 3 for k in range(8)]
    # setup a has every instance: the human mean includes instance 0's score of 2
    assert got[("a", HUMAN, "consistency")] == (pytest.approx(np.mean(ref_c)), 8)
    assert got[("a", "simulated", "consistency")] == (pytest.approx(np.mean(a_c)), 8)
    assert got[("a", paper_stats.DIFFERENCE, "consistency")][0] == pytest.approx(np.mean(a_c) - np.mean(ref_c))
    # setup b lacks instance 0: the human reference is taken on b's 7 instances only
    assert got[("b", HUMAN, "consistency")] == (8.0, 7) and got[("b", HUMAN, "collaborativeness")] == (7.0, 7)
    assert got[("b", "simulated", "consistency")] == (6.0, 7)
    assert got[("b", paper_stats.DIFFERENCE, "collaborativeness")] == (pytest.approx(-1.0), 7)
    # constant pairs: no interval, said so (never a zero-width one)
    b = lk.filter((pl.col("target") == "b") & (pl.col("series") == paper_stats.DIFFERENCE)).row(0, named=True)
    assert b["ci_low"] is None and b["ci_note"] == "degenerate resample (every resample equal)"
    d = lk.filter(
        (pl.col("target") == "a") & (pl.col("series") == paper_stats.DIFFERENCE) & (pl.col("score") == "consistency")
    ).row(0, named=True)
    assert d["ci_low"] <= d["mean"] <= d["ci_high"]
    # the unpaired means differ: this is what the paired table avoids
    un = (
        stats.likert_means(f, resamples=50, min_n=2)
        .filter((pl.col("target") == "reference") & (pl.col("score") == "consistency"))
        .row(0, named=True)
    )
    assert un["n"] == 8 and un["mean"] != got[("b", HUMAN, "consistency")][0]


def test_compare_to_humans_shows_the_paired_likert_table():
    f = run_frames(make_run())
    a = rq.compare_to_humans(f, "J", ["b"], "RQ2", resamples=200, min_n=2)
    lk = a.tables["likert"]
    assert set(lk["target"]) == {"b"} and lk["n"].unique().to_list() == [7]
    assert lk.filter((pl.col("series") == HUMAN) & (pl.col("score") == "consistency"))["mean"].to_list() == [8.0]
    assert a.tables["distance"]["n"].to_list() == [7]  # the fine-grained pairs: the same instances here
    [line] = [t for t in a.text if t.startswith("Likert scores")]
    assert "paired with the human reference" in line and "b consistency -2.00 (no interval: degenerate" in line
    assert "likert" in a.charts
