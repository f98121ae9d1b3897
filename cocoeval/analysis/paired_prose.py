"""The paired comparison of setups as data, and its one wording (private; import from
``cocoeval.analysis.paired``; beyond the paper).

``paired.answer`` computes a ``SetupPairs`` (per judge: the pairs whose distance to the humans
differs, how many pairs and behaviour differences hold, how many pairs went untested) and
``render_setup_pairs`` writes the sentences of its ``Answer.text`` from it. Pure: no run, no frames."""

from __future__ import annotations

from dataclasses import dataclass

from cocoeval.core.text import md_escape

from .rq_prose import NotRun

CORRECTION_WORDS = {"holm": "Holm", "bh": "Benjamini–Hochberg"}
MAX_LINES = 20
"""The answer lists at most this many pairs that differ per judge (the table has them all)."""


@dataclass(frozen=True)
class CloserPair:
    """A pair whose distance to the humans differs after Holm over the pairs: ``closer`` is closer
    than ``farther`` by ``gap`` (the farther one's distance minus the closer one's) with its 95%
    interval, on ``n`` instances of ``clusters`` source conversations."""

    closer: str
    farther: str
    gap: float
    low: float | None
    high: float | None
    p_adj: float
    n: int
    clusters: int


@dataclass(frozen=True)
class JudgePairs:
    """One judge's pairs: of ``pairs`` distance comparisons, those that differ (``held``), the
    behaviour differences that hold, and the pairs untested (too few instances or conversations)."""

    judge: str
    pairs: int
    held: tuple[CloserPair, ...]
    behaviour_differences: int
    untested: int


@dataclass(frozen=True)
class SetupPairs:
    """The paired answer: why there is nothing to compare (``not_run``), or the method, the
    correction over the behaviours of each pair (holm or bh) and each LLM judge's pairs."""

    not_run: NotRun | None
    method: str = ""
    correction: str = "holm"
    judges: tuple[JudgePairs, ...] = ()


def _pair(r: CloserPair) -> str:
    interval = f" (95% CI {r.low:.2f} to {r.high:.2f})" if r.low is not None and r.high is not None else ""
    return (
        f"- **{md_escape(r.closer)}** is closer to the humans than **{md_escape(r.farther)}** by {r.gap:.2f}"
        f"{interval}, p_adj = {r.p_adj:.3g}, n = {r.n} instances of {r.clusters} conversations"
    )


def render_setup_pairs(x: SetupPairs) -> list[str]:
    """The paired answer's sentences: "not run" with the step that adds a second setup or a judge,
    or the method and, per judge, how many pairs differ and at most ``MAX_LINES`` of them."""
    if x.not_run is not None:
        return [x.not_run.text()]
    out = [f"Method (beyond the paper): {x.method}."]
    for j in x.judges:
        lines = [_pair(r) for r in j.held]
        if len(lines) > MAX_LINES:
            lines = [*lines[:MAX_LINES], f"- and {len(lines) - MAX_LINES} more pairs (table paired)"]
        out.append(
            f"**Judged by {md_escape(j.judge)}**: {len(j.held)} of {j.pairs} pairs differ in their distance to the "
            f"humans (Holm over the pairs); {j.behaviour_differences} behaviour differences hold "
            f"({CORRECTION_WORDS[x.correction]} over the behaviours of each pair)"
            + (f"; {j.untested} pairs untested (the note says why)" if j.untested else "")
            + "."
            + ("\n" + "\n".join(lines) if lines else "")
        )
    return out
