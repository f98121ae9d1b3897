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
from .answer import (
    SIMULATED,
    Answer,
    chart_key,
    ci_text,
    interval_method,
    setup_labels,
)
from .coverage import HOW, not_run
from .frames import Frames, validity_note
from .paper_stats import HIGHER, LOWER

if TYPE_CHECKING:
    from cocoeval.run import Run

__all__ = ["by_turns_per_call", "compare_to_humans", "human_rates", "prompting"]


def human_rates(
    f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N, correction: str = "bh"
) -> Answer:
    """RQ1: how often humans show each behaviour in multi-party conversations (estimates and
    intervals; no test, so ``correction`` is accepted for a uniform call and has nothing to
    correct). Human–AI chat instances (``schema.is_human_ai``) are left out and counted: their
    human reference is a user's turns with a chatbot, the generalization study's subject."""
    inference.check_params(resamples=resamples, min_n=min_n, correction=correction)
    a = Answer("RQ1 — How often do humans show each inconsistent or uncollaborative behaviour?")
    if judge is None:
        a.text.append(
            not_run("this run has no judgments (no judge in its params, or the judge stage not run)", HOW["judge"])
        )
        return a
    chat = f.instances.filter(pl.col("human_ai"))["instance_id"]
    is_ref = (pl.col("judge") == judge) & (pl.col("target") == REFERENCE)
    n_chat = f.counts.filter(is_ref & pl.col("instance_id").is_in(chat.implode()))["instance_id"].n_unique()
    ref = f.counts.filter(is_ref & ~pl.col("instance_id").is_in(chat.implode()))
    excluded = (
        f"{n_chat} human–AI chat instance(s) judged by {md_escape(judge)} are left out (their reference is "
        "a user talking to a chatbot; see the generalization notebook)."
        if n_chat
        else "No human–AI chat instance is among them."
    )
    if ref.is_empty():
        a.text.append(
            not_run(
                f"no multi-party human reference has a valid judgment by {md_escape(judge)} "
                f"({md_escape(validity_note(f, judge, REFERENCE))})",
                HOW["judge"],
            )
        )
        a.text.append(excluded)
        return a
    sub = Frames(**{**f.__dict__, "counts": ref})
    means = stats.mean_occurrences(sub, resamples=resamples, seed=seed, min_n=min_n)
    a.tables["human_means"] = means
    names = setup_labels(f)
    top = means.sort("mean", descending=True)
    total = ref.group_by("instance_id").agg(pl.col("count").sum())["count"]
    n = means["n"][0]
    a.text.append(
        f"Judged by **{md_escape(judge)}** over {n} multi-party human references, a conversation shows "
        f"{cast(float, total.mean()):.2f} behaviours on average "
        f"(median {cast(float, total.median()):.0f}). {excluded}"
    )
    a.text.append(
        f"Method: n = {n} instances; {interval_method(resamples, seed, min_n)}; no test is made "
        "here, so no correction applies."
    )
    lines = [f"- {names[r['behaviour']]} ({r['category']}): {ci_text(r)}" for r in top.iter_rows(named=True)]
    a.text.append("Mean occurrences per conversation, most frequent first:\n" + "\n".join(lines))
    absent = [names[r["behaviour"]] for r in top.iter_rows(named=True) if r["mean"] == 0]
    if absent:
        a.text.append(f"Never detected in the {n} human references: " + ", ".join(absent) + ".")
    lk = f.likert.filter(is_ref & ~pl.col("instance_id").is_in(chat.implode()))
    if not lk.is_empty():
        lm = stats.likert_means(Frames(**{**f.__dict__, "likert": lk}), resamples=resamples, seed=seed, min_n=min_n)
        a.tables["human_likert"] = lm
        a.text.append(
            "Overall scores of the human references: "
            + "; ".join(f"{r['score']} {ci_text(r)}" for r in lm.iter_rows(named=True))
        )
    a.charts["human_behaviours"] = charts.behaviour_bars(
        means, f.taxonomy, judge=judge, title="Human conversations (Figure 3(a))"
    )
    return a


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
    run: Run | None = None,
    absent: tuple[str, str] | None = None,
) -> Answer:
    """RQ2-RQ5 and generalization: each setup against the human reference on the same instances.
    Over/under-production verdicts come from the paired sign-flip test, corrected over every
    behaviour x setup this judge judged (the same family in every notebook and the report).
    With ``run`` the figures follow the paper's grouping: one per model/condition (Figure 3).
    No ``setups``: "not run", with ``absent`` = (why, the step that adds them)."""
    a = Answer(question)
    if not setups:
        a.text.append(
            not_run(absent[0], absent[1])
            if absent
            else not_run("this run has no setup to compare", HOW["setup"].format(s="s", example="…"))
        )
        return a
    per_b, dist = stats.paired_vs_human(f, judge, resamples=resamples, seed=seed, min_n=min_n, correction=correction)
    if dist.is_empty():
        a.text.append(
            not_run(
                f"no setup has valid judgments by {md_escape(judge)} paired with a judged human "
                "reference (see invalid_rates)",
                HOW["judge"],
            )
        )
        return a
    family, n_setups = int(per_b["family"][0]), dist.height
    per_b = per_b.filter(pl.col("target").is_in(setups))
    dist = dist.filter(pl.col("target").is_in(setups)).sort("distance")
    if dist.is_empty():
        a.text.append(
            not_run(
                f"none of the setups {', '.join(md_escape(x) for x in setups)} has valid judgments "
                f"by {md_escape(judge)} (see invalid_rates)",
                HOW["judge"],
            )
        )
        return a
    a.tables["distance"] = dist
    a.tables["per_behaviour"] = per_b
    names = setup_labels(f)
    ns = dist["n"]
    a.text.append(
        f"Method: n = {ns.min()!s}{'' if ns.min() == ns.max() else f'–{ns.max()!s}'} instances per setup, "
        f"each paired with its human reference; {interval_method(resamples, seed, min_n)}; "
        f"over/under-production: {inference.describe_test(correction, family)} (the family: "
        f"{len(f.taxonomy.ids)} behaviours × the {n_setups} setup(s) judged by {md_escape(judge)}, "
        f"those with n ≥ {min_n})."
    )
    usable = dist.filter(pl.col("n") >= min_n)
    if usable.is_empty():
        a.text.append(
            f"No setup here has at least {min_n} instances judged by {md_escape(judge)}: no setup is "
            "called closest and no verdict is drawn."
        )
    else:
        best = usable.row(0, named=True)
        a.text.append(
            f"Profile distance D to the humans (Σ|mean simulated − mean human| per conversation; 0 = "
            f"human-like), judged by **{md_escape(judge)}**: closest **{md_escape(best['target'])}** "
            f"D = {ci_text(best, 'distance')} (among setups with n ≥ {min_n}; the smallest point estimate of D, "
            "not a tested difference between setups: compare their intervals)."
        )
    for r in dist.iter_rows(named=True):
        head = f"- **{md_escape(r['target'])}**: D = {ci_text(r, 'distance')}"
        if r["n"] < min_n:
            a.text.append(f"{head}; no verdict (n too small: {r['n']} < {min_n}).")
            continue
        s = per_b.filter(pl.col("target") == r["target"])

        def listed(v: str, s: pl.DataFrame = s) -> str:
            return (
                ", ".join(
                    f"{names[x['behaviour']]} (p_adj {x['p_adj']:.3g})"
                    for x in s.filter(pl.col("verdict") == v).iter_rows(named=True)
                )
                or "none"
            )

        a.text.append(f"{head}; over-produces: {listed(inference.OVER)}; under-produces: {listed(inference.UNDER)}.")
    fig3 = stats.figure3_means(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)
    a.tables["figure3"] = fig3
    if not fig3.is_empty() and run is not None:
        groups = paper_stats.figure_groups(paper_stats.conditions(run), setups)
        for label, chart in charts.figure3_groups(fig3, f.taxonomy, groups, judge=judge).items():
            a.charts[chart_key("figure3", label)] = chart
    elif not fig3.is_empty():
        a.charts["behaviours_vs_humans"] = charts.behaviour_bars(fig3, f.taxonomy, judge=judge, setups=setups)
    lk = paper_stats.likert_vs_human(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)  # paired, as above
    if not lk.is_empty():
        a.tables["likert"] = lk
        a.text.append(
            "Likert scores (1–10), each setup paired with the human reference on the instances both have a "
            "valid overall judgment for (n per setup); simulated − human: "
            + "; ".join(
                f"{md_escape(r['target'])} {r['score']} {ci_text(r)}"
                for r in lk.filter(pl.col("series") == paper_stats.DIFFERENCE).iter_rows(named=True)
            )
            + "."
        )
        a.charts["likert"] = charts.likert_chart(
            lk.filter(pl.col("series") != paper_stats.DIFFERENCE).with_columns(
                target=pl.when(pl.col("series") == "simulated")
                .then("target")
                .otherwise(pl.format("{} · {}", "target", "series"))
            )
        )
    return a


def _n_range(df: pl.DataFrame) -> str:
    lo, hi = df["n"].min(), df["n"].max()
    return f"{lo!s}" if lo == hi else f"{lo!s}–{hi!s}"


def _pair_line(f: Frames, rows: pl.DataFrame, head: str, min_n: int, b_word: str) -> str:
    """One comparison: what is significantly higher / lower in b after the correction."""
    names = setup_labels(f)
    n = rows["n"][0]
    if n < min_n:
        return f"- {head} (n = {n}): not tested ({rows['ci_note'][0] if n == 0 else f'n too small: {n} < {min_n}'})."

    def listed(d: str) -> str:
        return (
            ", ".join(
                f"{names[r['behaviour']]} ({r['diff']:+.2f}, p_adj {r['p_adj']:.3g})"
                for r in rows.filter(pl.col("direction") == d).iter_rows(named=True)
            )
            or "none"
        )

    same = rows.filter(pl.col("direction") == inference.NO_DIFF).height
    return (
        f"- {head} (n = {n}): higher {b_word}: {listed(HIGHER)}; lower {b_word}: {listed(LOWER)}; "
        f"no significant difference for {same} behaviour(s)."
    )


def _method(pr: pl.DataFrame, resamples: int, seed: int, min_n: int, correction: str, what: str) -> str:
    fam = int(pr["family"][0]) if pr.height else 0
    return (
        f"Method: differences per behaviour in mean occurrences per conversation, paired over the instances "
        f"both setups have valid judgments for (n = {_n_range(pr)}); {interval_method(resamples, seed, min_n)}; "
        f"{inference.describe_test(correction, fam)} (the family: {len(pr['behaviour'].unique())} behaviours × "
        f"{what}, those with n ≥ {min_n}). Human–AI chat instances are left out."
    )


def prompting(
    f: Frames,
    run: Run,
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
    per instance, tested per behaviour and corrected over behaviours × (model, k) pairs."""
    a = Answer("RQ3 — Does taxonomy-guided prompting change the behaviours, per model and turns per call?")
    pairs = paper_stats.rq3_pairs(paper_stats.conditions(run), baseline, treatment)
    if not pairs:
        a.text.append(
            not_run(
                f"no model has both a {md_escape(baseline)} and a {md_escape(treatment)} multi-party "
                "setup at the same turns per call in this run, so there is nothing to contrast",
                HOW["setup"].format(
                    s="s", example=f"gpt41-{baseline}-1 beside gpt41-{treatment}-1, for each model and k"
                ),
            )
        )
        return a
    pr = paper_stats.paired_between(f, judge, pairs, resamples, seed, min_n=min_n, correction=correction)
    if pr.is_empty():
        a.text.append(
            not_run(
                f"none of the {len(pairs)} {md_escape(baseline)}/{md_escape(treatment)} pair(s) has "
                f"instances both judged validly by {md_escape(judge)} (see invalid_rates)",
                HOW["judge"],
            )
        )
        return a
    a.tables["contrasts"] = pr
    n_pairs = pr.select("setup_a", "setup_b").unique().height
    a.text.append(
        _method(pr, resamples, seed, min_n, correction, f"the {n_pairs} (model, k) pair(s)")
        + f" Judge: **{md_escape(judge)}**; difference = {md_escape(treatment)} − {md_escape(baseline)}."
    )
    pr = pr.with_columns(comparison=pl.format("k = {} ({} → {})", "turns_per_call", "setup_a", "setup_b"))
    for (g,), part in pr.group_by("model_group", maintain_order=True):
        for (k, sa, sb), rows in part.group_by("turns_per_call", "setup_a", "setup_b", maintain_order=True):
            a.text.append(
                _pair_line(
                    f,
                    rows,
                    f"**{md_escape(g)}**, k = {k} ({md_escape(sa)} → {md_escape(sb)})",
                    min_n,
                    f"with {md_escape(treatment)}",
                )
            )
        a.charts[chart_key("rq3", g)] = charts.contrast_chart(
            part, f.taxonomy, title=f"{g}: {treatment} − {baseline} per turns per call"
        )
    return a


def by_turns_per_call(
    f: Frames,
    run: Run,
    judge: str,
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = inference.MIN_N,
    correction: str = "bh",
) -> Answer:
    """RQ5: within each model × prompt, the k values (turns per call) it has, compared pairwise
    per behaviour (paired per instance, corrected over behaviours × pairs); means per k with the
    human reference on the same instances. Never pooled across models or prompts."""
    a = Answer("RQ5 — Does the number of turns generated per call change the behaviours, within each model and prompt?")
    cond = paper_stats.conditions(run).filter(pl.col("kind") == "multiparty")
    other = cond.filter(pl.col("origin") != SIMULATED)["setup"].to_list()
    if other:  # imported or plugin: no turns per call to compare
        a.text.append(
            "Not compared (imported or plugin setups, which have no turns per call): "
            + ", ".join(md_escape(x) for x in other)
            + "."
        )
    cond = cond.filter(pl.col("origin") == SIMULATED)
    ks = cond.group_by("condition", maintain_order=True).agg(pl.col("turns_per_call").unique().sort())
    single = [
        f"{md_escape(r['condition'])} (only k = {r['turns_per_call'][0]})"
        for r in ks.iter_rows(named=True)
        if len(r["turns_per_call"]) < 2
    ]
    if single:
        a.text.append("Not compared (one k only): " + "; ".join(single) + ".")
    pairs = paper_stats.rq5_pairs(cond)
    pr = (
        paper_stats.paired_between(f, judge, pairs, resamples, seed, min_n=min_n, correction=correction)
        if pairs
        else pl.DataFrame()
    )
    if pr.is_empty():
        a.text.append(
            not_run(
                f"no model × prompt has two turns-per-call values judged validly by {md_escape(judge)} on shared instances"
                if pairs
                else "no model × prompt has multi-party setups at two turns-per-call values",
                HOW["judge"]
                if pairs
                else HOW["setup"].format(
                    s="s", example="gpt41-vanilla-1, -5, -30; the same k values for each model × prompt"
                ),
            )
        )
        return a
    a.tables["k_pairs"] = pr
    a.text.append(
        _method(
            pr,
            resamples,
            seed,
            min_n,
            correction,
            f"the {pr.select('setup_a', 'setup_b').unique().height} k pair(s) within model × prompt",
        )
        + f" Judge: **{md_escape(judge)}**; difference = larger k − smaller k."
    )
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
    pr = pr.with_columns(comparison=pl.format("k = {} → {}", "k_a", "k_b"))
    groups = paper_stats.figure_groups(cond)
    for (g, p), part in pr.group_by("model_group", "prompt", maintain_order=True):
        label = f"{g} · {p}"
        d = dist.filter(pl.col("condition") == label)
        if not d.is_empty():
            a.text.append(
                f"**{md_escape(label)}** — profile distance D to the humans by k: "
                + "; ".join(f"k = {r['turns_per_call']}: {ci_text(r, 'distance')}" for r in d.iter_rows(named=True))
                + "."
            )
        for (ka, kb, sa, sb), rows in part.group_by("k_a", "k_b", "setup_a", "setup_b", maintain_order=True):
            a.text.append(
                _pair_line(f, rows, f"k = {ka} → {kb} ({md_escape(sa)} → {md_escape(sb)})", min_n, f"with k = {kb}")
            )
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
    return a
