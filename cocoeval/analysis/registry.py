"""The analysis registry's machinery (the registered analyses are in ``analyses``, which
imports them from here for its users): ``Params``, the ``@analysis`` decorator, what a notebook and the report
take from an analysis (``Notebook``, ``ReportSpec``, ``Out``) and the look-ups that
``cocoeval report``, ``cocoeval.notebooks.generate`` and the tests make."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cocoeval.core.registry import Registry

from . import inference

if TYPE_CHECKING:
    from .answer import Answer
    from .frames import Frames
    from .store import RunLike

SECTIONS = ("behaviours", "judge-free", "leaderboard", "paper", "agreement")
"""Where the report writes an analysis: the behaviour means and their figures first (the longest
figures to draw, drawn while the rest is computed; listed with the judge-based statistics); the
judge-free statistics next; the leaderboard of simulators (its own heading in the index, "not run"
there when it has nothing to rank); the paper's study after the invalid rates (only when the run
has a judge); agreement last."""


@dataclass(frozen=True)
class Params:
    """What every analysis is computed with, besides the run. ``frames``: the run's frames when
    already made (``frames.run_frames``; else made from the run); ``options``: an analysis's own
    settings (a notebook passes its extra parameters, e.g. ``participants_top``)."""

    judge: str | None = None
    resamples: int = 1000
    seed: int = 0
    min_n: int = inference.MIN_N
    correction: str = "bh"
    frames: Frames | None = None
    bench_dir: Path | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def boot(self) -> dict[str, Any]:
        """``resamples``, ``seed`` and ``min_n`` as keyword arguments of the statistics."""
        return {"resamples": self.resamples, "seed": self.seed, "min_n": self.min_n}

    def frames_of(self, run: RunLike) -> Frames:
        if self.frames is not None:
            return self.frames
        from .frames import run_frames

        return run_frames(run)


@dataclass(frozen=True)
class Notebook:
    """A generated notebook, ``cocoeval/notebooks/<name>.ipynb`` (the number in ``name`` orders
    them): a markdown head (``title``, ``question``), the parameters cell (the common parameters
    plus ``params``: ``name: type = value  # help`` lines, passed to the analyses as options), the
    run summary, the answer of each analysis registered to it (after ``prelude``, glue code of
    this notebook only), a conversation viewer and, with ``annotate``, the annotator."""

    name: str
    title: str
    question: str
    params: tuple[str, ...] = ()
    prelude: str = ""
    run_summary: bool = True
    """False: one code cell opens the run and shows the answer (no run summary, no viewer)."""
    viewer: Literal["chart", "plain"] = "chart"
    """"chart": the viewer linked to Figure 3 of the answer's setups; "plain": the viewer alone."""
    annotate: bool = False

    @property
    def option_names(self) -> list[str]:
        return [line.split(":", 1)[0].strip() for line in self.params]


@dataclass(frozen=True)
class Out:
    """A table or figure of the report: its file name (no extension) and its line in index.md.
    In ``what``, ``{judge}`` becomes the judge shown and ``{test}`` the test of the table's ``p``
    column (``inference.describe_test`` over its tested rows). ``empty``: written even with no rows.
    ``judge_based``: in the judge-free section, a table that rests on a judge all the same (listed
    with the judge-based ones, and marked in a pipeline-check run as they are)."""

    name: str
    what: str
    empty: bool = False
    judge_based: bool = False


@dataclass(frozen=True)
class ReportSpec:
    """What ``cocoeval report`` writes of an analysis's answer: ``tables`` and ``figures`` by the
    answer's names (a table name's note in parentheses, e.g. the pipeline-check mark, is not part
    of it); ``other_figures``: every other chart too, named with this prefix and described by its
    title and the judge (None: only the figures named)."""

    section: Literal["behaviours", "judge-free", "leaderboard", "paper", "agreement"]
    tables: Mapping[str, Out] = field(default_factory=dict)
    figures: Mapping[str, Out] = field(default_factory=dict)
    other_figures: str | None = None


AnalysisFn = Callable[["RunLike", Params], "Answer | None"]


UNMARKED = frozenset({"agreement", "judge_check"})
"""Analyses whose behaviour tables are about the judge's agreement itself, not rates it produced:
never marked with the validation gate's line."""


@dataclass(frozen=True)
class Analysis:
    name: str
    title: str
    fn: AnalysisFn
    notebook: str | None = None
    report: ReportSpec | None = None

    def __call__(self, run: RunLike, params: Params | None = None) -> Answer | None:
        p = params or Params()
        if p.frames is None:
            p = replace(p, frames=p.frames_of(run))
        from cocoeval.core.speed import one_blas_thread

        from .charts import checked_once

        # each chart checked whole when written, not at each part (the same spec); small products on one thread
        with checked_once(), one_blas_thread():
            ans = self.fn(run, p)
        if (
            ans is not None
            and ans.judge_based
            and self.name not in UNMARKED
            and any("behaviour" in t.columns for t in ans.tables.values())
        ):
            # beyond the paper: the behaviours the judge is not validated for
            from .judge_check import gate_note

            assert p.frames is not None
            note = gate_note(run, p.frames, p.judge, p.resamples, p.seed, min_n=p.min_n)
            if note:
                ans.text.append(note)
        return ans


ANALYSES: Registry[Analysis] = Registry("analysis", unknown=("no analysis named {name!r}", "use one of: {known}"))
"""Every analysis by name, in the order registered (the report's order within a section). No
entry-point group: the report's layout and the notebooks (generated from this registry when the
package is built) are cocoeval's own, the same in every install; an analysis of one's own is
registered by importing the module that declares it."""
NOTEBOOKS: dict[str, Notebook] = {}


def analysis(
    name: str, title: str, *, notebook: Notebook | str | None = None, report: ReportSpec | None = None
) -> Callable[[AnalysisFn], AnalysisFn]:
    """Register ``fn(run, params) -> Answer | None`` (None: nothing to show, e.g. no judge) as the
    analysis ``name``. ``notebook``: the notebook it is shown in — a ``Notebook`` declares one, a
    name adds the analysis to one declared before; ``report``: what ``cocoeval report`` writes."""

    def register(fn: AnalysisFn) -> AnalysisFn:
        if name in ANALYSES.entries():
            raise ValueError(f"analysis {name!r} is registered twice")
        nb = notebook
        if isinstance(nb, Notebook):
            if nb.name in NOTEBOOKS:
                raise ValueError(f"notebook {nb.name!r} is declared twice (name it by its name to add {name!r})")
            NOTEBOOKS[nb.name] = nb
            nb = nb.name
        elif nb is not None and nb not in NOTEBOOKS:
            raise ValueError(f"analysis {name!r}: notebook {nb!r} is not declared by an earlier analysis")
        ANALYSES.add(name, Analysis(name, title, fn, nb, report))
        return fn

    return register


def get(name: str) -> Analysis:
    """The analysis ``name``; a ConfigError naming the known ones when there is none."""
    return ANALYSES.get(name)


def compute(name: str, run: RunLike, params: Params | None = None) -> Answer | None:
    """The answer of the registered analysis ``name`` on ``run``."""
    return get(name)(run, params)


def notebooks() -> dict[str, tuple[Notebook, list[Analysis]]]:
    """Each notebook, by name in order, with the analyses it shows (in the order registered)."""
    return {n: (NOTEBOOKS[n], [a for a in ANALYSES.entries().values() if a.notebook == n]) for n in sorted(NOTEBOOKS)}


def judge_free_outputs() -> list[str]:
    """The names of the report's judge-free tables and figures, in the order listed in its index."""
    outs = [
        o
        for a in in_report("judge-free")
        if a.report is not None  # (in_report: never None)
        for o in [*a.report.tables.values(), *a.report.figures.values()]
    ]
    return list(dict.fromkeys(o.name for o in outs if not o.judge_based))


def in_report(section: str) -> list[Analysis]:
    """The analyses the report writes in ``section`` (one of ``SECTIONS``), in the order registered."""
    if section not in SECTIONS:
        raise ValueError(f"no report section {section!r}")
    return [a for a in ANALYSES.entries().values() if a.report is not None and a.report.section == section]
