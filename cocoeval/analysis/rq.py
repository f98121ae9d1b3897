"""The paper's research questions RQ1–RQ5, answered from a run's data: each function returns an
``Answer`` (computed text, no hard-coded conclusions; tables; charts) for its notebook and the
report. RQ1 ``human_rates``; RQ2 and RQ4 ``compare_to_humans`` (the setups chosen by the registry);
RQ3 ``prompting``; RQ5 ``by_turns_per_call``. The other studies are in ``studies``."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import polars as pl

from cocoeval.core.targets import REFERENCE
from cocoeval.core.text import md_escape

from . import charts, inference, paper_stats, stats
from .answer import SIMULATED, Answer, chart_key, setup_labels
from .coverage import HOW
from .frames import Frames, validity_note
from .paper_stats import HIGHER, LOWER
from .rq_prose import (
    BehaviourDiff,
    BehaviourRate,
    BehaviourVerdict,
    ContrastMethod,
    Estimate,
    HumanComparison,
    HumanRates,
    Intervals,
    KDistance,
    KGroup,
    LikertDifference,
    NotRun,
    PairContrast,
    PromptingEffect,
    ScoreMean,
    SetupVsHumans,
    SingleK,
    TurnsPerCallEffect,
    render_human_comparison,
    render_human_rates,
    render_prompting,
    render_turns_per_call,
)

if TYPE_CHECKING:
    from .store import RunLike

__all__ = [
    "HumanComparison",
    "HumanRates",
    "PromptingEffect",
    "TurnsPerCallEffect",
    "by_turns_per_call",
    "compare_to_humans",
    "human_rates",
    "prompting",
    "render_human_comparison",
    "render_human_rates",
    "render_prompting",
    "render_turns_per_call",
]


def human_rates(
    f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N, correction: str = "bh"
) -> Answer:
    """RQ1: how often humans show each behaviour in multi-party conversations (estimates and
    intervals; no test, so ``correction`` is accepted for a uniform call and has nothing to
    correct). Human–AI chat instances (``schema.is_human_ai``) are left out and counted: their
    human reference is a user's turns with a chatbot, the generalization study's subject. The
    numbers are in ``Answer.result`` (``HumanRates``), the sentences rendered from them."""
    inference.check_params(resamples=resamples, min_n=min_n, correction=correction)
    a = Answer("RQ1 — How often do humans show each inconsistent or uncollaborative behaviour?")
    x = _human_rates(a, f, judge, Intervals(resamples, seed, min_n))
    a.text, a.result = render_human_rates(x), x
    return a


def _human_rates(a: Answer, f: Frames, judge: str | None, iv: Intervals) -> HumanRates:
    """RQ1's result; its tables and chart added to ``a``."""
    if judge is None:
        why = "this run has no judgments (no judge in its params, or the judge stage not run)"
        return HumanRates(None, iv, missing=NotRun(why, HOW["judge"]))
    chat = f.instances.filter(pl.col("human_ai"))["instance_id"]
    is_ref = (pl.col("judge") == judge) & (pl.col("target") == REFERENCE)
    n_chat = f.counts.filter(is_ref & pl.col("instance_id").is_in(chat.implode()))["instance_id"].n_unique()
    ref = f.counts.filter(is_ref & ~pl.col("instance_id").is_in(chat.implode()))
    if ref.is_empty():
        why = (
            f"no multi-party human reference has a valid judgment by {md_escape(judge)} "
            f"({md_escape(validity_note(f, judge, REFERENCE))})"
        )
        return HumanRates(judge, iv, excluded_chats=n_chat, missing=NotRun(why, HOW["judge"]))
    sub = Frames(**{**f.__dict__, "counts": ref})
    means = stats.mean_occurrences(sub, resamples=iv.resamples, seed=iv.seed, min_n=iv.min_n)
    a.tables["human_means"] = means
    names = setup_labels(f)
    total = ref.group_by("instance_id").agg(pl.col("count").sum())["count"]
    rates = tuple(
        BehaviourRate(r["behaviour"], names[r["behaviour"]], r["category"], Estimate.of(r))
        for r in means.sort("mean", descending=True).iter_rows(named=True)
    )
    likert: tuple[ScoreMean, ...] = ()
    lk = f.likert.filter(is_ref & ~pl.col("instance_id").is_in(chat.implode()))
    if not lk.is_empty():
        lm = stats.likert_means(
            Frames(**{**f.__dict__, "likert": lk}), resamples=iv.resamples, seed=iv.seed, min_n=iv.min_n
        )
        a.tables["human_likert"] = lm
        likert = tuple(ScoreMean(r["score"], Estimate.of(r)) for r in lm.iter_rows(named=True))
    a.charts["human_behaviours"] = charts.behaviour_bars(
        means, f.taxonomy, judge=judge, title="Human conversations (Figure 3(a))"
    )
    return HumanRates(
        judge,
        iv,
        excluded_chats=n_chat,
        n=means["n"][0],
        mean_total=cast(float, total.mean()),
        median_total=cast(float, total.median()),
        rates=rates,
        likert=likert,
    )


def compare_to_humans(
    f: Frames,
    judge: str,
    setups: list[str],
    question: str,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
    run: RunLike | None = None,
    absent: tuple[str, str] | None = None,
) -> Answer:
    """RQ2-RQ5 and generalization: each setup against the human reference on the same instances.
    Over/under-production verdicts come from the paired sign-flip test, corrected over every
    behaviour x setup this judge judged (the same family in every notebook and the report).
    With ``run`` the figures follow the paper's grouping: one per model/condition (Figure 3).
    No ``setups``: "not run", with ``absent`` = (why, the step that adds them)."""
    a = Answer(question)
    x = _compare_to_humans(a, f, judge, setups, Intervals(resamples, seed, min_n), correction, run, absent)
    a.text, a.result = render_human_comparison(x), x
    return a


def _compare_to_humans(
    a: Answer,
    f: Frames,
    judge: str,
    setups: list[str],
    iv: Intervals,
    correction: str,
    run: RunLike | None,
    absent: tuple[str, str] | None,
) -> HumanComparison:
    """RQ2/RQ4's result; its tables and charts added to ``a``."""
    resamples, seed, min_n = iv.resamples, iv.seed, iv.min_n
    if not setups:
        missing = (
            NotRun(*absent)
            if absent
            else NotRun("this run has no setup to compare", HOW["setup"].format(s="s", example="…"))
        )
        return HumanComparison(judge, iv, correction, missing=missing)
    per_b, dist = stats.paired_vs_human(f, judge, resamples=resamples, seed=seed, min_n=min_n, correction=correction)
    if dist.is_empty():
        why = (
            f"no setup has valid judgments by {md_escape(judge)} paired with a judged human "
            "reference (see invalid_rates)"
        )
        return HumanComparison(judge, iv, correction, missing=NotRun(why, HOW["judge"]))
    family, n_setups = int(per_b["family"][0]), dist.height
    per_b = per_b.filter(pl.col("target").is_in(setups))
    dist = dist.filter(pl.col("target").is_in(setups)).sort("distance")
    if dist.is_empty():
        why = (
            f"none of the setups {', '.join(md_escape(x) for x in setups)} has valid judgments "
            f"by {md_escape(judge)} (see invalid_rates)"
        )
        return HumanComparison(judge, iv, correction, missing=NotRun(why, HOW["judge"]))
    a.tables["distance"] = dist
    a.tables["per_behaviour"] = per_b
    names = setup_labels(f)

    def verdicts(target: str, v: str) -> tuple[BehaviourVerdict, ...]:
        rows = per_b.filter((pl.col("target") == target) & (pl.col("verdict") == v))
        return tuple(BehaviourVerdict(names[r["behaviour"]], r["p_adj"]) for r in rows.iter_rows(named=True))

    compared = tuple(
        SetupVsHumans(r["target"], Estimate.of(r, "distance"), tested=False)
        if r["n"] < min_n
        else SetupVsHumans(
            r["target"],
            Estimate.of(r, "distance"),
            tested=True,
            over=verdicts(r["target"], inference.OVER),
            under=verdicts(r["target"], inference.UNDER),
        )
        for r in dist.iter_rows(named=True)
    )
    fig3 = stats.figure3_means(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)
    a.tables["figure3"] = fig3
    if not fig3.is_empty() and run is not None:
        groups = paper_stats.figure_groups(paper_stats.conditions(run), setups)
        for label, chart in charts.figure3_groups(fig3, f.taxonomy, groups, judge=judge).items():
            a.charts[chart_key("figure3", label)] = chart
    elif not fig3.is_empty():
        a.charts["behaviours_vs_humans"] = charts.behaviour_bars(fig3, f.taxonomy, judge=judge, setups=setups)
    lk = paper_stats.likert_vs_human(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)  # paired, as above
    likert = None
    if not lk.is_empty():
        a.tables["likert"] = lk
        likert = tuple(
            LikertDifference(r["target"], r["score"], Estimate.of(r))
            for r in lk.filter(pl.col("series") == paper_stats.DIFFERENCE).iter_rows(named=True)
        )
        a.charts["likert"] = charts.likert_chart(
            lk.filter(pl.col("series") != paper_stats.DIFFERENCE).with_columns(
                target=pl.when(pl.col("series") == "simulated")
                .then("target")
                .otherwise(pl.format("{} · {}", "target", "series"))
            )
        )
    return HumanComparison(
        judge,
        iv,
        correction,
        setups=compared,
        family=family,
        n_behaviours=len(f.taxonomy.ids),
        n_setups_judged=n_setups,
        likert=likert,
    )


def _contrast(
    names: dict[str, str], rows: pl.DataFrame, min_n: int, model_group: str, prompt: str | None, k_a: int, k_b: int
) -> PairContrast:
    """One pair's comparison (``rows``: its behaviours): what is significantly higher / lower in b
    after the correction."""
    sa, sb, n = rows["setup_a"][0], rows["setup_b"][0], rows["n"][0]
    if n < min_n:
        return PairContrast(model_group, prompt, sa, sb, k_a, k_b, n, tested=False, untested_note=rows["ci_note"][0])

    def listed(d: str) -> tuple[BehaviourDiff, ...]:
        return tuple(
            BehaviourDiff(names[r["behaviour"]], r["diff"], r["p_adj"])
            for r in rows.filter(pl.col("direction") == d).iter_rows(named=True)
        )

    same = rows.filter(pl.col("direction") == inference.NO_DIFF).height
    return PairContrast(
        model_group, prompt, sa, sb, k_a, k_b, n, tested=True, higher=listed(HIGHER), lower=listed(LOWER), same=same
    )


def _method(pr: pl.DataFrame, iv: Intervals, correction: str) -> ContrastMethod:
    """How the pairs in ``pr`` (one row per pair × behaviour) were compared."""
    return ContrastMethod(
        n_low=pr["n"].min(),  # type: ignore[arg-type]
        n_high=pr["n"].max(),  # type: ignore[arg-type]
        family=int(pr["family"][0]) if pr.height else 0,
        n_behaviours=len(pr["behaviour"].unique()),
        n_pairs=pr.select("setup_a", "setup_b").unique().height,
        correction=correction,
        intervals=iv,
    )


def prompting(
    f: Frames,
    run: RunLike,
    judge: str,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
    baseline: str = "vanilla",
    treatment: str = "taxonomy",
) -> Answer:
    """RQ3: ``treatment`` − ``baseline`` prompting per model and per k (turns per call), paired
    per instance, tested per behaviour and corrected over behaviours × (model, k) pairs. The
    numbers are in ``Answer.result`` (``PromptingEffect``), the sentences rendered from them."""
    a = Answer("RQ3 — Does taxonomy-guided prompting change the behaviours, per model and turns per call?")
    x = _prompting(a, f, run, judge, Intervals(resamples, seed, min_n), correction, baseline, treatment)
    a.text, a.result = render_prompting(x), x
    return a


def _prompting(
    a: Answer, f: Frames, run: RunLike, judge: str, iv: Intervals, correction: str, baseline: str, treatment: str
) -> PromptingEffect:
    """RQ3's result; its table and charts added to ``a``."""
    pairs = paper_stats.rq3_pairs(paper_stats.conditions(run), baseline, treatment)
    if not pairs:
        why = (
            f"no model has both a {md_escape(baseline)} and a {md_escape(treatment)} multi-party "
            "setup at the same turns per call in this run, so there is nothing to contrast"
        )
        how = HOW["setup"].format(s="s", example=f"gpt41-{baseline}-1 beside gpt41-{treatment}-1, for each model and k")
        return PromptingEffect(judge, baseline, treatment, missing=NotRun(why, how))
    pr = paper_stats.paired_between(f, judge, pairs, iv.resamples, iv.seed, min_n=iv.min_n, correction=correction)
    if pr.is_empty():
        why = (
            f"none of the {len(pairs)} {md_escape(baseline)}/{md_escape(treatment)} pair(s) has "
            f"instances both judged validly by {md_escape(judge)} (see invalid_rates)"
        )
        return PromptingEffect(judge, baseline, treatment, missing=NotRun(why, HOW["judge"]))
    a.tables["contrasts"] = pr
    method = _method(pr, iv, correction)
    names = setup_labels(f)
    contrasts = []
    pr = pr.with_columns(comparison=pl.format("k = {} ({} → {})", "turns_per_call", "setup_a", "setup_b"))
    for (g,), part in pr.group_by("model_group", maintain_order=True):
        for (k, _, _), rows in part.group_by("turns_per_call", "setup_a", "setup_b", maintain_order=True):
            contrasts.append(_contrast(names, rows, iv.min_n, g, None, k, k))
        a.charts[chart_key("rq3", g)] = charts.contrast_chart(
            part, f.taxonomy, title=f"{g}: {treatment} − {baseline} per turns per call"
        )
    return PromptingEffect(judge, baseline, treatment, method=method, contrasts=tuple(contrasts))


def by_turns_per_call(
    f: Frames,
    run: RunLike,
    judge: str,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
) -> Answer:
    """RQ5: within each model × prompt, the k values (turns per call) it has, compared pairwise
    per behaviour (paired per instance, corrected over behaviours × pairs); means per k with the
    human reference on the same instances. Never pooled across models or prompts. The numbers are
    in ``Answer.result`` (``TurnsPerCallEffect``), the sentences rendered from them."""
    a = Answer("RQ5 — Does the number of turns generated per call change the behaviours, within each model and prompt?")
    x = _by_turns_per_call(a, f, run, judge, Intervals(resamples, seed, min_n), correction)
    a.text, a.result = render_turns_per_call(x), x
    return a


def _by_turns_per_call(
    a: Answer, f: Frames, run: RunLike, judge: str, iv: Intervals, correction: str
) -> TurnsPerCallEffect:
    """RQ5's result; its tables and charts added to ``a``."""
    resamples, seed, min_n = iv.resamples, iv.seed, iv.min_n
    cond = paper_stats.conditions(run).filter(pl.col("kind") == "multiparty")
    other = tuple(cond.filter(pl.col("origin") != SIMULATED)["setup"].to_list())  # no turns per call to compare
    cond = cond.filter(pl.col("origin") == SIMULATED)
    ks = cond.group_by("condition", maintain_order=True).agg(pl.col("turns_per_call").unique().sort())
    single = tuple(
        SingleK(r["condition"], r["turns_per_call"][0])
        for r in ks.iter_rows(named=True)
        if len(r["turns_per_call"]) < 2
    )
    pairs = paper_stats.rq5_pairs(cond)
    pr = (
        paper_stats.paired_between(f, judge, pairs, resamples, seed, min_n=min_n, correction=correction)
        if pairs
        else pl.DataFrame()
    )
    if pr.is_empty():
        missing = (
            NotRun(
                f"no model × prompt has two turns-per-call values judged validly by {md_escape(judge)} on shared instances",
                HOW["judge"],
            )
            if pairs
            else NotRun(
                "no model × prompt has multi-party setups at two turns-per-call values",
                HOW["setup"].format(
                    s="s", example="gpt41-vanilla-1, -5, -30; the same k values for each model × prompt"
                ),
            )
        )
        return TurnsPerCallEffect(judge, not_compared=other, single_k=single, missing=missing)
    a.tables["k_pairs"] = pr
    method = _method(pr, iv, correction)
    setups = cond["setup"].to_list()
    fig3 = stats.figure3_means(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)
    if not fig3.is_empty():
        a.tables["k_means"] = fig3.join(
            cond.select("setup", "model_group", "prompt", "turns_per_call"), left_on="panel", right_on="setup"
        )
    _, dist = stats.paired_vs_human(f, judge, resamples=resamples, seed=seed, min_n=min_n, correction=correction)
    dist = dist.join(cond.select("setup", "condition", "turns_per_call"), left_on="target", right_on="setup").sort(
        "condition", "turns_per_call"
    )
    a.tables["distance_by_k"] = dist
    names = setup_labels(f)
    pr = pr.with_columns(comparison=pl.format("k = {} → {}", "k_a", "k_b"))
    groups = paper_stats.figure_groups(cond)
    out = []
    for (g, p), part in pr.group_by("model_group", "prompt", maintain_order=True):
        label = f"{g} · {p}"
        distances = tuple(
            KDistance(r["turns_per_call"], Estimate.of(r, "distance"))
            for r in dist.filter(pl.col("condition") == label).iter_rows(named=True)
        )
        contrasts = tuple(
            _contrast(names, rows, min_n, g, p, ka, kb)
            for (ka, kb, _, _), rows in part.group_by("k_a", "k_b", "setup_a", "setup_b", maintain_order=True)
        )
        out.append(KGroup(g, p, distances, contrasts))
        a.charts[chart_key("rq5", label)] = charts.contrast_chart(part, f.taxonomy, title=f"{label}: k_b − k_a")
        if not fig3.is_empty():
            a.charts.update(
                {
                    chart_key("figure3", lb): ch
                    for lb, ch in charts.figure3_groups(
                        fig3, f.taxonomy, {label: groups.get(label, [])}, judge=judge
                    ).items()
                }
            )
    return TurnsPerCallEffect(judge, not_compared=other, single_k=single, method=method, groups=tuple(out))
