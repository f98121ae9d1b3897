"""The report kept beside its run, copied when the same report is asked for again: a speed trick
(``COCOEVAL_SPEED_OFF=report`` turns it off; the others are in ``core.speed``, which cannot hold
this one: it reads runs, and ``core`` sits below the run layer). ``write_report`` (``cocoeval
report``, notebook 09) keeps a copy of the report it writes in ``RUN/cache/report-<key>/``, with
``report.json`` (the list of figures and tables, the warnings, the SHA-256 of every file), and the
same report asked for again, into any folder, is that copy: the same bytes. The key covers
everything a report is made of (``kept_report_folder``), so a copy is never stale; a kept file
missing or not the bytes kept is said, and the report computed anew. Computing a report takes
seconds at the paper's scale (its statistics and ~30 figures); copying it, a fraction of that."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from cocoeval.core.jsonio import write_atomic, write_atomic_bytes
from cocoeval.core.speed import off

from .report_result import ReportResult
from .store import CACHE_DIR, RunLike, code_digest, keep_folder, read_digest, run_signature

log = logging.getLogger(__name__)
KEPT_REPORTS = 2
"""How many reports a run's ``CACHE_DIR`` keeps (the most recently written): that of ``cocoeval
report`` and that of a notebook with other settings."""
REPORT_LIBS = ("altair", "vl-convert-python", "numpy", "scipy", "polars", "pydantic", "krippendorff", "ppi-python")
"""The libraries whose version is part of a kept report's key (they make its numbers or its figures)."""


def kept_report_folder(run: RunLike, settings: dict[str, Any]) -> Path | None:
    """Where the report of ``run`` with ``settings`` (``write_report``'s arguments but the output
    folder) is kept: keyed by the SHA-256 of the records read (``RunStore.digest``), of every file
    of the run directory with its size and mtime (``run_signature``: annotations, usage...), of
    every file of cocoeval with the versions of ``REPORT_LIBS`` (``code_digest``) and of the
    settings. None for a ``Run`` (built from parts, or read whole) or a store changed in memory
    since read (``read_digest``): nothing is kept for those; None too where
    ``COCOEVAL_SPEED_OFF`` names ``report``."""
    digest = read_digest(run)
    if off("report") or run.path is None or digest is None:
        return None
    files = [(os.path.relpath(p, run.path), mtime, size) for p, mtime, size in run_signature(run.path)]
    code = code_digest(REPORT_LIBS, every_file=True)
    key = json.dumps({"run": digest, "files": files, "code": code, "settings": settings}, sort_keys=True)
    return run.path / CACHE_DIR / f"report-{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def report_files(rep: ReportResult) -> list[str]:
    """The files ``_write_report`` wrote for ``rep``, relative to its folder."""
    figs = [f"{n}{ext}" for n in rep.figures for ext in (".png", ".svg", ".vl.json")]
    return [
        *figs,
        *(f"{n}{ext}" for n in rep.tables for ext in (".csv", ".md")),
        "index.md",
        *(["index.html"] if rep.html else []),
    ]


def keep_report(folder: Path, out: Path, rep: ReportResult) -> None:
    """Keep a copy of the report just written to ``out`` as ``folder`` (whole or not at all), with
    ``report.json``: ``rep`` (but its ``out`` and ``html``, which belong to the folder written to)
    and the SHA-256 of each file; only the ``KEPT_REPORTS`` newest stay."""

    def fill(tmp: Path) -> None:
        files = {}
        for name in report_files(rep):
            data = (out / name).read_bytes()
            (tmp / name).write_bytes(data)
            files[name] = hashlib.sha256(data).hexdigest()
        kept = {k: v for k, v in asdict(rep).items() if k not in ("out", "html")}
        (tmp / "report.json").write_text(
            json.dumps({"report": kept, "html": bool(rep.html), "files": files}, ensure_ascii=False, sort_keys=True),
            encoding="utf-8",
        )

    shutil.rmtree(folder, ignore_errors=True)  # one kept without the HTML page, now written with it
    keep_folder(folder, fill, newest=KEPT_REPORTS, what="report")


def _kept_result(kept: Any, out: Path, html: bool) -> ReportResult:
    """The ``ReportResult`` of a report kept (``kept``: the ``report`` of its ``report.json``),
    copied to ``out`` (with its ``index.html`` if ``html``); a ``KeyError`` or ``TypeError`` for
    one not written by ``keep_report``."""
    judge = kept["judge"]
    if not (judge is None or isinstance(judge, str)) or not isinstance(kept["pipeline_check"], bool):
        raise TypeError("its judge or pipeline_check is not one of a report")
    return ReportResult(
        judge=judge,
        figures=_names(kept["figures"]),
        tables=_names(kept["tables"]),
        out=str(out),
        pipeline_check=kept["pipeline_check"],
        warnings=_names(kept["warnings"]),
        html=str(out / "index.html") if html else None,
    )


def _names(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise TypeError(f"{v!r} is not a list of names")
    return tuple(v)


def copy_kept(folder: Path, out: Path, html: bool) -> ReportResult | None:
    """Write the report kept as ``folder`` to ``out`` and return its ``rep``; None when none is
    kept there or it lacks the HTML page asked for (then it is written, and kept, anew), or when
    a kept file is missing or not the bytes kept (then it is written anew, and said so). A report
    kept with its HTML page serves one asked for without (``index.md`` does not name the page)."""
    if not folder.is_dir():
        return None
    try:
        meta = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        if html and not meta["html"]:
            return None
        rep = _kept_result(meta["report"], out, html)
        names = report_files(rep)
        if sorted(report_files(replace(rep, html="index.html" if meta["html"] else None))) != sorted(meta["files"]):
            raise ValueError("it lists other files than its report")
        data = {}
        for name in names:
            data[name] = (folder / name).read_bytes()
            if hashlib.sha256(data[name]).hexdigest() != meta["files"][name]:
                raise ValueError(f"{name} is not the file kept")
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("the report kept in %s cannot be used (%s): written anew", folder, e)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    out.mkdir(parents=True, exist_ok=True)
    for name, b in data.items():
        if name.endswith((".md", ".html")):  # as written: through write_atomic (API key values redacted)
            write_atomic(out / name, b.decode("utf-8"))
        else:
            write_atomic_bytes(out / name, b)
    return rep
