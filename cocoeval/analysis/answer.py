"""Shared pieces of the research-question answers (private; import from ``cocoeval.analysis.rq``): the
``Answer`` container, setup lookup from the run manifest, and how estimates are written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import altair as alt
import polars as pl

from .frames import Frames

if TYPE_CHECKING:
    from cocoeval.run import Run

SETUP_FIELDS = ("name", "model", "prompt", "turns_per_call", "kind")


@dataclass
class Answer:
    question: str
    text: list[str] = field(default_factory=list)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    charts: dict[str, alt.TopLevelMixin] = field(default_factory=dict)
    judge_based: bool = True
    """Whether its figures rest on a judge (marked in a pipeline-check run) or not (judge-free)."""
    setups: list[str] | None = None
    """The setups it compares with the humans (a notebook's linked chart shows them); None: every setup."""

    def markdown(self) -> str:
        return f"**{self.question}**\n\n" + "\n\n".join(self.text or ["_No data to answer this yet._"])


def setups_table(run: Run) -> pl.DataFrame:
    rows = [{k: s.get(k) for k in SETUP_FIELDS} for s in run.manifest.setup_params]
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={k: pl.Utf8 for k in SETUP_FIELDS})


def setup_labels(f: Frames) -> dict[str, str]:
    return {b.id: b.name for b in f.taxonomy.behaviours}


def fmt_ci(m: float, lo: float | None, hi: float | None, n: int, note: str | None = None) -> str:
    """An estimate with its interval and the instances it rests on, or why it has no interval."""
    if m is None:  # no estimate at all (nothing valid to average): say why
        return f"no estimate ({note or 'undefined'})"
    if note or lo is None or hi is None:
        return f"{m:.2f} (no interval: {note or 'undefined'})"
    return f"{m:.2f} (95% CI {lo:.2f}–{hi:.2f}, n = {n})"


def ci_text(r: dict[str, Any], value: str = "mean", lo: str = "ci_low", hi: str = "ci_high") -> str:
    return fmt_ci(r[value], r[lo], r[hi], r["n"], r.get("ci_note"))


def interval_method(resamples: int, seed: int, min_n: int) -> str:
    return (f"intervals: 95% percentile bootstrap over instances ({resamples} resamples, seed {seed}), undefined "
            f"(not shown) below n = {min_n} or when every resample is equal")


def pick_setups(run: Run, **where: Any) -> list[str]:
    """Setup names whose params match every ``field=value`` (a callable value is a predicate)."""
    out = []
    for s in run.manifest.setup_params:
        if all((v(s.get(k)) if callable(v) else s.get(k) == v) for k, v in where.items()):
            out.append(s["name"])
    return out


def chart_key(prefix: str, label: str) -> str:
    """A file-safe name for a chart of ``label`` (e.g. a model/condition)."""
    return f"{prefix}_" + (re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "x")
