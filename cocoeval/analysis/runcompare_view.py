"""What ``cocoeval compare`` shows (``runcompare.RunComparisonAnswer``; beyond the paper), apart from
the files it writes (``runcompare_report``): the tables and the setup × setup chart, the answer
notebook 13 shows (``notebook_answer``), and (from ``runcompare_prose``, where they are worded) the
answer first (which differences hold, the rank intervals, the method) and what was compared. It imports no report module, so the analysis registry can
show it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from . import charts, inference
from .runcompare import RunComparisonAnswer
from .runcompare_prose import BEYOND, answer_lines, row_sentence, what_lines

if TYPE_CHECKING:
    import altair as alt

    from .answer import Answer
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
    id that differs) is the answer's text, with the fix. The text is rendered
    (``render_runs_compared``) from its result, a ``RunsCompared`` in ``Answer.result``."""
    from cocoeval.core.errors import CocoevalError

    from .answer import Answer
    from .frames import open_run_dir
    from .runcompare import CORRECTIONS, compare_runs, run_labels
    from .runcompare_prose import RunsCompared, render_runs_compared

    question = "Which setups differ, across runs, on the instances they share?"
    runs = [run, *(open_run_dir(x) for x in others)] if others else [run, run]
    asked = kw.get("correction")
    offered = asked in CORRECTIONS
    if not offered:
        kw["correction"] = "holm"
    try:
        ans = compare_runs(runs, run_labels([r.path for r in runs]), judge=judge, setups=setups, **kw)
    except CocoevalError as e:
        x = RunsCompared(None, error=str(e))
        return Answer(question, render_runs_compared(x), result=x)
    tables = comparison_tables(ans)
    x = RunsCompared(ans, asked_correction=asked, correction_offered=offered)
    return Answer(
        question,
        render_runs_compared(x),
        tables={k: df for k, (df, _) in tables.items() if k in ("pairs", "ranks", "runs", "left_out")},
        charts={"paired": comparison_chart(ans)} if ans.comparison.rows else {},
        result=x,
    )
