"""Analysis: reads a run, never calls a model. ``store`` (``RunStore``: a run directory opened for
analysis, its records read at first use, the memo and the frames kept beside it;
``frames.open_run_dir`` opens one) → ``frames`` (polars frames of a run) →
``stats``, ``inference``, ``agreement``, ``paper_stats`` (statistics with honest uncertainty) and
``convstats``/``convcompare`` (judge-free statistics) → the answers (``rq``: RQ1–RQ5; ``studies``:
the benchmark, participants, the paper's tables, agreement; ``judge_free``; ``leaderboard``: the
leaderboard of simulators) → ``charts``. The
registry of analyses (``registry``, filled in ``analyses``) feeds ``report`` and the notebooks;
``coverage`` lists what of the paper a run (or a params file) lacks, for the report, the notebooks
and ``cocoeval check``.

Names load on first use: importing this package does not import polars' heavy parts or Altair.
Its modules import Altair, so importing the package defers the RFC 3987 grammar jsonschema would
build at Altair's import to that grammar's first use (``core.speed.defer_iri_grammar``)."""

from cocoeval import lazy_exports
from cocoeval.core.speed import defer_iri_grammar

defer_iri_grammar()

_WHERE = {
    "Answer": "cocoeval.analysis.answer",
    "Frames": "cocoeval.analysis.frames",
    "RunStore": "cocoeval.analysis.store",
    "open_run_dir": "cocoeval.analysis.frames",
    "run_frames": "cocoeval.analysis.frames",
    "invalid_rates": "cocoeval.analysis.frames",
    "Params": "cocoeval.analysis.registry",
    "compute": "cocoeval.analysis.analyses",
    "write_report": "cocoeval.analysis.report",
    "ReportResult": "cocoeval.analysis.report_result",
    "paper_coverage": "cocoeval.analysis.coverage",
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
