"""What ``write_report`` returns (``cocoeval report``, notebook 09): the typed answer of a report,
apart from ``report.py`` so that the report kept beside its run (``speed.py``) can write it and
rebuild it without importing the report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportResult:
    """A report written to ``out``: what it holds and where."""

    judge: str | None
    """The judge whose rates the judge-based figures and tables show (the one asked for, or the
    first LLM judge with valid judgments); None where no LLM judge has any."""
    figures: tuple[str, ...]
    """The figures written, sorted: each ``<name>.png``, ``<name>.svg`` and ``<name>.vl.json``."""
    tables: tuple[str, ...]
    """The tables written, sorted: each ``<name>.csv`` and ``<name>.md``."""
    out: str
    """The folder the report was written to (with its ``index.md``)."""
    pipeline_check: bool
    """Whether the run is a pipeline check (``label: pipeline-check``): its judge-based outputs are
    marked "not results"."""
    warnings: tuple[str, ...]
    """What the run's files say is wrong with them (``integrity_warnings``), also at the top of
    ``index.md``; empty for a run as ``cocoeval run`` wrote it."""
    html: str | None
    """The self-contained ``index.html`` written (``html=True``), else None."""
