"""The judge probes as data, and their one wording (beyond the paper).

``probes.probe_findings`` reads the probe tables into a ``ProbeFindings`` (the rows a sentence is
said of, typed); ``render_probes`` writes its lines for the judge_check analysis and
``cocoeval probe``. The render function is pure: no run, no tables."""

from __future__ import annotations

from dataclasses import dataclass

NOT_RUN = "not run: cocoeval probe PARAMS"


@dataclass(frozen=True)
class ProbeCI:
    """A 95% interval, or the note saying why there is none."""

    low: float | None
    high: float | None
    note: str | None


@dataclass(frozen=True)
class NamesFinding:
    """The names probe on one measure: fine-grained (``changed`` of ``n`` turn labels, ``value``
    their share) or a Likert score (``value`` points on average, ``changed`` of ``n`` targets)."""

    kind: str
    measure: str
    n_targets: int
    changed: int
    n: int
    value: float
    ci: ProbeCI
    flag: bool


@dataclass(frozen=True)
class PlantedFinding:
    """One planted behaviour: detected ``detected`` of ``n``, the other labels on the planted turn,
    and the false alarms added elsewhere (None: unknown, ``false_alarms_ci.note`` says why)."""

    behaviour: str
    expects: str
    detected: int
    n: int
    rate: float
    ci: ProbeCI
    other_label: str
    false_alarms: float | None
    false_alarms_ci: ProbeCI


@dataclass(frozen=True)
class StabilityFinding:
    """Two samples of the same judgments: fine-grained any behaviour (κ, share of turns agreeing)
    or a Likert score (share equal, mean absolute difference)."""

    kind: str
    measure: str
    n_targets: int
    n: int
    kappa: float | None
    agree: float
    ci: ProbeCI
    mean_abs_diff: float | None


@dataclass(frozen=True)
class SelfPreferenceFinding:
    """The gap when the judge's model family is the simulator's, on one measure."""

    judge_family: str
    same_setups: str
    other_setups: str
    measure: str
    gap: float
    n: int
    ci: ProbeCI


@dataclass(frozen=True)
class ProbeFindings:
    """What the probes found: which kinds ran, and the findings said of each."""

    names_run: bool
    planted_run: bool
    stability_run: bool
    names: tuple[NamesFinding, ...]
    planted: tuple[PlantedFinding, ...]
    stability: tuple[StabilityFinding, ...]
    self_preference: tuple[SelfPreferenceFinding, ...]
    self_preference_run: bool


def _ci(c: ProbeCI, fmt: str = ".2f") -> str:
    return f"95% CI {c.low:{fmt}} to {c.high:{fmt}}" if c.low is not None else f"no interval: {c.note}"


def render_probes(x: ProbeFindings) -> list[str]:
    """The probe findings in words, one line each (beyond the paper); "not run: cocoeval probe
    PARAMS" for a probe that was not run."""
    out = ["Judge probes (beyond the paper):"]
    if not (x.names_run or x.planted_run or x.stability_run):
        out.append(f"names, planted behaviours, stability: {NOT_RUN}")
    else:
        if not x.names_run:
            out.append(f"names: {NOT_RUN} (with names in probes.kinds)")
        for r in x.names:
            what = (
                f"{r.changed} of {r.n} turn labels ({r.value:.1%})"
                if r.kind == "fine_grained"
                else f"{r.value:.2f} Likert points on average ({r.changed} of {r.n} targets)"
            )
            out.append(
                f"names → letters, {r.measure} ({r.n_targets} targets): {what} change; {_ci(r.ci)}"
                + ("; FLAGGED: the judge's labels depend on the names" if r.flag else "; few, as expected")
            )
        if not x.planted_run:
            out.append(f"planted behaviours: {NOT_RUN} (with planted in probes.kinds)")
        for p in x.planted:
            fa = (
                f"{p.false_alarms:+.2f} labels per other turn ({_ci(p.false_alarms_ci)})"
                if p.false_alarms is not None
                else f"unknown ({p.false_alarms_ci.note})"
            )
            out.append(
                f"planted {p.behaviour} (expected {p.expects}): detected {p.detected} of {p.n} "
                f"({p.rate:.0%}; {_ci(p.ci)}); other labels only on "
                f"{p.other_label}; false alarms added elsewhere {fa}"
            )
        if not x.stability_run:
            out.append(f"stability: {NOT_RUN} (with stability in probes.kinds)")
        for s in x.stability:
            if s.kind == "fine_grained":
                k = f"κ {s.kappa:.2f}" if s.kappa is not None else "κ undefined"
                out.append(
                    f"stability, any behaviour ({s.n_targets} targets, {s.n} turns): {k}, "
                    f"{s.agree:.0%} of turns agree; {_ci(s.ci)}"
                )
            else:
                out.append(
                    f"stability, {s.measure}: {s.agree:.0%} equal, mean |difference| "
                    f"{s.mean_abs_diff:.2f} points ({s.n} targets)"
                )
    if not x.self_preference_run:
        out.append(
            "self-preference: not computed (needs setups of the judge's model family and of another family, "
            "judged validly beside the human reference)"
        )
    for g in x.self_preference:
        out.append(
            f"self-preference ({g.judge_family}: {g.same_setups} vs {g.other_setups}), "
            f"{g.measure}: gap {g.gap:+.2f} ({g.n} instances; {_ci(g.ci)})"
        )
    return out
