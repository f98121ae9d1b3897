"""The research questions, answered from a run's data: each function returns computed text
(no hard-coded conclusions), tables and charts for its notebook."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import altair as alt
import polars as pl

from . import charts, stats
from ._answer import (
    SETUP_FIELDS,
    Answer,
    _ci,
    _interval_method,
    _names,
    chart_key,
    pick_setups,
    setups_table,
)
from ._rq_paper import by_turns_per_call, paper_tables, participants, prompting
from ._text import md_escape
from .frames import REFERENCE, Frames, validity_note

if TYPE_CHECKING:
    from .run import Run

__all__ = ["SETUP_FIELDS", "Answer", "agreement_answer", "bench_summary", "by_turns_per_call", "compare_to_humans",
           "human_rates", "md_escape", "paper_tables", "participants", "pick_setups", "prompting", "setups_table"]


def human_rates(f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = stats.MIN_N,
                correction: str = "bh") -> Answer:
    """RQ1: how often humans show each behaviour in multi-party conversations (estimates and
    intervals; no test, so ``correction`` is accepted for a uniform call and has nothing to
    correct). Human–AI chat instances (``schema.is_human_ai``) are left out and counted: their
    human reference is a user's turns with a chatbot, the generalization study's subject."""
    stats.check_params(resamples=resamples, min_n=min_n, correction=correction)
    a = Answer("RQ1 — How often do humans show each inconsistent or uncollaborative behaviour?")
    chat = f.instances.filter(pl.col("human_ai"))["instance_id"]
    is_ref = (pl.col("judge") == judge) & (pl.col("target") == REFERENCE)
    n_chat = f.counts.filter(is_ref & pl.col("instance_id").is_in(chat.implode()))["instance_id"].n_unique()
    ref = f.counts.filter(is_ref & ~pl.col("instance_id").is_in(chat.implode()))
    excluded = (f"{n_chat} human–AI chat instance(s) judged by {md_escape(judge)} are left out (their reference is "
                "a user talking to a chatbot; see the generalization notebook)." if n_chat else
                "No human–AI chat instance is among them.")
    if ref.is_empty():
        a.text.append(f"No multi-party human reference has a valid judgment by {md_escape(judge)} "
                      f"({md_escape(validity_note(f, judge, REFERENCE))}). {excluded}")
        return a
    sub = Frames(**{**f.__dict__, "counts": ref})
    means = stats.mean_occurrences(sub, resamples=resamples, seed=seed, min_n=min_n)
    a.tables["human_means"] = means
    names = _names(f)
    top = means.sort("mean", descending=True)
    total = ref.group_by("instance_id").agg(pl.col("count").sum())["count"]
    n = means["n"][0]
    a.text.append(f"Judged by **{md_escape(judge)}** over {n} multi-party human references, a conversation shows "
                  f"{total.mean():.2f} behaviours on average (median {total.median():.0f}). {excluded}")
    a.text.append(f"Method: n = {n} instances; {_interval_method(resamples, seed, min_n)}; no test is made "
                  "here, so no correction applies.")
    lines = [f"- {names[r['behaviour']]} ({r['category']}): {_ci(r)}" for r in top.iter_rows(named=True)]
    a.text.append("Mean occurrences per conversation, most frequent first:\n" + "\n".join(lines))
    absent = [names[r["behaviour"]] for r in top.iter_rows(named=True) if r["mean"] == 0]
    if absent:
        a.text.append(f"Never detected in the {n} human references: " + ", ".join(absent) + ".")
    lk = f.likert.filter(is_ref & ~pl.col("instance_id").is_in(chat.implode()))
    if not lk.is_empty():
        lm = stats.likert_means(Frames(**{**f.__dict__, "likert": lk}), resamples=resamples, seed=seed, min_n=min_n)
        a.tables["human_likert"] = lm
        a.text.append("Overall scores of the human references: " + "; ".join(
            f"{r['score']} {_ci(r)}" for r in lm.iter_rows(named=True)))
    a.charts["human_behaviours"] = charts.behaviour_bars(means, f.taxonomy, judge=judge,
                                                         title="Human conversations (Figure 3(a))")
    return a


def compare_to_humans(f: Frames, judge: str, setups: list[str], question: str, resamples: int = 1000,
                      seed: int = 0, *, min_n: int = stats.MIN_N, correction: str = "bh",
                      run: Run | None = None) -> Answer:
    """RQ2-RQ5 and generalization: each setup against the human reference on the same instances.
    Over/under-production verdicts come from the paired sign-flip test, corrected over every
    behaviour x setup this judge judged (the same family in every notebook and the report).
    With ``run`` the figures follow the paper's grouping: one per model/condition (Figure 3)."""
    a = Answer(question)
    per_b, dist = stats.paired_vs_human(f, judge, resamples=resamples, seed=seed, min_n=min_n, correction=correction)
    if dist.is_empty():
        return a
    family, n_setups = int(per_b["family"][0]), dist.height
    per_b = per_b.filter(pl.col("target").is_in(setups))
    dist = dist.filter(pl.col("target").is_in(setups)).sort("distance")
    if dist.is_empty():
        a.text.append(f"None of the setups {', '.join(md_escape(x) for x in setups) or '(none)'} has valid judgments "
                      f"by {md_escape(judge)}.")
        return a
    a.tables["distance"] = dist
    a.tables["per_behaviour"] = per_b
    names = _names(f)
    ns = dist["n"]
    a.text.append(f"Method: n = {ns.min()}{'' if ns.min() == ns.max() else f'–{ns.max()}'} instances per setup, "
                  f"each paired with its human reference; {_interval_method(resamples, seed, min_n)}; "
                  f"over/under-production: {stats.describe_test(correction, family)} (the family: "
                  f"{len(f.taxonomy.ids)} behaviours × the {n_setups} setup(s) judged by {md_escape(judge)}, "
                  f"those with n ≥ {min_n}).")
    usable = dist.filter(pl.col("n") >= min_n)
    if usable.is_empty():
        a.text.append(f"No setup here has at least {min_n} instances judged by {md_escape(judge)}: no setup is "
                      "called closest and no verdict is drawn.")
    else:
        best = usable.row(0, named=True)
        a.text.append(f"Profile distance D to the humans (Σ|mean simulated − mean human| per conversation; 0 = "
                      f"human-like), judged by **{md_escape(judge)}**: closest **{md_escape(best['target'])}** "
                      f"D = {_ci(best, 'distance')} (among setups with n ≥ {min_n}; the smallest point estimate of D, "
                      "not a tested difference between setups: compare their intervals).")
    for r in dist.iter_rows(named=True):
        head = f"- **{md_escape(r['target'])}**: D = {_ci(r, 'distance')}"
        if r["n"] < min_n:
            a.text.append(f"{head}; no verdict (n too small: {r['n']} < {min_n}).")
            continue
        s = per_b.filter(pl.col("target") == r["target"])

        def listed(v: str, s: pl.DataFrame = s) -> str:
            return ", ".join(f"{names[x['behaviour']]} (p_adj {x['p_adj']:.3g})"
                             for x in s.filter(pl.col("verdict") == v).iter_rows(named=True)) or "none"

        a.text.append(f"{head}; over-produces: {listed(stats.OVER)}; under-produces: {listed(stats.UNDER)}.")
    fig3 = stats.figure3_means(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)
    a.tables["figure3"] = fig3
    if not fig3.is_empty() and run is not None:
        groups = stats.figure_groups(stats.conditions(run), setups)
        for label, chart in charts.figure3_groups(fig3, f.taxonomy, groups, judge=judge).items():
            a.charts[chart_key("figure3", label)] = chart
    elif not fig3.is_empty():
        a.charts["behaviours_vs_humans"] = charts.behaviour_bars(fig3, f.taxonomy, judge=judge, setups=setups)
    lk = stats.likert_vs_human(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)  # paired, as above
    if not lk.is_empty():
        a.tables["likert"] = lk
        a.text.append("Likert scores (1–10), each setup paired with the human reference on the instances both have a "
                      "valid overall judgment for (n per setup); simulated − human: " + "; ".join(
                          f"{md_escape(r['target'])} {r['score']} {_ci(r)}"
                          for r in lk.filter(pl.col("series") == stats.DIFFERENCE).iter_rows(named=True)) + ".")
        a.charts["likert"] = charts.likert_chart(lk.filter(pl.col("series") != stats.DIFFERENCE).with_columns(
            target=pl.when(pl.col("series") == "simulated").then("target").otherwise(pl.format("{} · {}", "target",
                                                                                                  "series"))))
    return a


def _paper_verdict(r: dict[str, Any]) -> str:
    if r["rho"] is None:
        return f"undefined: {r['note']}"
    if r["significant"] is None:
        return f"not tested: {r['ci_note'] or 'undefined'}"
    p5 = f"5th percentile {r['p5']:.2f}" if r["p5"] is not None else f"no range: {r['ci_note']}"
    return f"{p5}: {'significant' if r['significant'] else 'not significant'}"


def _rho(r: dict[str, Any]) -> str:
    rho = "undefined" if r["rho"] is None else f"{r['rho']:.2f}"
    return f"ρ = {rho} (n = {r['n']}; {_paper_verdict(r)})"


def agreement_answer(f: Frames, resamples: int = 1000, seed: int = 0, *, min_n: int = stats.MIN_N) -> Answer:
    """Appendix B.1's agreement: inter-human (each annotator against the mean of the other
    annotators) and each judge against the annotators left out in turn, for the behaviour counts
    and the Likert scores, tested with the paper's procedure (labelled so); detection totals per
    source and the B.3 coverage check."""
    stats.check_params(resamples=resamples, min_n=min_n)
    a = Answer("Do the LLM judges agree with human annotators?")
    humans = sorted(set(stats.annotators(f, "counts")) | set(stats.annotators(f, "likert")))
    judges = sorted(set(f.counts.filter(~pl.col("human"))["judge"]) | set(f.likert.filter(~pl.col("human"))["judge"]))
    if not f.counts.is_empty():
        a.tables["detection_totals"] = stats.detection_totals(f)
    if not humans:
        a.text.append(f"This run has no human annotator ({len(judges)} LLM judge(s)), so there is no agreement to "
                      "measure. Export items with `cocoeval annotate-export` (drawn as in the paper's Appendix B.1) "
                      "or use the annotator widget, then import the labels with `cocoeval annotate-import`.")
        return a
    a.text.append(f"Method ({stats.PROCEDURE}); {resamples} resamples, seed {seed}; conversations that every rater "
                  f"of a comparison rated validly; not tested below n = {min_n}. {len(humans)} human annotators: "
                  + ", ".join(md_escape(h) for h in humans) + ".")
    table = stats.agreement_table(f, resamples, seed, min_n=min_n)
    if not table.is_empty():
        a.tables["agreement"] = table
        shown = table.filter(pl.col("item").is_in(["all", *stats.LIKERT]))
        a.charts["agreement"] = charts.agreement_chart(shown)
        for r in shown.iter_rows(named=True):
            who = "inter-human" if r["comparison"] == stats.INTER_HUMAN else \
                f"{md_escape(r['comparison'])} vs {r['annotators']} annotator(s)"
            what = "all behaviours (counts)" if r["item"] == "all" else r["item"]
            a.text.append(f"- {who}, {what}: {_rho(r)}.")
    else:
        a.text.append("No comparison had at least two conversations rated by every rater.")
    per = [stats.agreement(f, None, resamples, seed, item, min_n=min_n) for scale in ("counts", "likert")
           for item in stats.items_of(f, scale)]
    per = [p.filter(pl.col("rater") != stats.AVERAGE) for p in per if not p.is_empty()]
    if per:
        a.tables["inter_human_by_annotator"] = pl.concat(per)
    cov = stats.taxonomy_coverage(f)
    if not cov.is_empty():
        a.tables["taxonomy_coverage"] = cov
        a.text.append("Behaviours not in the taxonomy (Appendix B.3), share of labelled turns: " + "; ".join(
            f"{md_escape(r['annotator'])} {r['turns_not_in_taxonomy']} of {r['turns']} turns"
            + (f" ({r['rate']:.1%})" if r["rate"] is not None else "") for r in cov.iter_rows(named=True)) + ".")
    return a


def bench_summary(instances: list[Any], bench_dir: Any) -> Answer:
    """Notebook 00: what the benchmark contains, and what the builder skipped."""
    import json
    from pathlib import Path

    a = Answer("What does the benchmark contain?", judge_based=False)
    rows = [{"instance_id": i.id, "dataset": i.dataset, "split": i.split,
             "speakers": len({t.speaker for t in [*i.history, *i.reference]}),
             "history_turns": len(i.history), "reference_turns": len(i.reference),
             "mean_words_per_turn": sum(len(t.text.split()) for t in [*i.history, *i.reference])
             / max(1, len(i.history) + len(i.reference)), "summary_method": i.summary.method,
             "metadata_method": i.metadata.method} for i in instances]
    df = pl.DataFrame(rows)
    per = df.group_by("dataset").agg(instances=pl.len(), mean_speakers=pl.col("speakers").mean(),
                                     mean_words_per_turn=pl.col("mean_words_per_turn").mean()).sort("dataset")
    a.tables["per_dataset"] = per
    a.tables["instances"] = df
    a.text.append(f"{df.height} instances in {per.height} datasets; each has {df['history_turns'].min()}–"
                  f"{df['history_turns'].max()} history turns and {df['reference_turns'].min()}–"
                  f"{df['reference_turns'].max()} reference turns.")
    report = Path(bench_dir) / "report.json"
    if report.exists():
        rep = json.loads(report.read_text())
        skipped = rep.get("skipped_conversations", [])
        a.text.append(f"The builder skipped {len(skipped)} conversation(s)" + (
            ": " + "; ".join(f"{md_escape(s['conversation'])} ({md_escape(s['reason'])})" for s in skipped[:10])
            if skipped else "."))
        if skipped:
            a.tables["skipped"] = pl.DataFrame(skipped)
    a.charts["speakers"] = alt.Chart(alt.Data(values=df.to_dicts())).mark_bar().encode(
        x=alt.X("speakers:O", title="distinct speakers in x + r"), y=alt.Y("count():Q", title="instances"),
        color="dataset:N").properties(width=300, height=180)
    return a
