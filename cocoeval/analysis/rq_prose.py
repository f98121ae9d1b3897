"""The research questions' answers as data, and the one wording of each (private; import from
``cocoeval.analysis.rq``).

``rq`` computes a typed result per question (``HumanRates`` for RQ1, ``HumanComparison`` for RQ2/RQ4
and generalization, ``PromptingEffect`` for RQ3, ``TurnsPerCallEffect`` for RQ5) and renders it
with the matching ``render_*`` function into the sentences of its ``Answer.text``. Keeping the two
apart makes every number a sentence says reachable as a field (``Answer.result``): a notebook, the
HTML report or a test can read it, or render it in other words, without parsing prose. The render
functions are pure: no run, no frames, only the result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cocoeval.core.text import md_escape

from . import inference
from .answer import fmt_ci, interval_method
from .coverage import not_run


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95% interval and the instances it rests on; ``note`` says why it
    has no interval (or no estimate: ``value`` None)."""

    value: float | None
    low: float | None
    high: float | None
    n: int
    note: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any], value: str = "mean", low: str = "ci_low", high: str = "ci_high") -> Estimate:
        """The estimate in a row of a statistics table (``value``, its interval columns, ``n`` and
        ``ci_note`` where the table has one)."""
        return cls(row[value], row[low], row[high], row["n"], row.get("ci_note"))

    def text(self) -> str:
        """Written as every answer writes an estimate (``answer.fmt_ci``)."""
        return fmt_ci(self.value, self.low, self.high, self.n, self.note)  # type: ignore[arg-type]


@dataclass(frozen=True)
class NotRun:
    """Why a question has nothing to answer from (markdown, names escaped) and the step that adds it."""

    why: str
    how: str

    def text(self) -> str:
        return not_run(self.why, self.how)


@dataclass(frozen=True)
class Intervals:
    """How the intervals were made: bootstrap resamples and seed, and the smallest n that gets one."""

    resamples: int
    seed: int
    min_n: int

    def text(self) -> str:
        return interval_method(self.resamples, self.seed, self.min_n)


# ----------------------------------------------------------------------------- RQ1
@dataclass(frozen=True)
class BehaviourRate:
    """One behaviour's mean occurrences per human conversation."""

    behaviour: str
    """The behaviour's id in the taxonomy."""
    name: str
    category: str
    mean: Estimate


@dataclass(frozen=True)
class ScoreMean:
    """One Likert score's mean (or a difference of means), with its interval."""

    score: str
    mean: Estimate


@dataclass(frozen=True)
class HumanRates:
    """RQ1: how often the multi-party human references show each behaviour, by one judge.
    ``missing`` is set (and the figures empty) when there is nothing to answer from."""

    judge: str | None
    intervals: Intervals
    excluded_chats: int = 0
    """Human–AI chat instances judged by this judge and left out (their reference is a user talking to a chatbot)."""
    n: int = 0
    """Multi-party human references with a valid judgment."""
    mean_total: float | None = None
    """Behaviours per conversation (all behaviours summed), mean over the references."""
    median_total: float | None = None
    rates: tuple[BehaviourRate, ...] = ()
    """Every behaviour, most frequent first."""
    likert: tuple[ScoreMean, ...] = ()
    missing: NotRun | None = None

    @property
    def absent(self) -> list[str]:
        """The behaviours never detected in the references (names, in ``rates`` order)."""
        return [r.name for r in self.rates if r.mean.value == 0]


def render_human_rates(x: HumanRates) -> list[str]:
    """RQ1's sentences."""
    excluded = (
        f"{x.excluded_chats} human–AI chat instance(s) judged by {md_escape(x.judge or '')} are left out (their "
        "reference is a user talking to a chatbot; see the generalization notebook)."
        if x.excluded_chats
        else "No human–AI chat instance is among them."
    )
    if x.missing is not None:
        return [x.missing.text()] + ([excluded] if x.judge is not None else [])
    out = [
        f"Judged by **{md_escape(x.judge or '')}** over {x.n} multi-party human references, a conversation shows "
        f"{x.mean_total:.2f} behaviours on average (median {x.median_total:.0f}). {excluded}",
        f"Method: n = {x.n} instances; {x.intervals.text()}; no test is made here, so no correction applies.",
        "Mean occurrences per conversation, most frequent first:\n"
        + "\n".join(f"- {r.name} ({r.category}): {r.mean.text()}" for r in x.rates),
    ]
    if absent := x.absent:
        out.append(f"Never detected in the {x.n} human references: " + ", ".join(absent) + ".")
    if x.likert:
        out.append(
            "Overall scores of the human references: " + "; ".join(f"{s.score} {s.mean.text()}" for s in x.likert)
        )
    return out


# ----------------------------------------------------------------------------- RQ2, RQ4, generalization
@dataclass(frozen=True)
class BehaviourVerdict:
    """A behaviour a setup over- or under-produces, with its corrected p-value."""

    name: str
    p_adj: float


@dataclass(frozen=True)
class SetupVsHumans:
    """One setup against the human reference on the same instances: its profile distance D and,
    where n reaches the minimum, the behaviours it significantly over- and under-produces."""

    setup: str
    distance: Estimate
    tested: bool
    """Whether n ≥ the minimum, so that verdicts are drawn."""
    over: tuple[BehaviourVerdict, ...] = ()
    under: tuple[BehaviourVerdict, ...] = ()


@dataclass(frozen=True)
class LikertDifference:
    """A setup's Likert score minus the human reference's, paired per instance."""

    setup: str
    score: str
    difference: Estimate


@dataclass(frozen=True)
class HumanComparison:
    """RQ2/RQ4 (and generalization): the chosen setups against the human reference, by one judge.
    ``family``, ``n_behaviours`` and ``n_setups_judged`` describe the multiple-testing family (every
    behaviour × every setup this judge judged, the same in every notebook and the report)."""

    judge: str
    intervals: Intervals
    correction: str
    setups: tuple[SetupVsHumans, ...] = ()
    """Closest first (by the point estimate of D)."""
    family: int = 0
    n_behaviours: int = 0
    n_setups_judged: int = 0
    likert: tuple[LikertDifference, ...] | None = None
    """None: no paired Likert scores at all."""
    missing: NotRun | None = None

    @property
    def closest(self) -> SetupVsHumans | None:
        """The setup with the smallest D among those tested (not a tested difference between setups)."""
        return next((s for s in self.setups if s.tested), None)


def _verdicts(v: tuple[BehaviourVerdict, ...]) -> str:
    return ", ".join(f"{b.name} (p_adj {b.p_adj:.3g})" for b in v) or "none"


def render_human_comparison(x: HumanComparison) -> list[str]:
    """RQ2/RQ4's sentences."""
    if x.missing is not None:
        return [x.missing.text()]
    judge, min_n = md_escape(x.judge), x.intervals.min_n
    lo, hi = min(s.distance.n for s in x.setups), max(s.distance.n for s in x.setups)
    out = [
        f"Method: n = {lo!s}{'' if lo == hi else f'–{hi!s}'} instances per setup, "
        f"each paired with its human reference; {x.intervals.text()}; "
        f"over/under-production: {inference.describe_test(x.correction, x.family)} (the family: "
        f"{x.n_behaviours} behaviours × the {x.n_setups_judged} setup(s) judged by {judge}, "
        f"those with n ≥ {min_n})."
    ]
    if (best := x.closest) is None:
        out.append(
            f"No setup here has at least {min_n} instances judged by {judge}: no setup is "
            "called closest and no verdict is drawn."
        )
    else:
        out.append(
            f"Profile distance D to the humans (Σ|mean simulated − mean human| per conversation; 0 = "
            f"human-like), judged by **{judge}**: closest **{md_escape(best.setup)}** "
            f"D = {best.distance.text()} (among setups with n ≥ {min_n}; the smallest point estimate of D, "
            "not a tested difference between setups: compare their intervals)."
        )
    for s in x.setups:
        head = f"- **{md_escape(s.setup)}**: D = {s.distance.text()}"
        if not s.tested:
            out.append(f"{head}; no verdict (n too small: {s.distance.n} < {min_n}).")
        else:
            out.append(f"{head}; over-produces: {_verdicts(s.over)}; under-produces: {_verdicts(s.under)}.")
    if x.likert is not None:
        out.append(
            "Likert scores (1–10), each setup paired with the human reference on the instances both have a "
            "valid overall judgment for (n per setup); simulated − human: "
            + "; ".join(f"{md_escape(d.setup)} {d.score} {d.difference.text()}" for d in x.likert)
            + "."
        )
    return out


# ----------------------------------------------------------------------------- RQ3, RQ5
@dataclass(frozen=True)
class BehaviourDiff:
    """A behaviour significantly higher or lower in setup b than in setup a: b − a, corrected p."""

    name: str
    diff: float
    p_adj: float


@dataclass(frozen=True)
class PairContrast:
    """Setup b against setup a on the instances both have valid judgments for: the behaviours
    significantly higher and lower in b after the correction, and how many show no difference.
    ``model_group`` and ``prompt`` are the pair's condition; RQ3 compares prompts at one k
    (``k_a == k_b``), RQ5 two k values at one prompt."""

    model_group: str
    prompt: str | None
    setup_a: str
    setup_b: str
    k_a: int
    k_b: int
    n: int
    tested: bool
    """Whether n ≥ the minimum; otherwise no behaviour is tested."""
    untested_note: str | None = None
    """Why a pair with no shared instance (n = 0) has no estimate."""
    higher: tuple[BehaviourDiff, ...] = ()
    lower: tuple[BehaviourDiff, ...] = ()
    same: int = 0


@dataclass(frozen=True)
class ContrastMethod:
    """How the pairs were compared: n range over the pairs, the test's family (behaviours × pairs)."""

    n_low: int
    n_high: int
    family: int
    n_behaviours: int
    n_pairs: int
    correction: str
    intervals: Intervals


def _render_method(m: ContrastMethod, what: str) -> str:
    n = f"{m.n_low!s}" if m.n_low == m.n_high else f"{m.n_low!s}–{m.n_high!s}"
    return (
        f"Method: differences per behaviour in mean occurrences per conversation, paired over the instances "
        f"both setups have valid judgments for (n = {n}); {m.intervals.text()}; "
        f"{inference.describe_test(m.correction, m.family)} (the family: {m.n_behaviours} behaviours × "
        f"{what}, those with n ≥ {m.intervals.min_n}). Human–AI chat instances are left out."
    )


def _render_pair(c: PairContrast, head: str, min_n: int, b_word: str) -> str:
    if not c.tested:
        why = c.untested_note if c.n == 0 else f"n too small: {c.n} < {min_n}"
        return f"- {head} (n = {c.n}): not tested ({why})."

    def listed(v: tuple[BehaviourDiff, ...]) -> str:
        return ", ".join(f"{b.name} ({b.diff:+.2f}, p_adj {b.p_adj:.3g})" for b in v) or "none"

    return (
        f"- {head} (n = {c.n}): higher {b_word}: {listed(c.higher)}; lower {b_word}: {listed(c.lower)}; "
        f"no significant difference for {c.same} behaviour(s)."
    )


@dataclass(frozen=True)
class PromptingEffect:
    """RQ3: ``treatment`` − ``baseline`` prompting per model and k, by one judge."""

    judge: str
    baseline: str
    treatment: str
    method: ContrastMethod | None = None
    contrasts: tuple[PairContrast, ...] = ()
    """Grouped by model, in the order the run's conditions give them."""
    missing: NotRun | None = None


def render_prompting(x: PromptingEffect) -> list[str]:
    """RQ3's sentences."""
    if x.missing is not None or x.method is None:
        return [x.missing.text()] if x.missing else []
    treatment = md_escape(x.treatment)
    out = [
        _render_method(x.method, f"the {x.method.n_pairs} (model, k) pair(s)")
        + f" Judge: **{md_escape(x.judge)}**; difference = {treatment} − {md_escape(x.baseline)}."
    ]
    for c in x.contrasts:
        head = f"**{md_escape(c.model_group)}**, k = {c.k_a} ({md_escape(c.setup_a)} → {md_escape(c.setup_b)})"
        out.append(_render_pair(c, head, x.method.intervals.min_n, f"with {treatment}"))
    return out


@dataclass(frozen=True)
class KDistance:
    """A setup's profile distance D to the humans, at its k (turns per call)."""

    k: int
    distance: Estimate


@dataclass(frozen=True)
class KGroup:
    """One model × prompt: D per k, and its k pairs compared."""

    model_group: str
    prompt: str
    distances: tuple[KDistance, ...]
    contrasts: tuple[PairContrast, ...]

    @property
    def label(self) -> str:
        return f"{self.model_group} · {self.prompt}"


@dataclass(frozen=True)
class SingleK:
    """A model × prompt with one k only (nothing to compare)."""

    condition: str
    k: int


@dataclass(frozen=True)
class TurnsPerCallEffect:
    """RQ5: within each model × prompt, its k values compared pairwise, by one judge. ``not_compared``
    lists the imported or plugin setups (no turns per call); ``single_k`` the conditions with one k."""

    judge: str
    not_compared: tuple[str, ...] = ()
    single_k: tuple[SingleK, ...] = ()
    method: ContrastMethod | None = None
    groups: tuple[KGroup, ...] = ()
    missing: NotRun | None = None


def render_turns_per_call(x: TurnsPerCallEffect) -> list[str]:
    """RQ5's sentences."""
    out = []
    if x.not_compared:
        out.append(
            "Not compared (imported or plugin setups, which have no turns per call): "
            + ", ".join(md_escape(s) for s in x.not_compared)
            + "."
        )
    if x.single_k:
        out.append(
            "Not compared (one k only): "
            + "; ".join(f"{md_escape(s.condition)} (only k = {s.k})" for s in x.single_k)
            + "."
        )
    if x.missing is not None or x.method is None:
        return out + ([x.missing.text()] if x.missing else [])
    out.append(
        _render_method(x.method, f"the {x.method.n_pairs} k pair(s) within model × prompt")
        + f" Judge: **{md_escape(x.judge)}**; difference = larger k − smaller k."
    )
    for g in x.groups:
        if g.distances:
            out.append(
                f"**{md_escape(g.label)}** — profile distance D to the humans by k: "
                + "; ".join(f"k = {d.k}: {d.distance.text()}" for d in g.distances)
                + "."
            )
        for c in g.contrasts:
            head = f"k = {c.k_a} → {c.k_b} ({md_escape(c.setup_a)} → {md_escape(c.setup_b)})"
            out.append(_render_pair(c, head, x.method.intervals.min_n, f"with k = {c.k_b}"))
    return out
