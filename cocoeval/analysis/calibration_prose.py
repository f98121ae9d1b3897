"""The judge_reliability analysis as data, and its one wording (beyond the paper).

``calibration.answer`` computes a ``Reliability`` (per LLM judge how its samples went, its pooled
calibration against the annotators' majority and its agreement history) and renders it with
``render_reliability`` into the sentences of its ``Answer.text``; the result stays reachable as
``Answer.result``, as for the research questions (``rq_prose``). The render function is pure: no
run, no frames."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Samples:
    """A sampled judge's samples: per target, in all, the invalid ones and their most frequent
    reasons (at most three, with their counts)."""

    samples_per_target: int
    samples: int
    invalid: int
    reasons: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PooledCalibration:
    """A judge's calibration pooled over the behaviours, and what was left out (``notes``)."""

    turns: int
    conversations: int
    ece: float
    brier: float
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Move:
    """How one measure of any behaviour moved against the previous judge id: the verdict
    (``direction``), the change, its 95% paired bootstrap interval (None: none) and the rule that
    called it (``calibration.BOOTSTRAP_RULE`` or the threshold rule, with why)."""

    measure: str
    direction: str
    change: float
    low: float | None = None
    high: float | None = None
    rule: str | None = None


@dataclass(frozen=True)
class History:
    """The comparison with the latest entry of the same judge name under another judge id
    (``earlier`` False: no such entry)."""

    earlier: bool
    previous_id: str | None
    previous_prompt: str | None
    previous_date: str | None
    moves: tuple[Move, ...]


@dataclass(frozen=True)
class JudgeReliability:
    """One LLM judge: its samples (None: one per target), its pooled calibration (None: not
    measured or no turns), its history (None: no entry made)."""

    judge: str
    samples: Samples | None
    calibration: PooledCalibration | None
    history: History | None


@dataclass(frozen=True)
class Reliability:
    """The judge_reliability analysis: the settings its sentences name, each LLM judge (none: the
    run has no LLM judge with valid judgments) and whether any calibration was measured."""

    bins: int
    change: float
    judges: tuple[JudgeReliability, ...]
    calibrated: bool
    min_n: int = 10
    """The fewest source conversations a change's interval is given from."""


def _move(m: Move) -> str:
    """One measure's verdict, its change and its interval where it has one."""
    ci = f"; 95% CI {m.low:+.3f} to {m.high:+.3f}" if m.low is not None and m.high is not None else ""
    change = "" if m.change is None else f" ({m.change:+.3f}{ci})"
    return f"{m.measure} {m.direction}{change}"


def render_reliability(x: Reliability) -> list[str]:
    """The judge_reliability answer's sentences, every number a field of ``x``."""
    from .coverage import not_run

    if not x.judges:
        return [not_run("this run has no LLM judge with valid judgments", "add a judge and run it")]
    out = [
        "Beyond the paper. With `samples: k` a judge answers each target k times; its label is the strict "
        "majority of the valid samples and its vote fraction per turn and behaviour the share of them that "
        f"label it. Calibration: the fractions against the annotators' majority on the annotated turns, Brier "
        f"score and expected calibration error ({x.bins} equal-width bins; 0 is perfect). History: "
        "judge_history.jsonl beside the run, compared with the latest earlier-dated entry of the same judge "
        "name under another judge id, only when both were measured on the same labelled conversations and "
        "annotators: a measure **rose** or **fell** when the 95% paired cluster-bootstrap interval of its change "
        "(the same conversations drawn for both judge ids) excludes 0, else it shows **no clear change** (the "
        f"difference is within what re-drawing the conversations gives; no interval under {x.min_n} conversations); "
        f"an earlier entry without per-conversation statistics gets the threshold rule (a rise or fall from "
        f"{x.change:g}, no test). Definitions: `cocoeval/analysis/calibration.py`, docs/judging.md."
    ]
    for j in x.judges:
        s = j.samples
        if s is not None:
            why = "; ".join(f"{n}× {r}" for r, n in s.reasons)
            out.append(
                f"- **{j.judge}**: {s.samples_per_target} samples per target; {s.invalid} of {s.samples} samples "
                f"invalid" + (f" ({why})" if why else "") + " (counted, never read as no behaviour)."
            )
        c = j.calibration
        if c is not None:
            out.append(
                f"- **{j.judge}** calibration over {c.turns} turn × behaviour pairs of {c.conversations} "
                f"conversations: ECE {c.ece:.3f}, Brier {c.brier:.3f}"
                + (f" ({'; '.join(c.notes)})" if c.notes else "")
                + "."
            )
        h = j.history
        if h is None:
            continue
        if not h.earlier:
            out.append(f"  History: no earlier entry of judge {j.judge} under another judge id.")
        else:
            moved = ", ".join(_move(m) for m in h.moves)
            rules = sorted({m.rule for m in h.moves if m.rule and m.low is None and m.rule.startswith("threshold")})
            out.append(
                f"  History: against judge id {h.previous_id} (prompt {h.previous_prompt}, "
                f"{h.previous_date}), any behaviour: {moved or 'not comparable'}"
                + (f" ({'; '.join(rules)})" if rules else "")
                + "."
            )
    if not x.calibrated:
        out.append(
            not_run(
                "this run has no human annotations, so the judge's calibration cannot be measured",
                "annotate conversations (docs/judging.md: Validating a judge)",
            )
        )
    return out
