"""A judge you can check (beyond the paper): turn-level agreement per behaviour, a validation gate
that fails closed, and behaviour rates corrected with the human labels.

The paper validates its judge once, with the leave-one-out Spearman ρ per behaviour over
conversations (``agreement``; kept exactly as it is). Added here, all labelled "beyond the paper":

- **Every label used** (``turn_labels``): a conversation counts when the judge and at least one
  annotator labelled it validly, with the annotators who did; the annotators' majority of a turn
  is strictly more than half of those who labelled it (``majority``).
- **Turn-level agreement** (``turn_agreement``): per behaviour and for "any behaviour",
  Krippendorff's α (nominal) among the annotators and with the judge added (the ``krippendorff``
  package for the values; its closed form for binary labels with missing values, the same
  numbers, for the bootstrap), Cohen's κ of the judge against each annotator on that annotator's
  turns (their mean), and the judge's precision, recall and F1 against the majority. Each with a
  95% percentile bootstrap interval over conversations (or the reason it has none) and the
  positive turns it rests on. Likert scores: ordinal α over conversations (``likert_agreement``).
- **The validation gate** (``validation``): per behaviour with at least ``MIN_CONVERSATIONS``
  conversations and ``MIN_POSITIVE_TURNS`` positive turns by the majority, Spearman ρ of the
  judge's count per conversation against the annotators' mean count, a one-sided permutation
  test (exact level), Holm-corrected over the behaviours tested; validated when the Holm p ≤ α,
  with the judge's current id (model, prompt version, taxonomy: judgments made under another id
  are stale and never used). The other behaviours are "too rare to validate here" or "too few
  conversations", never passed. Every behaviour rate of this judge is shown with the line
  ``not_validated_line`` names; with no annotations it says how to annotate.
- **Corrected rates** (``corrected_rates``): where the annotated conversations of a target are a
  random draw from the conversations the judge labelled (``cocoeval annotate-export --random``
  records the draw), the power-tuned prediction-powered estimate (PPI++, ``ppi-python`` with
  ``lam=None``; t-corrected; no interval below ``MIN_LABELLED`` labels) of the mean occurrences
  per conversation, beside the judge-only and the humans-only estimates, and whether the judge-only
  mean lies outside the corrected interval. Rates are shown clipped at 0, the raw value kept. The
  assumption is stated in every output: the annotated subset is a random draw from the same
  targets.

Every bootstrap or permutation draws from its own generator (``inference.rng_for``): the run's
seed and what it is of. Coverage, level and power on worlds with known truth:
``benchmarks/known_truth.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl

from . import agreement
from .frames import Frames
from .inference import ALPHA, MIN_N, adjust_pvalues, check_params, rng_for, too_small

if TYPE_CHECKING:
    from .judge_check_prose import CorrectedSummary, Estimate, GateSummary, JudgeProbes, StaleJudge
    from .store import RunLike

BEYOND = "beyond the paper"
ANY = "any behaviour"
MIN_CONVERSATIONS = 30
"""Annotated conversations a behaviour's agreement must rest on before the judge is validated for it
(the paper's fine-grained validation used 36)."""
MIN_POSITIVE_TURNS = 11
"""Turns the annotators' majority marked with a behaviour before the gate tests it: the paper reads
only behaviours "that occur more than 10 times"; below it a ρ rests on a handful of turns and the
behaviour is "too rare to validate here", neither passed nor failed."""
VALID = ("ok", "repaired")
ASSUMPTION = (
    "assumes the annotated conversations of each target are a random draw from the conversations the judge labelled"
)
ASSUMPTION_ACTIVE = (
    "assumes the annotated conversations of each target were drawn with the recorded probabilities "
    "(annotate-export --random, annotate-next) from the conversations the judge labelled"
)
HOW_TO_ANNOTATE = (
    "annotate conversations to validate it: cocoeval annotate-export RUN --out DIR, annotate "
    "template.csv, cocoeval annotate-import FILE RUN --key DIR/key.json (docs/judging.md: "
    "Validating a judge)"
)

TURN_SCHEMA = {
    "judge": pl.Utf8,
    "behaviour": pl.Utf8,
    "annotators": pl.Int64,
    "conversations": pl.Int64,
    "turns": pl.Int64,
    "positive_turns_humans": pl.Int64,
    "positive_turns_judge": pl.Int64,
    "alpha_humans": pl.Float64,
    "alpha_humans_low": pl.Float64,
    "alpha_humans_high": pl.Float64,
    "alpha_with_judge": pl.Float64,
    "alpha_with_judge_low": pl.Float64,
    "alpha_with_judge_high": pl.Float64,
    "kappa": pl.Float64,
    "kappa_low": pl.Float64,
    "kappa_high": pl.Float64,
    "precision": pl.Float64,
    "precision_low": pl.Float64,
    "precision_high": pl.Float64,
    "recall": pl.Float64,
    "recall_low": pl.Float64,
    "recall_high": pl.Float64,
    "f1": pl.Float64,
    "f1_low": pl.Float64,
    "f1_high": pl.Float64,
    "note": pl.Utf8,
}
LIKERT_SCHEMA = {
    "judge": pl.Utf8,
    "item": pl.Utf8,
    "annotators": pl.Int64,
    "conversations": pl.Int64,
    "alpha_humans": pl.Float64,
    "alpha_humans_low": pl.Float64,
    "alpha_humans_high": pl.Float64,
    "alpha_with_judge": pl.Float64,
    "alpha_with_judge_low": pl.Float64,
    "alpha_with_judge_high": pl.Float64,
    "note": pl.Utf8,
}
GATE_SCHEMA = {
    "judge": pl.Utf8,
    "judge_id": pl.Utf8,
    "behaviour": pl.Utf8,
    "validated": pl.Boolean,
    "status": pl.Utf8,
    "conversations": pl.Int64,
    "positive_turns": pl.Int64,
    "rho": pl.Float64,
    "p": pl.Float64,
    "p_holm": pl.Float64,
    "why": pl.Utf8,
}
VALIDATED, NOT_VALIDATED, TOO_RARE, TOO_FEW, NO_ANNOTATIONS = (
    "validated",
    "not validated",
    "too rare to validate here",
    "too few conversations",
    "no annotations",
)
PPI_SCHEMA = {
    "judge": pl.Utf8,
    "target": pl.Utf8,
    "behaviour": pl.Utf8,
    "n_labelled": pl.Int64,
    "n_labels": pl.Int64,
    "n_unlabelled": pl.Int64,
    "judge_only": pl.Float64,
    "judge_only_low": pl.Float64,
    "judge_only_high": pl.Float64,
    "humans_only": pl.Float64,
    "humans_only_low": pl.Float64,
    "humans_only_high": pl.Float64,
    "corrected": pl.Float64,
    "corrected_low": pl.Float64,
    "corrected_high": pl.Float64,
    "corrected_raw": pl.Float64,
    "disagree": pl.Boolean,
    "draw": pl.Utf8,
    "note": pl.Utf8,
}


# ---------------------------------------------------------------- turn-level label matrices


@dataclass(frozen=True)
class TurnLabels:
    """The judged turns of the conversations the first rater (the judge) and at least one other
    rater (an annotator) labelled validly: ``conv`` (T,) the conversation index of each turn,
    ``x[rater]`` (T, B) booleans, ``present[rater]`` (T,) whether that rater labelled the turn's
    conversation validly (every rater's labels are used where they exist: two annotators who split
    the conversations count both), ``behaviours`` the B ids, ``conversations`` the (target,
    instance_id) pairs, ``labels_used`` the annotator labellings used, ``notes`` what was left out
    and why."""

    raters: list[str]
    behaviours: list[str]
    conversations: list[tuple[str, str]]
    conv: np.ndarray
    x: dict[str, np.ndarray]
    present: dict[str, np.ndarray]
    labels_used: int
    notes: list[str]


def turn_labels(f: Frames, raters: Sequence[str]) -> TurnLabels:
    beh = list(f.taxonomy.ids)
    first, others = raters[0], list(raters[1:])
    j = f.judgments.filter(
        (pl.col("kind") == "fine_grained") & pl.col("status").is_in(VALID) & pl.col("judge").is_in(list(raters))
    )
    turns: dict[tuple[str, str], dict[str, int]] = {}
    for r in j.iter_rows(named=True):
        turns.setdefault((r["target"], r["instance_id"]), {})[r["judge"]] = r["turns"]
    notes = []
    convs: list[tuple[str, str]] = []
    who: dict[tuple[str, str], list[str]] = {}
    odd = 0
    for key, per in sorted(turns.items()):
        if first not in per:
            continue
        same = [h for h in others if h in per and per[h] == per[first]]
        odd += sum(1 for h in others if h in per and per[h] != per[first])
        if same:
            convs.append(key)
            who[key] = same
    if odd:
        notes.append(f"{odd} annotator labelling(s) of another number of turns than the judge's left out")
    sizes = [turns[c][first] for c in convs]
    conv = np.repeat(np.arange(len(convs)), sizes).astype(np.int64)
    start = dict(zip(convs, np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int) if sizes else [], strict=False))
    col = {b: i for i, b in enumerate(beh)}
    x = {r: np.zeros((len(conv), len(beh)), dtype=bool) for r in raters}
    has = {r: np.array([r == first or r in who[c] for c in convs], dtype=bool) for r in raters}
    present = {r: has[r][conv] if len(conv) else np.zeros(0, dtype=bool) for r in raters}
    lab = f.labels.filter(pl.col("judge").is_in(list(raters)))
    index = {c: k for k, c in enumerate(convs)}
    for r in lab.iter_rows(named=True):
        key = (r["target"], r["instance_id"])
        at = start.get(key)
        pos = r["position"]
        if at is None or not has[r["judge"]][index[key]] or r["behaviour"] not in col or pos >= turns[key][first]:
            continue
        # by the place among the judged turns, not the turn index: in a chat only the user turns
        # 0, 2, 4, ... are judged, and the conversation has as many rows as judged turns
        x[r["judge"]][at + pos, col[r["behaviour"]]] = True
    return TurnLabels(list(raters), beh, convs, conv, x, present, sum(len(v) for v in who.values()), notes)


def _weights(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(1 + resamples, n) how often each conversation is drawn: row 0 the sample itself."""
    idx = rng.integers(0, n, size=(resamples, n))
    w = np.zeros((resamples + 1, n))
    w[0] = 1
    for r in range(resamples):
        w[r + 1] = np.bincount(idx[r], minlength=n)
    return w


def _per_conv(values: np.ndarray, conv: np.ndarray, n: int) -> np.ndarray:
    """Sum of ``values`` (T, ...) per conversation: (n, ...)."""
    out = np.zeros((n, *values.shape[1:]))
    np.add.at(out, conv, values)
    return out


def binary_alpha(o01: np.ndarray, n0: np.ndarray, n1: np.ndarray) -> np.ndarray:
    """Krippendorff's nominal α of binary labels from its sufficient statistics (the disagreeing
    pairs ``o01`` of the coincidence matrix and the value counts ``n0``, ``n1`` over pairable
    units): 1 − (n − 1)·o01 / (n0·n1); NaN when every value is the same (no variation)."""
    n = n0 + n1
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n0 * n1 > 0, 1 - (n - 1) * o01 / (n0 * n1), np.nan)


def _alpha_stats(stack: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(T, B, 3) per turn and behaviour: o01, n0, n1 of the raters stacked on axis 0 (m, T, B) that
    labelled the turn (``mask`` (m, T)); a turn with fewer than two such raters is not pairable
    and adds nothing (Krippendorff's rule for missing values)."""
    m = mask.sum(axis=0).astype(float)[:, None]  # (T, 1) raters of each turn
    k = (stack & mask[..., None]).sum(axis=0).astype(float)
    pair = m >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        o01 = np.where(pair, k * (m - k) / np.where(pair, m - 1, 1), 0.0)
    return np.stack([o01, np.where(pair, m - k, 0.0), np.where(pair, k, 0.0)], axis=-1)


def _interval(v: np.ndarray, note: str | None) -> tuple[float | None, float | None, float | None, str | None]:
    """(value, 2.5th, 97.5th percentile, why there is no interval) of row 0 and the resamples;
    None where undefined, with the reason (the value the same in every resample, as a perfect
    agreement or a recall of 1 is; undefined in most resamples)."""
    point = None if not np.isfinite(v[0]) else float(v[0])
    boot = v[1:][np.isfinite(v[1:])]
    if note:
        return point, None, None, note
    if point is None:
        return None, None, None, "undefined"
    if boot.size < max(2, len(v[1:]) // 2):
        return point, None, None, f"undefined in {len(v) - 1 - boot.size} of {len(v) - 1} resamples"
    if np.all(boot == boot[0]):
        return point, None, None, f"no interval: {boot[0]:.2f} in every resample"
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return point, float(lo), float(hi), None


def turn_agreement(f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N) -> pl.DataFrame:
    """Turn-level agreement of ``judge`` with the annotators, per behaviour and for any behaviour
    (see the module's text). Empty when the run has no annotator besides the judge."""
    check_params(resamples=resamples, min_n=min_n)
    humans = [h for h in agreement.annotators(f, "counts") if h != judge]
    if not humans:
        return pl.DataFrame(schema=TURN_SCHEMA)
    tl = turn_labels(f, [judge, *humans])
    n = len(tl.conversations)
    names = [*tl.behaviours, ANY]
    note = too_small(n, min_n)
    base = {"judge": judge, "annotators": len(humans), "conversations": n}
    if n == 0:
        why = "; ".join([f"no conversation labelled validly by {judge} and at least one annotator", *tl.notes])
        return pl.DataFrame([{**base, "behaviour": b, "turns": 0, "note": why} for b in names], schema=TURN_SCHEMA)

    def with_any(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a, a.any(axis=1, keepdims=True)], axis=1)

    t = len(tl.conv)
    xj = with_any(tl.x[judge])
    xh = np.stack([with_any(tl.x[h]) for h in humans])  # (m, T, B + 1)
    mh = np.stack([tl.present[h] for h in humans])  # (m, T): who labelled each turn's conversation
    w = _weights(n, resamples, rng_for(seed, "turn_agreement", judge))
    out: dict[str, np.ndarray] = {}
    if len(humans) >= 2:
        s = w @ _per_conv(_alpha_stats(xh, mh).reshape(t, -1), tl.conv, n)
        s = s.reshape(len(w), len(names), 3)
        out["alpha_humans"] = binary_alpha(s[..., 0], s[..., 1], s[..., 2])
    both, mboth = np.concatenate([xh, xj[None]]), np.concatenate([mh, np.ones((1, t), dtype=bool)])
    s = w @ _per_conv(_alpha_stats(both, mboth).reshape(t, -1), tl.conv, n)
    s = s.reshape(len(w), len(names), 3)
    out["alpha_with_judge"] = binary_alpha(s[..., 0], s[..., 1], s[..., 2])
    kappas = []
    for h in range(len(humans)):
        a, b, on = xj, xh[h], mh[h][:, None]
        cells = (np.stack([a & b, a & ~b, ~a & b, ~a & ~b], axis=-1) & on[..., None]).reshape(t, -1).astype(float)
        c = (w @ _per_conv(cells, tl.conv, n)).reshape(len(w), len(names), 4)
        tot = c.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            po = (c[..., 0] + c[..., 3]) / tot
            pe = (
                (c[..., 0] + c[..., 1]) * (c[..., 0] + c[..., 2]) + (c[..., 2] + c[..., 3]) * (c[..., 1] + c[..., 3])
            ) / tot**2
            kappas.append(np.where((tot > 0) & (pe < 1), (po - pe) / (1 - pe), np.nan))
    with warnings.catch_warnings():  # a resample where no annotator's κ is defined: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        out["kappa"] = np.nanmean(kappas, axis=0)
    major = majority(xh, mh)
    cells = np.stack([xj & major, xj & ~major, ~xj & major], axis=-1).reshape(t, -1).astype(float)
    c = (w @ _per_conv(cells, tl.conv, n)).reshape(len(w), len(names), 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(c[..., 0] + c[..., 1] > 0, c[..., 0] / (c[..., 0] + c[..., 1]), np.nan)
        r = np.where(c[..., 0] + c[..., 2] > 0, c[..., 0] / (c[..., 0] + c[..., 2]), np.nan)
        out["precision"], out["recall"] = p, r
        out["f1"] = np.where(
            2 * c[..., 0] + c[..., 1] + c[..., 2] > 0, 2 * c[..., 0] / (2 * c[..., 0] + c[..., 1] + c[..., 2]), np.nan
        )
    # the point values of α from the krippendorff package (the closed form above is its binary case)
    hx = np.where(mh[..., None], xh.astype(float), np.nan)  # (m, T, B + 1), NaN where not labelled
    if len(humans) >= 2:
        out["alpha_humans"][0] = [_kripp(hx[:, :, i].T) for i in range(len(names))]
    out["alpha_with_judge"][0] = [
        _kripp(np.concatenate([hx, xj[None].astype(float)])[:, :, i].T) for i in range(len(names))
    ]
    rows = []
    for i, b in enumerate(names):
        row: dict[str, Any] = {
            **base,
            "behaviour": b,
            "turns": t,
            "positive_turns_humans": int(major[:, i].sum()),
            "positive_turns_judge": int(xj[:, i].sum()),
        }
        notes: list[str | None] = [note, *tl.notes]
        for k, v in out.items():
            row[k], row[f"{k}_low"], row[f"{k}_high"], reason = _interval(v[:, i], note)
            if reason and not note and row["positive_turns_humans"] + row["positive_turns_judge"]:
                notes.append(f"{k.replace('_', ' ')}: {reason}")
        if len(humans) < 2:
            notes.append("one annotator: no α among annotators")
        if not row["positive_turns_humans"] and not row["positive_turns_judge"]:
            notes.append("no positive turn: nothing to agree on (α, κ and F1 undefined)")
        row["note"] = "; ".join(filter(None, notes)) or None
        rows.append(row)
    return pl.DataFrame(rows, schema=TURN_SCHEMA)


def majority(xh: np.ndarray, mh: np.ndarray) -> np.ndarray:
    """(T, B) the annotators' majority label: a turn is positive when strictly more than half of
    the annotators who labelled its conversation marked it (one of two is no majority)."""
    k = (xh & mh[..., None]).sum(axis=0)
    return k * 2 > mh.sum(axis=0)[:, None]


def _kripp(units_by_rater: np.ndarray, level: Literal["nominal", "ordinal"] = "nominal") -> float:
    """Krippendorff's α of a (units, raters) matrix (NaN: not labelled) with the ``krippendorff``
    package; NaN when it is undefined (one value only, or no unit labelled by two raters)."""
    import krippendorff

    data = np.asarray(units_by_rater, dtype=float).T
    if np.unique(data[np.isfinite(data)]).size < 2 or not (np.isfinite(data).sum(axis=0) >= 2).any():
        return float("nan")  # one value only, or no unit two raters labelled: undefined
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def likert_agreement(
    f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> pl.DataFrame:
    """Ordinal Krippendorff's α of the Likert scores over the conversations the judge and at least
    one annotator scored validly (each conversation's annotators who scored it; a missing score is
    missing, as Krippendorff's α allows), among the annotators and with ``judge`` added, with 95%
    bootstrap intervals over conversations (each item drawn by its own seed)."""
    check_params(resamples=resamples, min_n=min_n)
    humans = [h for h in agreement.annotators(f, "likert") if h != judge]
    rows = []
    for item in agreement.LIKERT:
        if not humans:
            break
        x = agreement.scores(f, item, [judge, *humans], complete=False)  # (n, 1 + m), NaN where not scored
        n = len(x)
        note = too_small(n, min_n)
        row: dict[str, Any] = {"judge": judge, "item": item, "annotators": len(humans), "conversations": n}
        rng = rng_for(seed, "likert_agreement", judge, item)
        idx = rng.integers(0, n, size=(resamples, n)) if n else np.zeros((0, 0), dtype=int)
        notes = [
            note,
            "one annotator: no α among annotators" if len(humans) < 2 else None,
            "fewer than 2 conversations scored by the judge and an annotator" if n < 2 else None,
        ]
        for key, cols in (("alpha_humans", x[:, 1:]), ("alpha_with_judge", x)):
            if (key == "alpha_humans" and len(humans) < 2) or n < 2:
                row[key] = None
                continue
            v = np.array([_kripp(cols, "ordinal")] + [_kripp(cols[i], "ordinal") for i in idx])
            row[key], row[f"{key}_low"], row[f"{key}_high"], why = _interval(v, note)
            if why and not note:
                notes.append(f"{key.replace('_', ' ')}: {why}")
        row["note"] = "; ".join(filter(None, notes))
        rows.append(row)
    return pl.DataFrame(rows, schema=LIKERT_SCHEMA)


# ---------------------------------------------------------------- the validation gate


def judge_id(run: RunLike | None, judge: str) -> str | None:
    """The judge's current fine-grained id (model, prompt version, taxonomy), as the manifest gives it."""
    if run is None:
        return None
    return (run.manifest.judges.get(judge) or {}).get("fine_grained")


def spearman_permutation(
    judge: np.ndarray, humans: np.ndarray, permutations: int, rng: np.random.Generator
) -> tuple[float | None, float | None]:
    """Spearman ρ of the judge's per-conversation counts ``judge`` (n,) against the annotators'
    mean ``humans`` (n,), and the one-sided permutation p-value of ρ > 0: the judge's counts
    shuffled over the conversations ``permutations`` times, p = (1 + #{ρ* ≥ ρ}) / (1 +
    permutations), valid at any n and with ties (under no agreement every shuffle is as likely as
    the sample's order). (None, None) when ρ is undefined (constant counts)."""
    from scipy.stats import rankdata

    rj, rh = rankdata(judge), rankdata(humans)
    rj, rh = rj - rj.mean(), rh - rh.mean()
    den = float(np.sqrt((rj @ rj) * (rh @ rh)))
    if den == 0:
        return None, None
    rho = float(rj @ rh) / den
    perm = rng.permuted(np.broadcast_to(rj, (permutations, len(rj))), axis=1)
    hits = int(np.sum(perm @ rh / den >= rho - 1e-12))
    return rho, (1 + hits) / (1 + permutations)


GATE_PERMUTATIONS = 1999
"""Shuffles of the gate's permutation test: the smallest p is 1/2000, far below Holm's first
threshold over ten behaviours (0.005)."""


def validation(
    f: Frames,
    judge: str,
    run: RunLike | None = None,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
    min_conversations: int = MIN_CONVERSATIONS,
    min_positive: int = MIN_POSITIVE_TURNS,
    permutations: int = GATE_PERMUTATIONS,
    alpha: float = ALPHA,
) -> pl.DataFrame:
    """Per behaviour: whether ``judge`` is validated for it (see the module's text), its status,
    on how many annotated conversations and positive turns, with ρ, its permutation p and the Holm
    p over the behaviours tested, and why not. ``resamples`` and ``min_n`` are not used (the
    gate tests by permutation); they are accepted so every analysis is called alike."""
    check_params(resamples=resamples, min_n=min_n)
    jid = judge_id(run, judge)
    humans = [h for h in agreement.annotators(f, "counts") if h != judge]
    base = {"judge": judge, "judge_id": jid}
    if not humans:
        return pl.DataFrame(
            [
                {
                    **base,
                    "behaviour": b,
                    "validated": False,
                    "status": NO_ANNOTATIONS,
                    "conversations": 0,
                    "positive_turns": 0,
                    "why": "no annotations: " + HOW_TO_ANNOTATE,
                }
                for b in f.taxonomy.ids
            ],
            schema=GATE_SCHEMA,
        )
    rows = gate_rows(
        turn_labels(f, [judge, *humans]),
        base,
        seed,
        min_conversations=min_conversations,
        min_positive=min_positive,
        permutations=permutations,
        alpha=alpha,
    )
    return pl.DataFrame(rows, schema=GATE_SCHEMA)


def gate_rows(
    tl: TurnLabels,
    base: dict[str, Any],
    seed: int = 0,
    *,
    min_conversations: int = MIN_CONVERSATIONS,
    min_positive: int = MIN_POSITIVE_TURNS,
    permutations: int = GATE_PERMUTATIONS,
    alpha: float = ALPHA,
) -> list[dict[str, Any]]:
    """The gate's rows from the turn labels of the judge (``tl.raters[0]``) and the annotators."""
    judge, humans = tl.raters[0], tl.raters[1:]
    n = len(tl.conversations)
    xh = np.stack([tl.x[h] for h in humans])
    mh = np.stack([tl.present[h] for h in humans])
    major = majority(xh, mh)
    jc_ = _per_conv(tl.x[judge].astype(float), tl.conv, n)  # (n, B) the judge's count per conversation
    hsum = _per_conv((xh & mh[..., None]).sum(axis=0).astype(float), tl.conv, n)
    turns = np.bincount(tl.conv, minlength=n).astype(float)
    raters = _per_conv(mh.sum(axis=0).astype(float), tl.conv, n) / np.maximum(turns, 1)
    hmean = hsum / np.maximum(raters, 1)[:, None]  # the mean count over the conversation's annotators
    rows: list[dict[str, Any]] = []
    for i, b in enumerate(tl.behaviours):
        pos = int(major[:, i].sum())
        row: dict[str, Any] = {**base, "behaviour": b, "validated": False, "conversations": n, "positive_turns": pos}
        if n < min_conversations:
            row.update(
                status=TOO_FEW,
                why=f"only {n} annotated conversation(s) labelled by the judge and an "
                f"annotator; the gate asks for {min_conversations}",
            )
        elif pos < min_positive:
            row.update(
                status=TOO_RARE,
                why=f"{pos} positive turn(s) by the annotators' majority; the gate asks for "
                f"{min_positive} (too rare to validate here)",
            )
        else:
            rho, p = spearman_permutation(jc_[:, i], hmean[:, i], permutations, rng_for(seed, "validation", judge, b))
            row.update(rho=rho, p=p)
            if rho is None:
                row.update(status=NOT_VALIDATED, why="no ρ: the judge's or the annotators' counts are constant")
        rows.append(row)
    tested = [r for r in rows if r.get("p") is not None]
    for r, q in zip(tested, adjust_pvalues(np.array([r["p"] for r in tested]), "holm") if tested else [], strict=True):
        r["p_holm"] = float(q)
        if q <= alpha:
            r.update(validated=True, status=VALIDATED, why=None)
        else:
            r.update(
                status=NOT_VALIDATED,
                why=f"the test does not pass (ρ {r['rho']:.2f}, p {r['p']:.4f}, Holm p "
                f"{q:.4f} over the {len(tested)} behaviour(s) tested; α = {alpha:g})",
            )
    if tl.notes:
        for r in rows:
            r["why"] = "; ".join(filter(None, [r.get("why"), *tl.notes]))
    return rows


def gate_summary(gate: pl.DataFrame, name: dict[str, str] | None = None) -> GateSummary:
    """The gate table as what its sentence says: the behaviours (named by ``name``) validated, not
    validated, too rare to validate here; whether any rests on an annotated conversation."""
    from .judge_check_prose import GateSummary

    def names(rows: pl.DataFrame) -> tuple[str, ...]:
        return tuple(name.get(b, b) if name else b for b in rows["behaviour"].to_list())

    bad = gate.filter(~pl.col("validated"))
    return GateSummary(
        judge=gate["judge"][0],
        judge_id=gate["judge_id"][0],
        validated=names(gate.filter(pl.col("validated"))),
        not_validated=names(bad.filter(pl.col("status") != TOO_RARE)),
        too_rare=names(bad.filter(pl.col("status") == TOO_RARE)),
        annotated=bool(gate.filter(pl.col("conversations") > 0).height),
    )


def not_validated_line(gate: pl.DataFrame, name: dict[str, str] | None = None) -> str | None:
    """ "not validated for this judge: …" naming the behaviours the gate does not pass, those too
    rare to validate here apart (None when it passes them all); with no annotations at all it says
    how to annotate (``render_not_validated`` of its ``gate_summary``)."""
    from .judge_check_prose import render_not_validated

    return render_not_validated(gate_summary(gate, name), HOW_TO_ANNOTATE)


# ---------------------------------------------------------------- corrected rates


def random_draws(run: RunLike | None) -> dict[str, set[str]] | None:
    """{target: instance ids} drawn at random for annotation (``annotate-export --random``), or
    None when the run records no such draw."""
    from cocoeval.run.humans import random_draws as recorded

    return recorded(run.path if run is not None else None)


def small_sample_factor(n: int, alpha: float = 0.05) -> float:
    """How much wider a CLT interval over ``n`` labelled conversations is made: Student's t with
    n − 1 degrees of freedom instead of the normal quantile, and the variance with ddof 1 instead
    of ppi-python's ddof 0. Counts per conversation are skewed; without it the intervals cover
    0.86 at 12 labels and 0.92 at 40 (benchmarks/known_truth.py)."""
    from scipy.stats import norm, t

    return float(t.ppf(1 - alpha / 2, n - 1) / norm.ppf(1 - alpha / 2) * np.sqrt(n / (n - 1)))


def ppi_estimate(
    y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray, alpha: float = 0.05
) -> tuple[float, float, float]:
    """The prediction-powered mean of the human labels ``y`` with power tuning (PPI++,
    Angelopoulos, Duchi and Zrnic 2023: λ estimated from the data and clipped to [0, 1], so the
    estimate is never less precise than the humans' own mean, λ = 0, asymptotically) by the
    ``ppi-python`` package (``lam=None``), and its 1 − ``alpha`` interval widened around the
    estimate by ``small_sample_factor``."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # type: ignore[import-untyped]

    # a judge that gives one value everywhere predicts nothing: λ = 0 (the package would divide by 0)
    lam = 0.0 if np.ptp(np.concatenate([yhat, yhat_unlabelled])) == 0 else None
    est = float(np.ravel(ppi_mean_pointestimate(y, yhat, yhat_unlabelled, lam=lam))[0])
    lo, hi = (float(np.ravel(v)[0]) for v in ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=alpha, lam=lam))
    k = small_sample_factor(len(y), alpha)
    return est, est - (est - lo) * k, est + (hi - est) * k


def humans_mean(y: np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """The humans' own mean of ``y`` and its 1 − ``alpha`` Student-t interval (what the corrected
    estimate must beat)."""
    from scipy.stats import t

    m = float(y.mean())
    half = float(t.ppf(1 - alpha / 2, len(y) - 1) * y.std(ddof=1) / np.sqrt(len(y)))
    return m, m - half, m + half


MIN_LABELLED = 40
"""Labelled conversations of a target below which no corrected or humans-only interval is shown
(the documented ``--random 40`` draw reaches it): on skewed counts a CLT interval over fewer
covers the truth under 93% even with the t correction (0.90 at 12, 0.92 at 30;
benchmarks/known_truth.py)."""


def _clip(v: float | None) -> float | None:
    """A rate as shown: occurrences per conversation are never negative."""
    return None if v is None else max(0.0, v)


def corrected_rates(
    f: Frames,
    judge: str,
    run: RunLike | None = None,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
    alpha: float = 0.05,
) -> pl.DataFrame:
    """Per target and behaviour: the judge-only mean occurrences per conversation (95% bootstrap
    interval over its conversations, drawn by its own seed), the humans-only mean over the
    labelled conversations (each the mean count of the annotators who labelled it validly), and
    the prediction-powered estimate (``ppi_estimate``) with its 95% interval. Labelled
    conversations are those of the recorded random draw when there is one (``random_draws``),
    else every annotated conversation, with a note that B.1's draw is not random over targets.
    When every conversation of a target is labelled, the humans' mean is the answer. A rate and
    its interval are shown clipped at 0; the raw estimate is kept (``corrected_raw``) with a note."""
    check_params(resamples=resamples, min_n=min_n)
    humans = [h for h in agreement.annotators(f, "counts") if h != judge]
    if not humans:
        return pl.DataFrame(schema=PPI_SCHEMA)
    from cocoeval.run.humans import recorded_draws

    from .active import ACTIVE, METHOD, design_estimate, rounds_for

    draws = random_draws(run)
    records = recorded_draws(run.path) if run is not None else None
    cluster_of = dict(zip(f.instances["instance_id"], f.instances["conversation"], strict=True))
    c = f.counts
    jc = c.filter(pl.col("judge") == judge)
    hc = (
        c.filter(pl.col("judge").is_in(humans))
        .group_by("target", "instance_id", "behaviour")
        .agg(pl.col("count").mean().alias("human_count"), pl.len().alias("raters"))
    )
    human_ids = {str(t): set(p["instance_id"].to_list()) for (t,), p in hc.group_by("target", maintain_order=True)}
    rows = []
    for (target, b), part in jc.group_by("target", "behaviour", maintain_order=True):
        part = part.join(hc, on=["target", "instance_id", "behaviour"], how="left")
        annotated = part.filter(pl.col("human_count").is_not_null())
        labelled = annotated
        notes = [ASSUMPTION]
        unjudged = len(human_ids.get(str(target), set()) - set(part["instance_id"].to_list()))
        if unjudged:  # never silent: the estimand is the conversations the judge judged validly
            notes.append(
                f"{unjudged} labelled conversation(s) of this target have no valid judgment of this judge "
                "(invalid, stale or skipped) and are left out of every estimate here: judge-only, humans-only "
                "and corrected are rates over the conversations the judge judged validly"
            )
        units = part["instance_id"].to_list()
        rounds = rounds_for(
            records,
            str(target),
            units,
            dict(zip(units, part["dataset"].to_list(), strict=True)),
            set(annotated["instance_id"].to_list()),
        )
        active = any(r.mode == ACTIVE for r in rounds)
        clusters = [cluster_of.get(u, u) for u in units]
        design = active or len(rounds) > 1 or len(set(clusters)) < len(units)
        draw = ("active (recorded)" if active else "random (recorded)") if draws is not None else "not recorded"
        if active:
            notes = [ASSUMPTION_ACTIVE]
        if draws is not None:
            picked = draws.get(str(target), set())
            labelled = annotated.filter(pl.col("instance_id").is_in(list(picked)))
            if labelled.height < annotated.height and design:
                notes.append(
                    f"{annotated.height - labelled.height} annotated conversation(s) outside the recorded draws: "
                    "each counts with its label as a known value in a round that excluded it as labelled before, "
                    "and by λ times the judge's count in a round that could have drawn it (a draw that is not random "
                    "would bias the correction)"
                )
            elif labelled.height < annotated.height:
                notes.append(
                    f"{annotated.height - labelled.height} annotated conversation(s) outside the recorded "
                    "random draw left out (a draw that is not random would bias the correction)"
                )
        else:
            notes.append("no random draw is recorded (annotate-export --random), and B.1's draw is even over datasets")
        unl = part.filter(~pl.col("instance_id").is_in(labelled["instance_id"].to_list()))
        yall = part["count"].to_numpy().astype(float)
        boot = rng_for(seed, "corrected_rates", judge, str(target), b).integers(
            0, len(yall), size=(resamples, len(yall))
        )
        jo, jlo, jhi, _ = _interval(
            np.concatenate([[yall.mean()], yall[boot].mean(axis=1)]), too_small(len(yall), min_n)
        )
        row: dict[str, Any] = {
            "judge": judge,
            "target": target,
            "behaviour": b,
            "n_labelled": labelled.height,
            "n_labels": int(labelled["raters"].sum()) if labelled.height else 0,
            "n_unlabelled": unl.height,
            "judge_only": jo,
            "judge_only_low": jlo,
            "judge_only_high": jhi,
            "draw": draw,
        }
        small = too_small(labelled.height, max(min_n, MIN_LABELLED))
        if labelled.height >= 2:
            y = labelled["human_count"].to_numpy().astype(float)
            h, hlo, hhi = humans_mean(y, alpha)
            row.update(
                humans_only=h, humans_only_low=None if small else _clip(hlo), humans_only_high=None if small else hhi
            )
        if labelled.height < 2:
            notes.append(f"{labelled.height} labelled conversation(s): no correction (it needs 2)")
            raw = lo = hi = None
        elif unl.is_empty():
            notes.append("every conversation of this target is labelled: the humans' mean is the answer")
            raw, lo, hi = h, hlo, hhi
        elif design:
            labels = dict(zip(annotated["instance_id"], annotated["human_count"].cast(pl.Float64), strict=True))
            est = design_estimate(units, clusters, part["count"].to_numpy().astype(float), labels, rounds, alpha)
            raw, lo, hi = est.estimate, est.low, est.high
            notes += [f"estimator: {METHOD}, λ = {est.lam:.2f}, {est.clusters} source conversations", *est.notes]
            if active:
                notes.append("each label weighted by 1/π, its recorded inclusion probability (annotate-next)")
            # the humans' own mean under the same design: λ = 0, weighted by 1/π, clustered
            h0 = design_estimate(units, clusters, part["count"].to_numpy().astype(float), labels, rounds, alpha, 0.0)
            row.update(
                humans_only=h0.estimate,
                humans_only_low=None if small or h0.low is None else _clip(h0.low),
                humans_only_high=None if small else h0.high,
            )
        else:
            y, yhat = labelled["human_count"].to_numpy().astype(float), labelled["count"].to_numpy().astype(float)
            raw, lo, hi = ppi_estimate(y, yhat, unl["count"].to_numpy().astype(float), alpha)
            notes.append("estimator: PPI++ (ppi-python; one random draw, one window per source conversation)")
        if raw is not None:
            if small:
                notes.append(f"labelled: {small}")
                lo = hi = None
            row.update(
                corrected=_clip(raw),
                corrected_raw=raw,
                corrected_low=_clip(lo),
                corrected_high=hi,
                disagree=None if lo is None or hi is None or jo is None else bool(jo < lo or jo > hi),
            )
            if raw < 0 or (lo is not None and lo < 0):
                notes.append(
                    f"clipped at 0 (raw estimate {raw:.3f}"
                    + (f", raw lower end {lo:.3f}" if lo is not None else "")
                    + "): a rate is never negative"
                )
        row["note"] = "; ".join(notes)
        rows.append(row)
    return pl.DataFrame(rows, schema=PPI_SCHEMA).sort("target", "behaviour")


# ---------------------------------------------------------------- the answer, and the marks elsewhere


def corrected_summary(r: pl.DataFrame, names: dict[str, str]) -> CorrectedSummary:
    """The corrected rates as what their clause says: how many have an interval, and those whose
    judge-only mean lies outside it."""
    from .judge_check_prose import CorrectedSummary, Disagreement

    with_ci = r.filter(pl.col("corrected_low").is_not_null() & pl.col("corrected_high").is_not_null())
    off = with_ci.filter(pl.col("disagree").fill_null(False))
    return CorrectedSummary(
        rates=r.height,
        with_interval=with_ci.height,
        disagree=tuple(
            Disagreement(names.get(x["behaviour"], x["behaviour"]), x["target"], x["judge_only"], x["corrected"])
            for x in off.iter_rows(named=True)
        ),
    )


def corrected_line(r: pl.DataFrame, names: dict[str, str]) -> str:
    """What the corrected rates say, in one clause (``render_corrected`` of their
    ``corrected_summary``): where the judge-only mean lies outside the corrected interval, that
    none does among those with an interval, or that none has one."""
    from .judge_check_prose import render_corrected

    return render_corrected(corrected_summary(r, names))


def llm_judges(f: Frames) -> list[str]:
    """The LLM judges with valid judgments, in name order."""
    return sorted(set(f.judgments.filter(~pl.col("human") & pl.col("status").is_in(VALID))["judge"]))


def stale(f: Frames) -> list[StaleJudge]:
    """Each LLM judge whose every judgment is stale (made with other settings than the params give
    now), with the first reason recorded."""
    from .judge_check_prose import StaleJudge

    j = f.judgments.filter(~pl.col("human"))
    out = []
    for (name,), part in j.group_by("judge", maintain_order=True):
        if part.height and (part["status"] == "stale").all():
            why = part["reason"].drop_nulls().unique(maintain_order=True).to_list()
            out.append(StaleJudge(name, part.height, why[0] if why else None))
    return out


def stale_judges(f: Frames) -> list[str]:
    """ "judge J: all N judgments stale (why); …" for each LLM judge whose every judgment is stale
    (made with other settings than the params give now), with how to refresh them."""
    from .judge_check_prose import render_stale

    return [render_stale(s) for s in stale(f)]


def _estimate(row: dict[str, Any], key: str) -> Estimate:
    from .judge_check_prose import Estimate

    return Estimate(row[key], row[f"{key}_low"], row[f"{key}_high"])


def answer(
    run: RunLike,
    f: Frames,
    judge: str | None,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
    probes: dict[str, pl.DataFrame] | None = None,
    probe_findings: Sequence[JudgeProbes] = (),
) -> Any:
    """The judge_check analysis (beyond the paper): per LLM judge (``judge``: only that one) the
    validation gate, turn-level agreement, ordinal α of the Likert scores and corrected rates;
    ``probes``/``probe_findings``: the probes' tables and findings (``analysis.probes``) when
    given. Its text is rendered (``render_judge_check``) from its result, a ``JudgeCheck`` in
    ``Answer.result``."""
    from .answer import Answer
    from .judge_check_prose import AnyAgreement, JudgeAssessment, JudgeCheck, render_judge_check

    a = Answer("Can this judge be trusted, behaviour by behaviour? (beyond the paper)")
    judges = [judge] if judge is not None else llm_judges(f)
    humans = sorted(set(agreement.annotators(f, "counts")) | set(agreement.annotators(f, "likert"))) if judges else []
    names = {b.id: b.name for b in f.taxonomy.behaviours}
    gates, turns, likerts, rates = [], [], [], []
    assessed: list[JudgeAssessment] = []
    for j in judges:
        table = gate(f, j, run, resamples, seed, min_n=min_n)
        gates.append(table)
        agree: AnyAgreement | None = None
        corrected = None
        if humans:
            t = turn_agreement(f, j, resamples, seed, min_n=min_n)
            turns.append(t)
            row = t.filter(pl.col("behaviour") == ANY).row(0, named=True) if not t.is_empty() else None
            if row is not None and row["conversations"]:
                agree = AnyAgreement(
                    row["turns"],
                    row["conversations"],
                    row["positive_turns_humans"],
                    row["positive_turns_judge"],
                    _estimate(row, "alpha_with_judge"),
                    _estimate(row, "kappa"),
                    _estimate(row, "f1"),
                )
            likerts.append(likert_agreement(f, j, resamples, seed, min_n=min_n))
            r = corrected_rates(f, j, run, resamples, seed, min_n=min_n)
            rates.append(r)
            if not r.is_empty():
                corrected = corrected_summary(r, names)
        assessed.append(JudgeAssessment(gate_summary(table, names), agree, corrected))
    x = JudgeCheck(
        resamples=resamples,
        seed=seed,
        min_conversations=MIN_CONVERSATIONS,
        min_positive_turns=MIN_POSITIVE_TURNS,
        judges=tuple(assessed),
        stale=tuple(stale(f)) if not judges else (),
        humans=bool(humans),
        probes=tuple(probe_findings) if judges else (),
        assumption=ASSUMPTION,
        how_to_annotate=HOW_TO_ANNOTATE,
    )
    a.text, a.result = render_judge_check(x), x
    if not judges:
        return a
    a.tables["validation"] = pl.concat(gates)
    for key, parts in (("turn_agreement", turns), ("likert_agreement", likerts), ("corrected_rates", rates)):
        if parts and not all(p.is_empty() for p in parts):
            a.tables[key] = pl.concat(parts)
    for k, v in (probes or {}).items():
        if not v.is_empty():
            a.tables[f"probe_{k}"] = v
    return a


UNMARKED_OUTPUTS = (
    "agreement",
    "inter_human",
    "detection",
    "taxonomy_coverage",
    "judge_validation",
    "turn_agreement",
    "likert_agreement",
    "corrected_rates",
    "probe_",
    "invalid_rates",
)
"""Report outputs about agreement or accounting, not behaviour rates of the judge: never marked."""


_GATES: dict[tuple[Any, ...], tuple[Frames, pl.DataFrame]] = {}


def gate(
    f: Frames, judge: str, run: RunLike | None = None, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> pl.DataFrame:
    """``validation``, computed once per frames, judge and settings (the report and every answer
    that shows the judge's rates ask for it)."""
    key = (id(f), id(run), judge, resamples, seed, min_n)
    hit = _GATES.get(key)
    if hit is not None and hit[0] is f:
        return hit[1]
    table = validation(f, judge, run, resamples, seed, min_n=min_n)
    if len(_GATES) > 16:
        _GATES.clear()
    _GATES[key] = (f, table)
    return table


def gate_note(
    run: RunLike | None, f: Frames, judge: str | None, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> str | None:
    """ "Beyond the paper: not validated for this judge: …" for a behaviour rate shown of ``judge``
    (None: the run's only LLM judge; no mark for a human annotator or when the gate passes every
    behaviour)."""
    if judge is None:
        judges = llm_judges(f)
        judge = judges[0] if len(judges) == 1 else None
    if judge is None or judge not in llm_judges(f):
        return None
    names = {b.id: b.name for b in f.taxonomy.behaviours}
    line = not_validated_line(gate(f, judge, run, resamples, seed, min_n=min_n), names)
    return f"Beyond the paper: {line}." if line else None


def mark_chart(chart: Any, title: str, note: str) -> Any:
    """The chart with ``note`` (the not-validated line) as a subtitle under ``title``."""
    import altair as alt

    return chart.properties(title=alt.TitleParams(text=title, subtitle=[note], subtitleColor="#b30000"))
