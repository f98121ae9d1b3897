"""The judge-free answer (``convstats``, ``convcompare``) for the notebooks and the report, and how
a run says it is a pipeline check (``label: pipeline-check`` in its params, carried into the
manifest): its judge-based figures are then marked "pipeline check — tiny model, not results"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from cocoeval.core.targets import REFERENCE

from . import charts, convcompare, inference
from .answer import IMPORTED, PLUGIN, Answer, setup_label, setup_origin
from .convstats import HISTORY, STATISTICS, TURN_TAKING, conversation_frame, turn_taking_frame
from .frames import Frames
from .judge_free_prose import (
    JudgeFreeComparison,
    MeasuredOn,
    SanityCheck,
    SetupSource,
    SetupVsHumanStatistics,
    StatisticDiff,
    StatisticMean,
    TurnTakingMeasure,
    TurnTakingOf,
    TurnTakingRealism,
    render_judge_free,
    render_measured_on,
)
from .rq_prose import Estimate, Intervals

if TYPE_CHECKING:
    from cocoeval.run import Manifest
    from cocoeval.run.recorded import RecordedSetup

    from .store import RunLike


def pipeline_check(manifest: Manifest) -> bool:
    """Whether a run is a pipeline check (params ``label: pipeline-check``, as in the demo): its
    judge-based figures and tables are marked "pipeline check — tiny model, not results"."""
    return manifest.pipeline_check


def _what_setup(s: RecordedSetup) -> str:
    """What wrote a setup's continuations: its model, its plugin, or "imported continuations"."""
    origin = setup_origin(s)
    if origin == IMPORTED:
        return "imported continuations"
    return setup_label(s) if origin == PLUGIN else str(s.model)


def measured_on(manifest: Manifest) -> MeasuredOn:
    """What the judge-free statistics of a run are measured on: each setup and what wrote it, demo
    data or not, a pipeline check or not."""
    build = manifest.params.build
    return MeasuredOn(
        tuple(SetupSource(s.name, _what_setup(s)) for s in manifest.setup_params),
        demo_data=bool(build is not None and build.demo_data),
        pipeline_check=pipeline_check(manifest),
    )


def judge_free_note(manifest: Manifest) -> str:
    """What the judge-free statistics of a run are measured on, said truthfully."""
    return render_measured_on(measured_on(manifest))


def turn_taking_realism(turns: pl.DataFrame) -> TurnTakingRealism:
    """The turn-taking table (``convcompare.turn_taking``) as a result: the yardstick and each setup."""

    def of(target: str) -> TurnTakingOf:
        rows = {r["statistic"]: r for r in turns.filter(pl.col("target") == target).iter_rows(named=True)}
        return TurnTakingOf(target, tuple(TurnTakingMeasure(s, Estimate.of(rows[s])) for s in TURN_TAKING if s in rows))

    setups = [t for t in turns["target"].unique(maintain_order=True).to_list() if t != HISTORY]
    return TurnTakingRealism(
        of(HISTORY) if HISTORY in set(turns["target"].to_list()) else None, tuple(of(t) for t in setups)
    )


def _vs_human(paired: pl.DataFrame) -> tuple[SetupVsHumanStatistics, ...]:
    """Each setup's verdicts on the statistics (``convcompare.paired_vs_human``)."""
    out = []
    for target in paired["target"].unique(maintain_order=True).to_list():
        p = paired.filter(pl.col("target") == target)
        n = p["n"].max()
        if p["verdict"].is_null().all():
            out.append(SetupVsHumanStatistics(target, n, tested=False))  # type: ignore[arg-type]
            continue

        def listed(v: str, p: pl.DataFrame = p) -> tuple[StatisticDiff, ...]:
            return tuple(
                StatisticDiff(r["statistic"], STATISTICS[r["statistic"]], r["mean_sim"], r["mean_human"], r["p_adj"])
                for r in p.filter(pl.col("verdict") == v).iter_rows(named=True)
            )

        out.append(
            SetupVsHumanStatistics(
                target,
                n,  # type: ignore[arg-type]
                tested=True,
                higher=listed(convcompare.HIGHER),
                lower=listed(convcompare.LOWER),
            )
        )
    return tuple(out)


def judge_free(
    run: RunLike,
    f: Frames | None = None,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
) -> Answer:
    """Judge-free statistics (``convstats``): the human reference vs every setup on the turns
    themselves, paired over instances, tested and corrected over statistics x setups; with the
    judges' sanity table (``convcompare.judge_sanity``) when ``f`` has fine-grained judgments."""
    inference.check_params(resamples=resamples, min_n=min_n, correction=correction)
    a = Answer(
        "How do the simulated conversations differ from the human ones, measured without any judge?", judge_based=False
    )
    x = _judge_free(a, run, f, Intervals(resamples, seed, min_n), correction)
    a.text, a.result = render_judge_free(x), x
    return a


def _judge_free(a: Answer, run: RunLike, f: Frames | None, iv: Intervals, correction: str) -> JudgeFreeComparison:
    """``judge_free``'s result; its tables and charts added to ``a``."""
    on = measured_on(run.manifest)
    conv = conversation_frame(run)
    if conv.is_empty():
        return JudgeFreeComparison(on, iv, correction, empty=True)
    kw: dict[str, Any] = {"resamples": iv.resamples, "seed": iv.seed, "min_n": iv.min_n}
    m, paired = convcompare.run_means(run, **kw), convcompare.run_vs_human(run, **kw, correction=correction)
    a.tables.update(per_conversation=conv, means=m, vs_human=paired)
    family = int(paired["p"].is_not_null().sum()) if not paired.is_empty() else 0
    ns = m.filter(pl.col("target") == REFERENCE)["n"]
    ref = {r["statistic"]: r for r in m.filter(pl.col("target") == REFERENCE).iter_rows(named=True)}
    a.charts["judge_free"] = charts.convstats_chart(m, labels=STATISTICS)
    if not paired.is_empty():
        a.charts["judge_free_vs_human"] = charts.convstats_diff_chart(paired, labels=STATISTICS)
    tt = turn_taking_frame(run)
    turns = convcompare.turn_taking(tt, **kw)
    a.tables.update(turn_taking_per_conversation=tt, turn_taking=turns)
    if not turns.is_empty():
        a.charts["turn_taking"] = charts.convstats_chart(turns, labels=TURN_TAKING, columns=2)
    sanity = None
    if f is not None and not f.counts.is_empty():
        st = convcompare.run_judge_sanity(run, f, **kw)
        a.tables["judge_sanity" + (" (pipeline check — tiny model, not results)" if on.pipeline_check else "")] = st
        sanity = tuple(
            SanityCheck(r["judge"], r["behaviour"], r["statistic"], r["expected"], r["rho"], r["check"], r["ci_note"])
            for r in st.iter_rows(named=True)
        )
    return JudgeFreeComparison(
        on,
        iv,
        correction,
        references=ns.max() if len(ns) else 0,  # type: ignore[arg-type]
        family=family,
        n_statistics=len(STATISTICS),
        human=tuple(StatisticMean(s, STATISTICS[s], Estimate.of(r)) for s, r in ref.items()),
        setups=_vs_human(paired),
        turn_taking=turn_taking_realism(turns) if not turns.is_empty() else None,
        sanity=sanity,
    )
