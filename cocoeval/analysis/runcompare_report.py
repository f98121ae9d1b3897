"""The report of ``cocoeval compare`` (``runcompare.RunComparisonAnswer``; beyond the paper):
``compare.md`` leading with the answer (which differences hold; its words in ``runcompare_view``),
the tables as CSV and Markdown, the setup × setup figure, and the self-contained ``index.html``
(``html_report``: offline Vega bundle, no network) with the conversation viewer of the shared
instances, each run's setups side by side. Both pages are rendered from one typed document
(``report_doc.ReportDoc``, ``compared``) as a run's report is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from cocoeval.core.files import portable_path
from cocoeval.core.jsonio import write_atomic
from cocoeval.core.targets import REFERENCE

from . import charts
from .frames import FRAME_SCHEMAS, Frames, run_frames
from .report_doc import Listed, ReportDoc, Section, Text, render_markdown
from .runcompare import KIND, RunComparisonAnswer
from .runcompare_view import FIGURE, answer_lines, comparison_chart, comparison_tables, what_lines

if TYPE_CHECKING:
    from .store import RunLike

__all__ = ["CompareReport", "default_out", "viewer_parts", "write_comparison"]


@dataclass(frozen=True)
class CompareReport:
    """What ``write_comparison`` wrote."""

    out: str
    markdown: str
    """``compare.md``."""
    tables: tuple[str, ...]
    """The tables, each as ``NAME.csv`` and ``NAME.md``."""
    html: str | None
    """``index.html`` (None: not written)."""
    figures: tuple[str, ...] = ()
    """The figures, each as ``NAME.png``, ``NAME.svg`` and ``NAME.vl.json``."""


def viewer_parts(ans: RunComparisonAnswer, runs: Sequence[RunLike]) -> tuple[RunLike, Frames]:
    """A run and frames for the HTML report's conversation viewer: the shared instances, each
    run's compared setups as ``RUNLABEL/setup`` side by side, the judge's labels of them, and the
    human reference with the judgment the distances used (from the first run with a valid one)."""
    from cocoeval.run import Run

    shared = set(ans.intersection.instance_ids)
    labels = [r.label for r in ans.runs]
    judge = ans.judge.judge
    frames = [run_frames(r) for r in runs]
    ref_from: dict[str, int] = {}
    for k, f in enumerate(frames):
        ok = f.counts.filter((pl.col("judge") == judge) & ~pl.col("human") & (pl.col("target") == REFERENCE))[
            "instance_id"
        ]
        for iid in ok.to_list():
            ref_from.setdefault(iid, k)
    for k, f in enumerate(frames):  # no valid one anywhere: the first run's, whatever it says
        for iid in f.judgments.filter((pl.col("target") == REFERENCE) & (pl.col("kind") == KIND))["instance_id"]:
            ref_from.setdefault(iid, k)
    names = {(k, s): f"{labels[k]}/{s}" for k, r in enumerate(ans.runs) for s in r.setups}

    def part(k: int, df: pl.DataFrame, col: str) -> pl.DataFrame:
        own = [iid for iid, src in ref_from.items() if src == k]
        mine = [s for (j, s) in names if j == k]
        df = df.filter(pl.col("instance_id").is_in(list(shared)))
        if "judge" in df.columns:
            df = df.filter(pl.col("judge") == judge)
        if "human" in df.columns:  # an annotator of the same name is not the judge
            df = df.filter(~pl.col("human"))
        keep = pl.col(col).is_in(mine)
        if col == "target":
            keep = keep | ((pl.col(col) == REFERENCE) & pl.col("instance_id").is_in(own))
        return df.filter(keep).with_columns(
            pl.col(col).replace_strict({s: names[(k, s)] for s in mine}, default=pl.col(col))
        )

    def joined(name: str, col: str) -> pl.DataFrame:
        return pl.concat([part(k, getattr(f, name), col) for k, f in enumerate(frames)]).select(
            list(FRAME_SCHEMAS[name])
        )

    merged = Frames(
        instances=frames[0].instances.filter(pl.col("instance_id").is_in(list(shared))),
        counts=joined("counts", "target"),
        likert=joined("likert", "target"),
        labels=joined("labels", "target"),
        judgments=joined("judgments", "target"),
        continuations=joined("continuations", "setup"),
        taxonomy=frames[0].taxonomy,
    )
    run = Run(
        instances=[i for i in runs[0].instances if i.id in shared],
        continuations={
            names[(k, s)]: [c for c in runs[k].continuations.get(s, []) if c.instance_id in shared] for (k, s) in names
        },
    )
    return run, merged


def _safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:60] or "run"


def default_out(labels: Sequence[str]) -> Path:
    """``compare-A-vs-B`` (in the current folder) for runs labelled A and B."""
    return Path("compare-" + "-vs-".join(_safe(x) for x in labels))


def write_comparison(
    ans: RunComparisonAnswer, runs: Sequence[RunLike], out_dir: str | Path, *, html: bool = True
) -> CompareReport:
    """Write ``compare.md`` (the answer first, with the setup × setup figure, then what was
    compared, then the files), each table as CSV and Markdown, the figure as PNG, SVG and its
    Vega-Lite spec, and (``html``) the self-contained ``index.html`` into ``out_dir``."""
    from . import html_report
    from .report import markdown_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = comparison_tables(ans)
    mark = f" — {charts.PIPELINE_CHECK}" if ans.pipeline_check else ""
    for name, (df, what) in tables.items():
        df.write_csv(out / f"{name}.csv")
        write_atomic(out / f"{name}.md", f"# {what}{mark}\n\n" + markdown_table(df))
    figures: dict[str, tuple[list[Path], str]] = {}
    if ans.comparison.rows:  # the setup × setup view (paired.compare_setups' chart)
        figures["paired"] = (charts.save(comparison_chart(ans), out / "paired"), f"{FIGURE}{mark}")
    captions = {k: (df, f"{w}{mark}") for k, (df, w) in tables.items()}
    doc = ReportDoc(
        title=", ".join(r.label for r in ans.runs),
        notices=(),
        pipeline_check=ans.pipeline_check,
        headline=None,  # the answer is the first section
        with_html=html,
        sections=(
            Section(
                Text("Which differences hold", tuple(answer_lines(ans))),
                tuple(Listed(k, "figure", w, (ps[0].name, ps[1].name)) for k, (ps, w) in figures.items()),
            ),
            Section(Text("What was compared", (*what_lines(ans), ""))),
            Section(
                Text("Tables", ()),
                tuple(Listed(k, "table", w, (f"{k}.csv", f"{k}.md"), df.height) for k, (df, w) in captions.items()),
            ),
        ),
        compared=True,
    )
    md = out / "compare.md"
    write_atomic(md, render_markdown(doc))
    page = None
    if html:
        run, frames = viewer_parts(ans, runs)
        page = html_report.render_html(
            run,
            frames,
            out,
            doc,
            figures,
            captions,
            judge=ans.judge.judge,
            provenance={"compared runs": [_provenance(r) for r in runs], "labels": [r.label for r in ans.runs]},
        )
    return CompareReport(
        out=str(out), markdown=str(md), tables=tuple(tables), html=str(page) if page else None, figures=tuple(figures)
    )


def _provenance(run: RunLike) -> dict[str, object]:
    m = run.manifest
    return {
        "path": None if run.path is None else portable_path(run.path, Path.cwd()),
        "cocoeval_version": m.cocoeval_version,
        "git_revision": m.git_revision,
        "params_file": None if m.params_file is None else portable_path(m.params_file, Path.cwd()),
        "label": m.params.label,
        "status": m.status,
        "finished": m.finished,
        "instances": m.instances,
        "setups (name: id)": m.setups,
        "judges (name: kind: id)": m.judges,
        "imported": m.imported or None,
        "taxonomy": m.taxonomy or None,
    }
