"""Stopping when the answer is known (beyond the paper): the ``stopping:`` section of a params file,
the order instances are processed in, the rule, and the record of where each setup stopped.

- **Order.** The selected instances are processed in rounds of ``round_conversations`` SOURCE
  CONVERSATIONS, drawn in a seeded random order (every window of a conversation in the same round):
  the windows of one meeting are not independent, the conversations are, so each round adds
  independent draws of the unit the rule averages over. The order is each conversation's rank by a
  seeded hash of its id (``conversation_order``): a larger selection keeps the order of the
  conversations it shares with a smaller one, so a later run with a larger budget goes on from the
  call cache.
- **The statistic.** Per source conversation and behaviour, the mean over its windows of the paired
  difference (setup − human reference) in occurrences per conversation, by the rule's judge
  (instances where both have a valid fine-grained judgment; a conversation without one adds no
  observation).
- **The rule** (``METHOD``): a two-sided asymptotic confidence sequence for each behaviour's mean
  paired difference (Waudby-Smith, Arnold, Wu, Ramdas & Howard, "Time-uniform central limit theory
  and asymptotic confidence sequences", Annals of Statistics 2024; the Robbins normal-mixture
  boundary), radius sqrt( 2(tσ̂²ρ²+1)/(t²ρ²) · log( sqrt(tσ̂²ρ²+1)/α' ) ) with σ̂² the observations'
  variance, α' = α/K (Bonferroni over the K behaviours) and ρ² = (−2 log α' + log(1 − 2 log α'))/t*,
  tightest near t* = the planned number of conversations when σ̂ ≈ 1. The intervals hold for every
  t at once (asymptotically), so the rule may be looked at after every round: ``differs`` stops a
  setup once some behaviour's sequence excludes 0 (the probability that a setup equal to the humans
  is ever declared different is at most α; ``benchmarks/stopping.py``), ``precise`` once every
  behaviour's radius is at most ``eps``, ``differs_or_precise`` at the first of the two.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cocoeval.core.schema import Instance, Judgment, conversation_of
from cocoeval.core.targets import REFERENCE, behaviour_counts
from cocoeval.core.taxonomy import Taxonomy

METHOD = (
    "asymptotic confidence sequence (Waudby-Smith, Arnold, Wu, Ramdas & Howard 2024, normal mixture), "
    "Bonferroni over behaviours, on per-conversation mean paired differences (setup − human)"
)
"""The rule's name, in the manifest, the report and the docs."""

Rule = Literal["differs", "precise", "differs_or_precise"]


class StoppingSection(BaseModel):
    """The ``stopping:`` section (beyond the paper): process the selected instances in rounds of
    source conversations and stop each setup once its comparison with the humans is settled under
    an anytime-valid confidence sequence (``METHOD``). The instances the params select are the
    budget: a setup never settled uses them all."""

    model_config = ConfigDict(extra="forbid")

    rule: Rule = "differs"
    """When a setup is settled: ``differs`` — its behaviour profile is confirmed to differ from the
    humans' (some behaviour's confidence sequence excludes 0); ``precise`` — every behaviour's
    paired difference is known within ±``eps``; ``differs_or_precise`` — the first of the two."""
    eps: float | None = Field(None, gt=0, strict=False)
    """The half-width (occurrences per conversation) ``precise`` asks for; required by ``precise``
    and ``differs_or_precise``, refused by ``differs``."""
    alpha: float = Field(0.05, gt=0, lt=1)
    """The error rate the rule keeps over all rounds together: a setup equal to the humans is
    declared different with probability at most alpha (split over the behaviours, Bonferroni)."""
    round_conversations: int = Field(10, ge=1, le=1_000_000, strict=True)
    """Source conversations per round (all their windows); each round is simulated and judged, then
    the rule is evaluated for every setup still running."""
    min_rounds: int = Field(2, ge=1, le=1_000_000, strict=True)
    """Rounds every setup runs before the rule may stop it (the sequence is valid from the first,
    but its asymptotic level needs a few conversations)."""
    seed: int = Field(0, strict=True)
    """Seed of the conversations' order (``conversation_order``)."""
    judge: str | None = None
    """The LLM judge whose fine-grained judgments the rule reads (None: the first LLM judge that
    makes fine-grained judgments)."""

    @model_validator(mode="after")
    def _eps(self) -> StoppingSection:
        if self.rule == "differs" and self.eps is not None:
            raise ValueError("eps is the half-width of rule precise (or differs_or_precise); rule differs takes none")
        if self.rule != "differs" and self.eps is None:
            raise ValueError(f"rule {self.rule} needs eps, the half-width asked for (occurrences per conversation)")
        return self


class BehaviourBound(BaseModel):
    """One behaviour's confidence sequence at a setup's last look."""

    behaviour: str
    mean: float
    """Mean over conversations of the per-conversation mean paired difference (setup − human)."""
    radius: float
    low: float
    high: float


class SetupStop(BaseModel):
    """Where one setup stopped and why (``StoppingRecord.setups``)."""

    status: Literal["running", "differs", "precise", "budget"]
    """``running`` (still going: the run was interrupted), ``differs``/``precise`` (settled by the
    rule: stopped), ``budget`` (every round done and not settled)."""
    round: int
    """Rounds the setup took part in (the last one it was simulated in)."""
    conversations: int
    """Source conversations processed for it (the first ``conversations`` of the order)."""
    instances: int
    """Instances processed for it."""
    observations: int
    """Conversations with at least one valid paired judgment: the ``t`` of the sequence."""
    reason: str
    """Why it stopped (or did not), in words."""
    bounds: list[BehaviourBound] = Field(default_factory=list)
    """Every behaviour's confidence sequence at the last look (empty before any observation)."""


class StoppingRecord(BaseModel):
    """``manifest.json``'s ``stopping``: the rule as run and, per setup, where it stopped and why."""

    method: str = METHOD
    rule: str
    eps: float | None = None
    alpha: float
    round_conversations: int
    min_rounds: int
    seed: int
    judge: str
    rounds_planned: int
    conversations_planned: int
    instances_planned: int
    setups: dict[str, SetupStop] = Field(default_factory=dict)


# ---------------------------------------------------------------- order


def conversation_order(instances: Iterable[Instance], seed: int) -> list[str]:
    """The source conversations of ``instances`` in the seeded random order they are processed in:
    sorted by SHA-256 of (seed, conversation), so the order of two conversations never depends on
    which others are selected."""
    convs = {conversation_of(i) for i in instances}
    return sorted(convs, key=lambda c: (hashlib.sha256(f"cocoeval-stopping|{seed}|{c}".encode()).hexdigest(), c))


def rounds_of(instances: Sequence[Instance], section: StoppingSection) -> list[list[Instance]]:
    """The instances of each round, in the instances' own order within a round."""
    order = conversation_order(instances, section.seed)
    at = {c: n // section.round_conversations for n, c in enumerate(order)}
    out: list[list[Instance]] = [
        [] for _ in range((len(order) + section.round_conversations - 1) // section.round_conversations)
    ]
    for i in instances:
        out[at[conversation_of(i)]].append(i)
    return out


def processed_instances(instances: Sequence[Instance], section: StoppingSection, conversations: int) -> set[str]:
    """Ids of the instances of the first ``conversations`` conversations of the order (what a setup
    that stopped after them was run on)."""
    first = set(conversation_order(instances, section.seed)[:conversations])
    return {i.id for i in instances if conversation_of(i) in first}


# ---------------------------------------------------------------- the confidence sequence


def rho_squared(alpha: float, planned: int) -> float:
    """ρ² of the normal-mixture boundary that makes it tightest near ``planned`` observations
    (Waudby-Smith et al. 2024, for unit variance)."""
    la = -2.0 * math.log(alpha)
    return (la + math.log(la + 1.0)) / max(planned, 1)


def cs_radius(t: int, variance: float, alpha: float, rho2: float) -> float:
    """The asymptotic confidence sequence's radius after ``t`` observations of sample ``variance``:
    sqrt( 2(tσ̂²ρ²+1)/(t²ρ²) · log( sqrt(tσ̂²ρ²+1)/α ) )."""
    if t < 1:
        return math.inf
    v = t * variance * rho2 + 1.0
    return math.sqrt(2.0 * v / (t * t * rho2) * math.log(math.sqrt(v) / alpha))


def bounds_of(
    x: Sequence[Sequence[float]], behaviours: Sequence[str], alpha: float, planned: int
) -> list[BehaviourBound]:
    """Each behaviour's confidence sequence over the rows of ``x`` (t observations × K behaviours),
    at level alpha/K each (Bonferroni)."""
    t, k = len(x), len(behaviours)
    if t == 0:
        return []
    a = alpha / k
    rho2 = rho_squared(a, planned)
    out = []
    for b, name in enumerate(behaviours):
        col = [float(row[b]) for row in x]
        m = sum(col) / t
        var = sum((v - m) ** 2 for v in col) / t
        r = cs_radius(t, var, a, rho2)
        out.append(BehaviourBound(behaviour=name, mean=m, radius=r, low=m - r, high=m + r))
    return out


def decide(bounds: Sequence[BehaviourBound], section: StoppingSection) -> tuple[str | None, str]:
    """The rule on one setup's bounds: ("differs"|"precise"|None, why in words)."""
    apart = [b for b in bounds if b.low > 0 or b.high < 0]
    widest = max((b.radius for b in bounds), default=math.inf)
    if section.rule in ("differs", "differs_or_precise") and apart:
        names = ", ".join(f"{b.behaviour} {b.mean:+.2f} [{b.low:+.2f}, {b.high:+.2f}]" for b in apart[:3])
        return "differs", f"differs from the humans: the confidence sequence excludes 0 for {names}"
    if (
        section.rule in ("precise", "differs_or_precise")
        and bounds
        and section.eps is not None
        and widest <= section.eps
    ):
        return "precise", f"every behaviour's paired difference is known within ±{widest:.3f} (eps {section.eps:g})"
    if not bounds:
        return None, "no valid paired judgment yet"
    return None, (
        "not settled: every confidence sequence holds 0"
        if section.rule == "differs"
        else f"not settled: the widest radius is {widest:.3f} (eps {section.eps:g})"
    )


def observations(
    instances: Sequence[Instance], setup: str, judgments: Sequence[Judgment], judge: str, tax: Taxonomy
) -> list[list[float]]:
    """Per source conversation (in the order first met in ``instances``), the mean over its
    instances of the paired difference setup − human reference of each behaviour's count, by
    ``judge``'s valid fine-grained judgments; conversations without a valid pair are left out."""
    ref: dict[str, dict[str, int]] = {}
    sim: dict[str, dict[str, int]] = {}
    for j in judgments:
        if j.judge_name not in (None, judge) or j.kind != "fine_grained":
            continue
        c = behaviour_counts(j, tax)
        if c is None:
            continue
        name = j.target_name or j.target
        if j.target == REFERENCE:
            ref[j.instance_id] = c
        elif name == setup:
            sim[j.instance_id] = c
    per: dict[str, list[list[float]]] = {}
    for i in instances:
        if i.id in ref and i.id in sim:
            per.setdefault(conversation_of(i), []).append([sim[i.id][b] - ref[i.id][b] for b in tax.ids])
    return [[sum(col) / len(rows) for col in zip(*rows, strict=True)] for rows in per.values()]


def setup_stop(
    status: Literal["running", "differs", "precise", "budget"],
    rnd: int,
    done: Sequence[Instance],
    obs: Sequence[Sequence[float]],
    bounds: Sequence[BehaviourBound],
    reason: str,
    conversations: int,
) -> SetupStop:
    """A setup's record after round ``rnd``: ``conversations`` is the prefix of the order processed
    (what ``processed_instances`` reads back), not the conversations among the setup's own
    instances, which a ``datasets:`` filter makes fewer."""
    return SetupStop(
        status=status,
        round=rnd,
        conversations=conversations,
        instances=len(done),
        observations=len(obs),
        reason=reason,
        bounds=list(bounds),
    )


def record_for(section: StoppingSection, judge: str, instances: Sequence[Instance]) -> StoppingRecord:
    """The record before any round: the rule and the plan."""
    n = len(conversation_order(instances, section.seed))
    return StoppingRecord(  # every field given: the manifest is written with the fields set
        method=METHOD,
        rule=section.rule,
        eps=section.eps,
        alpha=section.alpha,
        round_conversations=section.round_conversations,
        min_rounds=section.min_rounds,
        seed=section.seed,
        judge=judge,
        rounds_planned=(n + section.round_conversations - 1) // section.round_conversations,
        conversations_planned=n,
        instances_planned=len(instances),
        setups={},
    )


def stopped_setups(manifest_stopping: Mapping[str, object] | None) -> StoppingRecord | None:
    """The manifest's ``stopping`` record read back (None: the run had no stopping: section)."""
    return None if manifest_stopping is None else StoppingRecord.model_validate(manifest_stopping)


# ---------------------------------------------------------------- the forecast (cocoeval estimate)

ASSUMED_TURN_RATES = (0.02, 0.03, 0.05, 0.08, 0.1, 0.04, 0.06, 0.12, 0.02, 0.07)
"""Per-turn rates of the taxonomy's behaviours (in its order) assumed for the humans when no judged
run is given: 2–12%, the known-truth worlds' (``benchmarks/known_truth.py``); the paper gives its
human rates (Figure 3(a)) as a chart only."""
EFFECT = 2.0
"""The assumed effect of a clearly separated setup: this multiple of the humans' rates..."""
EFFECT_BEHAVIOURS = 3
"""...on this many behaviours (the humans' most frequent ones), the rest equal."""


class SavingForecast(BaseModel):
    """What ``cocoeval estimate`` forecasts for a ``stopping:`` section (``forecast_saving``)."""

    human_rates: str
    """Where the humans' rates came from, in words."""
    assumption: str
    """The world simulated, in words."""
    worlds: int
    separated_share: float
    """Mean share of the budget's instances a clearly separated setup uses."""
    separated_correct: float
    """Share of worlds in which it stopped as ``differs``."""
    equal_share: float
    """Mean share a setup equal to the humans uses."""
    equal_wrong: float
    """Share of worlds in which a setup equal to the humans was declared different."""


def forecast_saving(
    instances: Sequence[Instance],
    section: StoppingSection,
    tax: Taxonomy,
    human_counts: Mapping[str, float] | None = None,
    *,
    worlds: int = 200,
) -> SavingForecast:
    """Monte Carlo of the rule on ``worlds`` worlds shaped as the run: its conversations and their
    windows, rounds as ``section`` plans them. The humans' count of behaviour b in an instance is
    Poisson(λ_b·g·h), λ_b the mean count per instance ``human_counts`` (the run's own judged
    reference) or ``ASSUMED_TURN_RATES`` × the instance's reference turns, g ~ Gamma(4, 1/4) per
    conversation and h ~ Gamma(8, 1/8) per window (overdispersed; windows of a meeting alike); a
    clearly separated setup draws at ``EFFECT`` × the rates on the ``EFFECT_BEHAVIOURS`` most
    frequent behaviours, an equal one at the humans' rates."""
    import numpy as np

    order = conversation_order(instances, section.seed)
    turns: dict[str, list[int]] = {c: [] for c in order}
    for i in instances:
        turns[conversation_of(i)].append(len(i.reference))
    k = len(tax.ids)
    if human_counts:
        base = np.array([human_counts.get(b, 0.0) for b in tax.ids])
        source = "the run's judged human reference (mean count per instance)"
        per_turn = None
    else:
        rates = np.array([ASSUMED_TURN_RATES[n % len(ASSUMED_TURN_RATES)] for n in range(k)])
        source = "assumed per-turn rates of 2–12% (the paper's Figure 3(a) is a chart only)"
        per_turn = rates
        base = rates * float(np.mean([len(i.reference) for i in instances]))
    top = np.argsort(-base, kind="stable")[:EFFECT_BEHAVIOURS]
    effect = np.ones(k)
    effect[top] = EFFECT
    total = len(instances)
    rounds = (len(order) + section.round_conversations - 1) // section.round_conversations

    def one(c: np.ndarray, seed: int) -> tuple[float, bool]:
        rng = np.random.default_rng([seed, 4242])
        obs: list[list[float]] = []
        used = 0
        for r in range(1, rounds + 1):
            for conv in order[(r - 1) * section.round_conversations : r * section.round_conversations]:
                n = len(turns[conv])
                lam = (
                    np.array(turns[conv])[:, None] * per_turn[None, :]
                    if per_turn is not None
                    else np.tile(base, (n, 1))
                )
                g = rng.gamma(4, 1 / 4) * rng.gamma(8, 1 / 8, size=(n, 1))
                d = rng.poisson(lam * c * g) - rng.poisson(lam * g)
                obs.append(d.mean(axis=0).tolist())
                used += n
            verdict, _ = decide(bounds_of(obs, tax.ids, section.alpha, len(order)), section)
            if verdict is not None and r >= section.min_rounds:
                return used / total, verdict == "differs"
        return 1.0, False

    sep = [one(effect, s) for s in range(worlds)]
    eq = [one(np.ones(k), s) for s in range(worlds)]
    names = ", ".join(tax.ids[j] for j in top)
    return SavingForecast(
        human_rates=source,
        assumption=(
            f"a clearly separated setup at {EFFECT:g}× the humans' rates on {names} (the rest equal); counts "
            "Poisson with a Gamma(4, 1/4) rate factor per conversation and Gamma(8, 1/8) per window"
        ),
        worlds=worlds,
        separated_share=float(np.mean([s for s, _ in sep])),
        separated_correct=float(np.mean([ok for _, ok in sep])),
        equal_share=float(np.mean([s for s, _ in eq])),
        equal_wrong=float(np.mean([ok for _, ok in eq])),
    )


def human_counts_of(judgments: Sequence[Judgment], judge: str, tax: Taxonomy) -> dict[str, float] | None:
    """Mean count per instance of each behaviour in the human reference, by ``judge``'s valid
    fine-grained judgments (None: none)."""
    rows = [
        c
        for j in judgments
        if j.target == REFERENCE and j.kind == "fine_grained" and j.judge_name in (None, judge)
        if (c := behaviour_counts(j, tax)) is not None
    ]
    if not rows:
        return None
    return {b: sum(r[b] for r in rows) / len(rows) for b in tax.ids}
