"""The judge-free answer (``convstats``, ``convcompare``) for the notebooks and the report, and how
a run says it is a pipeline check (``label: pipeline-check`` in its params, carried into the
manifest): its judge-based figures are then marked "pipeline check — tiny model, not results"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from cocoeval.core.targets import REFERENCE
from cocoeval.core.text import md_escape

from . import charts, convcompare, inference
from .answer import IMPORTED, PLUGIN, Answer, ci_text, interval_method, setup_label, setup_origin
from .convstats import HISTORY, STATISTICS, TURN_TAKING, conversation_frame, turn_taking_frame
from .frames import Frames

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


def judge_free_note(manifest: Manifest) -> str:
    """What the judge-free statistics of a run are measured on, said truthfully."""
    params = manifest.params
    models = ", ".join(f"{md_escape(s.name)} = {md_escape(_what_setup(s))}" for s in manifest.setup_params)
    text = (
        "No model judges these: the human reference's values are measured on the benchmark's reference turns "
        f"(what the people said next), each setup's on its continuations ({models or 'no setups'})."
    )
    if params.build is not None and params.build.demo_data:
        text += (
            " This run's references include cocoeval's illustrative demo conversations, which are generated "
            "from templates, not human data."
        )
    if pipeline_check(manifest):
        text += (
            " The setups' models are tiny: their differences from the humans are real for these models and say "
            "nothing about capable LLMs."
        )
    return text


def turn_taking_text(turns: pl.DataFrame) -> str:
    """The turn-taking table (``convcompare.turn_taking``) in one paragraph."""

    def said(target: str) -> str:
        rows = {r["statistic"]: r for r in turns.filter(pl.col("target") == target).iter_rows(named=True)}
        return "; ".join(
            f"{'transitions TV' if s == 'transition_distance' else 'entropy − humans (bits)'} " + ci_text(rows[s])
            for s in TURN_TAKING
            if s in rows
        )

    setups = [t for t in turns["target"].unique(maintain_order=True).to_list() if t != HISTORY]
    return (
        "Turn-taking realism, each continuation against the human reference of its own instance (who speaks "
        "after whom: total variation between the speaker-transition distributions, 0 = the same, 1 = nothing in "
        "common; and the speaker entropy of the turns, continuation − human, in bits), averaged over instances: "
        + (
            f"yardstick, the humans' own last turns of x against r: {said(HISTORY)}. "
            if HISTORY in set(turns["target"].to_list())
            else ""
        )
        + (" ".join(f"**{md_escape(t)}**: {said(t)}." for t in setups) or "no setup has a continuation.")
    )


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
    conv = conversation_frame(run)
    if conv.is_empty():
        return a
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "min_n": min_n}
    m = convcompare.means(conv, **kw)
    paired = convcompare.paired_vs_human(conv, **kw, correction=correction)
    a.tables.update(per_conversation=conv, means=m, vs_human=paired)
    family = int(paired["p"].is_not_null().sum()) if not paired.is_empty() else 0
    ns = m.filter(pl.col("target") == REFERENCE)["n"]
    a.text.append(judge_free_note(run.manifest))
    a.text.append(
        f"Method: {ns.max() if len(ns) else 0!s} human references; per-turn statistics as defined in "
        f"`cocoeval/analysis/convstats.py` (lowercase word tokens, trigram repetition, …), a conversation whose "
        f"statistic is undefined left out of it; {interval_method(resamples, seed, min_n)}; setup vs human: "
        f"{inference.describe_test(correction, family)} (the family: {len(STATISTICS)} statistics × the setups)."
    )
    ref = {r["statistic"]: r for r in m.filter(pl.col("target") == REFERENCE).iter_rows(named=True)}
    a.text.append(
        "Human reference: "
        + "; ".join(f"{STATISTICS[s]} {ci_text(r)}" for s, r in ref.items() if r["mean"] is not None)
        + "."
    )
    for target in paired["target"].unique(maintain_order=True).to_list():
        p = paired.filter(pl.col("target") == target)
        if p["verdict"].is_null().all():
            a.text.append(f"- **{md_escape(target)}**: not tested (n = {p['n'].max()!s} < {min_n} instances).")
            continue

        def listed(v: str, p: pl.DataFrame = p) -> str:
            return (
                ", ".join(
                    f"{STATISTICS[r['statistic']]} ({r['mean_sim']:.2f} vs {r['mean_human']:.2f}, p_adj "
                    f"{r['p_adj']:.3g})"
                    for r in p.filter(pl.col("verdict") == v).iter_rows(named=True)
                )
                or "none"
            )

        a.text.append(
            f"- **{md_escape(target)}** (n = {p['n'].max()!s}): higher than humans: "
            f"{listed(convcompare.HIGHER)}; lower: {listed(convcompare.LOWER)}."
        )
    a.charts["judge_free"] = charts.convstats_chart(m, labels=STATISTICS)
    if not paired.is_empty():
        a.charts["judge_free_vs_human"] = charts.convstats_diff_chart(paired, labels=STATISTICS)
    tt = turn_taking_frame(run)
    turns = convcompare.turn_taking(tt, **kw)
    a.tables.update(turn_taking_per_conversation=tt, turn_taking=turns)
    if not turns.is_empty():
        a.text.append(turn_taking_text(turns))
        a.charts["turn_taking"] = charts.convstats_chart(turns, labels=TURN_TAKING, columns=2)
    if f is not None and not f.counts.is_empty():
        sanity = convcompare.judge_sanity(f, conv, **kw)
        a.tables[
            "judge_sanity" + (" (pipeline check — tiny model, not results)" if pipeline_check(run.manifest) else "")
        ] = sanity
        a.text.append(
            "Judge sanity (Spearman of each judge's counts with the closest judge-free statistic; a judge "
            "answering at random gives ρ ≈ 0): "
            + (
                "; ".join(
                    f"{md_escape(r['judge'])} {r['behaviour']} ~ {r['statistic']} ({r['expected']}): "
                    + (f"ρ = {r['rho']:.2f}, {r['check']}" if r["check"] else f"no interval: {r['ci_note']}")
                    for r in sanity.iter_rows(named=True)
                )
                or "no pair in this taxonomy"
            )
            + "."
        )
    return a
