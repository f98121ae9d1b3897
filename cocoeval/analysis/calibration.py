"""A judge's reliability, tracked (beyond the paper): vote fractions of a judge's samples, their
calibration against the annotators' majority, and a history of its agreement across runs.

- **Votes** (``judge_votes``): for a judge with ``samples: k`` (``JudgeConfig.samples``), per
  judged turn and behaviour the share of its valid samples that label it (``fraction``), beside
  the judgment's own label (the samples' strict majority). A judge with one sample votes 0 or 1.
- **Calibration** (``calibration``): over the turns of the conversations the judge and at least
  one annotator labelled (``judge_check.turn_labels``, the same turns and the same annotators'
  majority as the turn-level agreement: strictly more than half of those who labelled the turn),
  the vote fraction p of each turn and behaviour against the majority's label y: the **Brier
  score** mean((p − y)²) and the **expected calibration error** Σ_b n_b/N |mean(y_b) − mean(p_b)|
  over ``BINS`` equal-width bins of p ([0, 0.1), …, [0.9, 1.0]), per behaviour and pooled over
  the behaviours; the **reliability diagram** (``reliability_chart``) plots mean(y_b) against
  mean(p_b) per bin. A calibrated judge's fraction 0.7 is a turn the annotators mark 70% of the
  time; an overconfident one's fractions sit near 0 and 1 whatever the turn.
- **History** (``record_history``, ``history_table``): each time agreement is computed for an LLM
  judge, one line is appended to ``judge_history.jsonl`` *beside the run directory* (in its parent
  folder, so runs kept side by side share one history; ``history_path``) unless its latest line of
  the same judge id and run holds the same numbers: judge name and id, prompt version, samples,
  run, date, annotators and conversations, and α (with the judge), κ and F1 per behaviour and for
  any behaviour, with the pooled ECE and Brier score, and a digest of the labelled conversations
  and annotators (``design``); the run is named relative to the history's folder. The file is
  written only when it is a regular file (never through a link or into a pipe).
  Each entry also keeps, per labelled conversation, the additive sufficient statistics of its
  measures (``conversation_stats``, ``per_conversation``: α's binary coincidence counts, κ's 2×2
  counts per annotator, F1's TP/FP/FN against the majority, the ECE's bins and the Brier score's
  squared error), so that any resample of the conversations gives its measures by sums.
  ``history_table`` compares the current entry with the latest earlier-dated one of the same judge
  name under another judge id: on the same labelled conversations and annotators, per measure the
  change with a 95% paired cluster-bootstrap interval (the same source conversations drawn for both
  entries), "rose"/"fell" when it excludes 0, else "no clear change"; an earlier entry without the
  statistics gets the threshold rule ``CHANGE``, labelled so; not comparable when the labelled
  conversations or annotators differ. The interval and the statistics are beyond the paper.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from . import agreement
from .frames import Frames
from .inference import MIN_N, rng_for, too_small

if TYPE_CHECKING:
    import altair as alt

    from cocoeval.core.schema import Judgment

    from .store import RunLike

BEYOND = "beyond the paper"
BINS = 10
"""Equal-width bins of the vote fraction for the ECE and the reliability diagram."""
POOLED = "all behaviours"
ANY = "any behaviour"
HISTORY_FILE = "judge_history.jsonl"
VALID = ("ok", "repaired")
MEASURES = ("alpha_with_judge", "kappa", "f1")
"""The agreement measures of ``judge_check.turn_agreement`` a history entry keeps per behaviour."""

VOTES_SCHEMA = {
    "judge": pl.Utf8,
    "judge_id": pl.Utf8,
    "target": pl.Utf8,
    "instance_id": pl.Utf8,
    "turn": pl.Int64,
    "behaviour": pl.Utf8,
    "votes": pl.Int64,
    "valid_samples": pl.Int64,
    "samples": pl.Int64,
    "fraction": pl.Float64,
    "label": pl.Boolean,
}
SAMPLES_SCHEMA = {
    "judge": pl.Utf8,
    "samples_per_target": pl.Int64,
    "judgments": pl.Int64,
    "samples": pl.Int64,
    "invalid_samples": pl.Int64,
    "reasons": pl.Utf8,
}
CALIBRATION_SCHEMA = {
    "judge": pl.Utf8,
    "behaviour": pl.Utf8,
    "samples": pl.Int64,
    "conversations": pl.Int64,
    "turns": pl.Int64,
    "positive_turns": pl.Int64,
    "mean_fraction": pl.Float64,
    "ece": pl.Float64,
    "brier": pl.Float64,
    "brier_low": pl.Float64,
    "brier_high": pl.Float64,
    "note": pl.Utf8,
}
BINS_SCHEMA = {
    "judge": pl.Utf8,
    "bin": pl.Int64,
    "low": pl.Float64,
    "high": pl.Float64,
    "n": pl.Int64,
    "mean_fraction": pl.Float64,
    "observed": pl.Float64,
}
HISTORY_SCHEMA = {
    "judge": pl.Utf8,
    "behaviour": pl.Utf8,
    "measure": pl.Utf8,
    "previous_id": pl.Utf8,
    "previous_prompt": pl.Utf8,
    "previous_run": pl.Utf8,
    "previous_date": pl.Utf8,
    "previous": pl.Float64,
    "current_id": pl.Utf8,
    "current": pl.Float64,
    "change": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "n_conversations": pl.Int64,
    "direction": pl.Utf8,
    "rule": pl.Utf8,
}


# ----------------------------------------------------------------------------- the pure statistics


def brier(p: np.ndarray, y: np.ndarray) -> float:
    """Mean squared difference of the predicted probabilities ``p`` and the 0/1 outcomes ``y``."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    return float(np.mean((p - y) ** 2)) if len(p) else math.nan


def bin_of(p: np.ndarray, bins: int = BINS) -> np.ndarray:
    """The bin index of each fraction: [0, 1/bins), …, [(bins-1)/bins, 1] (1 in the last)."""
    return np.minimum((np.asarray(p, dtype=float) * bins).astype(int), bins - 1)


def ece(p: np.ndarray, y: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error: Σ over equal-width bins of p of n_b/N |mean(y_b) − mean(p_b)|."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    if not len(p):
        return math.nan
    b = bin_of(p, bins)
    n = np.bincount(b, minlength=bins)
    gap = np.abs(np.bincount(b, weights=y, minlength=bins) - np.bincount(b, weights=p, minlength=bins))
    return float(gap.sum() / n.sum())


def brier_interval(
    p: np.ndarray, y: np.ndarray, conv: np.ndarray, resamples: int, rng: np.random.Generator, alpha: float = 0.05
) -> tuple[float, float]:
    """Percentile bootstrap interval of the Brier score over conversations: ``p``, ``y`` (T, ...)
    per turn, ``conv`` (T,) the conversation of each turn; the conversations are resampled whole."""
    n = int(conv.max()) + 1
    sse = np.zeros(n)
    np.add.at(sse, conv, ((p - y) ** 2).reshape(len(conv), -1).sum(axis=1))
    cnt = np.bincount(conv, minlength=n) * (p.size // max(len(conv), 1))
    w = np.stack([np.bincount(rng.integers(0, n, size=n), minlength=n) for _ in range(resamples)])
    b = (w @ sse) / (w @ cnt)
    lo, hi = np.quantile(b, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def reliability_bins(p: np.ndarray, y: np.ndarray, bins: int = BINS) -> list[tuple[int, int, float, float]]:
    """(bin, n, mean fraction, observed frequency) of each non-empty bin: the reliability diagram."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    b = bin_of(p, bins)
    return [(k, int((b == k).sum()), float(p[b == k].mean()), float(y[b == k].mean())) for k in np.unique(b)]


# ----------------------------------------------------------------------------- votes


def _current(run: RunLike, judge: str) -> list[Judgment]:
    """The judge's fine-grained judgments under its current id (the manifest's; stale ones never)."""
    jid = (run.manifest.judges.get(judge) or {}).get("fine_grained")
    return [j for j in run.judgments.get(judge, []) if j.kind == "fine_grained" and (jid is None or j.judge_id == jid)]


def _votes_of(j: Judgment) -> tuple[dict[tuple[int, str], int], int, int]:
    """({(turn, behaviour): votes}, valid samples, samples) of a valid judgment."""
    parts = j.samples or [j]
    valid = [p for p in parts if p.status in VALID]
    votes: dict[tuple[int, str], int] = {}
    for p in valid:
        for lb in p.labels:
            for b in set(lb.behaviours):
                votes[(lb.turn, b)] = votes.get((lb.turn, b), 0) + 1
    return votes, len(valid), len(parts)


def judge_votes(run: RunLike, judge: str) -> pl.DataFrame:
    """Per valid fine-grained judgment of ``judge``, each turn and behaviour at least one of its
    valid samples labels: the votes, the valid samples, the samples asked, the fraction and whether
    the judgment labels it (the majority). A turn and behaviour not listed has fraction 0."""
    rows = []
    for j in _current(run, judge):
        if j.status not in VALID:
            continue
        votes, valid, k = _votes_of(j)
        on = {(lb.turn, b) for lb in j.labels for b in lb.behaviours}
        for (turn, b), v in sorted(votes.items()):
            rows.append(
                {
                    "judge": judge,
                    "judge_id": j.judge_id,
                    "target": j.target_name or j.target,
                    "instance_id": j.instance_id,
                    "turn": turn,
                    "behaviour": b,
                    "votes": v,
                    "valid_samples": valid,
                    "samples": k,
                    "fraction": v / valid,
                    "label": (turn, b) in on,
                }
            )
    return pl.DataFrame(rows, schema=VOTES_SCHEMA)


@dataclass(frozen=True)
class SampleAccount:
    """How a judge's samples went: judgments (fine-grained, current id), samples asked in all, the
    invalid ones, and their reasons counted."""

    judge: str
    samples_per_target: int
    judgments: int
    samples: int
    invalid: int
    reasons: dict[str, int]


def sample_account(run: RunLike, judge: str) -> SampleAccount:
    """The samples of ``judge``'s current fine-grained judgments, the invalid ones counted by reason."""
    js = _current(run, judge)
    parts = [p for j in js for p in (j.samples or [j])]
    reasons: dict[str, int] = {}
    for p in parts:
        if p.status not in VALID:
            reasons[p.reason or "invalid"] = reasons.get(p.reason or "invalid", 0) + 1
    k = max((len(j.samples or [j]) for j in js), default=1)
    return SampleAccount(judge, k, len(js), len(parts), sum(reasons.values()), reasons)


def _account(run: RunLike, judge: str) -> SampleAccount:
    """``sample_account``, without reading the judgments of a judge the manifest records as asking
    one answer per target (there is nothing to count: its invalid answers are its invalid
    judgments, ``invalid_rates``), so that a report from the kept frames reads no record."""
    recorded = [rj for rj in run.manifest.params.judges or [] if rj.name == judge]
    if recorded and all((rj.samples or 1) == 1 for rj in recorded):
        return SampleAccount(judge, 1, 0, 0, 0, {})
    return sample_account(run, judge)


# ----------------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class Calibration:
    """The calibration of one judge: ``table`` (CALIBRATION_SCHEMA) per behaviour and pooled,
    ``bins`` (BINS_SCHEMA) the pooled reliability diagram, ``p``/``y`` the pooled fractions and
    majority labels (turn × behaviour), ``notes`` what was left out."""

    judge: str
    table: pl.DataFrame
    bins: pl.DataFrame
    p: np.ndarray
    y: np.ndarray
    notes: list[str]
    design: str | None = None
    """A digest of the labelled conversations (target, instance) and the annotators the numbers
    come from (``design_digest``): two history entries with other digests measured other things."""
    row_conversation: tuple[tuple[str, str], ...] = ()
    """The labelled conversation (target, instance) of each judged turn: ``p`` and ``y`` hold one
    such turn's behaviours after another."""


def design_digest(conversations: Sequence[tuple[str, str]], annotators: Sequence[str]) -> str:
    """SHA-256 (16 hex digits) of the sorted labelled conversations and annotators."""
    text = json.dumps([sorted(map(list, conversations)), sorted(annotators)], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def calibration(
    run: RunLike, f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> Calibration | None:
    """The vote fractions of ``judge`` against the annotators' majority on the turns
    ``judge_check.turn_labels`` gives (None: no annotator besides the judge). The Brier score has a
    95% percentile bootstrap interval over source conversations (``resamples``, from ``min_n`` of
    them; the windows and targets cut from one meeting are resampled together); the ECE has none (it is biased upward near 0, where a percentile interval
    would not cover a calibrated judge's 0)."""
    from .judge_check import majority, turn_labels

    humans = [h for h in agreement.annotators(f, "counts") if h != judge]
    if not humans:
        return None
    tl = turn_labels(f, [judge, *humans])
    by = {(j.target_name or j.target, j.instance_id): j for j in _current(run, judge) if j.status in VALID}
    beh = tl.behaviours
    p = np.zeros((len(tl.conv), len(beh)))
    keep = np.ones(len(tl.conv), dtype=bool)
    offset = 0
    k = 1
    missing = 0
    for c, key in enumerate(tl.conversations):
        n = int((tl.conv == c).sum())
        j = by.get(key)
        if j is None:  # no judgment under the current id: left out, never read as fraction 0
            missing += 1
            keep[offset : offset + n] = False
        else:
            votes, valid, ks = _votes_of(j)
            k = max(k, ks)
            # rows are the judged turns in order (a chat judges only its user turns 0, 2, 4, ...)
            place = {lb.turn: i for i, lb in enumerate(j.labels)}
            for (turn, b), v in votes.items():
                at = place.get(turn)
                if at is not None and at < n and b in beh:
                    p[offset + at, beh.index(b)] = v / valid
        offset += n
    xh = np.stack([tl.x[h] for h in humans])
    mh = np.stack([tl.present[h] for h in humans])
    y = majority(xh, mh).astype(float)
    p, y = p[keep], y[keep]
    # the bootstrap's unit: the source conversation (``core.schema.conversation_of``), as for the
    # corrected rates: the windows and targets cut from one meeting are not independent
    source = dict(zip(f.instances["instance_id"].to_list(), f.instances["conversation"].to_list(), strict=True))
    units: dict[str, int] = {}
    unit = np.array(
        [units.setdefault(source.get(iid) or iid, len(units)) for _, iid in tl.conversations], dtype=np.int64
    )
    conv = unit[tl.conv][keep] if len(tl.conv) else np.zeros(0, dtype=np.int64)
    conv = np.unique(conv, return_inverse=True)[1].astype(np.int64) if len(conv) else conv
    n_units = int(conv.max()) + 1 if len(conv) else 0
    n_conv = len(tl.conversations) - missing
    notes = list(tl.notes)
    if missing:
        notes.append(f"{missing} conversation(s) without the judge's judgment under its current id left out")
    rows = []
    base = {"judge": judge, "samples": k, "conversations": n_conv}
    for i, b in [*enumerate(beh), (None, POOLED)]:
        pp = p.ravel() if i is None else p[:, i]
        yy = y.ravel() if i is None else y[:, i]
        note = None if len(pp) else "no annotated turn"
        if k == 1 and len(pp):
            note = "one sample per target: the fractions are 0 or 1"
        lo = hi = None
        small = too_small(n_units, min_n)
        if small and len(pp):
            note = "; ".join(filter(None, [note, f"no interval: {small}"]))
        elif len(pp):
            pc = p if i is None else p[:, [i]]
            yc = y if i is None else y[:, [i]]
            lo, hi = brier_interval(pc, yc, conv, resamples, rng_for(seed, "calibration", judge, b))
        rows.append(
            {
                **base,
                "behaviour": b,
                "turns": len(pp),
                "positive_turns": int(yy.sum()),
                "mean_fraction": float(pp.mean()) if len(pp) else None,
                "ece": ece(pp, yy) if len(pp) else None,
                "brier": brier(pp, yy) if len(pp) else None,
                "brier_low": lo,
                "brier_high": hi,
                "note": note,
            }
        )
    pooled_p, pooled_y = p.ravel(), y.ravel()
    bins = pl.DataFrame(
        [
            {
                "judge": judge,
                "bin": b,
                "low": b / BINS,
                "high": (b + 1) / BINS,
                "n": n,
                "mean_fraction": m,
                "observed": o,
            }
            for b, n, m, o in reliability_bins(pooled_p, pooled_y)
        ],
        schema=BINS_SCHEMA,
    )
    design = design_digest([key for key in tl.conversations if key in by], humans)
    table = pl.DataFrame(rows, schema=CALIBRATION_SCHEMA)
    row_keys = tuple(tl.conversations[c] for c in tl.conv[keep]) if len(tl.conv) else ()
    return Calibration(judge, table, bins, pooled_p, pooled_y, notes, design, row_keys)


def reliability_chart(bins: pl.DataFrame, title: str = "Reliability diagram (beyond the paper)") -> alt.TopLevelMixin:
    """The reliability diagram of ``bins`` (BINS_SCHEMA; several judges coloured): per bin the
    annotators' observed frequency against the judge's mean vote fraction, the point's size its
    turns, the diagonal where a calibrated judge lies."""
    import altair as alt

    diag = (
        alt.Chart(pl.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]}))
        .mark_line(strokeDash=[4, 4], color="grey")
        .encode(x="x:Q", y="y:Q")
    )
    pts = (
        alt.Chart(bins)
        .mark_line(point=True)
        .encode(
            x=alt.X("mean_fraction:Q", title="judge's vote fraction (mean in bin)", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("observed:Q", title="annotators' majority marks it (share)", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("judge:N"),
            size=alt.Size("n:Q", title="turns × behaviours"),
            tooltip=["judge", "low", "high", "n", "mean_fraction", "observed"],
        )
    )
    return alt.layer(diag, pts).properties(title=title, width=320, height=320)


# ----------------------------------------------------------------------------- history


def history_path(run: RunLike, folder: str | Path | None = None) -> Path | None:
    """``judge_history.jsonl`` in ``folder`` (None: the run directory's parent, beside the run);
    None for a run with no directory."""
    if folder is not None:
        return Path(folder) / HISTORY_FILE
    return None if run.path is None else Path(run.path).resolve().parent / HISTORY_FILE


def read_history(path: Path) -> list[dict[str, Any]]:
    """The entries of a history file in order (none when it is missing; a line that is no JSON
    object, e.g. one cut off by a crash, is skipped)."""
    from cocoeval.core.files import special_file

    if path.is_symlink() or special_file(path) is not None or not path.is_file():
        return []  # a link or a pipe at that path is neither read nor followed
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(e, dict) and isinstance(e.get("judge"), str) and isinstance(e.get("measures"), dict):
            out.append(e)
    return out


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 6)


def history_entry(
    run: RunLike,
    judge: str,
    turns: pl.DataFrame,
    cal: Calibration | None,
    date: str | None = None,
    *,
    folder: Path | None = None,
    stats: ConversationStats | None = None,
) -> dict[str, Any] | None:
    """The history entry of ``judge`` from its turn-level agreement ``turns`` (``turn_agreement``)
    and calibration; None when no conversation was labelled by the judge and an annotator. The
    run is recorded relative to the history's ``folder`` (``core.files.portable_path``: never an
    absolute path of this machine; its name alone when it lies elsewhere); ``design`` is the
    calibration's digest of the labelled conversations and annotators; ``per_conversation`` the
    additive statistics ``stats`` (``conversation_stats``) the next judge id's change is
    bootstrapped from (beyond the paper)."""
    from cocoeval.core.files import portable_path

    if turns.is_empty() or not turns["conversations"].fill_null(0).max():
        return None
    measures = {r["behaviour"]: {m: _num(r[m]) for m in MEASURES} for r in turns.iter_rows(named=True)}
    if cal is not None:
        pooled = cal.table.filter(pl.col("behaviour") == POOLED).row(0, named=True)
        measures[POOLED] = {"ece": _num(pooled["ece"]), "brier": _num(pooled["brier"])}
    first = turns.row(0, named=True)
    return {
        "judge": judge,
        "judge_id": (run.manifest.judges.get(judge) or {}).get("fine_grained"),
        "prompt": run.manifest.prompts.get("judge_fine_grained"),
        "samples": cal.table["samples"][0] if cal is not None else 1,
        "run": None if run.path is None else portable_path(run.path, folder or Path(run.path).parent),
        "design": cal.design if cal is not None else None,
        "date": date or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "annotators": int(first["annotators"]),
        "conversations": int(first["conversations"]),
        "measures": measures,
        **({"per_conversation": stats.to_json()} if stats is not None else {}),
    }


def record_history(path: Path, entry: dict[str, Any]) -> bool:
    """Append ``entry`` to the history at ``path`` unless the latest entry of its judge id and run
    holds the same numbers (a report made again adds nothing). True when appended; False too when
    the folder cannot be written, or ``path`` is a link, a named pipe, a device or a socket (the
    history is then not kept, and nothing fails or waits). The line is written by one ``os.write``
    on a file opened for appending, so two reports at once do not interleave their lines."""
    from cocoeval.core.files import special_file

    if path.is_symlink() or special_file(path) is not None or (path.exists() and not path.is_file()):
        return False
    same = [e for e in read_history(path) if (e.get("judge_id"), e.get("run")) == (entry["judge_id"], entry["run"])]
    keys = ("judge", "samples", "annotators", "conversations", "measures", "prompt", "design", "per_conversation")
    if same and all(same[-1].get(k) == entry.get(k) for k in keys):
        return False
    line = (json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # put in place between the check and the open
            return False
        os.write(fd, line)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


# ----------------------------------------------------------------------------- per-conversation statistics

AGREEMENT_LAYOUT = ("o01", "n0", "n1", "tp", "fp", "fn")
"""The first numbers of a conversation's statistics per behaviour: α's binary coincidence counts
(the disagreeing pairs o01 and the pairable values n0, n1 of the annotators with the judge, the
sums ``judge_check.binary_alpha`` takes), then F1's counts of the judge against the annotators'
majority (both mark it, the judge only, the majority only); then per annotator (``annotators``
order) the 2×2 counts of κ in ``KAPPA_CELLS`` order, over the turns that annotator labelled."""
KAPPA_CELLS = ("both", "judge_only", "annotator_only", "neither")
CALIBRATION_LAYOUT = ("squared_error", "cells")
"""A conversation's calibration statistics, pooled over the behaviours: the summed squared error
of the vote fractions, the turn × behaviour cells, then per fraction bin (``BINS``) its cells, its
summed fractions and its majority-marked cells: the ECE and the Brier score of any set of
conversations are functions of their sums."""
MAX_STATS = 1_000_000
"""The most numbers an entry's per-conversation statistics may hold to be read (a bound on what a
hand-edited or damaged history can make the comparison allocate)."""


@dataclass(frozen=True)
class ConversationStats:
    """The additive sufficient statistics of a history entry's measures, per labelled conversation
    (``conversations``, the (target, instance) pairs of ``design_digest``) and behaviour (the
    taxonomy's and ``ANY``): ``agreement`` (n, B, 6 + 4·annotators) in ``AGREEMENT_LAYOUT`` order;
    ``calibration`` (n, 2 + 3·BINS) in ``CALIBRATION_LAYOUT`` order, or None (no calibration).
    ``units`` names each conversation's source conversation, the unit a bootstrap draws (the
    windows cut from one meeting are drawn together)."""

    behaviours: tuple[str, ...]
    annotators: tuple[str, ...]
    conversations: tuple[tuple[str, str], ...]
    units: tuple[str, ...]
    agreement: np.ndarray
    calibration: np.ndarray | None = None

    def to_json(self) -> dict[str, Any]:
        """The entry's ``per_conversation`` field: one row per conversation, exact integers kept
        integers, the rest rounded to 6 decimals."""

        def num(v: float) -> float | int:
            return int(v) if float(v).is_integer() else round(float(v), 6)

        rows = []
        for k, (target, iid) in enumerate(self.conversations):
            row: dict[str, Any] = {
                "target": target,
                "instance_id": iid,
                "unit": self.units[k],
                "agreement": [[num(v) for v in b] for b in self.agreement[k]],
            }
            if self.calibration is not None:
                row["calibration"] = [num(v) for v in self.calibration[k]]
            rows.append(row)
        return {
            "layout": [*AGREEMENT_LAYOUT, *(f"kappa {c}" for c in KAPPA_CELLS)],
            "calibration_layout": [*CALIBRATION_LAYOUT, f"{BINS} bins × (cells, fractions, marked)"],
            "behaviours": list(self.behaviours),
            "annotators": list(self.annotators),
            "conversations": rows,
        }

    @classmethod
    def from_json(cls, d: Any) -> ConversationStats | None:
        """The statistics of an entry's ``per_conversation`` field; None when it is absent or not
        of that shape (an earlier entry, or a damaged line: the comparison then says so)."""
        try:
            beh = tuple(str(b) for b in d["behaviours"])
            ann = tuple(str(a) for a in d["annotators"])
            rows = list(d["conversations"])
            width = len(AGREEMENT_LAYOUT) + len(KAPPA_CELLS) * len(ann)
            if len(rows) * len(beh) * width > MAX_STATS or not rows or not beh:
                return None
            agree = np.array([r["agreement"] for r in rows], dtype=float)
            if agree.shape != (len(rows), len(beh), width) or not np.isfinite(agree).all():
                return None
            cal = None
            if all("calibration" in r for r in rows):
                cal = np.array([r["calibration"] for r in rows], dtype=float)
                if cal.shape != (len(rows), 2 + 3 * BINS) or not np.isfinite(cal).all():
                    cal = None
            keys = tuple((str(r["target"]), str(r["instance_id"])) for r in rows)
            units = tuple(str(r["unit"]) for r in rows)
        except (KeyError, TypeError, ValueError):
            return None
        return cls(beh, ann, keys, units, agree, cal)


def conversation_stats(f: Frames, judge: str, cal: Calibration | None = None) -> ConversationStats | None:
    """The per-conversation statistics of ``judge``'s turn-level agreement with the annotators on
    the turns ``judge_check.turn_labels`` gives (the same turns, annotators and majority as
    ``judge_check.turn_agreement``: summed over all conversations they give its α, κ and F1), and
    of its calibration ``cal`` (the same conversations); None when no conversation was labelled by
    the judge and an annotator."""
    from .judge_check import _alpha_stats, _per_conv, majority, turn_labels

    humans = [h for h in agreement.annotators(f, "counts") if h != judge]
    if not humans:
        return None
    tl = turn_labels(f, [judge, *humans])
    n, t = len(tl.conversations), len(tl.conv)
    if n == 0:
        return None

    def with_any(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a, a.any(axis=1, keepdims=True)], axis=1)

    xj = with_any(tl.x[judge])
    xh = np.stack([with_any(tl.x[h]) for h in humans])  # (m, T, B + 1)
    mh = np.stack([tl.present[h] for h in humans])  # (m, T)
    both, mboth = np.concatenate([xh, xj[None]]), np.concatenate([mh, np.ones((1, t), dtype=bool)])
    major = majority(xh, mh)
    parts = [_alpha_stats(both, mboth), np.stack([xj & major, xj & ~major, ~xj & major], axis=-1).astype(float)]
    for h in range(len(humans)):
        a, b, on = xj, xh[h], mh[h][:, None, None]
        parts.append((np.stack([a & b, a & ~b, ~a & b, ~a & ~b], axis=-1) & on).astype(float))
    cells = np.concatenate(parts, axis=-1)  # (T, B + 1, K)
    agree = _per_conv(cells.reshape(t, -1), tl.conv, n).reshape(n, cells.shape[1], cells.shape[2])
    source = dict(zip(f.instances["instance_id"].to_list(), f.instances["conversation"].to_list(), strict=True))
    units = tuple(source.get(iid) or iid for _, iid in tl.conversations)
    calib = None
    if cal is not None and len(cal.row_conversation) * max(len(tl.behaviours), 1) == len(cal.p):
        index = {key: k for k, key in enumerate(tl.conversations)}
        b = len(tl.behaviours)
        rows = np.array([index.get(key, -1) for key in cal.row_conversation], dtype=np.int64)
        if len(rows) and b and (rows >= 0).all():
            p, y = cal.p.reshape(-1, b), cal.y.reshape(-1, b)
            bins = bin_of(p)  # (T', B)
            per_turn = [((p - y) ** 2).sum(axis=1), np.full(len(p), float(b))]
            for stat in (np.ones_like(p), p, y):
                per_turn.extend((np.where(bins == k, stat, 0.0)).sum(axis=1) for k in range(BINS))
            calib = _per_conv(np.stack(per_turn, axis=1), rows, n)
        elif not len(rows):
            calib = np.zeros((n, 2 + 3 * BINS))
    return ConversationStats((*tl.behaviours, ANY), tuple(humans), tuple(tl.conversations), units, agree, calib)


def agreement_measures(s: np.ndarray, annotators: int) -> dict[str, np.ndarray]:
    """α (with the judge), κ (the mean over the annotators of each one's κ with the judge, over
    the turns it labelled) and F1 from summed agreement statistics ``s`` (..., B, K) in
    ``AGREEMENT_LAYOUT`` order: (..., B) each, NaN where undefined (as ``turn_agreement``)."""
    import warnings

    from .judge_check import binary_alpha

    out = {"alpha_with_judge": binary_alpha(s[..., 0], s[..., 1], s[..., 2])}
    tp, fp, fn = s[..., 3], s[..., 4], s[..., 5]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["f1"] = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
        kappas = []
        for h in range(annotators):
            c = s[..., 6 + 4 * h : 10 + 4 * h]
            tot = c.sum(axis=-1)
            po = (c[..., 0] + c[..., 3]) / tot
            pe = (
                (c[..., 0] + c[..., 1]) * (c[..., 0] + c[..., 2]) + (c[..., 2] + c[..., 3]) * (c[..., 1] + c[..., 3])
            ) / tot**2
            kappas.append(np.where((tot > 0) & (pe < 1), (po - pe) / (1 - pe), np.nan))
    with warnings.catch_warnings():  # no annotator's κ defined: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        out["kappa"] = np.nanmean(kappas, axis=0) if kappas else np.full(s.shape[:-1], np.nan)
    return out


def calibration_measures(s: np.ndarray) -> dict[str, np.ndarray]:
    """The ECE and the Brier score from summed calibration statistics ``s`` (..., 2 + 3·BINS) in
    ``CALIBRATION_LAYOUT`` order: (...) each, NaN with no cell."""
    cells = s[..., 1]
    fp, fy = s[..., 2 + BINS : 2 + 2 * BINS], s[..., 2 + 2 * BINS :]
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "ece": np.where(cells > 0, np.abs(fy - fp).sum(axis=-1) / cells, np.nan),
            "brier": np.where(cells > 0, s[..., 0] / cells, np.nan),
        }


CHANGE = 0.05
"""The threshold rule, kept for an earlier entry without per-conversation statistics: a change of
a history measure (α, κ, F1, ECE, Brier; all on a 0–1 scale) of at least this is called a rise or
a fall, a smaller one "within ±0.05". It is no test: on 5 conversations noise crosses it often, on
300 a real change of 0.03 stays under it (``benchmarks/judge_history.py``)."""
NOT_COMPARABLE = "not comparable: other conversations/annotators"
NO_CLEAR_CHANGE = "no clear change"
TIE = 1e-9
"""An interval end within this of 0 does not exclude it (float noise of two equal measures)."""
BOOTSTRAP_RULE = "95% paired cluster bootstrap over conversations"
THRESHOLD_RULE = "threshold rule: no per-conversation statistics in the {} entry"


@dataclass(frozen=True)
class _Change:
    """The bootstrap of one measure's change: the interval (None: none, ``reason`` says why)."""

    low: float | None
    high: float | None
    reason: str | None


def _change_interval(d: np.ndarray, note: str | None, clusters: int) -> _Change:
    """The 95% interval of a change from its resamples ``d[1:]`` (row 0: the sample's change) over
    ``clusters`` source conversations: ``paired.recentred``, the resamples centred on the sample's
    change and their spread widened by √(C/(C − 1))·t_{C−1}/z (a plain percentile interval of a
    cluster bootstrap is too narrow for few conversations: it called a change in about 10% of
    equal-judge worlds at 10 conversations, ``benchmarks/judge_history.py``). None when ``note``
    says the sample is too small, the change is undefined, or it is undefined in more than half of
    the resamples (a measure with no positive turn in most draws)."""
    from .paired import recentred

    if note:
        return _Change(None, None, note)
    if not np.isfinite(d[0]):
        return _Change(None, None, "the change is undefined")
    boot = d[1:][np.isfinite(d[1:])]
    if boot.size < max(2, (len(d) - 1) // 2):
        return _Change(None, None, f"undefined in {len(d) - 1 - boot.size} of {len(d) - 1} resamples")
    lo, hi = recentred(float(d[0]), boot, clusters)
    return _Change(float(lo), float(hi), None)


def paired_changes(
    cur: ConversationStats, prev: ConversationStats, resamples: int, rng: np.random.Generator, min_n: int = MIN_N
) -> tuple[dict[tuple[str, str], _Change], int] | str:
    """Per (behaviour, measure) the 95% interval of the change from ``prev`` to ``cur`` from
    ``resamples`` draws of the source conversations with replacement, the same draw for both
    entries (paired: the conversations are the same, so their shared difficulty cancels;
    ``_change_interval``), and the
    number of source conversations drawn from; a string saying why not when the two hold other
    conversations or annotators. No interval under ``min_n`` source conversations."""
    from .judge_check import _weights

    if cur.annotators != prev.annotators or set(cur.conversations) != set(prev.conversations):
        return "the per-conversation statistics cover other conversations or annotators"
    at = {key: k for k, key in enumerate(prev.conversations)}
    order = np.array([at[key] for key in cur.conversations], dtype=np.int64)
    names = [b for b in cur.behaviours if b in prev.behaviours]
    ci = [cur.behaviours.index(b) for b in names]
    pi = [prev.behaviours.index(b) for b in names]
    units, unit = np.unique(np.array(cur.units, dtype=object).astype(str), return_inverse=True)
    n = len(units)

    def per_unit(x: np.ndarray) -> np.ndarray:
        out = np.zeros((n, *x.shape[1:]))
        np.add.at(out, unit, x)
        return out

    w = _weights(n, resamples, rng)  # row 0: the sample itself
    note = too_small(n, min_n)
    out: dict[tuple[str, str], _Change] = {}
    a = np.einsum("ru,ubk->rbk", w, per_unit(cur.agreement[:, ci]))
    b = np.einsum("ru,ubk->rbk", w, per_unit(prev.agreement[order][:, pi]))
    ma, mb = agreement_measures(a, len(cur.annotators)), agreement_measures(b, len(prev.annotators))
    for m in ma:
        for i, beh in enumerate(names):
            out[(beh, m)] = _change_interval(ma[m][:, i] - mb[m][:, i], note, n)
    if cur.calibration is not None and prev.calibration is not None:
        ca = calibration_measures(w @ per_unit(cur.calibration))
        cb = calibration_measures(w @ per_unit(prev.calibration[order]))
        for m in ca:
            out[(POOLED, m)] = _change_interval(ca[m] - cb[m], note, n)
    return out, n


def history_table(
    entries: Sequence[dict[str, Any]],
    judge: str,
    current_id: str | None,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
) -> pl.DataFrame:
    """Per behaviour and measure, the latest entry of ``judge`` under ``current_id`` against the
    latest entry of the same judge name under another id dated no later (entries ordered by their
    date, not their place in the file) (beyond the paper). On the same labelled conversations and
    annotators (the same ``design`` digest) the change has a 95% paired cluster-bootstrap interval
    (``paired_changes``, ``resamples`` draws seeded by ``seed`` and the judge): "rose" or "fell"
    when it excludes 0, else "no clear change"; no interval (and no call) under ``min_n`` source
    conversations, the reason given. When either entry predates the per-conversation statistics
    the threshold rule calls it (``CHANGE``), its ``rule`` saying so. ``NOT_COMPARABLE`` when the
    two were measured on other labelled conversations or annotators (their digests differ, or one
    has none). Empty when there is no such pair."""
    mine = sorted((e for e in entries if e.get("judge") == judge), key=lambda e: str(e.get("date") or ""))
    cur_at = max((n for n, e in enumerate(mine) if e.get("judge_id") == current_id), default=None)
    if cur_at is None:
        return pl.DataFrame(schema=HISTORY_SCHEMA)
    cur = mine[cur_at]
    prev = next((e for e in reversed(mine[:cur_at]) if e.get("judge_id") != current_id), None)
    if prev is None:
        return pl.DataFrame(schema=HISTORY_SCHEMA)
    same_design = cur.get("design") is not None and cur.get("design") == prev.get("design")
    changes: dict[tuple[str, str], _Change] = {}
    n_units: int | None = None
    rule: str | None = None
    if same_design:
        sc = ConversationStats.from_json(cur.get("per_conversation"))
        sp = ConversationStats.from_json(prev.get("per_conversation"))
        if sp is None or sc is None:
            rule = THRESHOLD_RULE.format("earlier" if sp is None else "current")
        else:
            got = paired_changes(sc, sp, resamples, rng_for(seed, "judge_history", judge), min_n)
            if isinstance(got, str):
                rule = f"threshold rule: {got}"
            else:
                changes, n_units = got
    rows = []
    for b, ms in cur["measures"].items():
        for m, v in ms.items():
            old = (prev["measures"].get(b) or {}).get(m)
            change = None if v is None or old is None else round(v - old, 6)
            lower_better = m in ("ece", "brier")
            c = changes.get((b, m))
            row_rule = rule
            if change is None:
                direction = "not comparable"
            elif not same_design:
                direction = NOT_COMPARABLE
            elif c is not None:
                row_rule = BOOTSTRAP_RULE
                if c.low is None or c.high is None:
                    direction = f"no interval: {c.reason}"
                elif c.low > TIE or c.high < -TIE:
                    direction = "rose" if c.low > TIE else "fell"
                else:
                    direction = NO_CLEAR_CHANGE
            else:
                row_rule = row_rule or "threshold rule: no per-conversation statistics of this measure"
                direction = f"within ±{CHANGE:g}" if abs(change) < CHANGE else ("rose" if change > 0 else "fell")
            if lower_better and direction in ("rose", "fell"):
                direction += " (lower is better)"
            rows.append(
                {
                    "judge": judge,
                    "behaviour": b,
                    "measure": m,
                    "previous_id": prev.get("judge_id"),
                    "previous_prompt": prev.get("prompt"),
                    "previous_run": prev.get("run"),
                    "previous_date": prev.get("date"),
                    "previous": old,
                    "current_id": current_id,
                    "current": v,
                    "change": change,
                    "ci_low": None if c is None or c.low is None else round(c.low, 6),
                    "ci_high": None if c is None or c.high is None else round(c.high, 6),
                    "n_conversations": n_units if c is not None else None,
                    "direction": direction,
                    "rule": row_rule if change is not None and same_design else None,
                }
            )
    return pl.DataFrame(rows, schema=HISTORY_SCHEMA)


# ----------------------------------------------------------------------------- the analysis


def answer(
    run: RunLike,
    f: Frames,
    judge: str | None,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
    history_folder: str | Path | None = None,
    record: bool = True,
) -> Any:
    """The judge_reliability analysis (beyond the paper): per LLM judge its samples, the
    calibration of its vote fractions against the annotators' majority (tables ``calibration``,
    ``reliability_bins``, ``judge_votes``; chart ``reliability``) and its agreement history
    (``judge_history``), appending the current agreement to the history file unless ``record`` is
    False (``cocoeval report --no-history``: compared, nothing written); ``judge_samples``
    counts a sampled judge's invalid samples with their reasons. Its text is rendered
    (``render_reliability``) from its result, a ``Reliability`` in ``Answer.result``."""
    from .answer import Answer
    from .calibration_prose import (
        History,
        JudgeReliability,
        Move,
        PooledCalibration,
        Reliability,
        Samples,
        render_reliability,
    )
    from .judge_check import llm_judges, turn_agreement

    a = Answer("How reliable is the judge, and is it getting better? (beyond the paper)")
    judges = [judge] if judge is not None else llm_judges(f)
    if not judges:
        a.text, a.result = render_reliability(x := Reliability(BINS, CHANGE, (), False)), x
        return a
    path = history_path(run, history_folder)
    cals, binss, votes, hist = [], [], [], []
    accounts: list[dict[str, Any]] = []
    found: list[JudgeReliability] = []
    for j in judges:
        acc = _account(run, j)
        samples: Samples | None = None
        pooled_cal: PooledCalibration | None = None
        history: History | None = None
        if acc.samples_per_target > 1:
            ranked = sorted(acc.reasons.items(), key=lambda kv: -kv[1])
            samples = Samples(acc.samples_per_target, acc.samples, acc.invalid, tuple(ranked[:3]))
            votes.append(judge_votes(run, j))
            accounts.append(
                {
                    "judge": j,
                    "samples_per_target": acc.samples_per_target,
                    "judgments": acc.judgments,
                    "samples": acc.samples,
                    "invalid_samples": acc.invalid,
                    "reasons": "; ".join(f"{n}× {r}" for r, n in ranked) or None,
                }
            )
        cal = calibration(run, f, j, resamples, seed, min_n=min_n)
        if cal is not None:
            cals.append(cal.table)
            binss.append(cal.bins)
            pooled = cal.table.filter(pl.col("behaviour") == POOLED).row(0, named=True)
            if pooled["turns"]:
                pooled_cal = PooledCalibration(
                    pooled["turns"], pooled["conversations"], pooled["ece"], pooled["brier"], tuple(cal.notes)
                )
            turns = turn_agreement(f, j, resamples=1)  # the point estimates only (they do not depend on resamples)
            stats = conversation_stats(f, j, cal)
            entry = history_entry(run, j, turns, cal, folder=None if path is None else path.parent, stats=stats)
            if entry is not None:
                if path is not None and record:
                    record_history(path, entry)
                past = read_history(path) if path is not None else []
                if not record:  # compared as if recorded, nothing written
                    past.append(entry)
                t = history_table(past or [entry], j, entry["judge_id"], resamples, seed, min_n=min_n)
                if t.is_empty():
                    history = History(False, None, None, None, ())
                else:
                    prev = t.row(0, named=True)
                    moves = tuple(
                        Move(r["measure"], r["direction"], r["change"], r["ci_low"], r["ci_high"], r["rule"])
                        for r in t.filter(pl.col("behaviour") == ANY).iter_rows(named=True)
                    )
                    history = History(True, prev["previous_id"], prev["previous_prompt"], prev["previous_date"], moves)
                    hist.append(t)
        found.append(JudgeReliability(j, samples, pooled_cal, history))
    x = Reliability(BINS, CHANGE, tuple(found), bool(cals), min_n)
    a.text, a.result = render_reliability(x), x
    if accounts:
        a.tables["judge_samples"] = pl.DataFrame(accounts, schema=SAMPLES_SCHEMA)
    for key, parts in (
        ("calibration", cals),
        ("reliability_bins", binss),
        ("judge_votes", votes),
        ("judge_history", hist),
    ):
        if parts:
            a.tables[key] = pl.concat(parts)
    if binss and not pl.concat(binss).is_empty():
        a.charts["reliability"] = reliability_chart(pl.concat(binss))
    return a
