"""The judge-free answers as data, and the one wording of each (private; import the results from
here, the analyses from ``judge_free``, ``detectability`` and ``turntaking``).

Each judge-free analysis computes a typed result (``JudgeFreeComparison`` for ``judge_free``,
``DetectabilityResult`` for ``detectability``, ``TurnTakingMeasured`` for ``turn_taking_measured``;
``MeasuredOn`` is what the judge-free statistics of a run are measured on, said in the analysis and
in the report's index) and renders it with the matching ``render_*`` function into the sentences of
its ``Answer.text``. Every number a sentence says is a field (``Answer.result``) that a notebook,
the HTML report or a test can read without parsing prose. The render functions are pure: no run,
no frames, only the result."""

from __future__ import annotations

from dataclasses import dataclass

from cocoeval.core.text import md_escape

from . import inference
from .answer import fmt_ci
from .rq_prose import Estimate, Intervals


# ----------------------------------------------------------------------------- what is measured
@dataclass(frozen=True)
class SetupSource:
    """A setup's name and what wrote its continuations (its model, its plugin, or "imported continuations")."""

    name: str
    what: str


@dataclass(frozen=True)
class MeasuredOn:
    """What a run's judge-free statistics are measured on: the human references and each setup's
    continuations; whether the references include the demo's template conversations, and whether the
    run is a pipeline check (tiny models)."""

    setups: tuple[SetupSource, ...]
    demo_data: bool
    pipeline_check: bool


def render_measured_on(x: MeasuredOn) -> str:
    """What the judge-free statistics are measured on, said truthfully (one paragraph)."""
    models = ", ".join(f"{md_escape(s.name)} = {md_escape(s.what)}" for s in x.setups)
    text = (
        "No model judges these: the human reference's values are measured on the benchmark's reference turns "
        f"(what the people said next), each setup's on its continuations ({models or 'no setups'})."
    )
    if x.demo_data:
        text += (
            " This run's references include cocoeval's illustrative demo conversations, which are generated "
            "from templates, not human data."
        )
    if x.pipeline_check:
        text += (
            " The setups' models are tiny: their differences from the humans are real for these models and say "
            "nothing about capable LLMs."
        )
    return text


# ----------------------------------------------------------------------------- judge_free
@dataclass(frozen=True)
class StatisticMean:
    """One judge-free statistic's mean over the human references, with its interval."""

    statistic: str
    """Its id (``convstats.STATISTICS``)."""
    name: str
    mean: Estimate


@dataclass(frozen=True)
class StatisticDiff:
    """A statistic on which a setup differs from the humans after correction."""

    statistic: str
    name: str
    mean_sim: float
    mean_human: float
    p_adj: float


@dataclass(frozen=True)
class SetupVsHumanStatistics:
    """One setup against the human reference on the judge-free statistics, paired over ``n`` instances;
    ``tested`` False when n is below the smallest n tested (no verdicts)."""

    target: str
    n: int | None
    tested: bool
    higher: tuple[StatisticDiff, ...] = ()
    lower: tuple[StatisticDiff, ...] = ()


@dataclass(frozen=True)
class TurnTakingMeasure:
    """One turn-taking statistic (``convstats.TURN_TAKING``) of a target, mean over instances."""

    statistic: str
    estimate: Estimate


@dataclass(frozen=True)
class TurnTakingOf:
    """A target's turn-taking realism against the human reference of the same instances."""

    target: str
    measures: tuple[TurnTakingMeasure, ...]


@dataclass(frozen=True)
class TurnTakingRealism:
    """Turn-taking realism of every setup; ``yardstick``: the humans' own last turns of x against r
    (None when the run has none)."""

    yardstick: TurnTakingOf | None
    setups: tuple[TurnTakingOf, ...]


@dataclass(frozen=True)
class SanityCheck:
    """A judge's per-conversation counts of a behaviour against the closest judge-free statistic:
    Spearman ρ and its verdict (``check``), or why it has none (``note``)."""

    judge: str
    behaviour: str
    statistic: str
    expected: str
    rho: float | None
    check: str | None
    note: str | None


@dataclass(frozen=True)
class JudgeFreeComparison:
    """``judge_free``: the human reference against every setup on statistics of the turns themselves.
    ``empty``: the run has no conversation to measure (no sentence)."""

    measured_on: MeasuredOn
    intervals: Intervals
    correction: str
    empty: bool = False
    references: int = 0
    """Human references measured (the largest n of a statistic)."""
    family: int = 0
    """Tests in the correction's family (statistics × setups tested)."""
    n_statistics: int = 0
    human: tuple[StatisticMean, ...] = ()
    setups: tuple[SetupVsHumanStatistics, ...] = ()
    turn_taking: TurnTakingRealism | None = None
    sanity: tuple[SanityCheck, ...] | None = None
    """None: the run has no judgments to check."""


_TURN_TAKING_WORDS = {"transition_distance": "transitions TV"}


def _turn_taking(x: TurnTakingRealism) -> str:
    def said(t: TurnTakingOf) -> str:
        return "; ".join(
            f"{_TURN_TAKING_WORDS.get(m.statistic, 'entropy − humans (bits)')} " + m.estimate.text() for m in t.measures
        )

    return (
        "Turn-taking realism, each continuation against the human reference of its own instance (who speaks "
        "after whom: total variation between the speaker-transition distributions, 0 = the same, 1 = nothing in "
        "common; and the speaker entropy of the turns, continuation − human, in bits), averaged over instances: "
        + (f"yardstick, the humans' own last turns of x against r: {said(x.yardstick)}. " if x.yardstick else "")
        + (" ".join(f"**{md_escape(t.target)}**: {said(t)}." for t in x.setups) or "no setup has a continuation.")
    )


def _diffs(d: tuple[StatisticDiff, ...]) -> str:
    return ", ".join(f"{s.name} ({s.mean_sim:.2f} vs {s.mean_human:.2f}, p_adj {s.p_adj:.3g})" for s in d) or "none"


def _sanity(c: SanityCheck) -> str:
    return f"{md_escape(c.judge)} {c.behaviour} ~ {c.statistic} ({c.expected}): " + (
        f"ρ = {c.rho:.2f}, {c.check}" if c.check else f"no interval: {c.note}"
    )


def render_judge_free(x: JudgeFreeComparison) -> list[str]:
    """``judge_free``'s sentences: what is measured, the method, the humans, each setup, turn-taking
    realism and the judges' sanity check."""
    if x.empty:
        return []
    out = [
        render_measured_on(x.measured_on),
        f"Method: {x.references} human references; per-turn statistics as defined in "
        "`cocoeval/analysis/convstats.py` (lowercase word tokens, trigram repetition, …), a conversation whose "
        f"statistic is undefined left out of it; {x.intervals.text()}; setup vs human: "
        f"{inference.describe_test(x.correction, x.family)} (the family: {x.n_statistics} statistics × the setups).",
        "Human reference: " + "; ".join(f"{s.name} {s.mean.text()}" for s in x.human if s.mean.value is not None) + ".",
    ]
    for s in x.setups:
        if not s.tested:
            out.append(f"- **{md_escape(s.target)}**: not tested (n = {s.n!s} < {x.intervals.min_n} instances).")
        else:
            out.append(
                f"- **{md_escape(s.target)}** (n = {s.n!s}): higher than humans: {_diffs(s.higher)}; "
                f"lower: {_diffs(s.lower)}."
            )
    if x.turn_taking is not None:
        out.append(_turn_taking(x.turn_taking))
    if x.sanity is not None:
        out.append(
            "Judge sanity (Spearman of each judge's counts with the closest judge-free statistic; a judge "
            "answering at random gives ρ ≈ 0): "
            + ("; ".join(_sanity(c) for c in x.sanity) or "no pair in this taxonomy")
            + "."
        )
    return out


# ----------------------------------------------------------------------------- detectability
@dataclass(frozen=True)
class ClassifierTest:
    """One comparison of the classifier test: its AUC with interval and permutation p, or why none
    (``note``); for a setup, how many of its continuations were ok (the rest left out)."""

    target: str
    comparison: str
    auc: float | None
    low: float | None
    high: float | None
    p: float | None
    n: int
    conversations: int
    note: str | None
    continuations_ok: int | None = None
    continuations: int | None = None

    @property
    def invalid(self) -> int:
        """Continuations left out as invalid (0 for the floor)."""
        return (self.continuations or 0) - (self.continuations_ok or 0)

    def text(self) -> str:
        """The comparison in words: its AUC with interval, p and sizes, or why it has none."""
        if self.auc is None:
            return f"no AUC ({self.note})"
        return (
            f"AUC {self.auc:.2f} (95% interval {self.low:.2f}–{self.high:.2f}; p = {self.p:.3g} for AUC > 0.5; "
            f"n = {self.n} from {self.conversations} conversations)"
            if self.p is not None
            else f"AUC {self.auc:.2f} (95% interval {self.low:.2f}–{self.high:.2f}; n = {self.n})"
        )


@dataclass(frozen=True)
class DetectabilityResult:
    """``detectability`` (beyond the paper): can a classifier tell each setup from the humans. The
    method's settings, the floor (humans vs humans) and every setup; ``floor`` None: no instances
    (no sentence)."""

    intervals: Intervals
    folds: int
    permutations: int
    min_conversations: int
    floor: ClassifierTest | None = None
    setups: tuple[ClassifierTest, ...] = ()


def render_detectability(x: DetectabilityResult) -> list[str]:
    """``detectability``'s sentences: the method, the floor, each setup."""
    if x.floor is None:
        return []
    iv = x.intervals
    lines = [
        f"- **{md_escape(d.target)}**: {d.text()} [{d.continuations_ok} of {d.continuations} continuations ok]"
        + (f"; {d.invalid} invalid continuation(s) left out" if d.invalid else "")
        + "."
        for d in x.setups
    ]
    return [
        "Beyond the paper. Method: each instance with an ok continuation gives two documents, the human reference "
        "and the continuation (the words and punctuation of their turns, no speaker names, typesetting only one "
        "side can have removed); hashed TF-IDF word uni- and bigrams; a ridge classifier cross-validated in "
        f"{x.folds} folds grouped by source conversation; the AUC of the out-of-fold scores (0.5 = this classifier "
        "cannot tell them apart: a lower bound on how distinguishable a setup is, never a proof that it is human); "
        f"its 95% interval: a cluster bootstrap over conversations ({iv.resamples} resamples, seed {iv.seed}) widened "
        "by the refitted models' variance; p: a permutation test swapping the labels within instances and refitting "
        f"({x.permutations} permutations). No AUC below {iv.min_n} instances or {x.min_conversations} source "
        "conversations. Definitions: `cocoeval/analysis/detectability.py` and docs/analysis.md.",
        f"Floor, {x.floor.comparison}: {x.floor.text()}.",
        "\n".join(lines) or "No setup has continuations.",
    ]


# ----------------------------------------------------------------------------- turn_taking_measured
@dataclass(frozen=True)
class SpeakerAccuracy:
    """A rule's (teacher-forced) or a setup's (free-running) share of positions whose speaker is the
    humans', with its interval over source conversations."""

    predictor: str
    label: str
    """The rule's description (``turntaking.POLICIES``), or the setup's name."""
    what: str | None
    accuracy: float | None
    low: float | None
    high: float | None
    conversations: int
    note: str | None

    def text(self) -> str:
        return fmt_ci(self.accuracy, self.low, self.high, self.conversations, self.note).replace(  # type: ignore[arg-type]
            "n = ", "conversations = "
        )


@dataclass(frozen=True)
class RunLength:
    """A target's runs (consecutive turns by one speaker): mean length, how many, the longest."""

    target: str
    mean_run: float
    runs: int
    longest: int


@dataclass(frozen=True)
class SelfSelectionCounts:
    """A self-selection setup's turns taken, passes, malformed answers and all-passed turns."""

    setup: str
    turns_chosen: int
    passes: int
    malformed: int
    all_passed: int


@dataclass(frozen=True)
class TurnTakingMeasured:
    """``turn_taking_measured`` (beyond the paper): next-speaker accuracy, run lengths, self-selection
    counts and how many per-speaker fidelity distances were scored. ``empty``: nothing to measure (no
    sentence)."""

    intervals: Intervals
    teacher_forced: str
    """How the rules are scored (``turntaking.TEACHER_FORCED``)."""
    free_running: str
    """How the setups are scored (``turntaking.FREE_RUNNING``)."""
    min_speaker_turns: int
    empty: bool = False
    rules: tuple[SpeakerAccuracy, ...] = ()
    setups: tuple[SpeakerAccuracy, ...] = ()
    run_lengths: tuple[RunLength, ...] = ()
    self_selection: tuple[SelfSelectionCounts, ...] = ()
    fidelity_scored: int = 0
    fidelity_unscored: int = 0


def render_turn_taking_measured(x: TurnTakingMeasured) -> list[str]:
    """``turn_taking_measured``'s sentences."""
    if x.empty:
        return []
    iv = x.intervals
    out = [
        f"Beyond the paper. Next-speaker accuracy, {x.teacher_forced}: at every position of the human reference each "
        "rule is given the true conversation so far and names the next speaker (the history draw is scored by the "
        "probability it names the right one); 95% intervals resample source conversations "
        f"({iv.resamples} resamples, seed {iv.seed}; none below {iv.min_n} conversations). "
        + "; ".join(f"{r.label}: {r.text()}" for r in x.rules)
        + "."
    ]
    if x.setups:
        out.append(
            f"Speaker agreement, {x.free_running}: the share of positions where a continuation's speaker is the "
            "humans' (each continuation follows its own turns, so this measures the sequence, not the rule): "
            + "; ".join(f"**{r.predictor}** ({r.what}) {r.text()}" for r in x.setups)
            + "."
        )
    if x.run_lengths:
        out.append(
            "Run lengths (consecutive turns by one speaker), mean per target: "
            + "; ".join(
                f"{r.target} {r.mean_run:.2f} turns ({r.runs} runs, longest {r.longest})" for r in x.run_lengths
            )
            + "."
        )
    if x.self_selection:
        out.append(
            "Self-selection: "
            + "; ".join(
                f"{s.setup}: {s.turns_chosen} turns taken by an agent that chose to, {s.passes} passes, {s.malformed} "
                f"malformed answers (asked again, never read as a pass), {s.all_passed} turns where every "
                "agent passed (history policy)"
                for s in x.self_selection
            )
            + "."
        )
    if x.fidelity_scored or x.fidelity_unscored:
        out.append(
            f"Per-speaker fidelity (judge-based): {x.fidelity_scored} participant × setup × judge distances scored, "
            f"{x.fidelity_unscored} listed with the reason they are not (fewer than "
            f"{x.min_speaker_turns} turns on a side, or one source conversation)."
        )
    return out
