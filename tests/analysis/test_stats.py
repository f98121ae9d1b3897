"""Statistics against hand-computed cases and scipy; determinism; paired resampling."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from cocoeval.analysis.agreement import agreement, judge_vs_humans
from cocoeval.analysis.frames import invalid_rates, run_frames
from cocoeval.analysis.paper_stats import participants_spearman
from cocoeval.analysis.stats import (
    boot_index,
    bootstrap_mean_ci,
    detections,
    likert_means,
    mean_occurrences,
    paired_vs_human,
)
from cocoeval.core.schema import Continuation, Judgment, TurnLabel
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

from ..sim_helpers import instance

TAX = load_taxonomy()


def fine(inst_id, target, judge, per_turn, status="ok", human=False):
    return Judgment(
        instance_id=inst_id,
        target=target,
        target_name=target,
        judge_id=("human:" if human else "") + judge,
        judge_name=judge,
        kind="fine_grained",
        taxonomy_hash=TAX.hash,
        status=status,
        labels=[TurnLabel(turn=i, behaviours=bs) for i, bs in enumerate(per_turn)],
        judged_turns=list(range(len(per_turn))),
        reason="bad" if status == "invalid" else None,
    )


def overall(inst_id, target, judge, c, k):
    return Judgment(
        instance_id=inst_id,
        target=target,
        target_name=target,
        judge_id=judge,
        judge_name=judge,
        kind="overall",
        taxonomy_hash=TAX.hash,
        consistency=c,
        collaborativeness=k,
    )


def make_run(n=6):
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=4) for i in range(n)]
    js = []
    for k, inst in enumerate(insts):
        # human reference: k repetitions; simulation: k + 1 repetitions and one off-topic
        js.append(fine(inst.id, "reference", "J", [["repetition"]] * min(k, 4) + [[]] * (4 - min(k, 4))))
        js.append(fine(inst.id, "sim", "J", [["repetition"]] * min(k + 1, 4) + [[]] * (4 - min(k + 1, 4))))
        js.append(overall(inst.id, "reference", "J", 5 + k % 3, 4))
    js.append(fine(insts[0].id, "sim2", "J", [], status="invalid"))
    # the helpers use the setup's name as its id: a judgment counts only for the current ok continuation
    conts = {
        "sim": [Continuation(instance_id=i.id, setup_id="sim", turns=i.reference) for i in insts],
        "sim2": [
            Continuation(instance_id=insts[0].id, setup_id="sim2", turns=insts[0].reference),
            *[Continuation(instance_id=i.id, setup_id="sim2", status="invalid", reason="x") for i in insts[1:2]],
        ],
    }
    return Run.model_validate({"instances": insts, "continuations": conts, "judgments": {"J": js}})


def test_bootstrap_matches_a_hand_loop_and_is_seeded():
    x = np.arange(20, dtype=float).reshape(10, 2)
    mean, lo, hi = bootstrap_mean_ci(x, 200, seed=3)
    idx = boot_index(10, 200, 3)
    loop = np.array([[np.mean([x[i, k] for i in row]) for k in range(2)] for row in idx])
    assert np.allclose(mean, x.mean(0))
    assert np.allclose(lo, np.percentile(loop, 2.5, axis=0)) and np.allclose(hi, np.percentile(loop, 97.5, axis=0))
    assert np.allclose(bootstrap_mean_ci(x, 200, seed=3)[1], lo)
    assert not np.allclose(bootstrap_mean_ci(x, 200, seed=4)[1], lo)


def test_bootstrap_ci_close_to_scipy():
    rng = np.random.default_rng(0)
    x = rng.poisson(2.0, size=80).astype(float)
    _, lo, hi = bootstrap_mean_ci(x, 5000, seed=1)
    ref = sps.bootstrap((x,), np.mean, n_resamples=5000, method="percentile", random_state=1).confidence_interval
    assert abs(lo[0] - ref.low) < 0.1 and abs(hi[0] - ref.high) < 0.1


def test_frames_exclude_invalid_and_report_rates():
    f = run_frames(make_run())
    assert set(f.counts["target"].unique()) == {"reference", "sim"}  # sim2's invalid judgment absent
    rates = invalid_rates(f)
    row = rates.filter((pl.col("stage") == "judge") & (pl.col("target") == "sim2")).row(0, named=True)
    assert row["invalid"] == 1 and row["invalid_rate"] == 1.0
    crow = rates.filter((pl.col("stage") == "simulate") & (pl.col("target") == "sim2")).row(0, named=True)
    assert crow["invalid_rate"] == 0.5


def test_stale_judgments_of_a_changed_setup_are_counted_apart_never_in_means():
    run = make_run()
    insts = run.instances
    # the setup's settings changed (new id "sim-v2"); simulate re-ran: instance 0's new continuation is
    # invalid, the others are ok but not judged yet. The old judgments (target "sim") are stale.
    run.continuations["sim"] = [
        Continuation(instance_id=insts[0].id, setup_id="sim-v2", status="invalid", reason="x")
    ] + [Continuation(instance_id=i.id, setup_id="sim-v2", turns=i.reference) for i in insts[1:]]
    f = run_frames(run)
    assert "sim" not in set(f.counts["target"]) and f.counts.filter(pl.col("target") == "reference").height > 0
    assert set(f.judgments.filter(pl.col("target") == "sim")["status"]) == {"stale"}
    row = invalid_rates(f).filter((pl.col("stage") == "judge") & (pl.col("target") == "sim")).row(0, named=True)
    assert row["stale"] == 6 and row["n"] == 0 and row["invalid"] == 0
    # a judgment of the new continuation counts again
    run.judgments["J"].append(fine(insts[1].id, "sim", "J", [["repetition"]] * 4))
    run.judgments["J"][-1].target = "sim-v2"
    f = run_frames(run)
    assert f.counts.filter((pl.col("target") == "sim") & (pl.col("behaviour") == "repetition"))["count"].to_list() == [
        4
    ]


def test_mean_occurrences_hand_computed():
    f = run_frames(make_run())
    m = mean_occurrences(f, resamples=300, min_n=2)
    ref = m.filter((pl.col("target") == "reference") & (pl.col("behaviour") == "repetition")).row(0, named=True)
    assert ref["mean"] == pytest.approx(np.mean([min(k, 4) for k in range(6)])) and ref["n"] == 6
    assert ref["ci_low"] <= ref["mean"] <= ref["ci_high"]
    assert ref["ci_note"] is None
    # never shown: every resample is 0, so there is no interval (not a zero-width one), and it says why
    off = m.filter((pl.col("target") == "sim") & (pl.col("behaviour") == "off_topic")).row(0, named=True)
    assert off["mean"] == 0 and off["ci_low"] is None and off["ci_high"] is None
    assert off["ci_note"] == "degenerate resample (every resample equal)"
    assert mean_occurrences(f, resamples=300, min_n=2).equals(m)  # deterministic
    # 6 instances are fewer than the default minimum of 10: every interval is undefined, with n said
    small = mean_occurrences(f, resamples=300)
    assert small["ci_low"].is_null().all() and small["ci_high"].is_null().all()
    assert set(small["ci_note"]) == {"n too small (n=6 < 10)"} and set(small["n"]) == {6}
    lk = likert_means(f, resamples=300, min_n=2).filter(pl.col("score") == "consistency").row(0, named=True)
    assert lk["mean"] == pytest.approx(np.mean([5 + k % 3 for k in range(6)]))


def test_paired_resampling_keeps_pairs():
    f = run_frames(make_run())
    per_b, dist = paired_vs_human(f, "J", resamples=500, min_n=2)
    rep = per_b.filter((pl.col("target") == "sim") & (pl.col("behaviour") == "repetition")).row(0, named=True)
    # sim - human is 1 on instances 0-3 and 0 on 4-5 (both capped at 4): paired CI stays in [0, 1];
    # unpaired resampling would spread it far wider (the counts themselves range 0-4)
    assert rep["diff"] == pytest.approx(4 / 6)
    assert 0 <= rep["diff_ci_low"] <= rep["diff"] <= rep["diff_ci_high"] <= 1
    d = dist.row(0, named=True)
    assert d["distance"] == pytest.approx(4 / 6) and d["ci_low"] <= d["distance"] <= d["ci_high"]


def _agree_run(seed, noise):
    rng = np.random.default_rng(seed)
    insts = [instance(f"d/c{i}/0", n_hist=2, n_ref=6) for i in range(30)]
    base = rng.integers(0, 6, size=30)
    js = []
    for r, name in enumerate(["A", "B", "C"]):
        vals = base if noise == 0 else rng.integers(0, 6, size=30)
        vals = np.clip(vals + (r if noise == 0 else 0), 0, 6)
        for inst, v in zip(insts, vals, strict=True):
            js.append(
                fine(inst.id, "reference", name, [["repetition"]] * int(v) + [[]] * (6 - int(v)), human=name != "A")
            )
    return run_frames(Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"x": js}})), insts


def test_agreement_leave_one_out_against_scipy_and_significance():
    f, _ = _agree_run(0, noise=1)
    assert agreement(f, resamples=50)["rater"].to_list()[:2] == ["B", "C"]  # by default humans only (A is a judge)
    a = agreement(f, ["A", "B", "C"], resamples=500)  # any raters named explicitly
    wide = (
        f.counts.group_by("judge", "instance_id")
        .agg(pl.col("count").sum())
        .pivot(on="judge", index="instance_id", values="count")
        .sort("instance_id")
    )
    x = wide.select("A", "B", "C").to_numpy().astype(float)
    expected = np.mean([sps.spearmanr(x[:, r], np.delete(x, r, axis=1).mean(axis=1)).statistic for r in range(3)])
    avg = a.filter(pl.col("rater") == "average (leave-one-out)").row(0, named=True)
    assert avg["rho"] == pytest.approx(expected)
    assert not avg["significant"]  # independent random raters
    g, _ = _agree_run(1, noise=0)
    avg = (
        agreement(g, ["A", "B", "C"], resamples=500)
        .filter(pl.col("rater") == "average (leave-one-out)")
        .row(0, named=True)
    )
    assert avg["rho"] > 0.9 and avg["significant"]
    jh = judge_vs_humans(g, "A", resamples=300).filter(pl.col("item") == "all").row(0, named=True)
    assert jh["significant"] and jh["annotators"] == 2


def test_detections_and_participants():
    f = run_frames(make_run())
    d = detections(f).filter((pl.col("target") == "reference") & (pl.col("behaviour") == "repetition"))
    assert d["total"].item() == sum(min(k, 4) for k in range(6))
    f2, _ = _agree_run(2, noise=1)
    pc = participants_spearman(f2, "A")
    assert set(pc["behaviour"]) >= {"all", "repetition"}
    # every instance has 3 participants: no variance, so rho is undefined (null, the reason said)
    al = pc.filter(pl.col("behaviour") == "all")
    assert al.height and al["rho"].is_null().all() and al["note"].str.contains("constant").all()


def test_participants_against_scipy():
    from cocoeval.core.schema import Turn

    insts, js, n_part, totals = [], [], [], []
    for i in range(12):
        k = 1 + i % 4  # 1-4 speakers in the window
        base = instance(f"d/c{i}/0", n_hist=2, n_ref=4)
        turns = [Turn(speaker=f"S{j % k}", text="x") for j in range(6)]
        inst = base.model_copy(update={"history": turns[:2], "reference": turns[2:]})
        insts.append(inst)
        total = (i * 7) % 5
        js.append(fine(inst.id, "reference", "J", [["repetition"]] * min(total, 4) + [[]] * (4 - min(total, 4))))
        n_part.append(len({t.speaker for t in turns}))
        totals.append(min(total, 4))
    f = run_frames(Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"J": js}}))
    row = participants_spearman(f, "J", count="window").filter(pl.col("behaviour") == "all").row(0, named=True)
    ref = sps.spearmanr(n_part, totals)
    assert row["rho"] == pytest.approx(ref.statistic) and row["p_value"] == pytest.approx(ref.pvalue)
    assert row["n"] == 12


def test_paired_vs_human_is_made_once_per_frames_and_settings_and_again_for_other_frames(monkeypatch):
    from cocoeval.analysis import stats

    made = []
    inner = stats._paired_vs_human
    monkeypatch.setattr(stats, "_paired_vs_human", lambda *a, **k: made.append((a[1:], k)) or inner(*a, **k))
    f = run_frames(make_run())
    per_b, dist = paired_vs_human(f, "J", resamples=200, min_n=2)
    again = paired_vs_human(f, "J", resamples=200, min_n=2)
    assert len(made) == 1 and again[0] is per_b and again[1] is dist  # the report and RQ5 ask alike
    holm = paired_vs_human(f, "J", resamples=200, min_n=2, correction="holm")
    assert len(made) == 2 and holm[0]["correction"].to_list() != per_b["correction"].to_list()
    # frames made otherwise (here the same run's frames made anew) are computed from, with the same numbers
    fresh = run_frames(make_run())
    assert fresh is not f
    other = paired_vs_human(fresh, "J", resamples=200, min_n=2)
    assert len(made) == 3 and other[0].equals(per_b) and other[1].equals(dist)


def test_figure3_compares_each_setup_with_the_humans_on_its_own_instances(monkeypatch):
    from cocoeval.analysis import stats
    from cocoeval.analysis.stats import figure3_means

    run = make_run(6)
    # sim3 covers only the first two instances
    run.judgments["J"] += [fine(i.id, "sim3", "J", [[]] * 4) for i in run.instances[:2]]
    run.continuations["sim3"] = [
        Continuation(instance_id=i.id, setup_id="sim3", turns=i.reference) for i in run.instances[:2]
    ]
    f = run_frames(run)
    made = []
    panel = stats._panel
    monkeypatch.setattr(stats, "_panel", lambda *a: made.append(a[3:]) or panel(*a))
    m = figure3_means(f, "J", resamples=100)
    assert len(made) == 2  # sim and sim3
    assert figure3_means(f, "J", resamples=100).equals(m) and len(made) == 2  # made once per frames: the same again
    assert figure3_means(f, "J", resamples=100, setups=["sim3"]).equals(m.filter(pl.col("panel") == "sim3"))
    assert len(made) == 2
    figure3_means(f, "J", resamples=101)  # other settings: made again
    assert made[-2:] == [("sim", 101, 0, 10), ("sim3", 101, 0, 10)]
    ref3 = m.filter(
        (pl.col("panel") == "sim3") & (pl.col("series") == "human reference") & (pl.col("behaviour") == "repetition")
    ).row(0, named=True)
    assert ref3["n"] == 2 and ref3["mean"] == pytest.approx((0 + 1) / 2)  # instances 0 and 1 only
    ref = m.filter(
        (pl.col("panel") == "sim") & (pl.col("series") == "human reference") & (pl.col("behaviour") == "repetition")
    ).row(0, named=True)
    assert ref["n"] == 6
    # a reference judgment that is invalid takes its instance out of both series, so both rest on
    # the same instances (the simulated side does not keep the instance the humans lack)
    run.judgments["J"] = [
        j
        if not (j.target == "reference" and j.kind == "fine_grained" and j.instance_id == run.instances[5].id)
        else fine(j.instance_id, "reference", "J", [], status="invalid")
        for j in run.judgments["J"]
    ]
    m = figure3_means(run_frames(run), "J", resamples=100)
    both = m.filter((pl.col("panel") == "sim") & (pl.col("behaviour") == "repetition"))
    assert sorted(both["n"].to_list()) == [5, 5]


def test_participants_metadata_is_null_when_m_lists_none():
    run = make_run(2)
    i0 = run.instances[0]
    run.instances[0] = i0.model_copy(update={"metadata": i0.metadata.model_copy(update={"participants": []})})
    f = run_frames(run).instances.sort("instance_id")
    assert f["n_participants_metadata"][0] is None  # M lists no participant: unknown, not 0
    assert f["n_participants_metadata"][1] == len(run.instances[1].metadata.participants) > 0


def test_a_ratio_whose_human_mean_can_be_zero_has_no_interval():
    """Humans show the behaviour once in 12 conversations, the setup every time: in about a third
    of the resamples the human mean is 0 and the ratio unbounded, so no finite interval is given."""
    from cocoeval.analysis.stats import paired_differences

    h = np.zeros((12, 2))
    h[0, 0] = 1
    h[:, 1] = [1, 2] * 6  # a behaviour the humans always show: its ratio keeps its interval
    s = np.ones((12, 2))
    r = paired_differences(s, h, resamples=500, seed=0)
    assert r["ratio"][0] == pytest.approx(12.0)
    assert r["ratio_notes"][0].startswith("human mean 0 in ") and "of 500 resamples" in r["ratio_notes"][0]
    assert r["ratio_notes"][1] is None and r["ratio_lo"][1] < r["ratio"][1] < r["ratio_hi"][1]


def test_count_matrix_orders_instances_as_the_pivot_does_with_non_ascii_ids_and_shuffled_rows():
    """``count_matrix``'s fast path (numpy's order of the instance ids) gives the matrix the pivot
    path gives: the same instances in the same order (code points, as polars orders UTF-8 bytes)."""
    import numpy as np
    import polars as pl

    from cocoeval.analysis.stats import count_matrix

    rng = np.random.default_rng(3)
    ids = ["b-2", "a-10", "a-9", "ä-1", "Z-1", "é", "日本", "a-1"]
    behaviours = ["x", "y", "z"]
    rows = [(i, b, int(rng.integers(0, 5))) for i in ids for b in behaviours]
    df = pl.DataFrame(rows, schema={"instance_id": pl.Utf8, "behaviour": pl.Utf8, "count": pl.Int64}, orient="row")
    df = df.sample(fraction=1.0, shuffle=True, seed=1)
    got_ids, got = count_matrix(df, behaviours)
    wide = df.pivot(on="behaviour", index="instance_id", values="count").sort("instance_id")
    assert got_ids == wide["instance_id"].to_list()
    assert np.array_equal(got, wide.select(behaviours).to_numpy().astype(float))
