"""``cocoeval report RUN_DIR --out DIR``: every figure (PNG + SVG), every table (CSV +
Markdown) and an index listing them, with the invalid rates beside the statistics. The index is a
typed document (``report_doc.ReportDoc``) filled here from what the analyses computed, rendered as
``index.md`` (``report_doc.render_markdown``) and ``index.html`` (``html_report.render_html``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from cocoeval.core import speed
from cocoeval.core.errors import ConfigError
from cocoeval.core.files import portable_spec
from cocoeval.core.jsonio import write_atomic
from cocoeval.core.text import md_escape

from . import analyses, charts, html_report, inference, judge_check, render
from .answer import Answer
from .coverage import paper_coverage
from .frames import Frames, invalid_rates, open_run_dir, run_frames
from .headline import Headline, headline
from .judge_free import measured_on, pipeline_check
from .leaderboard_prose import Leaderboard
from .report_doc import (
    Board,
    Coverage,
    JudgeBased,
    JudgeFree,
    Listed,
    ReportDoc,
    Section,
    Settings,
    SetupSource,
    render_markdown,
)
from .report_result import ReportResult
from .speed import copy_kept, keep_report, kept_report_folder
from .store import RunLike, integrity_warnings


def markdown_table(df: pl.DataFrame, digits: int = 3) -> str:
    """A Markdown table; null and NaN cells show "–" (undefined), text cells are escaped."""
    if df.is_empty():
        return "_(no rows)_\n"

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "–" if v != v else f"{v:.{digits}f}"
        return "–" if v is None else md_escape(v) if isinstance(v, str) else str(v)

    def cells(col: pl.Series) -> list[str]:
        """``fmt`` of every value of ``col``, a column at a time (a text escaped once per value)."""
        values = col.to_list()
        if col.dtype.is_float():
            return ["–" if v is None or v != v else f"{v:.{digits}f}" for v in values]
        if col.dtype == pl.String:
            escaped = {v: fmt(v) for v in set(values)}
            return [escaped[v] for v in values]
        return [fmt(v) for v in values]

    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(row) + " |\n" for row in zip(*map(cells, df.iter_columns()), strict=True))


def render_workers() -> int:
    """Processes rendering the report's figures while the statistics are computed (``render``):
    one per core, two at most. Two on two cores, though the statistics keep a core busy: the
    figures take about as much CPU as the statistics (8–9 s each on the paper's shape, on two cores
    running slow), and two workers finish them while the statistics still run, where one would
    outlast them (measured 0.4 s sooner than one)."""
    return max(1, min(2, os.cpu_count() or 1))


def default_judge(f: Frames) -> str | None:
    """The first LLM judge with valid fine-grained judgments, else the first with valid overall
    ones; None when there is none. Never a human annotator: an annotator is compared with the
    judge, never shown as it (``stale_judges`` says why an LLM judge has nothing valid)."""
    for d in (f.counts, f.likert):
        llm = d.filter(~pl.col("human"))["judge"].unique(maintain_order=True).to_list()
        if llm:
            return str(llm[0])
    return None


def check_judge(f: Frames, judge: str | None) -> str | None:
    """The judge to show: the one asked for (it must have judgments in this run) or the default."""
    if judge is None:
        return default_judge(f)
    known = sorted(set(f.judgments["judge"].unique().to_list()) | set(f.counts["judge"].unique().to_list()))
    if judge not in known:
        raise ConfigError(
            f"judge {judge!r} has no judgments in this run",
            hint=f"use one of: {', '.join(known) or '(none: the run has no judgments yet)'}",
        )
    return judge


def _what(out: analyses.Out, p: analyses.Params, df: pl.DataFrame | None = None) -> str:
    what = out.what.replace("{judge}", md_escape(p.judge)) if "{judge}" in out.what else out.what
    if "{test}" in what and df is not None:
        what = what.replace("{test}", inference.describe_test(p.correction, int(df["p"].is_not_null().sum())))
    return what


def write_section(section: str, run: RunLike, p: analyses.Params, table: Any, figure: Any) -> dict[str, Answer]:
    """Compute the registered analyses of a report ``section`` (``analyses.in_report``) and write
    the tables and figures their ``ReportSpec`` names; returns their answers by analysis."""
    answers = {}
    for a in analyses.in_report(section):
        ans = a(run, p)
        if ans is None or a.report is None:
            continue
        answers[a.name] = ans
        for key, out in a.report.tables.items():  # a note in parentheses is not part of the name
            df = next((v for k, v in ans.tables.items() if k.split(" (")[0] == key), None)
            if df is not None and (out.empty or not df.is_empty()):
                table(out.name, df, _what(out, p, df))
        for key, chart in ans.charts.items():
            fig = a.report.figures.get(key)
            if fig is not None:
                figure(fig.name, chart, _what(fig, p), judged=ans.judge_based)
            elif a.report.other_figures is not None:
                # every top-level chart class has .title; their base TopLevelMixin does not declare it
                title = chart.title if isinstance(chart.title, str) else ans.question  # type: ignore[attr-defined]
                figure(
                    a.report.other_figures + key,
                    chart,
                    f"{md_escape(title)} ({md_escape(p.judge)})",
                    judged=ans.judge_based,
                )
    return answers


def setup_sources(run: RunLike) -> tuple[SetupSource, ...]:
    """The setups cocoeval's own LLM simulator did not write: imported ones (their file, its
    sha256, the models that wrote them, the description) and plugins (the simulator, its model and
    options)."""
    out = []
    imported = run.manifest.imported
    for s in run.manifest.setup_params:
        if s.continuations is not None:
            src = imported.get(s.name, {})
            desc = src.get("description") or s.description
            model = src.get("model") or s.model
            out.append(
                SetupSource(
                    s.name,
                    "imported",
                    file=str(src.get("file") or s.continuations),
                    sha256=str(src.get("sha256", "not recorded")),
                    model=None if model is None else str(model),
                    record_models=_record_models(run, s.name),
                    description=str(desc) if desc else None,
                )
            )
        elif s.simulator is not None:
            out.append(
                SetupSource(
                    s.name,
                    "plugin",
                    model=s.model or None,
                    simulator=s.simulator,
                    options=tuple((k, f"{v}") for k, v in (s.options or {}).items() if v is not None),
                )
            )
    return tuple(out)


def _record_models(run: RunLike, name: str) -> tuple[str, ...]:
    """The ``model`` an imported setup's records name (each record's own label, kept with the
    continuation), distinct, in the order met."""
    cs = run.continuations.get(name, []) if name in run.names("continuations") else []
    return tuple(  # local/<absolute path> read local/<file name>, as the manifest records the setup's
        dict.fromkeys(portable_spec(str(m)) for c in cs if c.imported and (m := c.imported.get("model")) is not None)
    )


def _headline(
    run: RunLike,
    f: Frames,
    judge: str | None,
    board: Answer | None,
    rates: pl.DataFrame,
    check: bool,
    *,
    resamples: int,
    seed: int,
    min_n: int,
) -> Headline:
    """The report's first lines from what it computed: the leaderboard, the judge's validation
    gate (computed once: the marks asked for it already) and the invalid accounting."""
    setups = list(dict.fromkeys([*run.manifest.setups, *sorted(set(f.continuations["setup"].to_list()))]))
    llm = judge_check.llm_judges(f)
    gate = judge_check.gate(f, judge, run, resamples, seed, min_n=min_n) if judge is not None and judge in llm else None
    result = board.result if board is not None else None
    not_ranked = result.not_run.text() if isinstance(result, Leaderboard) and result.not_run is not None else None
    return headline(
        setups=setups,
        judges=llm,
        judge=judge,
        instances=f.instances,
        board=board.tables.get("leaderboard") if board is not None else None,
        not_ranked=not_ranked,
        gate=gate,
        rates=rates,
        behaviours=len(f.taxonomy.ids),
        pipeline_check=check,
    )


def _tests(answers: dict[str, Answer]) -> int | None:
    """How many setup-vs-human tests of the judge-free statistics the family has; None when the run
    has no conversation."""
    vs = answers["judge_free"].tables.get("vs_human") if "judge_free" in answers else None
    if vs is None:
        return None
    return int(vs["p"].is_not_null().sum()) if not vs.is_empty() else 0


def write_report(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    judge: str | None = None,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
    html: bool = False,
    history: bool = True,
) -> ReportResult:
    """Every figure and table of a run (``html``: also the self-contained ``index.html``,
    ``html_report``). Intervals over fewer than ``min_n`` instances (or with every resample equal) are undefined; verdicts of ``paired_vs_human`` are corrected over
    behaviours x setups with ``correction`` (bh, holm or none). ``history``: False to
    leave the judge history beside the run unwritten (``calibration.answer``'s ``record``).
    Returns what was written (``ReportResult``)."""
    inference.check_params(resamples=resamples, min_n=min_n, correction=correction)
    # its workers start while the run is read; the charts are written unvalidated (validated by the
    # tests), so none is checked at each part either (``charts.checked_once``: the same specs)
    out, title = Path(out_dir), Path(run_dir).name
    with render.Renderer(render_workers()) as renderer, charts.checked_once(), speed.one_blas_thread():
        run = open_run_dir(run_dir)  # a run this process read already (a notebook kernel) is not read again
        f = run_frames(run)
        judge = check_judge(f, judge)  # the judge asked for or the default: one report either way
        kept = kept_report_folder(
            run,
            {
                "title": title,
                "judge": judge,
                "resamples": resamples,
                "seed": seed,
                "min_n": min_n,
                "correction": correction,
                "history": history,
            },
        )
        rep = copy_kept(kept, out, html) if kept is not None else None
        if rep is not None:
            renderer.discard()  # nothing to render
            return rep
        rep = _write_report(
            run,
            f,
            title,
            out,
            renderer,
            judge=judge,
            resamples=resamples,
            seed=seed,
            min_n=min_n,
            correction=correction,
            html=html,
            history=history,
        )
    if kept is not None:
        keep_report(kept, out, rep)
    return rep


def _write_report(
    run: RunLike,
    f: Frames,
    title: str,
    out: Path,
    renderer: render.Renderer,
    *,
    judge: str | None,
    resamples: int,
    seed: int,
    min_n: int,
    correction: str,
    html: bool,
    history: bool = True,
) -> ReportResult:
    check = pipeline_check(run.manifest)
    mark = f" — {charts.PIPELINE_CHECK}" if check else ""
    judge = check_judge(f, judge)
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "min_n": min_n}
    judge_free = analyses.judge_free_outputs()  # listed first in the index, never marked
    tables: dict[str, tuple[pl.DataFrame, str]] = {}
    figures: dict[str, tuple[list[Path], str]] = {}

    gate = judge_check.gate_note(run, f, judge, resamples, seed, min_n=min_n)  # beyond the paper: the marks

    def rates_of_judge(name: str) -> bool:
        """Whether a table or figure shows behaviour rates made by the judge (marked with the gate)."""
        return name not in judge_free and not name.startswith(judge_check.UNMARKED_OUTPUTS)

    def table(name: str, df: pl.DataFrame, what: str) -> None:
        if check and name not in judge_free and name != "invalid_rates":
            what += mark
        if gate and "behaviour" in df.columns and rates_of_judge(name):
            what += f" — {gate}"
        tables[name] = (df, what)
        out.mkdir(parents=True, exist_ok=True)
        df.write_csv(out / f"{name}.csv")
        write_atomic(out / f"{name}.md", f"# {what}\n\n" + markdown_table(df))

    def figure(name: str, chart: Any, what: str, *, judged: bool = False) -> None:
        if name in figures:
            return
        if judged and check:
            chart, what = charts.titled(chart, f"{what} — {charts.PIPELINE_CHECK}"), f"{what}{mark}"
        if judged and gate and rates_of_judge(name) and "likert" not in name:
            chart, what = judge_check.mark_chart(chart, what, gate), f"{what} — {gate}"
        base = out / name  # rendered by the renderer's workers, waited for before the index
        figures[name] = (charts.figure_paths(base), what)
        renderer.submit(charts.unchecked_json(chart), base)  # validated by the tests

    params = analyses.Params(judge=judge, frames=f, correction=correction, options={"record_history": history}, **kw)
    rates = invalid_rates(f)  # the invalid_rates table and the headline's accounting
    # The behaviour means and their two figures first: quick to compute and the longest figures to
    # render, so the workers draw them while the judge-free statistics are computed. They are
    # listed (index, HTML) where they always were: moved there below, after invalid_rates.
    write_section("behaviours", run, params, table, figure)
    early = [*tables, *figures]  # all written so far
    free = _tests(write_section("judge-free", run, params, table, figure))
    board = write_section("leaderboard", run, params, table, figure).get("leaderboard")
    board_outs = list(
        dict.fromkeys(
            o.name
            for a in analyses.in_report("leaderboard")
            if a.report is not None
            for o in [*a.report.tables.values(), *a.report.figures.values()]
        )
    )
    table(
        "invalid_rates",
        rates,
        "Invalid continuations (per setup) and judgments (per judge, target, kind); skipped = no turn "
        "to judge; stale = made with other settings than the params give now, or judgments of a continuation the "
        "setup no longer has; missing = expected by the params but "
        "absent (no_continuation: the setup has no ok continuation to judge; empty: unknown); none of these counted; "
        "unknown_speaker_share = the share of a setup's turns by speakers who are not participants (more than half "
        "in a continuation makes it invalid)",
    )
    for name in early:  # back in their place in the listings (a dict keeps the order of insertion)
        if name in tables:
            tables[name] = tables.pop(name)
        if name in figures:
            figures[name] = figures.pop(name)
    if not f.counts.is_empty() and judge is not None:  # the paired comparisons with the humans first
        write_section("paper", run, params, table, figure)
    write_section("agreement", run, params, table, figure)  # the Likert means first
    paired = tables.get("paired_vs_human")

    def listed(names: list[str]) -> tuple[Listed, ...]:
        """The figures, then the tables, of ``names`` that were written, as a section lists them."""
        figs = [
            Listed(k, "figure", figures[k][1], tuple(p.name for p in figures[k][0][:2])) for k in names if k in figures
        ]
        tabs = [
            Listed(k, "table", tables[k][1], (f"{k}.csv", f"{k}.md"), tables[k][0].height) for k in names if k in tables
        ]
        return (*figs, *tabs)

    ranked = board is not None and "behaviours" in board.tables
    doc = ReportDoc(
        title=title,
        notices=tuple(integrity_warnings(run)),  # none for a run as cocoeval run wrote it
        pipeline_check=check,
        headline=_headline(run, f, judge, board, rates, check, resamples=resamples, seed=seed, min_n=min_n),
        with_html=html,
        sections=(
            Section(Settings(resamples, seed, min_n, setup_sources(run))),
            Section(Coverage(tuple(paper_coverage(run)))),  # what of the paper this run lacks, and how to add it
            Section(
                JudgeFree(measured_on(run.manifest), correction, free),
                listed(judge_free) if free is not None else (),
            ),
            Section(
                Board(ranked, tuple(board.text) if board is not None else (), run.manifest.stopping),
                listed(board_outs),
                marked=check,
            ),
            Section(
                JudgeBased(
                    judge,
                    tuple(judge_check.stale(f)),
                    correction,
                    int(paired[0]["p"].is_not_null().sum()) if paired else None,
                ),
                listed([k for k in dict.fromkeys([*figures, *tables]) if k not in judge_free and k not in board_outs]),
                marked=check,
            ),
        ),
    )
    renderer.close()  # every figure written (html_report reads them); a failed one fails the report
    write_atomic(out / "index.md", render_markdown(doc))
    page = str(html_report.render_html(run, f, out, doc, figures, tables, judge=judge)) if html else None
    return ReportResult(
        judge=judge,
        figures=tuple(sorted(figures)),
        tables=tuple(sorted(tables)),
        out=str(out),
        pipeline_check=check,
        warnings=doc.notices,
        html=page,
    )
