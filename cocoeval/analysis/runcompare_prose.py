"""Notebook 13's answer (``analyses.compare_runs``) as data, and its one wording (private; import
from ``cocoeval.analysis.runcompare_view``; beyond the paper).

``runcompare_view.notebook_answer`` computes a ``RunsCompared`` (the comparison ``cocoeval compare``
makes, a ``runcompare.RunComparisonAnswer``, or why the runs could not be compared) and
``render_runs_compared`` writes the sentences of its ``Answer.text`` from it, with the wording of
``cocoeval compare``'s own index: ``answer_lines`` (which differences hold, the rank intervals, the
method) and ``what_lines`` (what was compared), both rendered from the ``RunComparisonAnswer``.
Pure: no run, no frames, only the result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cocoeval.core.text import md_escape

from . import inference

if TYPE_CHECKING:
    from .paired import PairRow
    from .runcompare import RunComparisonAnswer

BEYOND = (
    "Beyond the paper: the paper compares each simulator with the humans within one run; comparing setups of "
    "different runs with paired tests is cocoeval's own (docs/paper.md)."
)


def _s(n: int) -> str:
    """The plural ending for ``n`` things."""
    return "" if n == 1 else "s"


def _num(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _ci(r: PairRow) -> str:
    return f"95% CI [{_num(r.ci_low)}, {_num(r.ci_high)}]" if r.ci_low is not None else f"no interval: {r.note}"


def row_sentence(r: PairRow, names: dict[str, str]) -> str:
    """One held difference in words (Markdown): which setup is closer to the humans, or produces
    more of a behaviour, with the estimate, its interval and the corrected p."""
    from .paired import A_FARTHER, A_HIGHER, DISTANCE

    a, b = f"`{md_escape(r.a)}`", f"`{md_escape(r.b)}`"
    stat = f"{_ci(r)}, p_adj {_num(r.p_adj, 4)}, n = {r.n} instances from {r.clusters} conversations"
    if r.behaviour == DISTANCE:
        near, far = (b, a) if r.verdict == A_FARTHER else (a, b)
        return (
            f"- {near} is closer to the humans than {far} (distance to the humans {_num(r.mean_a)} for {a}, "
            f"{_num(r.mean_b)} for {b}; {a} − {b} = {_num(r.diff)}, {stat})"
        )
    what = md_escape(names.get(r.behaviour, r.behaviour))
    if r.verdict == A_HIGHER:
        more, less, m_more, m_less = a, b, r.mean_a, r.mean_b
    else:
        more, less, m_more, m_less = b, a, r.mean_b, r.mean_a
    return (
        f"- {more} produces more *{what}* than {less} ({_num(m_more)} vs {_num(m_less)} per conversation; "
        f"{a} − {b} = {_num(r.diff)}, {stat})"
    )


def answer_lines(ans: RunComparisonAnswer) -> list[str]:
    """The answer first (Markdown lines): which differences hold, the rank intervals, the method."""
    from .paired import DISTANCE

    names = dict(ans.behaviour_names)
    inter = ans.intersection
    held = ans.held()
    across = [r for r in held if ans.cross_run(r)]
    within = [r for r in held if not ans.cross_run(r)]
    pairs = {(r.a, r.b) for r in ans.comparison.rows}
    cross_pairs = sum(1 for a, b in pairs if a.split("/", 1)[0] != b.split("/", 1)[0])
    tested = [r for r in ans.comparison.rows if r.p is not None]
    lines = [
        f"Judge `{md_escape(ans.judge.judge)}` (judge id `{md_escape(ans.judge.judge_id)}`, the same in every run), "
        f"on the {len(inter.instance_ids)} instances every run has with the same content, from "
        f"{inter.conversations} source conversations; {len(ans.setups)} setups, {len(pairs)} pair{_s(len(pairs))} "
        f"({cross_pairs} across runs), {len(tested)} of {len(ans.comparison.rows)} comparisons tested.\n",
    ]
    if not held:
        lines.append(
            f"**No difference holds** at α = {inference.ALPHA:g} after the correction: no pair of setups differs "
            "in its distance to the humans or in any behaviour beyond what chance gives on these instances "
            "(an untested row, marked with its note in pairs.csv, is no evidence either way).\n"
        )
    for title, rows in (("Across runs", across), ("Within a run", within)):
        if rows:
            lines.append(f"**{title}: {len(rows)} difference{'s hold' if len(rows) != 1 else ' holds'}:**\n")
            lines += [row_sentence(r, names) for r in rows]
            lines.append("")
    dist = [r for r in ans.comparison.rows if r.behaviour == DISTANCE]
    if dist and not any(r.p is not None for r in dist):
        lines.append(
            "The distances to the humans were not tested: " + md_escape(dist[0].note or "no human reference") + ".\n"
        )
    if ans.comparison.ranks:
        ranks = sorted(ans.comparison.ranks, key=lambda x: (x.rank, x.setup))
        lines.append(
            "Rank by distance to the humans (1 = closest; an interval such as 1–3 is a rank not settled by the "
            "data): " + ", ".join(f"`{md_escape(x.setup)}` {x.text}" for x in ranks) + ".\n"
        )
    lines.append(
        f"Method: {md_escape(ans.comparison.method)}; α = {inference.ALPHA:g}; intervals and tests need at least "
        f"{ans.min_n} instances.\n"
    )
    return lines


def what_lines(ans: RunComparisonAnswer) -> list[str]:
    """What was compared (Markdown lines): the runs, the shared instances and what each run leaves
    out, the judge, the human reference, the setups and judges left out."""
    inter = ans.intersection
    left = inter.left_out_counts()
    ds = ", ".join(f"{md_escape(d)} {n}" for d, n in inter.datasets)
    lines = [
        f"- **Shared instances**: {len(inter.instance_ids)} (an instance is shared when every run has its id with "
        f"the same M, S, x and human reference: the instance hash), from {inter.conversations} source conversations; "
        f"by dataset: {ds}.",
    ]
    for r in ans.runs:
        c = left.get(r.label)
        why = (
            ", ".join(
                f"{n} {'with other content elsewhere' if k == 'other content' else 'absent from another run'}"
                for k, n in sorted(c.items())
            )
            if c
            else "none"
        )
        lines.append(
            f"- Run `{md_escape(r.label)}` ({md_escape(r.path)}; benchmark {md_escape(r.bench or 'not recorded')}): "
            f"{r.instances} instances, left out: {why}"
            + (" — pipeline check, not results" if r.pipeline_check else "")
            + "."
        )
    if inter.left_out:
        lines.append("- Every instance left out, with why: left_out.csv.")
    lines.append(
        f"- **Judge**: `{md_escape(ans.judge.judge)}` ({md_escape(ans.judge.why)}); fine-grained judge id "
        f"`{md_escape(ans.judge.judge_id)}` in every run (model, prompt and taxonomy: a judge is never compared "
        "across runs by its name alone)."
    )
    lines += [f"- Judge not compared: {md_escape(x)}." for x in ans.judge.not_compared]
    src = ", ".join(f"`{md_escape(lab)}` {n}" for lab, n in ans.reference_from)
    lines.append(
        "- **Human reference** (the same text in every run: the common baseline of the distances): its valid "
        f"judgments by `{md_escape(ans.judge.judge)}` taken from the first run that has one: {src or 'none'}"
        + (
            f"; on {ans.reference_differs} shared instances another run's judgment of the same reference differs "
            "(the same judge id: the judge's sampling)"
            if ans.reference_differs
            else ""
        )
        + "."
    )
    lines += [f"- Setup not compared: {md_escape(x)}." for x in ans.not_compared]
    return lines


@dataclass(frozen=True)
class RunsCompared:
    """The runs compared (``comparison``), or why not (``error``: the message of the comparison's
    error, with its fix); ``correction_offered`` False: the correction asked for
    (``asked_correction``) is not one paired comparisons offer, and Holm was used instead."""

    comparison: RunComparisonAnswer | None
    error: str | None = None
    asked_correction: str | None = None
    correction_offered: bool = True


def render_runs_compared(x: RunsCompared) -> list[str]:
    """The answer's sentences: the beyond-the-paper label, then "not compared" with the error, or
    the correction used instead of one not offered, which differences hold and what was compared."""
    if x.comparison is None:
        return [BEYOND, f"**Not compared.** {md_escape(x.error or '')}"]
    note = (
        []
        if x.correction_offered
        else [f"Correction {x.asked_correction!r} is not offered for paired comparisons: Holm is used."]
    )
    return [BEYOND, *note, *answer_lines(x.comparison), "\n".join(what_lines(x.comparison))]
