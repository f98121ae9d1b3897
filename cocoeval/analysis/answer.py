"""Shared pieces of the research-question answers (private; import from ``cocoeval.analysis.rq``): the
``Answer`` container, setup lookup from the run manifest, and how estimates are written."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from .frames import Frames

if TYPE_CHECKING:
    import altair as alt

    from cocoeval.run.recorded import RecordedSetup

    from .store import RunLike

SETUP_FIELDS = ("name", "origin", "model", "prompt", "turns_per_call", "kind", "simulator", "continuations")
SIMULATED, IMPORTED, PLUGIN = "simulated", "imported", "plugin"
"""Where a setup's continuations come from (``setup_origin``): cocoeval's own simulation loop (one
LLM writes every turn, k per call), a file of imported continuations (``continuations:``), or a
simulator plugin (``simulator:``)."""


def recorded_setup(s: RecordedSetup | Mapping[str, Any]) -> RecordedSetup:
    """``s`` as a recorded setup (a mapping, e.g. a test's or a notebook's, is read as one)."""
    from cocoeval.run.recorded import RecordedSetup

    return s if isinstance(s, RecordedSetup) else RecordedSetup.model_validate(s)


def setup_origin(s: RecordedSetup | Mapping[str, Any]) -> str:
    """``IMPORTED`` for a setup of imported continuations, ``PLUGIN`` for a simulator plugin, else
    ``SIMULATED``: the setup's ``source`` when the manifest records it, else told by its keys
    (``continuations:``, ``simulator:``)."""
    s = recorded_setup(s)
    if s.source in (SIMULATED, IMPORTED, PLUGIN):
        return str(s.source)
    if s.continuations:
        return IMPORTED
    if s.simulator:
        return PLUGIN
    return SIMULATED


def setup_view(s: RecordedSetup | Mapping[str, Any]) -> dict[str, Any]:
    """A manifest setup as the analyses read it: every field of ``SETUP_FIELDS`` present (None
    where it does not apply) and ``origin`` added. Only a simulated setup has a prompt and a
    turns per call (k): an imported or plugin setup has neither (even when its record carries one),
    so it never enters the RQ3 prompt or RQ5 turns-per-call comparisons; its model is the one it
    names (or None)."""
    s = recorded_setup(s)
    origin = setup_origin(s)
    out = {k: getattr(s, k, None) for k in SETUP_FIELDS}
    out.update(origin=origin, kind=s.kind or "multiparty")
    if origin != SIMULATED:
        out.update(prompt=None, turns_per_call=None)
    return out


def setup_label(s: RecordedSetup | Mapping[str, Any]) -> str:
    """A setup's model/condition label: "imported: <name>", "plugin <simulator>" (· its model), or
    its model (a simulated setup)."""
    v = setup_view(s)
    if v["origin"] == IMPORTED:
        return f"imported: {v['name']}"
    if v["origin"] == PLUGIN:
        return f"plugin {v['simulator']}" + (f" · {v['model']}" if v["model"] else "")
    return str(v["model"] or "")


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
    result: object | None = None
    """The typed result its ``text`` is rendered from (e.g. ``rq_prose.HumanRates``), for a reader
    that needs the numbers rather than the sentences; None where an analysis has none yet."""

    def markdown(self) -> str:
        return f"**{self.question}**\n\n" + "\n\n".join(self.text or ["_No data to answer this yet._"])


def setups_table(run: RunLike) -> pl.DataFrame:
    schema = {k: pl.Int64 if k == "turns_per_call" else pl.Utf8 for k in SETUP_FIELDS}
    rows = [
        {k: v if k == "turns_per_call" or v is None else str(v) for k, v in setup_view(s).items()}
        for s in run.manifest.setup_params
    ]
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


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
    return (
        f"intervals: 95% percentile bootstrap over instances ({resamples} resamples, seed {seed}), undefined "
        f"(not shown) below n = {min_n} or when every resample is equal"
    )


def pick_setups(run: RunLike, **where: Any) -> list[str]:
    """Setup names whose params match every ``field=value`` (a callable value is a predicate), read
    through ``setup_view``: an imported or plugin setup has no prompt or turns per call."""
    out = []
    for s in run.manifest.setup_params:
        d = {**s.model_dump(mode="json"), **setup_view(s)}
        if all((v(d.get(k)) if callable(v) else d.get(k) == v) for k, v in where.items()):
            out.append(s.name)
    return out


def chart_key(prefix: str, label: str) -> str:
    """A file-safe name for a chart of ``label`` (e.g. a model/condition)."""
    return f"{prefix}_" + (re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "x")
