"""The judge_check analysis as data, and its one wording (beyond the paper).

``judge_check.answer`` computes a ``JudgeCheck`` (per LLM judge its validation gate, its
any-behaviour agreement with the annotators and what the corrected rates say; the probes'
findings) and renders it with ``render_judge_check`` into the sentences of its ``Answer.text``;
the result stays reachable as ``Answer.result``, as for the research questions (``rq_prose``).
The render functions are pure: no run, no frames."""

from __future__ import annotations

from dataclasses import dataclass

from .probes_prose import ProbeFindings, render_probes


@dataclass(frozen=True)
class GateSummary:
    """What a judge's validation gate passes: ``validated`` (behaviour names), the behaviours it
    does not pass, apart those too rare to validate here; ``annotated``: whether any behaviour
    rests on an annotated conversation."""

    judge: str
    judge_id: str | None
    validated: tuple[str, ...]
    not_validated: tuple[str, ...]
    too_rare: tuple[str, ...]
    annotated: bool


@dataclass(frozen=True)
class Estimate:
    """A point estimate (None: undefined) with its 95% interval (None: no interval)."""

    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class AnyAgreement:
    """Turn-level agreement on any behaviour between a judge and the annotators' majority."""

    turns: int
    conversations: int
    positive_turns_humans: int
    positive_turns_judge: int
    alpha_with_judge: Estimate
    kappa: Estimate
    f1: Estimate


@dataclass(frozen=True)
class Disagreement:
    """A behaviour rate whose judge-only mean lies outside its corrected 95% interval."""

    behaviour: str
    target: str
    judge_only: float
    corrected: float


@dataclass(frozen=True)
class CorrectedSummary:
    """What the corrected rates say: how many have an interval (of ``rates``) and which of those
    disagree with the judge-only mean."""

    rates: int
    with_interval: int
    disagree: tuple[Disagreement, ...]


@dataclass(frozen=True)
class JudgeAssessment:
    """One LLM judge: its gate, and (with human annotations) its agreement and corrected rates."""

    gate: GateSummary
    agreement: AnyAgreement | None
    corrected: CorrectedSummary | None


@dataclass(frozen=True)
class StaleJudge:
    """An LLM judge whose every judgment is stale, with the first reason recorded."""

    judge: str
    judgments: int
    why: str | None


@dataclass(frozen=True)
class JudgeProbes:
    """The probes' findings for one judge (``label``: its name where several are shown, else None)."""

    label: str | None
    findings: ProbeFindings


@dataclass(frozen=True)
class JudgeCheck:
    """The judge_check analysis: the settings its sentences name, every LLM judge assessed (none:
    ``stale`` says why where every judgment of one is stale), whether the run has human
    annotations, and the probes' findings."""

    resamples: int
    seed: int
    min_conversations: int
    min_positive_turns: int
    judges: tuple[JudgeAssessment, ...]
    stale: tuple[StaleJudge, ...]
    humans: bool
    probes: tuple[JudgeProbes, ...]
    assumption: str
    how_to_annotate: str


def render_stale(s: StaleJudge) -> str:
    """ "every one of the N judgments of the LLM judge J is stale (why); …" with how to refresh them."""
    return (
        f"every one of the {s.judgments} judgments of the LLM judge {s.judge} is stale"
        + (f" ({s.why})" if s.why else "")
        + "; nothing of it is counted and no annotator takes its place."
        " Run `cocoeval run PARAMS` again to judge with the current settings (calls already made "
        "with them are served from the cache)"
    )


def render_not_validated(g: GateSummary, how_to_annotate: str) -> str | None:
    """ "not validated for this judge: …" naming the behaviours the gate does not pass, those too
    rare to validate here apart (None when it passes them all); with no annotations at all it says
    how to annotate."""
    if not (g.not_validated or g.too_rare):
        return None
    if not g.annotated:
        return f"not validated for this judge ({g.judge}): every behaviour, no human annotations; {how_to_annotate}"
    parts = ([", ".join(g.not_validated)] if g.not_validated else []) + (
        [f"too rare to validate here: {', '.join(g.too_rare)}"] if g.too_rare else []
    )
    return f"not validated for this judge ({g.judge}): {'; '.join(parts)} (see the judge_check validation table)"


def render_corrected(c: CorrectedSummary) -> str:
    """What the corrected rates say, in one clause: where the judge-only mean lies outside the
    corrected interval, that none does among those with an interval, or that none has one."""
    if not c.with_interval:
        return (
            "no corrected interval: no target has enough labelled conversations (see the corrected_rates table's notes)"
        )
    if not c.disagree:
        return (
            f"the judge-only mean lies inside the corrected 95% interval for all {c.with_interval} behaviour rates "
            f"with an interval ({c.rates - c.with_interval} without one)"
        )
    return "the judge-only mean lies outside the corrected 95% interval for " + "; ".join(
        f"{d.behaviour} of {d.target} ({d.judge_only:.2f} vs {d.corrected:.2f})" for d in c.disagree
    )


def _fmt(e: Estimate) -> str:
    if e.value is None:
        return "undefined"
    return f"{e.value:.2f}" + (
        f" ({e.low:.2f}–{e.high:.2f})" if e.low is not None and e.high is not None else " (no interval)"
    )


def render_judge_check(x: JudgeCheck) -> list[str]:
    """The judge_check answer's sentences, every number a field of ``x``."""
    from .coverage import not_run

    if not x.judges:
        return [
            not_run(
                "this run has no LLM judge with valid judgments"
                + (f" ({'; '.join(render_stale(s) for s in x.stale)})" if x.stale else ""),
                "add a judge to the params' judges: and run them",
            )
        ]
    out = [
        f"Beyond the paper. Turn-level agreement over the judged turns of the conversations the judge and at "
        f"least one annotator labelled validly, each with the annotators who did (Krippendorff's α, Cohen's "
        f"κ, precision/recall/F1 against the annotators' majority), 95% percentile bootstrap intervals over "
        f"conversations ({x.resamples} resamples, seed {x.seed}); the gate: a one-sided permutation test of ρ "
        f"between the judge's and the annotators' counts per conversation, Holm-corrected over the behaviours "
        f"tested, each resting on at least {x.min_conversations} conversations and {x.min_positive_turns} "
        "positive turns (fewer: too rare to validate here). Definitions: `cocoeval/analysis/judge_check.py`, "
        "docs/judging.md."
    ]
    for j in x.judges:
        g = j.gate
        out.append(
            f"- **{g.judge}** (judge id {g.judge_id or 'not recorded'}): validated for "
            + (", ".join(g.validated) if g.validated else "no behaviour")
            + ". "
            + (render_not_validated(g, x.how_to_annotate) or "Validated for every behaviour.")
        )
        a = j.agreement
        if a is not None:
            out.append(
                f"  Any behaviour, over {a.turns} turns of {a.conversations} conversations "
                f"({a.positive_turns_humans} positive by the annotators' majority, "
                f"{a.positive_turns_judge} by the judge): α with the judge {_fmt(a.alpha_with_judge)}, "
                f"κ {_fmt(a.kappa)}, F1 {_fmt(a.f1)}."
            )
        if j.corrected is not None:
            out.append(f"  Corrected rates ({x.assumption}): {render_corrected(j.corrected)}.")
    if not x.humans:
        out.append(
            not_run(
                "this run has no human annotations, so no agreement can be measured and no judge is validated",
                x.how_to_annotate,
            )
        )
    for p in x.probes:
        out += [f"{p.label}: {line}" if p.label is not None else line for line in render_probes(p.findings)]
    return out
