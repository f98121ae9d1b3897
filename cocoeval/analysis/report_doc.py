"""The report as one typed document (``ReportDoc``): ``report.write_report`` computes the analyses
and fills it with what they found (numbers, names, the answers' typed results and their rendered
text); ``render_markdown`` writes it as ``index.md`` and ``html_report.render_html`` lays out
``index.html`` from the same document (its notices, headline, sections and listings). Every
sentence of the report's own (the settings, the sections' introductions, the listings, the
stale-judge lines) is rendered here from the document's fields, once for both pages: the HTML page
renders the same lines (``section_lines``, ``intro_lines``) and converts their inline Markdown.
``cocoeval compare`` (``runcompare_report``) writes its ``compare.md`` and ``index.html`` from such
a document too (``compared``: no headline, its sections given as ``Text``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from cocoeval.core.text import md_escape

from .coverage import TITLE as COVERAGE_TITLE
from .coverage import Missing, coverage_markdown
from .headline import Headline, headline_markdown

if TYPE_CHECKING:
    from cocoeval.run.stopping import StoppingRecord

    from .judge_check_prose import StaleJudge
    from .judge_free_prose import MeasuredOn

__all__ = [
    "SETTINGS",
    "Board",
    "Coverage",
    "JudgeBased",
    "JudgeFree",
    "Listed",
    "ReportDoc",
    "Section",
    "Settings",
    "SetupSource",
    "Text",
    "intro_lines",
    "listing_lines",
    "render_markdown",
    "section_lines",
    "title_line",
]

SETTINGS = "Settings and sources"
"""The report's section after the headline: the bootstrap's settings, the setups' sources."""
JUDGE_FREE = "Judge-free statistics (no model needed)"
LEADERBOARD = "Leaderboard of simulators"
JUDGE_BASED = "Judge-based statistics"
VIEWER_HTML = (
    "[the conversation viewer of index.html](index.html#cc-viewer): every instance's human reference beside the "
    "setups' continuations, aligned by turn; search by text and speaker, filters by behaviour, judge score and "
    "dataset."
)
VIEWER_MD = (
    "in the conversation viewer of the HTML report (`cocoeval report RUN --out DIR --html` writes index.html) "
    "and of notebook 09_explore."
)


@dataclass(frozen=True)
class Listed:
    """A figure or a table a section lists, with the files written for it."""

    name: str
    """The output's name (its files are ``<name>.<ext>`` beside ``index.md``)."""
    kind: Literal["figure", "table"]
    """A figure (PNG, SVG, its Vega-Lite spec) or a table (CSV, Markdown)."""
    what: str
    """Its caption (inline Markdown), with the marks it carries (pipeline check, the judge's
    validation gate): the same words as the table's own ``.md`` heading or the chart's title."""
    files: tuple[str, ...]
    """The files the listing links to, by name: a figure's PNG and SVG, a table's CSV and Markdown."""
    rows: int | None = None
    """A table's rows (None for a figure)."""


@dataclass(frozen=True)
class SetupSource:
    """A setup cocoeval's own LLM simulator did not write: imported continuations or a plugin."""

    name: str
    origin: Literal["imported", "plugin"]
    file: str | None = None
    """Imported: the file its continuations came from, as the manifest records it."""
    sha256: str | None = None
    """Imported: the file's SHA-256 as recorded ("not recorded" where the manifest has none)."""
    model: str | None = None
    """The model the setup names (imported: the import's own, else the setup's; plugin: the
    setup's), None where it names none."""
    record_models: tuple[str, ...] = ()
    """Imported: the ``model`` each continuation record names (each record's own label), distinct,
    in the order met."""
    description: str | None = None
    """Imported: the description given with the import, else the setup's."""
    simulator: str | None = None
    """Plugin: the simulator plugin's name."""
    options: tuple[tuple[str, str], ...] = ()
    """Plugin: the options given to the simulator (those set), as text."""


@dataclass(frozen=True)
class Settings:
    """The bootstrap's settings and where the setups not simulated by cocoeval came from."""

    resamples: int
    seed: int
    min_n: int
    """Intervals over fewer instances are undefined."""
    sources: tuple[SetupSource, ...] = ()


@dataclass(frozen=True)
class Coverage:
    """What of the paper the run lacks (``coverage.paper_coverage``), with the steps that add it."""

    missing: tuple[Missing, ...]


@dataclass(frozen=True)
class JudgeFree:
    """The judge-free statistics' introduction."""

    measured_on: MeasuredOn
    """What the statistics are measured on (``judge_free.measured_on``)."""
    correction: str
    """The multiple-comparison correction of the setup-vs-human tests."""
    tests: int | None
    """How many setup-vs-human tests the family has; None when the run has no conversation."""


@dataclass(frozen=True)
class Board:
    """The leaderboard's introduction."""

    ranked: bool
    """Whether any setup is ranked; if not, ``text`` says why and how to add it."""
    text: tuple[str, ...]
    """The leaderboard answer's text (``leaderboard_prose.render_leaderboard``, with any line the
    registry adds), shown when nothing is ranked."""
    stopping: StoppingRecord | None
    """Where each setup stopped and why (a run with ``stopping:``), shown beside a ranking."""


@dataclass(frozen=True)
class JudgeBased:
    """The judge-based statistics' introduction."""

    judge: str | None
    """The judge the figures show; None when no LLM judge has valid judgments."""
    stale: tuple[StaleJudge, ...]
    """LLM judges whose every judgment is stale (``judge_check.stale``)."""
    correction: str
    tests: int | None
    """Behaviour × setup tests of over/under-production (``paired_vs_human``); None: not computed."""


@dataclass(frozen=True)
class Text:
    """A section of given Markdown lines (a section added by a caller rather than computed here)."""

    title: str
    lines: tuple[str, ...]


Body = Settings | Coverage | JudgeFree | Board | JudgeBased | Text


@dataclass(frozen=True)
class Section:
    """One ``##`` section of the report: its introduction and what it lists."""

    body: Body
    """What the section says, as facts; its sentences are rendered by ``section_lines``."""
    listed: tuple[Listed, ...] = ()
    """The figures, then the tables, it lists, in the order listed."""
    marked: bool = False
    """Whether the title carries the pipeline-check mark (a judge-based section of such a run)."""

    @property
    def title(self) -> str:
        """The section's title, as index.md and index.html show it."""
        from .charts import PIPELINE_CHECK

        b = self.body
        title = {
            Settings: SETTINGS,
            Coverage: COVERAGE_TITLE,
            JudgeFree: JUDGE_FREE,
            Board: LEADERBOARD,
            JudgeBased: JUDGE_BASED,
        }.get(type(b)) or (b.title if isinstance(b, Text) else "")
        return f"{title} — {PIPELINE_CHECK}" if self.marked else title


@dataclass(frozen=True)
class ReportDoc:
    """The report of a run, as ``index.md`` and ``index.html`` both show it."""

    title: str
    """The run's name (the folder's); a comparison's: the labels of the runs compared, comma-separated."""
    notices: tuple[str, ...]
    """What the run's files say is wrong with them (``integrity_warnings``), first in the report."""
    pipeline_check: bool
    """Whether the run is a pipeline check: a paragraph says its judge-based outputs are not findings."""
    headline: Headline | None
    """The first screen (``headline.Headline``); None: none (a comparison: its first section is the answer)."""
    with_html: bool
    """Whether ``index.html`` is written beside: the headline's pointer to the conversation viewer
    links into it, else names the command that writes it."""
    sections: tuple[Section, ...]
    compared: bool = False
    """Whether the document is ``cocoeval compare``'s (beyond the paper): its title names the runs
    compared, a line says the comparison is beyond the paper, and its pipeline-check paragraph
    speaks of a run compared."""


def title_line(doc: ReportDoc) -> str:
    """The document's title, as the first line of index.md and the HTML page's heading show it."""
    return f"Comparing runs: {md_escape(doc.title)}" if doc.compared else f"Report for {md_escape(doc.title)}"


def setup_source_lines(sources: tuple[SetupSource, ...]) -> list[str]:
    """The lines naming the setups cocoeval's own LLM simulator did not write; none without any."""
    lines = []
    for s in sources:
        name = md_escape(s.name)
        if s.origin == "imported":
            made = _made_by(s)
            lines.append(
                f"- `{name}`: imported from `{md_escape(str(s.file))}` (sha256 {s.sha256})"
                + (f", {made}" if made else "")
                + (f": {md_escape(s.description)}" if s.description else "")
            )
        else:
            opts = ", ".join(f"{k}: {v}" for k, v in s.options)
            lines.append(
                f"- `{name}`: simulator plugin `{md_escape(str(s.simulator))}`"
                + (f" with model {md_escape(s.model)}" if s.model else "")
                + (f" ({md_escape(opts)})" if opts else "")
            )
    if not lines:
        return []
    return [
        "Setups not written by cocoeval's own LLM simulator (they are judged and analysed like the others):\n",
        *lines,
        "",
    ]


def _made_by(s: SetupSource) -> str:
    """What wrote an imported setup's continuations: the setup's model and the models its records
    name, the latter said apart where they differ; "" when neither says."""
    named = s.record_models
    shown = ", ".join(md_escape(m) for m in named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
    if s.model is None:
        return f"written by {shown} (the records' model)" if named else ""
    if not named or list(named) == [s.model]:
        return f"written by {md_escape(s.model)}"
    return f"written by {md_escape(s.model)} (the records name {shown})"


def intro_lines(doc: ReportDoc) -> list[str]:
    """The lines above the headline: a comparison's beyond-the-paper line, the run directory's
    warnings, the pipeline-check paragraph."""
    from cocoeval.run.rundir import PIPELINE_LABEL

    from .charts import PIPELINE_CHECK
    from .runcompare_prose import BEYOND

    lines = [f"_{BEYOND}_\n"] if doc.compared else []
    if doc.notices:
        lines += [
            "**Warnings about this run directory** (what it holds that its instances or manifest do not "
            "account for):\n",
            *(f"- {md_escape(w)}" for w in doc.notices),
            "",
        ]
    if doc.pipeline_check and doc.compared:
        lines.append(
            f"**{PIPELINE_CHECK[0].upper()}{PIPELINE_CHECK[1:]}.** A run compared is labelled "
            f"`label: {PIPELINE_LABEL}`: its judge is a tiny model, so the differences show that every path runs; "
            "they are not findings.\n"
        )
    elif doc.pipeline_check:
        lines.append(
            f"**{PIPELINE_CHECK[0].upper()}{PIPELINE_CHECK[1:]}.** This run is labelled "
            f"`label: {PIPELINE_LABEL}`: its judges are a tiny model, so the judge-based figures and tables "
            "show that every path of the workbench runs end to end; they are not findings.\n"
        )
    return lines


def section_lines(section: Section) -> list[str]:
    """A section's text as Markdown lines, below its title and above its listing."""
    from . import inference

    b = section.body
    if isinstance(b, Settings):
        return [
            f"Bootstrap: {b.resamples} resamples over instances, seed {b.seed}; an interval over fewer than "
            f"{b.min_n} instances, or with every resample equal, is undefined (– in the tables, a cross instead "
            "of a whisker in the figures; ci_note says why).\n",
            *setup_source_lines(b.sources),
        ]
    if isinstance(b, Coverage):
        return [coverage_markdown(list(b.missing), heading="")]
    if isinstance(b, JudgeFree):
        from .judge_free_prose import render_measured_on

        if b.tests is None:
            return ["_No conversation in this run._\n"]
        return [
            f"{render_measured_on(b.measured_on)} Definitions: `cocoeval/analysis/convstats.py` and docs/analysis.md "
            f"(Judge-free statistics). Setup vs human: {inference.describe_test(b.correction, b.tests)} "
            "(the family: statistics × setups).\n"
        ]
    if isinstance(b, Board):
        from .leaderboard_prose import render_stopping

        if not b.ranked:  # nothing ranked: the answer says why and how
            return [*b.text, ""]
        return [
            "Every setup ranked per judge (setups judged by different judges are never ranked together) by the "
            "distance of its behaviour profile from the humans' on the same instances: the root mean square of "
            "the per-behaviour paired differences in mean occurrences per conversation (estimated without the "
            "upward bias of squared noise; equal distances share a rank), with the floor (the same distance "
            "between two random halves of the human references: 0 on average), the Likert gap and the "
            "judge-free turn-taking distances beside. Beyond the paper: each rank's interval (rank_low–rank_high, "
            "the ranks the data support; an interval of several ranks is unsettled) and every pair of setups "
            "compared on the instances both have (paired, clustered by source conversation). Definitions: "
            "`cocoeval/analysis/leaderboard.py`, `cocoeval/analysis/paired.py` and "
            "docs/analysis.md (A leaderboard of simulators; Setup against setup).\n",
            *(f"{x}\n" for x in render_stopping(b.stopping)),
        ]
    if isinstance(b, JudgeBased):
        from .judge_check_prose import render_stale

        tested = (
            f"Over/under-production (paired_vs_human): {inference.describe_test(b.correction, b.tests)}."
            if b.tests is not None
            else ""
        )
        return [
            *(f"**Stale judge:** {md_escape(render_stale(s))}.\n" for s in b.stale),
            (
                f"Judge shown in the figures: {md_escape(b.judge)}. {tested}"
                if b.judge is not None
                else "No LLM judge with valid judgments: the figures show no judge's rates."
            ),
            "Invalid judgments are excluded and counted in invalid_rates.\n",
        ]
    return list(b.lines)


def listing_lines(listed: tuple[Listed, ...]) -> list[str]:
    """A section's listing: its figures, then its tables, each linked to its files."""
    figs = [
        f"- **{x.name}**: {x.what} — " + ", ".join(f"[{n}]({n})" for n in x.files) for x in listed if x.kind == "figure"
    ]
    tabs = [
        f"- **{x.name}**: {x.what} — " + ", ".join(f"[{n}]({n})" for n in x.files) + f" ({x.rows} rows)"
        for x in listed
        if x.kind == "table"
    ]
    return (["Figures:\n", *figs, ""] if figs else []) + (["Tables:\n", *tabs, ""] if tabs else [])


def render_markdown(doc: ReportDoc) -> str:
    """``index.md`` (a comparison's ``compare.md``): the title, the notices, the headline, then each
    section with its text and listing."""
    lines = [f"# {title_line(doc)}\n", *intro_lines(doc)]
    if doc.headline is not None:  # the answer first
        lines += headline_markdown(doc.headline, VIEWER_HTML if doc.with_html else VIEWER_MD)
    for s in doc.sections:
        lines += [f"## {s.title}\n", *section_lines(s), *listing_lines(s.listed)]
    return "\n".join(lines) + "\n"
