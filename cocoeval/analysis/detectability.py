"""A human-likeness test that needs no judge (beyond the paper): can a classifier tell a setup's
continuations from the human references of the same instances?

**The two samples.** Every instance that has both an ok continuation of the setup and its human
reference r gives two documents, the reference (label 0) and the continuation (label 1). A
document is the text of the target's scored turns (every turn; in human–AI chats the user turns
only, as the judges and ``convstats`` see them), one turn a line. Invalid continuations have no
turns: they are left out and counted (``continuations_ok`` of ``continuations``), never replaced.

**What the classifier sees** (``plain_text``). The words and punctuation of the turns, never the
speakers' names: both sides have the same participants, and a name is the identity of a
conversation, which the folds keep apart. Typesetting that only one side can have is removed from
both: transcription tags in braces ("{vocalsound}", the builder removes them from the references),
markdown emphasis and headings ("**", "__", "#"), a bullet or a speaker's name repeated at the
start of a turn ("Alice: …", a simulator's formatting slip), typographic quotes and dashes (a
model writes ’ and —, a transcript ' and -) and runs of white space. Features (``features``):
TF-IDF (sublinear tf) of word uni- and bigrams, punctuation marks counted as words, hashed
(``Hashed``, in polars), the IDF from the documents of the comparison without their labels (the same for
every fold and every permutation: no label reaches it), terms in a single document dropped.
Character n-grams are left out for cost (sklearn hashes them in about 4 s per 1,000 documents,
25 s for a paper-scale run's 6,000).

**The classifier and its AUC.** A ridge classifier (least squares on −1/+1 labels, L2 penalty
``ALPHA``, no intercept: what sklearn's ``RidgeClassifier`` fits), cross-validated with ``FOLDS``
folds grouped by source conversation (``group_folds``, sklearn's ``GroupKFold`` assignment, on
``frames.conversation_of``: every window of a meeting, and both documents of an instance, in the
same fold; so each training fold holds as many references as continuations). Not logistic
regression: its fitted scores are linear in the labels, so one Cholesky factor per fold refits the
observed labels and every permutation's at once (``out_of_fold``), where a logistic regression
refitted per permutation costs about 0.1 s a fit on 480 documents, 100 s per setup at the paper's
scale; on TF-IDF text the two rank documents alike. The AUC is that of the pooled out-of-fold
scores: the probability that a continuation scores as more machine-like than a reference, ties
counted one half. 0.5: this classifier cannot tell them apart; 1: it always can. A high AUC shows
a difference; an AUC near 0.5 shows only that this classifier, on these features and this many
instances, found none: it is a lower bound on how distinguishable the setup is.

**Its interval** is a 95% cluster bootstrap over source conversations of the out-of-fold scores
(``resamples`` draws of the conversations with replacement, each bringing every document it has),
widened for what it holds fixed. A bootstrap of the scores keeps the fitted models as they are, so
it sees how the AUC moves with the conversations it is measured on and not with the models a new
sample would fit: on worlds where the truth is 0.5 its percentile interval covered 0.5 in about
70% of them. The permutations measure the missing part where the truth is known (every
permutation refits): ``model_variance`` is the variance of their AUCs minus the mean
fixed-model bootstrap variance of ``NULL_DRAWS`` of them, and ``widened`` stretches both arms of
the percentile interval so that its variance gains that much, then by the small-sample factor
√(k/(k − 1))·t_{k−1}/z of its k conversations (as the leaderboard's distance), clipped to
[0, 1]. Coverage on worlds with known truth: ``benchmarks/detectability.py`` (docs/testing.md).

**Its p-value** (one-sided, AUC > 0.5) is a permutation test that refits: each of
``permutations`` draws swaps the two labels of each instance with probability ½ (independently)
and runs the whole cross-validation again (the same folds); p = (1 + the draws
whose AUC reaches the observed one) / (1 + permutations). Exact under the null hypothesis that
an instance's continuation and reference are exchangeable (a simulator drawing from the humans).
Its cost at the paper's scale is printed by ``benchmarks/detectability.py --scale``.

**The floor: humans against humans** (``FLOOR``). The same pipeline on pairs of human references
of *other windows of the same conversations*: the windows of each conversation in order, paired
first with second, third with fourth (an odd last one left out), each pair's two labels drawn at
random (seeded by what the pair is of). Its AUC is 0.5 in expectation by construction; its value and
interval show how far from 0.5 chance alone puts the AUC on this benchmark's human text, on about
half as many pairs as a setup has instances. When fewer than ``MIN_CONVERSATIONS`` conversations
have two windows, the pairs are references of *other conversations of the same dataset* instead
(each conversation's first window, conversations paired in a seeded order; a pair is one group),
and the row says so.

**Too few to say.** Below ``min_n`` instances (pairs) or ``MIN_CONVERSATIONS`` source conversations
a row has no AUC, only the reason: with fewer conversations the folds and the cluster bootstrap
rest on too few independent units to mean anything.

**Implementation.** numpy, polars and scipy (scipy imported inside the functions: ``cocoeval``
does not import it at start). The TF-IDF, the folds and the ridge fit are written here with
scikit-learn's arithmetic and assignment (``TfidfTransformer`` then ``normalize``, ``GroupKFold``,
``RidgeClassifier``), the same numbers to the bit, so that a report need not import scikit-learn;
the tests hold scikit-learn as their oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from cocoeval.core.targets import reference_target

from . import inference, stats
from .documents import COMPARED, STALE, document_frame
from .documents import document as _doc
from .documents import plain_text as plain_text  # the documents are made there (kept with the frames)
from .frames import conversation_of
from .store import derived_frame

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from cocoeval.core.schema import Instance

    from .answer import Answer
    from .judge_free_prose import ClassifierTest
    from .store import RunLike

FOLDS = 5
"""Cross-validation folds (fewer when there are fewer conversations, never fewer than two)."""
MIN_CONVERSATIONS = 10
"""Source conversations a comparison needs for an AUC (the folds and the cluster bootstrap's units)."""
PERMUTATIONS = 199
"""Label swaps of the permutation test (each refits every fold, all in one solve): the smallest p is 1/200."""
ALPHA = 1.0
"""The ridge classifier's L2 penalty (sklearn's default; not tuned: tuning would need nested folds)."""

FLOOR = "floor: humans vs humans"
"""The floor row's target (not a setup name: those are file names, with no space or colon)."""
VS_HUMANS = "setup vs the human reference of the same instances"
WITHIN = "humans vs humans: other windows of the same conversations"
ACROSS = "humans vs humans: other conversations of the same dataset"

SCHEMA: dict[str, Any] = {
    "target": pl.Utf8,
    "comparison": pl.Utf8,
    "n": pl.Int64,
    "conversations": pl.Int64,
    "auc": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "p": pl.Float64,
    "permutations": pl.Int64,
    "folds": pl.Int64,
    "continuations_ok": pl.Int64,
    "continuations": pl.Int64,
    "note": pl.Utf8,
}

TOKENS = r"\b\w+\b|[^\w\s]"
"""Words (one letter included) and each punctuation mark: a comma, a dash or an exclamation mark is
part of how a turn is written."""
HASH_BITS = 20
HASH_FEATURES = 2**HASH_BITS


class Hashed:
    """Word uni- and bigram counts of documents (``TOKENS`` of the lowercased text; a bigram is two
    consecutive tokens of a document), hashed into ``HASH_FEATURES`` columns by polars' string hash:
    a document's row depends on its text alone, so each text is counted once however many
    comparisons it is in (a run's references are in every setup's). Tokenised, paired and hashed
    in polars for all new texts at once (sklearn's HashingVectorizer took 15 times longer). Each
    text's row is kept as two arrays (its columns in increasing order, their counts), so that the
    matrix of a comparison is their concatenation."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def counts(self, docs: Sequence[str]) -> csr_matrix:
        """The counts of ``docs``, one row each (columns in increasing order within a row)."""
        from scipy.sparse import csr_matrix

        new = [d for d in dict.fromkeys(docs) if d not in self._rows]
        if new:
            toks = pl.Series("tok", new, dtype=pl.Utf8).str.to_lowercase().str.extract_all(TOKENS)
            t = pl.DataFrame({"doc": np.arange(len(new)), "tok": toks}).explode("tok").drop_nulls("tok")
            # the next token of the same text (none after a text's last), then the bigrams
            pairs = t.with_columns(nxt=pl.when(pl.col("doc").shift(-1) == pl.col("doc")).then(pl.col("tok").shift(-1)))
            bigrams = pairs.drop_nulls("nxt").select("doc", tok=pl.col("tok") + " " + pl.col("nxt"))

            def key(grams: pl.DataFrame) -> pl.DataFrame:  # the text's number and the gram's column, one integer
                return grams.select(
                    key=pl.col("doc") * HASH_FEATURES + (pl.col("tok").hash(0) % HASH_FEATURES).cast(pl.Int64)
                )

            keys = pl.concat([key(t), key(bigrams)])
            k = keys["key"].sort().to_numpy()
            starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))  # one run of equal keys per gram
            doc, col = k[starts] >> HASH_BITS, k[starts] & (HASH_FEATURES - 1)  # (a power of two)
            cut = np.searchsorted(doc, np.arange(1, len(new)))
            cols = np.split(col.astype(np.int32), cut)
            counts = np.split(np.diff(starts, append=len(k)).astype(np.float64), cut)
            self._rows.update(zip(new, zip(cols, counts, strict=True), strict=True))
        rows = [self._rows[d] for d in docs]
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(i) for i, _ in rows], out=indptr[1:])
        indices = np.concatenate([i for i, _ in rows]) if rows else np.zeros(0, np.int32)
        data = np.concatenate([v for _, v in rows]) if rows else np.zeros(0)
        return csr_matrix((data, indices, indptr), shape=(len(rows), HASH_FEATURES))


def features(docs: Sequence[str], hashed: Hashed | None = None) -> csr_matrix:
    """TF-IDF (sublinear tf, smoothed idf) of the hashed word uni- and bigrams of ``docs``, its IDF
    from these documents alone (no labels), terms in a single document dropped (they cannot help to
    score another), rows l2-normalised. A row of zeros for a document with no term left. The
    arithmetic is sklearn's ``TfidfTransformer(sublinear_tf=True)`` then ``normalize``, operation
    for operation (tf = 1 + log count, idf = 1 + log((n + 1)/(df + 1)), each row divided by the
    square root of its squares summed in column order), so the values are the same to the bit; the
    tests hold sklearn as the oracle."""
    from scipy.sparse import csr_matrix

    c = (hashed or Hashed()).counts(docs)
    n = c.shape[0]
    df = np.bincount(c.indices, minlength=HASH_FEATURES)
    kept = df >= 2
    keep = kept[c.indices]
    row = np.repeat(np.arange(n), np.diff(c.indptr))[keep]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
    # the columns left, renumbered in order, so that XXᵀ does not walk a million empty ones
    indices = (np.cumsum(kept) - 1)[c.indices[keep]]
    idf = np.full(int(kept.sum()), n + 1, dtype=np.float64)
    idf /= df[kept] + 1.0
    np.log(idf, out=idf)
    idf += 1.0
    data = np.log(c.data[keep])
    data += 1.0
    data *= idf[indices]
    norm = np.sqrt(np.bincount(row, weights=data * data, minlength=n))  # summed in order, row by row
    data /= norm[row]
    return csr_matrix((data, indices, indptr), shape=(n, len(idf)))


def group_folds(groups: np.ndarray, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) indices of each of ``n_splits`` folds that keep every group in one fold:
    sklearn's ``GroupKFold(n_splits)`` (not shuffled), the same assignment. The groups (sorted by
    name) are taken by their number of documents, largest first (of equal sizes, the later name
    first), each put in the fold with the fewest documents so far (of equal ones, the first);
    indices increasing within a fold."""
    if n_splits < 2:
        raise ValueError(f"folds need n_splits of 2 or more, not {n_splits}")
    names, of = np.unique(groups, return_inverse=True)
    if n_splits > len(names):
        raise ValueError(f"{n_splits} folds but only {len(names)} group(s)")
    sizes = np.bincount(of)
    load = [0] * n_splits
    fold_of = np.empty(len(names), dtype=np.int64)
    for g in np.argsort(sizes, kind="stable")[::-1].tolist():
        f = load.index(min(load))
        load[f] += int(sizes[g])
        fold_of[g] = f
    doc_fold = fold_of[of]
    return [(np.flatnonzero(doc_fold != f), np.flatnonzero(doc_fold == f)) for f in range(n_splits)]


def aucs(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The AUC of each column of ``scores`` (documents, k) for its column of ``labels`` (1 =
    positive): the Mann–Whitney U of the positives over the negatives divided by their product,
    ties counted one half (average ranks: half-integers, so the sums are exact)."""
    from .agreement import average_ranks  # scipy.stats.rankdata's ranks, without importing scipy.stats

    pos = labels == 1
    n1 = pos.sum(axis=0)
    n0 = len(labels) - n1
    r = average_ranks(np.asarray(scores).T).T
    return ((r * pos).sum(axis=0) - n1 * (n1 + 1) / 2) / (n1 * n0)


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The AUC of ``scores`` for ``labels`` (``aucs`` of one column)."""
    return float(aucs(np.asarray(scores, float)[:, None], np.asarray(labels)[:, None])[0])


def cluster_bootstrap(
    scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """The AUC of ``scores`` in each of ``resamples`` cluster-bootstrap draws: the groups drawn with
    replacement, each bringing all its documents (as often as it is drawn). Computed from the
    group × group sums of the pairwise comparisons, so a draw costs a product of its counts (every
    sum a count of halves: exact, in any order)."""
    ids, g = np.unique(groups, return_inverse=True)
    k = len(ids)
    pos = labels == 1
    s1, s0 = scores[pos], scores[~pos]
    h = (s1[:, None] > s0[None, :]) + 0.5 * (s1[:, None] == s0[None, :])
    # (k, k): group u's positives against group v's negatives
    cell = (g[pos][:, None] * k + g[~pos][None, :]).ravel()
    hg = np.bincount(cell, weights=h.ravel(), minlength=k * k).reshape(k, k)
    w = rng.multinomial(k, np.full(k, 1.0 / k), size=resamples).astype(np.float64)
    num = ((w @ hg) * w).sum(axis=1)
    return num / ((w @ np.bincount(g[pos], minlength=k)) * (w @ np.bincount(g[~pos], minlength=k)))


NULL_DRAWS = 10
"""Permutations whose fixed-model bootstrap variance ``model_variance`` averages."""
NULL_RESAMPLES = 200
"""Cluster-bootstrap draws for each of them."""


def model_variance(
    scores: np.ndarray,
    labels: np.ndarray,
    groups: np.ndarray,
    seed: int,
    what: Sequence[str],
    permuted: np.ndarray | None = None,
) -> float | None:
    """What the fixed-model bootstrap misses, measured under the null hypothesis: the variance of
    the permutations' AUCs (each refitted: every source of variation) minus the mean
    fixed-model cluster-bootstrap variance of the first ``NULL_DRAWS`` of them (the test
    documents' share); at least 0. ``scores`` and ``labels``: one column per permutation;
    ``permuted``: their AUCs when already computed (``aucs``). None below ``NULL_DRAWS``
    permutations."""
    if scores.shape[1] < NULL_DRAWS:
        return None
    total = float(np.var(aucs(scores, labels) if permuted is None else permuted, ddof=1))
    rng = inference.rng_for(seed, "detectability null", *what)
    fixed = np.mean(
        [
            np.var(cluster_bootstrap(scores[:, j], labels[:, j], groups, NULL_RESAMPLES, rng), ddof=1)
            for j in range(NULL_DRAWS)
        ]
    )
    return max(0.0, total - float(fixed))


def widened(point: float, boot: np.ndarray, extra: float | None, clusters: int) -> tuple[float, float]:
    """The 95% interval: the percentile interval of the fixed-model bootstrap ``boot``, its two
    arms (point to each end) stretched so that its variance becomes the bootstrap's plus
    ``extra`` (``model_variance``: the refitted models' share) and by √(k/(k − 1))·t_{k−1}/z for
    its k ``clusters`` (the leaderboard's small-sample scaling, ``recentred_interval``), clipped to
    [0, 1]. When every draw equals the point (perfect separation in every draw), the arms are
    ±1.96·√extra, so scaled."""
    from scipy.special import ndtri, stdtrit  # scipy.stats' norm.ppf and t.ppf, without importing scipy.stats

    z = ndtri(0.975)
    small = np.sqrt(clusters / (clusters - 1)) * stdtrit(clusters - 1, 0.975) / z
    lo, hi = np.percentile(boot, stats.PERCENTILES)
    var = float(np.var(boot, ddof=1))
    if var <= 0:
        arm = z * np.sqrt(extra or 0.0) * small
        return max(0.0, point - arm), min(1.0, point + arm)
    r = np.sqrt(1 + (extra or 0.0) / var) * small
    return max(0.0, point - (point - lo) * r), min(1.0, point + (hi - point) * r)


@dataclass(frozen=True)
class Detection:
    """One two-sample classifier test: the AUC of the out-of-fold scores with its cluster-bootstrap
    interval and its permutation p (all None with ``note`` saying why when there are too few pairs
    or conversations). ``scores``, ``labels`` and ``groups`` are per document (two per pair: the
    first sample's, label 0, then the second's, label 1)."""

    n: int
    conversations: int
    auc: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p: float | None = None
    folds: int = 0
    permutations: int = 0
    note: str | None = None
    scores: np.ndarray | None = None
    labels: np.ndarray | None = None
    groups: np.ndarray | None = None


KERNEL_BLOCKS = 4
"""Row blocks of ``kernel``: each block's products with itself and the rows after it."""


def kernel(x: csr_matrix) -> np.ndarray:
    """XXᵀ of the rows of ``x``, dense: each entry the sum of its products in column order, as
    scipy's sparse product ``x @ x.T`` adds them (the same bits), computed above the diagonal
    block by block (``KERNEL_BLOCKS``) and mirrored, which skips most of the products below it."""
    n = x.shape[0]
    k = np.empty((n, n))
    edges = np.linspace(0, n, KERNEL_BLOCKS + 1).astype(int).tolist()
    for s, e in pairwise(edges):
        part = (x[s:e] @ x[s:].T).toarray()
        k[s:e, s:] = part
        k[e:, s:e] = part[:, e - s :].T
    return k


def out_of_fold(x: csr_matrix, signs: np.ndarray, folds: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Each document's score from the ridge classifier fitted on the other folds, for each column
    of ``signs`` (documents, k: the labels as −1/+1) at once: w = X_Tᵀ(K_TT + ``ALPHA``·I)⁻¹y_T
    and the scores K_STᵀ… = X_S w, with K = XXᵀ (sklearn's ``RidgeClassifier(alpha=ALPHA,
    fit_intercept=False)``, solved through the documents' kernel: one Cholesky factor per fold
    serves every column)."""
    from scipy.linalg import cho_factor, cho_solve

    from cocoeval.core.speed import one_blas_thread

    k = kernel(x)
    out = np.empty(signs.shape, dtype=np.float64)
    with one_blas_thread():  # entered after scipy.linalg's BLAS is loaded, so that it is limited too
        for train, test in folds:
            f = cho_factor(k[np.ix_(train, train)] + ALPHA * np.eye(len(train)))
            out[test] = k[np.ix_(test, train)] @ cho_solve(f, signs[train])
    return out


def two_sample_test(
    first: Sequence[str],
    second: Sequence[str],
    groups: Sequence[str],
    *,
    seed: int = 0,
    what: Sequence[str] = (),
    resamples: int = 1000,
    permutations: int = PERMUTATIONS,
    min_n: int = inference.MIN_N,
    min_groups: int = MIN_CONVERSATIONS,
    folds: int = FOLDS,
    hashed: Hashed | None = None,
) -> Detection:
    """The classifier test of the pairs (``first[i]``, ``second[i]``) of group ``groups[i]`` (their
    source conversation): the AUC of telling the second sample from the first, out of fold, its
    cluster-bootstrap interval and its permutation p (module docstring). Randomness is drawn by
    ``inference.rng_for(seed, "detectability", *what)``; ``hashed``: the counts of texts already
    seen (the same features either way)."""
    inference.check_params(resamples=resamples, min_n=min_n)
    if permutations < 0:
        raise ValueError(f"permutations must be 0 or more, not {permutations}")
    n, k = len(first), len(set(groups))
    if len(second) != n or len(groups) != n:
        raise ValueError("first, second and groups must have one entry per pair")
    if n < min_n:
        return Detection(n, k, note=f"{n} pair(s), fewer than {min_n}: no AUC")
    if k < min_groups:
        return Detection(n, k, note=f"{n} pairs from {k} source conversation(s), fewer than {min_groups}: no AUC")
    from cocoeval.core.speed import one_blas_thread

    x = features([*first, *second], hashed)
    labels = np.repeat([0, 1], n)
    group = np.array([*groups, *groups])
    n_folds = min(folds, k)
    split = group_folds(group, n_folds)
    # the observed labels, then each permutation's: an instance's two labels swapped with probability ½
    swaps = inference.rng_for(seed, "detectability permutations", *what).integers(0, 2, size=(n, permutations))
    y = np.hstack([labels[:, None], labels[:, None] ^ np.vstack([swaps, swaps])])
    scores = out_of_fold(x, 2.0 * y - 1.0, split)
    every = aucs(scores, y)
    point = float(every[0])
    with one_blas_thread():  # the bootstraps' products on one thread (exact sums: the same on any number)
        boot = cluster_bootstrap(
            scores[:, 0], labels, group, resamples, inference.rng_for(seed, "detectability", *what)
        )
        extra = model_variance(scores[:, 1:], y[:, 1:], group, seed, what, every[1:])
    lo, hi = widened(point, boot, extra, k)
    reached = int((every[1:] >= point - 1e-12).sum())
    return Detection(
        n,
        k,
        auc=point,
        ci_low=float(lo),
        ci_high=float(hi),
        p=(1 + reached) / (1 + permutations) if permutations else None,
        folds=n_folds,
        permutations=permutations,
        scores=scores[:, 0],
        labels=labels,
        groups=group,
    )


def _window_order(inst: Instance) -> tuple[int, str]:
    return (inst.provenance.start_index, inst.id)


def floor_pairs(
    instances: Sequence[Instance], seed: int, min_groups: int = MIN_CONVERSATIONS, *, refs: dict[str, str] | None = None
) -> tuple[list[str], list[str], list[str], str]:
    """The floor's pairs of human references (first, second, group, comparison): other windows of
    the same conversations (``WITHIN``) when at least ``min_groups`` conversations have two
    windows, else each conversation's first window against another conversation's of the same
    dataset (``ACROSS``). Each pair's order is drawn at random, seeded by what it is of. ``refs``:
    each instance's reference document when already made."""
    by_conv: dict[str, list[Instance]] = {}
    for inst in instances:
        by_conv.setdefault(conversation_of(inst), []).append(inst)
    ref = refs if refs is not None else {i.id: _doc(i, i.reference, reference_target(i).judged) for i in instances}
    pairs: list[tuple[str, str, str]] = []
    for conv in sorted(by_conv):
        ws = sorted(by_conv[conv], key=_window_order)
        pairs += [(ws[j].id, ws[j + 1].id, conv) for j in range(0, len(ws) - 1, 2)]
    comparison = WITHIN
    if len({g for _, _, g in pairs}) < min_groups:
        comparison, pairs = ACROSS, []
        by_ds: dict[str, list[str]] = {}
        for conv in sorted(by_conv):
            by_ds.setdefault(by_conv[conv][0].dataset, []).append(conv)
        for ds, convs in sorted(by_ds.items()):
            order = inference.rng_for(seed, "detectability floor", ds).permutation(len(convs))
            cs = [convs[o] for o in order]
            for j in range(0, len(cs) - 1, 2):
                a, b = (min(by_conv[c], key=_window_order).id for c in (cs[j], cs[j + 1]))
                pairs.append((a, b, f"{cs[j]} + {cs[j + 1]}"))
    first, second, groups = [], [], []
    for a, b, g in pairs:
        if inference.rng_for(seed, "detectability floor order", g, a).integers(0, 2):
            a, b = b, a
        first.append(ref[a])
        second.append(ref[b])
        groups.append(g)
    return first, second, groups, comparison


def _row(target: str, comparison: str, d: Detection, **extra: Any) -> dict[str, Any]:
    return {
        "target": target,
        "comparison": comparison,
        "n": d.n,
        "conversations": d.conversations,
        "auc": d.auc,
        "ci_low": d.ci_low,
        "ci_high": d.ci_high,
        "ci_note": d.note,
        "p": d.p,
        "permutations": d.permutations if d.auc is not None else None,
        "folds": d.folds if d.auc is not None else None,
        **extra,
    }


@derived_frame("detectability", SCHEMA, lazy=True)
def detectability(
    run: RunLike,
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    permutations: int = PERMUTATIONS,
) -> pl.DataFrame:
    """One row per comparison (``SCHEMA``): the floor first, then every setup with continuations (the
    manifest's order, then any other): the classifier test of its ok continuations against the
    human references of the same instances, and how many of its continuations were ok. Once per
    run and settings in a process (the leaderboard and this analysis share it); the table of the
    default settings, a pure function of the run's texts, is kept with the run's frames
    (``store.derived_frame``), so that the first report after the run reads it instead of fitting
    some 4,000 classifiers again."""
    return _detectability(run, resamples=resamples, seed=seed, min_n=min_n, permutations=permutations)


def _detectability(run: RunLike, *, resamples: int, seed: int, min_n: int, permutations: int) -> pl.DataFrame:
    kw: dict[str, Any] = {
        "seed": seed,
        "resamples": resamples,
        "permutations": permutations,
        "min_n": min_n,
        "hashed": Hashed(),  # each reference counted once for every setup
    }
    insts = {i.id: i for i in run.instances}
    refs = {i.id: _doc(i, i.reference, reference_target(i).judged) for i in insts.values()}  # once for every setup
    first, second, groups, comparison = floor_pairs(list(insts.values()), seed, refs=refs)
    fl = two_sample_test(first, second, groups, what=(FLOOR, comparison), **kw)
    rows = [_row(FLOOR, comparison, fl)]
    docs = document_frame(run)  # the continuations' documents, kept with the run's frames: no record read
    conts = docs["setup"].unique(maintain_order=True).to_list()
    named = [s.name for s in run.manifest.setup_params if s.name in conts]
    for name in [*named, *sorted(set(conts) - set(named))]:
        current = docs.filter((pl.col("setup") == name) & (pl.col("status") != STALE))
        ok = current.filter(pl.col("status") == COMPARED).sort("instance_id", maintain_order=True)
        ref_docs = [refs[i] for i in ok["instance_id"]]
        d = two_sample_test(ref_docs, ok["document"].to_list(), ok["conversation"].to_list(), what=(name,), **kw)
        invalid = current.height - ok.height
        rows.append(
            _row(
                name,
                VS_HUMANS,
                d,
                continuations_ok=ok.height,
                continuations=current.height,
                note=f"{invalid} invalid continuation(s) left out" if invalid else None,
            )
        )
    return pl.DataFrame(rows, schema=SCHEMA)


def _tested(r: dict[str, Any]) -> ClassifierTest:
    """A row of the table (``SCHEMA``) as a result."""
    from .judge_free_prose import ClassifierTest

    return ClassifierTest(
        r["target"],
        r["comparison"],
        r["auc"],
        r["ci_low"],
        r["ci_high"],
        r["p"],
        r["n"],
        r["conversations"],
        r["ci_note"],
        continuations_ok=r["continuations_ok"],
        continuations=r["continuations"],
    )


def answer(run: RunLike, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N) -> Answer:
    """The classifier test of every setup and the floor: table ``detectability``, its chart, the text
    (rendered from ``judge_free_prose.DetectabilityResult``)."""
    from . import charts
    from .answer import Answer
    from .judge_free_prose import DetectabilityResult, render_detectability
    from .rq_prose import Intervals

    a = Answer(
        "Can a classifier tell each setup's continuations from the humans' on the same instances, with no judge? "
        "(beyond the paper)",
        judge_based=False,
    )
    x = DetectabilityResult(Intervals(resamples, seed, min_n), FOLDS, PERMUTATIONS, MIN_CONVERSATIONS)
    if run.instances:
        t = detectability(run, resamples=resamples, seed=seed, min_n=min_n)
        a.tables["detectability"] = t
        rows = [_tested(r) for r in t.iter_rows(named=True)]
        x = replace(x, floor=rows[0], setups=tuple(rows[1:]))
        if t["auc"].is_not_null().any():
            a.charts["detectability"] = charts.detectability_chart(t)
    a.text, a.result = render_detectability(x), x
    return a
