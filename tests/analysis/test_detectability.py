"""The judge-free classifier test (``analysis.detectability``, beyond the paper): its AUC, folds,
permutation p and cluster bootstrap against plain re-implementations (sklearn's RidgeClassifier
and roc_auc_score, the Mann–Whitney count by loops), what it refuses to estimate, the floor's
pairs, and the test on a run: in the registry, the leaderboard's columns, the chart, and through
``cocoeval run`` and ``cocoeval report``."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from cocoeval.analysis import analyses, detectability, leaderboard
from cocoeval.analysis.analyses import Params
from cocoeval.analysis.inference import rng_for
from cocoeval.core.schema import Continuation, Turn
from cocoeval.run import Run

from ..sim_helpers import instance

WORDS = [
    "budget",
    "plan",
    "team",
    "meeting",
    "design",
    "remote",
    "price",
    "market",
    "user",
    "battery",
    "colour",
    "shape",
    "button",
    "screen",
]


def _docs(seed: int, n: int, shift: float) -> tuple[list[str], list[str], list[str]]:
    """n pairs over n // 2 conversations: the second sample uses the last words more often by ``shift``."""
    rng = np.random.default_rng(seed)
    p0 = np.full(len(WORDS), 1 / len(WORDS))
    p1 = p0 + shift * np.linspace(-1, 1, len(WORDS))
    p1 = np.clip(p1, 1e-3, None) / np.clip(p1, 1e-3, None).sum()

    def doc(p: np.ndarray) -> str:
        return "\n".join(" ".join(rng.choice(WORDS, size=6, p=p)) + " ." for _ in range(5))

    return [doc(p0) for _ in range(n)], [doc(p1) for _ in range(n)], [f"c{i // 2}" for i in range(n)]


def _by_hand(first, second, groups, labels_of_pair=None):
    """Out-of-fold scores by sklearn's RidgeClassifier on the same features and GroupKFold folds,
    and their AUC by roc_auc_score."""
    from sklearn.linear_model import RidgeClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold

    n = len(first)
    x = detectability.features([*first, *second])
    y = np.repeat([0, 1], n) if labels_of_pair is None else labels_of_pair
    g = np.array([*groups, *groups])
    scores = np.empty(2 * n)
    for train, test in GroupKFold(n_splits=detectability.FOLDS).split(np.zeros(2 * n), np.repeat([0, 1], n), g):
        m = RidgeClassifier(alpha=detectability.ALPHA, fit_intercept=False, solver="cholesky").fit(x[train], y[train])
        scores[test] = m.decision_function(x[test])
    return scores, roc_auc_score(y, scores)


def test_the_auc_is_sklearns_ridge_classifier_and_roc_auc_on_the_same_folds():
    first, second, groups = _docs(0, 40, 0.04)
    d = detectability.two_sample_test(first, second, groups, seed=3, what=("t",), permutations=0, resamples=200)
    scores, expected = _by_hand(first, second, groups)
    assert d.scores is not None and np.allclose(d.scores, scores, atol=1e-8)
    assert d.auc == pytest.approx(expected, abs=1e-12) and 0.5 < d.auc < 1
    assert (d.n, d.conversations, d.folds) == (40, 20, 5)
    # the Mann–Whitney count by loops, ties one half
    pos, neg = scores[40:], scores[:40]
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg)
    assert detectability.auc(scores, np.repeat([0, 1], 40)) == pytest.approx(u / 1600, abs=1e-12)
    assert detectability.auc(np.array([1.0, 1.0, 2.0, 0.0]), np.array([0, 1, 1, 0])) == 0.875


def test_the_permutation_p_counts_the_refitted_swaps_that_reach_the_observed_auc():
    first, second, groups = _docs(1, 30, 0.0)  # no difference: a p far from 0
    d = detectability.two_sample_test(first, second, groups, seed=5, what=("s",), permutations=7, resamples=100)
    swaps = rng_for(5, "detectability permutations", "s").integers(0, 2, size=(30, 7))
    reached = 0
    for j in range(7):
        y = np.repeat([0, 1], 30) ^ np.concatenate([swaps[:, j], swaps[:, j]])
        reached += _by_hand(first, second, groups, y)[1] >= d.auc - 1e-12
    assert d.p == (1 + reached) / 8
    strong = detectability.two_sample_test(*_docs(2, 30, 0.07), seed=5, permutations=19, resamples=100)
    assert strong.p == 1 / 20 and strong.auc is not None and strong.auc > 0.9


def test_a_cluster_bootstrap_draw_is_the_auc_of_the_documents_its_conversations_bring():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    scores = np.round(rng.normal(size=24), 1)  # ties across groups
    labels = np.tile([0, 1], 12)
    groups = np.repeat([f"g{i}" for i in range(6)], 4)
    boot = detectability.cluster_bootstrap(scores, labels, groups, 5, np.random.default_rng(9))
    draws = np.random.default_rng(9).multinomial(6, np.full(6, 1 / 6), size=5)
    for b, w in enumerate(draws):
        keep = np.concatenate([np.flatnonzero(groups == f"g{i}").repeat(1) for i in range(6) for _ in range(w[i])])
        assert boot[b] == pytest.approx(roc_auc_score(labels[keep], scores[keep]), abs=1e-12)


def test_the_folds_are_sklearns_group_k_fold_on_random_groups():
    from sklearn.model_selection import GroupKFold

    rng = np.random.default_rng(4)
    for trial in range(60):
        n_groups = int(rng.integers(2, 30))
        sizes = rng.integers(1, 5, size=n_groups)  # many equal sizes: the tie rules decide
        names = rng.permutation([f"g{i}" for i in range(n_groups)])
        groups = rng.permutation(np.repeat(names, sizes))
        for n_splits in range(2, min(n_groups, 7) + 1):
            ours = detectability.group_folds(groups, n_splits)
            theirs = list(GroupKFold(n_splits=n_splits).split(np.zeros(len(groups)), None, groups))
            assert len(ours) == len(theirs) == n_splits
            for (a, b), (c, d) in zip(ours, theirs, strict=True):
                assert np.array_equal(a, c) and np.array_equal(b, d), (trial, n_splits)
    few = np.array(["a", "a", "b"])
    with pytest.raises(ValueError, match="only 2 group"):
        detectability.group_folds(few, 3)  # fewer groups than folds: refused, as GroupKFold refuses
    with pytest.raises(ValueError):
        GroupKFold(n_splits=3).split(np.zeros(3), None, few).__next__()
    with pytest.raises(ValueError, match="2 or more"):
        detectability.group_folds(few, 1)


def test_the_features_are_sklearns_tfidf_transformer_and_normalize():
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.preprocessing import normalize

    first, second, _ = _docs(3, 30, 0.05)
    docs = [*first, *second, "", "a lone word", "!"]  # rows left empty
    x = detectability.features(docs)
    c = detectability.Hashed().counts(docs)
    df = np.bincount(c.indices, minlength=c.shape[1])
    c = c[:, np.flatnonzero(df >= 2)]
    expected = normalize(TfidfTransformer(sublinear_tf=True, norm=None).fit_transform(c)).tocsr()
    expected.eliminate_zeros()
    assert x.shape == expected.shape and x.nnz == expected.nnz
    assert np.array_equal(x.indptr, expected.indptr) and np.array_equal(x.indices, expected.indices)
    assert np.allclose(x.data, expected.data, rtol=1e-15, atol=0)
    assert x[len(docs) - 3 :].nnz == 0


def test_the_hashed_counts_are_each_texts_grams_counted_one_by_one():
    import re
    from collections import Counter
    from itertools import pairwise

    texts = ["The cat sat.\nThe cat, the hat!", "", "cat sat", "?!", "x y x y x", "The cat sat."]

    def by_hand(text):
        toks = re.findall(detectability.TOKENS, text.lower())
        grams = toks + [f"{a} {b}" for a, b in pairwise(toks)]
        cols = pl.Series(grams, dtype=pl.Utf8).hash(0) % detectability.HASH_FEATURES
        return Counter(cols.to_list())

    hashed = detectability.Hashed()
    for docs in (texts, texts[::-1], [texts[2], texts[0], texts[2]]):  # the second and third from the cache
        m = hashed.counts(docs)
        assert m.shape == (len(docs), detectability.HASH_FEATURES) and m.has_sorted_indices
        for i, text in enumerate(docs):
            row = m[i]
            assert dict(zip(row.indices.tolist(), row.data.tolist(), strict=True)) == by_hand(text)
    assert np.array_equal(detectability.Hashed().counts(texts).toarray(), hashed.counts(texts).toarray())


def test_the_kernel_is_scipys_sparse_product_to_the_bit():
    first, second, _ = _docs(5, 60, 0.03)
    x = detectability.features([*first, *second])
    for n in [*range(0, 9), 37, 120]:
        part = x[:n]
        assert np.array_equal(detectability.kernel(part), (part @ part.T).toarray()), n


def test_the_interval_and_the_aucs_use_scipys_quantiles_and_ranks():
    from scipy.stats import norm, rankdata, t

    rng = np.random.default_rng(7)
    scores = np.round(rng.normal(size=(40, 6)), 1)  # ties
    labels = rng.integers(0, 2, size=(40, 6))
    pos = labels == 1
    by_ranks = ((rankdata(scores, axis=0) * pos).sum(axis=0) - pos.sum(0) * (pos.sum(0) + 1) / 2) / (
        pos.sum(0) * (40 - pos.sum(0))
    )
    assert np.array_equal(detectability.aucs(scores, labels), by_ranks)
    boot = rng.uniform(0.4, 0.8, size=500)
    for k, extra in [(10, 0.001), (37, None), (200, 0.0)]:
        small = np.sqrt(k / (k - 1)) * t.ppf(0.975, k - 1) / norm.ppf(0.975)
        lo, hi = np.percentile(boot, [2.5, 97.5])
        r = np.sqrt(1 + (extra or 0.0) / np.var(boot, ddof=1)) * small
        assert detectability.widened(0.6, boot, extra, k) == (0.6 - (0.6 - lo) * r, 0.6 + (hi - 0.6) * r)
    flat = detectability.widened(1.0, np.ones(50), 0.004, 12)
    assert flat[1] == 1.0 and flat[0] == 1.0 - norm.ppf(0.975) * np.sqrt(0.004) * (
        np.sqrt(12 / 11) * t.ppf(0.975, 11) / norm.ppf(0.975)
    )


def test_the_test_imports_neither_scikit_learn_nor_scipy_stats():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from cocoeval.analysis import detectability as d\n"
        "rng = np.random.default_rng(0)\n"
        "w = ['a', 'b', 'c', 'd', '.']\n"
        "doc = lambda: ' '.join(rng.choice(w, size=12))\n"
        "r = d.two_sample_test([doc() for _ in range(24)], [doc() for _ in range(24)],"
        " [f'c{i // 2}' for i in range(24)], permutations=19, resamples=50)\n"
        "assert r.auc is not None\n"
        "print(sorted(m for m in sys.modules if m.startswith(('sklearn', 'scipy.stats'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_too_few_pairs_or_conversations_give_no_auc_and_say_why():
    first, second, groups = _docs(0, 12, 0.05)
    few = detectability.two_sample_test(first[:8], second[:8], groups[:8])
    assert few.auc is None and few.note == "8 pair(s), fewer than 10: no AUC"
    one = detectability.two_sample_test(first, second, ["c"] * 12)
    assert one.auc is None and one.note == "12 pairs from 1 source conversation(s), fewer than 10: no AUC"
    mute = detectability.two_sample_test(["."] * 20, ["!"] * 20, [f"c{i}" for i in range(20)], permutations=19)
    assert mute.auc is not None  # punctuation is a word here: "." against "!" is told apart
    with pytest.raises(ValueError, match="one entry per pair"):
        detectability.two_sample_test(first, second[:3], groups)


def test_the_document_drops_typesetting_only_one_side_can_have_and_the_speakers_names():
    turns = [
        Turn(speaker="Alice", text="Alice: **Great** point — let’s go {vocalsound}"),
        Turn(speaker="Bob", text="  - yeah   so   we  said “no”"),
        Turn(speaker="Bob", text="# Summary\nBob said Alice is right"),
    ]
    assert detectability.plain_text(turns, ["Alice", "Bob"]) == (
        'Great point - let\'s go\nyeah so we said "no"\nSummary\nBob said Alice is right'
    )


def _inst(conv: int, window: int, dataset: str = "d"):
    base = instance(f"{dataset}/m{conv}/{window}", n_hist=4, n_ref=6)
    prov = base.provenance.model_copy(update={"start_index": 100 * window})
    words = np.random.default_rng(conv * 10 + window).choice(WORDS, size=(6, 7))
    ref = [Turn(speaker=t.speaker, text=" ".join(w) + " .") for t, w in zip(base.reference, words, strict=True)]
    return base.model_copy(update={"reference": ref, "provenance": prov, "dataset": dataset})


def test_the_floor_pairs_windows_of_one_conversation_else_conversations_of_one_dataset():
    insts = [_inst(c, w) for c in range(10) for w in range(3)]  # three windows: one pair each, the third left out
    first, second, groups, comparison = detectability.floor_pairs(insts, seed=0)
    assert (
        comparison == detectability.WITHIN
        and len(first) == 10
        and sorted(set(groups)) == sorted(f"d/m{c}" for c in range(10))
    )
    ref = {detectability.plain_text(i.reference): i.id for i in insts}
    for a, b, g in zip(first, second, groups, strict=True):
        assert {ref[a], ref[b]} == {f"{g}/0", f"{g}/1"}
    assert {ref[a].endswith("/0") for a in first} == {True, False}  # each pair's order drawn
    single = [_inst(c, 0, "d" if c < 12 else "e") for c in range(16)]
    first, second, groups, comparison = detectability.floor_pairs(single, seed=0)
    assert comparison == detectability.ACROSS and len(first) == 8
    for g in groups:  # two conversations of the same dataset
        a, b = g.split(" + ")
        assert a.split("/")[0] == b.split("/")[0] and a != b


def _run(n_conv: int = 12):
    insts = [_inst(c, w) for c in range(n_conv) for w in range(2)]
    bot = [Turn(speaker=t.speaker, text="I agree with that point.") for t in insts[0].reference]
    conts = {
        "copy": [Continuation(instance_id=i.id, setup_id="copy", turns=i.reference) for i in insts],
        "bot": [Continuation(instance_id=i.id, setup_id="bot", turns=bot) for i in insts[1:]]
        + [Continuation(instance_id=insts[0].id, setup_id="bot", status="invalid", reason="no turns")],
    }
    setups = [{"name": "copy", "model": "m"}, {"name": "bot", "model": "m"}]
    return Run.model_validate({"instances": insts, "continuations": conts, "manifest": {"params": {"setups": setups}}})


def test_a_copy_of_the_humans_is_indistinguishable_a_canned_bot_is_not_and_invalid_ones_are_counted():
    run = _run()
    a = analyses.compute("detectability", run, Params(resamples=200))
    assert a is not None and not a.judge_based
    t = a.tables["detectability"]
    rows = {r["target"]: r for r in t.iter_rows(named=True)}
    assert t["target"].to_list() == [detectability.FLOOR, "copy", "bot"]
    assert rows[detectability.FLOOR]["comparison"] == detectability.WITHIN and rows[detectability.FLOOR]["n"] == 12
    assert rows["copy"]["auc"] == 0.5 and rows["copy"]["p"] == 1.0  # the same documents: every score tied
    assert rows["bot"]["auc"] == 1.0 and rows["bot"]["p"] == 1 / (1 + detectability.PERMUTATIONS)
    assert rows["bot"]["ci_low"] > 0.8 and rows["bot"]["ci_high"] == 1.0
    assert (rows["bot"]["n"], rows["bot"]["continuations_ok"], rows["bot"]["continuations"]) == (23, 23, 24)
    assert rows["bot"]["note"] == "1 invalid continuation(s) left out"
    assert "**bot**: AUC 1.00" in "\n".join(a.text) and "Beyond the paper" in a.text[0]
    spec = a.charts["detectability"].to_dict()

    def values(x):
        if isinstance(x, dict):
            return [v for k, y in x.items() for v in (list(y) if k == "values" else values(y))]
        return [v for y in x for v in values(y)] if isinstance(x, list | tuple) else []

    assert {v.get("target") for v in values(spec)} >= {detectability.FLOOR, "copy", "bot"}
    assert any(layer.get("mark", {}).get("color") == "#c0392b" for layer in spec["layer"])  # the rule at 0.5
    # too few conversations: rows, no AUC, the reason
    small = analyses.compute("detectability", _run(4), Params(resamples=50)).tables["detectability"]
    assert small["auc"].is_null().all() and "fewer than 10" in small["ci_note"][1]


def test_the_leaderboard_has_the_auc_beside_the_distance_and_the_floor_row_the_humans_own():
    run = _run()
    det = detectability.detectability(run, resamples=200)
    from cocoeval.analysis.frames import run_frames

    from .test_stats import fine

    js = [fine(i.id, "reference", "J", [[]] * 6) for i in run.instances] + [
        fine(i.id, "copy", "J", [[]] * 6) for i in run.instances
    ]
    judged = Run.model_validate({**run.model_dump(), "judgments": {"J": js}})
    board, _ = leaderboard.leaderboard(run_frames(judged), None, None, resamples=50, detectability=det)
    rows = {r["setup"]: r for r in board.iter_rows(named=True)}
    assert rows["copy"]["auc"] == 0.5 and rows["bot"]["auc"] == 1.0 and rows["bot"]["auc_n"] == 23
    floor = det.filter(pl.col("target") == detectability.FLOOR).row(0, named=True)
    assert rows[leaderboard.FLOOR]["auc"] == floor["auc"] and rows[leaderboard.FLOOR]["auc_n"] == 12
    assert rows[leaderboard.FLOOR]["auc_ci_low"] == floor["ci_low"]
