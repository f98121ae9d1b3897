"""The paper's other studies as data, and the one wording of each (private; import from
``cocoeval.analysis.studies``).

``studies`` computes a typed result per study (``ParticipantsStudy`` for D.4 / Table 12,
``PaperTables`` for Figure 3 and Tables 4 and 11, ``Agreement`` for §3.3 / B.1, ``BenchSummary``
for the benchmark's contents) and renders it with the matching ``render_*`` function into the
sentences of its ``Answer.text``; the result stays reachable as ``Answer.result``, as for the
research questions (``rq_prose``). The render functions are pure: no run, no frames."""

from __future__ import annotations

from dataclasses import dataclass

from cocoeval.core.text import md_escape

from .agreement import PROCEDURE
from .inference import CORRECTION_NAMES
from .paper_stats import COUNT_NAMES
from .rq_prose import Intervals, NotRun


# ----------------------------------------------------------------------------- participants (D.4)
@dataclass(frozen=True)
class DatasetVariance:
    """A dataset's variance of participant counts (None below two counted instances), its range,
    and whether the study picked it."""

    dataset: str
    variance: float | None
    instances: int
    low: int | None
    high: int | None
    picked: bool


@dataclass(frozen=True)
class Rho:
    """A Spearman ρ between participants and one behaviour's count (``behaviour``: its name, or
    "all behaviours") for one target, with its corrected p."""

    target: str
    behaviour: str
    rho: float
    p_adj: float | None
    n: int


@dataclass(frozen=True)
class DatasetCorrelations:
    """One chosen dataset: the human reference's ρ over all behaviours and its strongest single
    behaviour (or why it has no ρ), and every ρ significant after the correction."""

    dataset: str
    human_no_rho: str | None
    """Why the human reference has no ρ here; None when it has one."""
    human_all: Rho | None = None
    human_strongest: Rho | None = None
    significant: tuple[Rho, ...] = ()


@dataclass(frozen=True)
class ParticipantsStudy:
    """D.4 / Table 12: per dataset, whether behaviour counts change with the participant count.
    ``given`` says the datasets were named by the caller (else the ``top`` of largest variance)."""

    judge: str
    count: str
    """How participants are counted (a key of ``paper_stats.COUNT_NAMES``)."""
    given: bool
    top: int
    min_n: int
    correction: str
    variances: tuple[DatasetVariance, ...]
    chosen: tuple[str, ...] = ()
    """The datasets with correlations, in the order of the table."""
    n_tested: int = 0
    """Correlations with a corrected p (the correction's family)."""
    datasets: tuple[DatasetCorrelations, ...] = ()
    missing: NotRun | None = None


def _variances(x: ParticipantsStudy) -> str:
    return (
        "Variance of participant counts per dataset (table participant_variance), "
        + ("the datasets given: " if x.given else f"the {x.top} largest picked: ")
        + "; ".join(
            f"{md_escape(v.dataset)} "
            + (f"{v.variance:.3g}" if v.variance is not None else f"none ({v.instances} instance(s) with a count)")
            + (" (picked)" if v.picked else "")
            for v in x.variances
        )
        + "."
    )


def _dataset_line(d: DatasetCorrelations) -> str:
    line = f"- **{md_escape(d.dataset)}**: "
    if d.human_no_rho is not None:
        line += f"human reference: no ρ ({d.human_no_rho})"
    else:
        al = d.human_all
        line += "human reference " + (f"ρ(all) = {al.rho:.2f} (n = {al.n})" if al else "")
        if (r := d.human_strongest) is not None:
            line += f"; strongest: {r.behaviour} ρ = {r.rho:.2f} (p_adj {r.p_adj:.3g})"
    sig = ", ".join(f"{md_escape(r.target)}/{r.behaviour} ρ = {r.rho:.2f}" for r in d.significant)
    return line + "; significant after the correction: " + (sig or "none") + "."


def render_participants(x: ParticipantsStudy) -> list[str]:
    """The participants study's sentences."""
    if x.missing is not None:
        return [x.missing.text(), _variances(x)]
    how = (
        "given" if x.given else f"the {x.top} with the largest variance of participant counts, as the paper picks them"
    )
    chosen = [v for v in x.variances if v.dataset in x.chosen]
    return [
        f"Datasets ({how}): "
        + "; ".join(
            f"{md_escape(v.dataset)} (variance {v.variance:.2f}, {v.low}–{v.high} participants, {v.instances} instances)"
            for v in chosen
        )
        + ". "
        + _variances(x),
        f'Method: participants counted as the {COUNT_NAMES[x.count]} (count = "{x.count}"); Spearman ρ per '
        f"dataset, target and behaviour over the instances judged validly by {md_escape(x.judge)}; scipy's "
        f"p, {CORRECTION_NAMES[x.correction]} over the {x.n_tested} "
        f"correlations of the table (p_adj); no ρ below n = {x.min_n} or when a side is constant "
        "(note says why). Human–AI chat instances are left out.",
        *(_dataset_line(d) for d in x.datasets),
    ]


# ----------------------------------------------------------------------------- Figure 3, Tables 4 and 11
@dataclass(frozen=True)
class PaperTables:
    """Which of the paper's Figure 3 and Tables 4 and 11 this run gives, by one judge."""

    judge: str
    intervals: Intervals
    figures: int = 0
    """Figure 3's figures drawn: one per model/condition (and the humans alone)."""
    table4: bool = False
    table11: bool = False
    missing: NotRun | None = None


def render_paper_tables(x: PaperTables) -> list[str]:
    """The paper tables' sentences."""
    if x.missing is not None:
        return [x.missing.text()]
    return [
        f"Judge **{md_escape(x.judge)}**, multi-party instances only (human–AI chats are the generalization "
        f"study). Figure 3: {x.figures} figure(s), one per model/condition, each panel a setup (k) "
        "beside the human reference on the same instances. Table 4: consistency and collaborativeness "
        f"(1–10), each row over its own valid judgments (n; not paired, as the paper lays it out: the "
        f"paired scores are in the answers' likert tables), {x.intervals.text()}. Table 11: mean occurrences per "
        "conversation per dataset, each row over its own valid judgments (n)."
    ]


# ----------------------------------------------------------------------------- agreement (§3.3, B.1)
@dataclass(frozen=True)
class AgreementRho:
    """One agreement: inter-human (``judge`` None) or a judge against the annotators left out in
    turn, on all behaviours' counts (``item`` "all") or a Likert score, with the paper's test."""

    judge: str | None
    annotators: int
    item: str
    rho: float | None
    n: int
    note: str | None
    """Why ρ is undefined."""
    significant: bool | None
    """The paper's verdict; None: not tested (``ci_note`` says why)."""
    p5: float | None
    """The 5th percentile of the resampled ρ (None: no range, ``ci_note`` says why)."""
    ci_note: str | None


@dataclass(frozen=True)
class TaxonomyCoverage:
    """An annotator's labelled turns whose behaviour is not in the taxonomy (Appendix B.3)."""

    annotator: str
    not_in_taxonomy: int
    turns: int
    rate: float | None


@dataclass(frozen=True)
class Agreement:
    """Do the LLM judges agree with the human annotators? ``detections`` is the sentence saying
    what the detection totals are over (``agreement.detection_note``); ``no_comparison`` is set
    when no comparison has enough conversations rated by every rater."""

    resamples: int
    seed: int
    min_n: int
    humans: tuple[str, ...]
    judges: int
    detections: str | None = None
    rhos: tuple[AgreementRho, ...] = ()
    no_comparison: NotRun | None = None
    coverage: tuple[TaxonomyCoverage, ...] = ()
    missing: NotRun | None = None


def _verdict(r: AgreementRho) -> str:
    if r.rho is None:
        return f"undefined: {r.note}"
    if r.significant is None:
        return f"not tested: {r.ci_note or 'undefined'}"
    p5 = f"5th percentile {r.p5:.2f}" if r.p5 is not None else f"no range: {r.ci_note}"
    return f"{p5}: {'significant' if r.significant else 'not significant'}"


def _agreement_line(r: AgreementRho) -> str:
    who = "inter-human" if r.judge is None else f"{md_escape(r.judge)} vs {r.annotators} annotator(s)"
    what = "all behaviours (counts)" if r.item == "all" else r.item
    rho = "undefined" if r.rho is None else f"{r.rho:.2f}"
    return f"- {who}, {what}: ρ = {rho} (n = {r.n}; {_verdict(r)})."


def render_agreement(x: Agreement) -> list[str]:
    """The agreement study's sentences."""
    detections = [x.detections] if x.detections is not None else []
    if x.missing is not None:
        return [x.missing.text(), *detections]
    out = [
        f"Method ({PROCEDURE}); {x.resamples} resamples, seed {x.seed}; conversations that every rater "
        f"of a comparison rated validly; not tested below n = {x.min_n}. {len(x.humans)} human annotators: "
        + ", ".join(md_escape(h) for h in x.humans)
        + ".",
        *detections,
        *(_agreement_line(r) for r in x.rhos),
    ]
    if x.no_comparison is not None:
        out.append(x.no_comparison.text())
    if x.coverage:
        out.append(
            "Behaviours not in the taxonomy (Appendix B.3), share of labelled turns: "
            + "; ".join(
                f"{md_escape(c.annotator)} {c.not_in_taxonomy} of {c.turns} turns"
                + (f" ({c.rate:.1%})" if c.rate is not None else "")
                for c in x.coverage
            )
            + "."
        )
    return out


# ----------------------------------------------------------------------------- the benchmark
@dataclass(frozen=True)
class SkippedConversation:
    """A conversation the benchmark builder skipped, and why."""

    conversation: str
    reason: str


@dataclass(frozen=True)
class BenchSummary:
    """What the benchmark contains; ``skipped`` None when the builder's report is absent."""

    instances: int
    datasets: int
    history_turns: tuple[int, int]
    """Fewest and most history turns of an instance."""
    reference_turns: tuple[int, int]
    skipped: tuple[SkippedConversation, ...] | None = None


SKIPPED_SHOWN = 10
"""Skipped conversations named in the text (the table lists them all)."""


def render_bench_summary(x: BenchSummary) -> list[str]:
    """The benchmark summary's sentences."""
    (h0, h1), (r0, r1) = x.history_turns, x.reference_turns
    out = [
        f"{x.instances} instances in {x.datasets} datasets; each has {h0!s}–{h1!s} history turns and "
        f"{r0!s}–{r1!s} reference turns."
    ]
    if x.skipped is not None:
        out.append(
            f"The builder skipped {len(x.skipped)} conversation(s)"
            + (
                ": "
                + "; ".join(f"{md_escape(s.conversation)} ({md_escape(s.reason)})" for s in x.skipped[:SKIPPED_SHOWN])
                if x.skipped
                else "."
            )
        )
    return out
