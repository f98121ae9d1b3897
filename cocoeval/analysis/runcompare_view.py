"""What ``cocoeval compare`` says (``runcompare.RunComparisonAnswer``; beyond the paper), apart from
the files it writes (``runcompare_report``): the answer first (which differences hold, the rank
intervals, the method), what was compared, the tables and the setup × setup chart; and the answer
notebook 13 shows (``notebook_answer``). It imports no report module, so the analysis registry can
show it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from cocoeval.core.text import md_escape

from . import charts, inference
from .runcompare import RunComparisonAnswer

if TYPE_CHECKING:
    import altair as alt

    from .answer import Answer
    from .paired import PairRow
    from .store import RunLike

__all__ = [
    "BEYOND",
    "FIGURE",
    "answer_lines",
    "comparison_chart",
    "comparison_tables",
    "notebook_answer",
    "row_sentence",
    "what_lines",
]

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


def comparison_tables(ans: RunComparisonAnswer) -> dict[str, tuple[pl.DataFrame, str]]:
    """{name: (table, what it is)} of the report."""
    pairs = ans.comparison.frame()
    pairs = pairs.with_columns(
        across_runs=pl.col("a").str.split("/").list.first() != pl.col("b").str.split("/").list.first()
    )
    ranks = ans.comparison.rank_frame()
    if not ranks.is_empty():
        ranks = ranks.with_columns(rank_interval=pl.Series([x.text for x in ans.comparison.ranks], dtype=pl.Utf8))
    left = ans.intersection.left_out_counts()
    shared = len(ans.intersection.instance_ids)
    runs = pl.DataFrame(
        [
            {
                "run": r.label,
                "path": r.path,
                "bench": r.bench,
                "instances": r.instances,
                "shared": shared,
                "absent_elsewhere": left.get(r.label, Counter())["not in"],
                "other_content_elsewhere": left.get(r.label, Counter())["other content"],
                "setups": ", ".join(r.setups),
                "judge": ans.judge.judge,
                "judge_id": r.judge_id,
                "pipeline_check": r.pipeline_check,
                "reference_judgments_used": dict(ans.reference_from).get(r.label, 0),
            }
            for r in ans.runs
        ]
    )
    lo = pl.DataFrame(
        [(x.run, x.instance_id, x.dataset, x.why) for x in ans.intersection.left_out],
        schema={"run": pl.Utf8, "instance_id": pl.Utf8, "dataset": pl.Utf8, "why": pl.Utf8},
        orient="row",
    )
    ds = pl.DataFrame(list(ans.intersection.datasets), schema={"dataset": pl.Utf8, "instances": pl.Int64}, orient="row")
    corr = inference.CORRECTION_NAMES[ans.comparison.correction]
    return {
        "pairs": (
            pairs,
            "Beyond the paper: every pair of setups (a − b) per behaviour (mean occurrences per conversation) and "
            "in the distance to the humans, on the shared instances, 95% CIs clustered by source conversation; p: "
            f"sign-flip test; p_adj: {corr} over the behaviours of each pair (distance: Holm over the pairs)",
        ),
        "ranks": (ranks, "Beyond the paper: rank by distance to the humans with its simultaneous rank interval"),
        "runs": (runs, "The runs compared: instances, shared ones, those left out and why, setups, judge id"),
        "shared": (ds, "The shared instances by dataset"),
        "left_out": (lo, "Every instance not compared, per run, with why (absent from another run, or other content)"),
    }


FIGURE = (
    "Beyond the paper: setup × setup, the row's distance to the humans minus the column's on the shared instances, "
    "coloured by the corrected verdict (Holm over the pairs); in brackets, the behaviours that differ (corrected "
    "over the behaviours of the pair)"
)


def comparison_chart(ans: RunComparisonAnswer) -> alt.TopLevelMixin:
    """The setup × setup view of the comparison (``charts.paired_chart``), titled with the pipeline
    check mark when a run compared is one."""
    chart = charts.paired_chart(ans.comparison.frame())
    return charts.titled(chart, f"paired comparisons — {charts.PIPELINE_CHECK}") if ans.pipeline_check else chart


def notebook_answer(
    run: RunLike, *, others: Sequence[str], judge: str | None, setups: Sequence[str] | None, **kw: Any
) -> Answer:
    """The answer of notebook 13 (``analyses.compare_runs``): ``run`` compared with the run
    directories ``others`` (none: with itself, which shows the machinery and that nothing differs)
    as ``cocoeval compare`` compares them; ``kw``: resamples, seed, correction (holm or bh; any
    other is Holm, said), min_n. A comparison the runs do not allow (no shared instance, a judge
    id that differs) is the answer's text, with the fix."""
    from cocoeval.core.errors import CocoevalError

    from .answer import Answer
    from .frames import open_run_dir
    from .runcompare import CORRECTIONS, compare_runs, run_labels

    question = "Which setups differ, across runs, on the instances they share?"
    runs = [run, *(open_run_dir(x) for x in others)] if others else [run, run]
    note = []
    if kw.get("correction") not in CORRECTIONS:
        note.append(f"Correction {kw.get('correction')!r} is not offered for paired comparisons: Holm is used.")
        kw["correction"] = "holm"
    try:
        ans = compare_runs(runs, run_labels([r.path for r in runs]), judge=judge, setups=setups, **kw)
    except CocoevalError as e:
        return Answer(question, [BEYOND, f"**Not compared.** {md_escape(str(e))}"])
    tables = comparison_tables(ans)
    return Answer(
        question,
        [BEYOND, *note, *answer_lines(ans), "\n".join(what_lines(ans))],
        tables={k: df for k, (df, _) in tables.items() if k in ("pairs", "ranks", "runs", "left_out")},
        charts={"paired": comparison_chart(ans)} if ans.comparison.rows else {},
    )
