"""Agreement as the paper measures it (Appendix B.1), against numbers computed by hand.

Three annotators (A, B, C) and one LLM judge (J) on five conversations. The expected values
are derived in the comments (ranks with ties averaged, Pearson on the ranks) and checked
against a plain loop implementation below, never against the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import agreement, studies
from cocoeval.analysis.frames import run_frames
from cocoeval.core.schema import Judgment
from cocoeval.core.taxonomy import load_taxonomy
from cocoeval.run import Run

from ..sim_helpers import fine_reference, instance

TAX = load_taxonomy()
REP = "repetition"
# repetition counts per conversation c0..c4 (c5 is judged by J only)
COUNTS = {"A": [0, 1, 2, 3, 4], "B": [1, 0, 3, 2, 4], "C": [0, 2, 1, 4, 3], "J": [0, 1, 3, 2, 5, 6]}
CONSISTENCY = {"A": [2, 4, 6, 8, 10], "B": [3, 2, 7, 5, 9], "C": [2, 5, 4, 9, 8], "J": [1, 2, 3, 4, 5]}
COLLAB = {"A": [5, 5, 5, 5, 5], "B": [1, 2, 3, 4, 5], "C": [2, 1, 3, 5, 4], "J": [1, 2, 3, 4, 5]}


def _fine(iid, rater, k, n_turns=6):
    return fine_reference(iid, rater, {t: [REP] for t in range(k)}, range(n_turns))


def _overall(iid, rater, c, k):
    return Judgment(
        instance_id=iid,
        target="reference",
        target_name="reference",
        judge_id=f"human:{rater}" if rater != "J" else "jid",
        judge_name=rater,
        kind="overall",
        taxonomy_hash=TAX.hash,
        consistency=c,
        collaborativeness=k,
    )


def frames(counts=COUNTS, cons=CONSISTENCY, collab=COLLAB):
    n = max(len(v) for v in counts.values())
    insts = [instance(f"d/c{i:02d}/0", n_hist=2, n_ref=6) for i in range(n)]  # sorted as the draws index them
    js = [_fine(insts[i].id, r, k) for r, ks in counts.items() for i, k in enumerate(ks)]
    js += [
        _overall(insts[i].id, r, c, k) for r in cons for i, (c, k) in enumerate(zip(cons[r], collab[r], strict=True))
    ]
    return run_frames(Run.model_validate({"instances": insts, "continuations": {}, "judgments": {"x": js}}))


# --- an independent, plain implementation (loops), for the bootstrap check -----------------
def ranks(v):
    return [1 + sum(w < x for w in v) + (sum(w == x for w in v) - 1) / 2 for x in v]


def rho(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else math.nan


def mean_of(rows):
    return [sum(col) / len(col) for col in zip(*rows, strict=True)]


def inter_human_by_hand(x):  # x: {annotator: scores}
    names = list(x)
    rs = [rho(x[a], mean_of([x[o] for o in names if o != a])) for a in names]
    ok = [r for r in rs if not math.isnan(r)]
    return sum(ok) / len(ok) if ok else math.nan


def judge_by_hand(j, x):
    names = list(x)
    rs = [rho(j, mean_of([x[o] for o in names if o != a])) for a in names]
    ok = [r for r in rs if not math.isnan(r)]
    return sum(ok) / len(ok) if ok else math.nan


def test_leave_one_out_counts_by_hand():
    f = frames()
    ag = agreement.agreement(f, resamples=50, item=REP, min_n=5)
    by = {r["rater"]: r for r in ag.iter_rows(named=True)}
    # A vs mean(B, C) = [.5, 1, 2, 3, 3.5]: the same order as A -> 1
    assert by["A"]["rho"] == pytest.approx(1.0)
    # B ranks [2, 1, 4, 3, 5] vs mean(A, C) = [0, 1.5, 1.5, 3.5, 3.5] ranked [1, 2.5, 2.5, 4.5, 4.5]:
    # centred [-1, -2, 1, 0, 2] . [-2, -.5, -.5, 1.5, 1.5] = 5.5, sums of squares 10 and 9
    assert by["B"]["rho"] == pytest.approx(5.5 / math.sqrt(90))
    # C ranks [1, 3, 2, 5, 4] vs mean(A, B) = [.5, .5, 2.5, 2.5, 4]: likewise 5.5 / sqrt(90)
    assert by["C"]["rho"] == pytest.approx(5.5 / math.sqrt(90))
    assert by[agreement.AVERAGE]["rho"] == pytest.approx((1 + 11 / math.sqrt(90)) / 3)
    assert set(ag["comparison"]) == {"inter-human"} and "J" not in by  # the judge is no annotator
    assert ag["n"].to_list() == [5] * 4  # c5 has no human labels
    assert by[agreement.AVERAGE]["rho"] == pytest.approx(inter_human_by_hand({r: COUNTS[r] for r in "ABC"}))


def test_judge_against_the_left_out_means_by_hand():
    f = frames()
    jh = agreement.judge_vs_humans(f, "J", resamples=50, min_n=5)
    rep = jh.filter(pl.col("item") == REP).row(0, named=True)
    # J ranks [1, 2, 4, 3, 5], centred [-2, -1, 1, 0, 2]
    # without A: mean(B, C) ranks 1..5 -> 9 / 10; without B: 7 / sqrt(90); without C: 9 / sqrt(90)
    assert rep["rho"] == pytest.approx((0.9 + 16 / math.sqrt(90)) / 3)
    assert rep["n"] == 5 and rep["annotators"] == 3 and rep["comparison"] == "J"
    # not the old "judge vs the mean of all": mean(A, B, C) ranks 1..5 would give 0.9
    assert rep["rho"] != pytest.approx(0.9)
    assert jh.filter(pl.col("item") == "all")["rho"].item() == pytest.approx(rep["rho"])  # only repetition
    # a behaviour nobody detected: every count is 0, rho undefined -> null with a note, never 0
    off = jh.filter(pl.col("item") == "off_topic").row(0, named=True)
    assert off["rho"] is None and off["significant"] is None and "constant scores" in off["note"]


def test_leave_one_out_likert_by_hand():
    f = frames()
    cons = agreement.agreement(f, resamples=50, item="consistency", min_n=5)
    by = {r["rater"]: r["rho"] for r in cons.iter_rows(named=True)}
    # A vs mean(B, C) = [2.5, 3.5, 5.5, 7, 8.5] -> 1; B [2, 1, 4, 3, 5] vs mean(A, C) ranked 1..5 -> 8 / 10;
    # C [1, 3, 2, 5, 4] vs mean(A, B) = [2.5, 3, 6.5, 6.5, 9.5] centred [-2, -1, .5, .5, 2] -> 6.5 / sqrt(95)
    assert [by["A"], by["B"], by["C"]] == pytest.approx([1.0, 0.8, 6.5 / math.sqrt(95)])
    assert by[agreement.AVERAGE] == pytest.approx((1.8 + 6.5 / math.sqrt(95)) / 3)
    col = agreement.agreement(f, resamples=50, item="collaborativeness", min_n=5)
    byc = {r["rater"]: r for r in col.iter_rows(named=True)}
    # A is constant (all 5): undefined, named in the note; B and C each 8 / 10 against the others' mean
    assert byc["A"]["rho"] is None and byc["A"]["significant"] is None
    assert byc["B"]["rho"] == pytest.approx(0.8) and byc["C"]["rho"] == pytest.approx(0.8)
    assert byc[agreement.AVERAGE]["rho"] == pytest.approx(0.8)
    assert (
        "ρ undefined for A" in byc[agreement.AVERAGE]["note"]
        and "averaged over the other 2" in byc[agreement.AVERAGE]["note"]
    )
    jh = agreement.judge_vs_humans(f, "J", resamples=50, min_n=5, items=["consistency"]).row(0, named=True)
    # J ranks 1..5: without A -> 1, without B -> 1, without C: mean(A, B) centred ranks as above -> 9.5 / sqrt(95)
    assert jh["rho"] == pytest.approx((2 + 9.5 / math.sqrt(95)) / 3) and jh["scale"] == "likert"


def test_table_detections_and_answer():
    f = frames()
    t = agreement.agreement_table(f, resamples=50, min_n=5)
    assert set(t["comparison"]) == {"inter-human", "J"}
    assert set(t["item"]) == {"all", *TAX.ids, "consistency", "collaborativeness"}
    assert t.filter(pl.col("comparison") == "inter-human")["rater"].unique().to_list() == [agreement.AVERAGE]
    d = agreement.detection_totals(f).filter(pl.col("behaviour") == REP)
    tot = dict(zip(d["source"], d["total"], strict=True))
    # on the five conversations the annotators labelled: J's sixth conversation is left out
    assert tot == {"A": 10, "B": 10, "C": 10, "annotators (mean of 3)": 10, "J": 11}
    assert d.filter(pl.col("source") == "J")["conversations"].item() == 5
    a = studies.agreement_answer(f, resamples=50, min_n=5)
    assert {"agreement", "inter_human_by_annotator", "detection_totals"} <= set(a.tables)
    text = "\n".join(a.text)
    assert "the paper's procedure" in text and "3 human annotators" in text
    assert f"{(1 + 11 / math.sqrt(90)) / 3:.2f}" in text  # inter-human, all behaviours


def _bootstrap_by_hand(x, judge, seed, resamples, item_fn):
    """The paper's test by loops: the same seeded draws (as stats.boot_index), the average
    leave-one-out rho in each resample, its 5th and 95th percentiles."""
    n = len(next(iter(x.values())))
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    vals = []
    for row in idx:
        xs = {a: [x[a][i] for i in row] for a in x}
        v = item_fn(xs) if judge is None else judge_by_hand([judge[i] for i in row], xs)
        if not math.isnan(v):
            vals.append(v)
    return np.percentile(vals, 5), np.percentile(vals, 95)


def test_one_sided_bootstrap_by_hand():
    rng = np.random.default_rng(3)
    base = rng.integers(0, 6, size=12)
    x = {a: np.clip(base + rng.integers(-1, 2, size=12), 0, 6).tolist() for a in "ABC"}
    j = np.clip(base + rng.integers(-2, 3, size=12), 0, 7).tolist()
    f = frames({**x, "J": j}, {a: [5] * 12 for a in "ABC"}, {a: [5] * 12 for a in "ABC"})
    avg = (
        agreement.agreement(f, resamples=200, seed=7, item=REP)
        .filter(pl.col("rater") == agreement.AVERAGE)
        .row(0, named=True)
    )
    p5, p95 = _bootstrap_by_hand(x, None, 7, 200, inter_human_by_hand)
    assert avg["rho"] == pytest.approx(inter_human_by_hand(x))
    assert (avg["p5"], avg["p95"]) == pytest.approx((p5, p95))
    assert avg["significant"] is bool(p5 > 0) and avg["significant"]  # correlated raters
    jr = agreement.judge_vs_humans(f, "J", resamples=200, seed=7, items=[REP]).row(0, named=True)
    jp5, jp95 = _bootstrap_by_hand(x, j, 7, 200, None)
    assert jr["rho"] == pytest.approx(judge_by_hand(j, x)) and (jr["p5"], jr["p95"]) == pytest.approx((jp5, jp95))
    # independent raters: the 5th percentile is not above 0
    y = {a: rng.permutation(6 * [0, 1]).tolist() for a in "ABC"}
    g = frames({**y, "J": y["A"]}, {a: [5] * 12 for a in "ABC"}, {a: [5] * 12 for a in "ABC"})
    r = (
        agreement.agreement(g, resamples=200, seed=1, item=REP)
        .filter(pl.col("rater") == agreement.AVERAGE)
        .row(0, named=True)
    )
    q5, _ = _bootstrap_by_hand(y, None, 1, 200, inter_human_by_hand)
    assert r["p5"] == pytest.approx(q5) and r["significant"] is bool(q5 > 0) is False
    # below min_n: the estimate, but no test
    small = agreement.agreement(f, resamples=50, item=REP, min_n=20)
    assert small["significant"].is_null().all() and set(small["ci_note"]) == {"n too small (n=12 < 20)"}


def test_one_annotator_and_no_annotators():
    f = frames({"A": COUNTS["A"], "J": COUNTS["J"]}, {"A": CONSISTENCY["A"]}, {"A": COLLAB["A"]})
    assert agreement.agreement(f, resamples=20, min_n=5).is_empty()  # inter-human needs two annotators
    r = agreement.judge_vs_humans(f, "J", resamples=20, min_n=5, items=[REP]).row(0, named=True)
    assert r["rho"] == pytest.approx(0.9) and "one annotator (A)" in r["note"]
    g = frames({"J": COUNTS["J"]}, {}, {})
    assert agreement.agreement_table(g, resamples=20).is_empty()
    a = studies.agreement_answer(g, resamples=20)
    assert "no human annotator" in "\n".join(a.text)


def test_spearman_boot_equals_ranking_every_resample_bit_for_bit():
    """The counting ranks of ``spearman_boot`` give the very floats of ranking each resample
    (``spearman_rows(a[idx], b[idx])``): ties, constant resamples, one or two values, NaN; over
    more resamples than ``BOOT_ROWS`` (ranked and correlated a block at a time, the last one short)."""
    import numpy as np

    from cocoeval.analysis.agreement import BOOT_ROWS, spearman_boot, spearman_rows

    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 7, 40, 501):
        for a, b in [
            (rng.integers(0, 3, n).astype(float), rng.normal(size=n).round(1)),
            (np.zeros(n), rng.integers(0, 2, n).astype(float)),
            (rng.normal(size=n), rng.normal(size=n)),
        ]:
            idx = np.vstack([np.arange(n), rng.integers(0, n, size=(2 * BOOT_ROWS + 9, n))])
            assert np.array_equal(spearman_boot(a, b, idx), spearman_rows(a[idx], b[idx]), equal_nan=True)
    a, b = np.array([1.0, np.nan, 2.0, 3.0]), np.array([1.0, 2.0, 2.0, 0.5])
    idx = np.vstack([np.arange(4), rng.integers(0, 4, size=(9, 4))])
    assert np.array_equal(spearman_boot(a, b, idx), spearman_rows(a[idx], b[idx]), equal_nan=True)


def test_average_ranks_and_spearman_test_are_scipys_bit_for_bit():
    """``average_ranks`` is ``scipy.stats.rankdata(a, axis=-1)`` (ties, NaN rows, integers, one
    value, an empty row) and ``spearman_test`` is ``scipy.stats.spearmanr``'s ρ and p, the very
    floats; neither imports scipy.stats."""
    import subprocess
    import sys

    import numpy as np
    import scipy.stats as sps

    from cocoeval.analysis.agreement import average_ranks, spearman_test

    rng = np.random.default_rng(5)
    cases = [rng.integers(0, 4, size=(30, n)) for n in (1, 2, 5, 40)]
    cases += [rng.normal(size=(7, 13)).round(1), np.zeros((3, 4)), np.empty((2, 0)), rng.integers(0, 9, size=17)]
    nan = rng.integers(0, 3, size=(6, 9)).astype(float)
    nan[[1, 4], [2, 0]] = np.nan
    cases.append(nan)
    for a in cases:
        assert np.array_equal(average_ranks(a), sps.rankdata(a, axis=-1), equal_nan=True)
    for n in (3, 4, 10, 50, 300):
        for _ in range(40):
            x = rng.integers(1, 6, n) if n < 300 else rng.integers(1, 40, n)
            y = rng.integers(0, 4, n).astype(float) if _ % 2 else rng.normal(size=n)
            if np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            ref = sps.spearmanr(x, y)
            assert spearman_test(x, y) == (float(ref.statistic), float(ref.pvalue))
    code = (
        "import sys, numpy as np; from cocoeval.analysis.agreement import spearman_test, spearman_rows; "
        "spearman_test(np.arange(5), np.array([1., 3, 2, 5, 4])); spearman_rows(np.eye(3), np.eye(3)); "
        "print('scipy.stats' in sys.modules)"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


def test_spearman_tests_of_many_pairs_are_scipys_spearmanr_of_each_bit_for_bit():
    """The batched tests (Table 12's) give each pair's ρ and p as ``scipy.stats.spearmanr`` does, and
    as one pair at a time, the very floats: lengths mixed in one call, ties, integers and floats,
    perfect agreement and reversal."""
    import numpy as np
    import scipy.stats as sps

    from cocoeval.analysis.agreement import spearman_test, spearman_tests

    rng = np.random.default_rng(11)
    pairs = []
    for k in range(600):
        n = int(rng.integers(3, 70))
        x = rng.integers(0, int(rng.integers(2, 9)), n)
        y = rng.normal(size=n) if k % 3 == 0 else rng.integers(0, int(rng.integers(2, 25)), n)
        if np.ptp(x) > 0 and np.ptp(y) > 0:
            pairs.append((x, y))
    pairs += [
        (np.arange(5), np.arange(5) * 2.0),
        (np.arange(6), -np.arange(6)),
        (np.array([1, 1, 2]), np.array([3, 1, 2])),
    ]
    got = spearman_tests(pairs)
    assert len(got) == len(pairs) and len({len(x) for x, _ in pairs}) > 30
    assert got == [spearman_test(x, y) for x, y in pairs]
    for (x, y), (rho, p) in zip(pairs, got, strict=True):
        ref = sps.spearmanr(x, y)
        assert (rho, p) == (float(ref.statistic), float(ref.pvalue))
    assert spearman_tests([]) == []
