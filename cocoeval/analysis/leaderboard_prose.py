"""The leaderboard's answer as data, and its one wording (private; import from
``cocoeval.analysis.leaderboard``).

``leaderboard.answer`` computes a ``Leaderboard`` (per judge: the floor and every setup's entry,
ranked or not, with its distance, farthest behaviour, Likert gaps, judge-free AUC and counts) and
``render_leaderboard`` writes the sentences of its ``Answer.text`` from it; ``render_stopping``
writes the paragraph on where each setup of a run with a ``stopping:`` section stopped (the report
quotes it too). The render functions are pure: no run, no frames, only the result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cocoeval.core.text import md_escape

from .rq_prose import Estimate, Intervals, NotRun

if TYPE_CHECKING:
    from cocoeval.run.stopping import StoppingRecord


@dataclass(frozen=True)
class FloorDistance:
    """The floor of one judge: the distance between two random halves of its ``n`` valid human
    references (the mean over the resamples) and the 2.5–97.5 percentile range; ``note`` says why
    there is no range (or no distance: ``distance`` None)."""

    n: int
    distance: float | None
    low: float | None
    high: float | None
    note: str | None


@dataclass(frozen=True)
class Counted:
    """Of one setup under one judge: continuations ok of those present or expected, the share of the
    ok continuations' turns said by non-participants, judgments valid of all (None: not counted)."""

    continuations_ok: int | None
    continuations: int | None
    unknown_speaker_share: float | None
    judgments_valid: int | None
    judgments: int | None


@dataclass(frozen=True)
class BoardEntry:
    """One setup on one judge's leaderboard. ``rank`` None: unranked (``note`` says why);
    ``rank_low``–``rank_high`` the ranks the data support (beyond the paper; None: not computed).
    ``distance`` None in its value: no distance (n = 0 or one instance)."""

    setup: str
    group: str | None
    rank: int | None
    rank_low: int | None
    rank_high: int | None
    distance: Estimate
    farthest: tuple[str, float] | None
    """The behaviour (its name) whose paired difference (setup − human) is largest in size, and it."""
    consistency_gap: float | None
    collaborativeness_gap: float | None
    likert_n: int | None
    auc: Estimate | None
    """The judge-free classifier AUC with its interval (beyond the paper); None: no interval."""
    counts: Counted
    note: str | None


@dataclass(frozen=True)
class JudgeBoard:
    """One judge's leaderboard: the floor, then the setups, ranked first (never across judges)."""

    judge: str
    floor: FloorDistance
    entries: tuple[BoardEntry, ...]


@dataclass(frozen=True)
class Leaderboard:
    """The leaderboard answer: where each setup stopped (a run with ``stopping:``), why there is no
    leaderboard (``not_run``), or the method's figures and one board per LLM judge."""

    stopping: StoppingRecord | None
    not_run: NotRun | None
    behaviours: int
    """The taxonomy's behaviours, K (the distance is a root mean square over them)."""
    intervals: Intervals
    boards: tuple[JudgeBoard, ...] = ()


def render_stopping(rec: StoppingRecord | None) -> list[str]:
    """The paragraph on where each setup stopped and why, with the confidence sequence that decided
    it (the leaderboard's intervals are fixed-n ones, and said so); empty without a ``stopping:``."""
    if rec is None:
        return []
    rule = f"{rec.rule}" + (f" (eps {rec.eps:g})" if rec.eps is not None else "")
    lines = [
        f"**Stopped when the answer was known** (beyond the paper): rule `{rule}`, alpha {rec.alpha:g} over all "
        f"rounds, rounds of {rec.round_conversations} source conversations in a seeded random order (seed "
        f"{rec.seed}), at least {rec.min_rounds} round(s), judge {md_escape(rec.judge)}; method: {rec.method}. "
        "The leaderboard's intervals above are ordinary fixed-n bootstrap intervals on the instances each setup "
        "used; the stop was decided by the confidence sequences below, which hold at every round at once."
    ]
    for name, st in rec.setups.items():
        apart = [b for b in st.bounds if b.low > 0 or b.high < 0]
        shown = apart or sorted(st.bounds, key=lambda b: -b.radius)
        cs = "; ".join(f"{b.behaviour} {b.mean:+.2f} [{b.low:+.2f}, {b.high:+.2f}]" for b in shown[:3])
        lines.append(
            f"- **{md_escape(name)}**: {st.status} — round {st.round} of {rec.rounds_planned}, {st.conversations} of "
            f"{rec.conversations_planned} conversations, {st.instances} of {rec.instances_planned} instances "
            f"({st.observations} with a valid pair); {md_escape(st.reason)}"
            + (f". Confidence sequence at the stop: {cs}" if cs else "")
            + "."
        )
    return ["\n".join(lines)]


def _method(x: Leaderboard) -> str:
    return (
        f"Method: per judge, each setup against the human reference on the instances both have a valid fine-grained "
        f"judgment for (n); per behaviour the paired difference in mean occurrences per conversation (setup − human); "
        f"the distance: the root mean square of the {x.behaviours} true differences (occurrences per "
        "conversation), estimated without the upward bias of squared noise (each squared mean difference minus its "
        "sampling variance, clipped at 0 after averaging; with several windows of one source conversation, only "
        "products of differences from different conversations) and its interval from the resamples of that estimate "
        "re-centred on it (D = the absolute sum of the observed differences beside it, plug-in); "
        f"{x.intervals.text()}, resampling source conversations where a conversation gives "
        "several instances; equal distances share a rank; ranked by the distance's point "
        f"estimate among setups with n ≥ {x.intervals.min_n}. Beyond the paper, rank_low–rank_high: the ranks the "
        "data support "
        "(simultaneous pairwise tests of the distances, a sign-flip test swapping two setups within each source "
        "conversation, Holm over all pairs; Mogstad, Romano, Shaikh & Wilhelm 2024): every setup's true rank lies "
        "in its interval at once with 95% confidence; a rank shown as 2–4 is unsettled; the pairs themselves: the "
        "paired table. The floor: the "
        "distance between two random halves of the human references (bootstrapped by source conversation, "
        "estimated the same way): 0 on "
        "average, with the range chance gives. Beside: the Likert gap (setup − human, paired), the judge-free "
        "turn-taking distances and, beyond the paper, the judge-free classifier test (auc: how well a classifier "
        "tells the setup's continuations from the humans', 0.5 = indistinguishable by it, with its interval; the "
        "floor row's: humans against humans; `cocoeval/analysis/detectability.py`)."
    )


def _floor(judge: str, fl: FloorDistance) -> str:
    return (
        f"**Judged by {md_escape(judge)}** — floor (two halves of the {fl.n} valid human references): "
        + (
            f"{fl.distance:.2f}"
            + (f" (95% range {fl.low:.2f}–{fl.high:.2f})" if fl.low is not None else f" (no range: {fl.note})")
            if fl.distance is not None
            else f"none ({fl.note})"
        )
        + "."
    )


def _of(ok: int | None, total: int | None, what: str) -> str | None:
    return None if total is None else f"{ok} of {total} {what}"


def _entry(e: BoardEntry) -> str:
    c = e.counts
    share = c.unknown_speaker_share
    counts = "; ".join(
        x
        for x in (
            _of(c.continuations_ok, c.continuations, "continuations ok"),
            f"{share:.0%} of their turns by non-participants" if share else None,
            _of(c.judgments_valid, c.judgments, "judgments valid"),
        )
        if x
    )
    head = (
        "- (unranked) "
        if e.rank is None
        else f"{e.rank}. "
        if e.rank_low is None or e.rank_low == e.rank_high
        else f"{e.rank}. (rank {e.rank_low}–{e.rank_high}, unsettled) "
    )
    if e.distance.value is None:
        return f"{head}**{md_escape(e.setup)}**: n = 0 ({counts or 'nothing judged'}); {e.note}."
    gap = (
        f"; consistency gap {e.consistency_gap:+.2f}, collaborativeness gap "
        f"{e.collaborativeness_gap:+.2f} (n = {e.likert_n})"
        if e.consistency_gap is not None and e.collaborativeness_gap is not None
        else ""
    )
    return (
        f"{head}**{md_escape(e.setup)}** ({md_escape(e.group or '?')}): distance {e.distance.text()}"
        + (f"; farthest: {e.farthest[0]} {e.farthest[1]:+.2f}" if e.farthest else "")
        + gap
        + (
            f"; judge-free AUC {e.auc.value:.2f} ({e.auc.low:.2f}–{e.auc.high:.2f})"
            if e.auc is not None and e.auc.value is not None and e.auc.low is not None and e.auc.high is not None
            else ""
        )
        + f" [{counts}]"
        + (f"; {e.note}" if e.note else "")
        + "."
    )


def render_leaderboard(x: Leaderboard) -> list[str]:
    """The leaderboard's sentences: the stopping paragraph, then "not run" with the step that adds a
    leaderboard, or the method and, per judge, the floor and one line per setup."""
    out = render_stopping(x.stopping)
    if x.not_run is not None:
        return [*out, x.not_run.text()]
    out.append(_method(x))
    for b in x.boards:
        out.append(_floor(b.judge, b.floor))
        out.append("\n".join(_entry(e) for e in b.entries))
    return out
