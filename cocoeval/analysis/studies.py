"""The paper's other studies, answered from a run's data: the benchmark's summary
(``bench_summary``), the participants study (D.4, ``participants``), the paper's Figure 3 and
Tables 4 and 11 (``paper_tables``) and judge–human agreement (§3.3, B.1: ``agreement_answer``).
Setup metadata (model, prompt, k) comes from the run manifest; see ``paper_stats`` for the
statistics. RQ1–RQ5 are in ``rq``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import altair as alt
import polars as pl

from cocoeval.core.targets import REFERENCE
from cocoeval.core.text import md_escape

from . import agreement, charts, inference, paper_stats, stats
from .answer import Answer, chart_key, interval_method, setup_labels
from .coverage import HOW, not_run
from .frames import Frames
from .inference import CORRECTION_NAMES
from .paper_stats import COUNT_NAMES, multiparty_ids, participant_counts

if TYPE_CHECKING:
    from cocoeval.run import Run


def participants(
    f: Frames,
    judge: str,
    run: Run | None = None,
    *,
    datasets: list[str] | None = None,
    top: int = 2,
    count: str = "conversation",
    min_n: int = inference.MIN_N,
    correction: str = "bh",
) -> Answer:
    """D.4 / Table 12: per dataset, Spearman between an instance's participant count and each
    behaviour's count, for the human reference and every setup. ``datasets`` None: the ``top``
    datasets with the largest variance of participant counts. ``run`` is accepted for a uniform
    call (targets come from the judgments)."""
    inference.check_params(min_n=min_n, correction=correction)
    a = Answer("Do behaviour counts change with the number of participants (D.4, Table 12)?")
    var = paper_stats.participant_variance(f, count)
    picked = datasets if datasets is not None else paper_stats.picked_datasets(var, top)
    var = var.with_columns(picked=pl.col("dataset").is_in(picked))
    a.tables["participant_variance"] = var
    variances = (
        "Variance of participant counts per dataset (table participant_variance), "
        + ("the datasets given: " if datasets is not None else f"the {top} largest picked: ")
        + "; ".join(
            f"{md_escape(r['dataset'])} "
            + (
                f"{r['variance']:.3g}"
                if r["variance"] is not None
                else f"none ({r['instances']} instance(s) with a count)"
            )
            + (" (picked)" if r["picked"] else "")
            for r in var.iter_rows(named=True)
        )
        + "."
    )
    sp = paper_stats.participants_spearman(
        f, judge, None, datasets, top=top, count=count, min_n=min_n, correction=correction
    )
    if sp.is_empty():
        ranked = var.filter(pl.col("variance").is_not_null())
        a.text.append(
            not_run(
                f"no multi-party conversation judged by {md_escape(judge)} in the datasets "
                f"{', '.join(md_escape(d) for d in datasets)}"
                if datasets is not None
                else f"no multi-party conversation judged by {md_escape(judge)} in the {ranked.height} "
                "dataset(s) with a participant-count variance (a dataset needs at least two multi-party "
                "instances to have one)",
                "build the benchmark with more instances per dataset (build.options.per_dataset; the "
                f"paper: 50) and judge them: {HOW['judge']}",
            )
        )
        a.text.append(variances)
        return a
    chosen = sp["dataset"].unique(maintain_order=True).to_list()
    how = (
        "given"
        if datasets is not None
        else f"the {top} with the largest variance of participant counts, as the paper picks them"
    )
    a.text.append(
        f"Datasets ({how}): "
        + "; ".join(
            f"{md_escape(r['dataset'])} (variance {r['variance']:.2f}, {r['min']}–{r['max']} participants, "
            f"{r['instances']} instances)"
            for r in var.filter(pl.col("dataset").is_in(chosen)).iter_rows(named=True)
        )
        + ". "
        + variances
    )
    a.text.append(
        f'Method: participants counted as the {COUNT_NAMES[count]} (count = "{count}"); Spearman ρ per '
        f"dataset, target and behaviour over the instances judged validly by {md_escape(judge)}; scipy's "
        f"p, {CORRECTION_NAMES[correction]} over the {int(sp['p_adj'].is_not_null().sum())} "
        f"correlations of the table (p_adj); no ρ below n = {min_n} or when a side is constant "
        "(note says why). Human–AI chat instances are left out."
    )
    names = {**setup_labels(f), "all": "all behaviours"}
    for ds in chosen:
        d = sp.filter(pl.col("dataset") == ds)
        h = d.filter(pl.col("target") == REFERENCE)
        line = f"- **{md_escape(ds)}**: "
        hv = h.filter(pl.col("rho").is_not_null())
        if hv.is_empty():
            line += "human reference: no ρ (" + (h["note"][0] if h.height else "not judged") + ")"
        else:
            best = hv.filter(pl.col("behaviour") != "all").sort(pl.col("rho").abs(), descending=True)
            al = hv.filter(pl.col("behaviour") == "all")
            line += "human reference " + (f"ρ(all) = {al['rho'][0]:.2f} (n = {al['n'][0]})" if al.height else "")
            if best.height:
                r = best.row(0, named=True)
                line += f"; strongest: {names[r['behaviour']]} ρ = {r['rho']:.2f} (p_adj {r['p_adj']:.3g})"
        sig = d.filter(pl.col("p_adj") <= inference.ALPHA)
        line += (
            "; significant after the correction: "
            + (
                ", ".join(
                    f"{md_escape(r['target'])}/{names[r['behaviour']]} ρ = {r['rho']:.2f}"
                    for r in sig.iter_rows(named=True)
                )
                or "none"
            )
            + "."
        )
        a.text.append(line)
    a.tables["spearman"] = sp
    a.tables["table12"] = sp.pivot(on="target", index=["dataset", "behaviour"], values="rho")
    a.charts["table12"] = charts.participants_heatmap(sp, f.taxonomy)
    col = participant_counts(f, count)
    per_conv = (
        f.counts.filter((pl.col("judge") == judge) & (pl.col("target") == REFERENCE))
        .group_by("instance_id", maintain_order=True)
        .agg(total=pl.col("count").sum())  # one order every time
        .join(col.filter(pl.col("dataset").is_in(chosen)), on="instance_id")
        .rename({"participants": "n_participants"})
    )
    a.charts["participants"] = charts.participants_chart(per_conv, x_title=f"participants ({count})")
    return a


def paper_tables(
    f: Frames, run: Run, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N
) -> Answer:
    """Figure 3 (one figure per model/condition with the human reference of the same instances,
    and the humans alone as 3(a)), Table 4 (Likert means with CIs) and Table 11 (behaviour means
    per dataset), from this run's multi-party data."""
    a = Answer("The paper's Figure 3 and Tables 4 and 11 for this run")
    cond = paper_stats.conditions(run)
    mp = cond.filter(pl.col("kind") == "multiparty")
    ids = multiparty_ids(f).implode()
    ref = f.counts.filter(
        (pl.col("judge") == judge) & (pl.col("target") == REFERENCE) & pl.col("instance_id").is_in(ids)
    )
    human = (
        stats.mean_occurrences(Frames(**{**f.__dict__, "counts": ref}), resamples=resamples, seed=seed, min_n=min_n)
        if not ref.is_empty()
        else None
    )
    fig3 = (
        stats.figure3_means(f, judge, mp["setup"].to_list(), resamples=resamples, seed=seed, min_n=min_n)
        if mp.height
        else pl.DataFrame()
    )
    if not fig3.is_empty():
        a.tables["figure3"] = fig3
    for label, ch in charts.figure3_groups(
        fig3, f.taxonomy, paper_stats.figure_groups(mp), judge=judge, human=human
    ).items():
        a.charts[chart_key("figure3", label)] = ch
    t4 = paper_stats.table4(f, judge, cond, resamples, seed, min_n=min_n)
    if not t4.is_empty():
        a.tables["table4"] = t4
    t11 = paper_stats.table11(f, judge, cond)
    if not t11.is_empty():
        a.tables["table11"] = t11
    if not a.charts and "table4" not in a.tables and "table11" not in a.tables:
        a.text.append(not_run(f"no multi-party instance has a valid judgment by {md_escape(judge)}", HOW["judge"]))
        return a
    a.text.append(
        f"Judge **{md_escape(judge)}**, multi-party instances only (human–AI chats are the generalization "
        f"study). Figure 3: {len(a.charts)} figure(s), one per model/condition, each panel a setup (k) "
        "beside the human reference on the same instances. Table 4: consistency and collaborativeness "
        f"(1–10), each row over its own valid judgments (n; not paired, as the paper lays it out: the "
        f"paired scores are in the answers' likert tables), {interval_method(resamples, seed, min_n)}. Table 11: mean occurrences per "
        "conversation per dataset, each row over its own valid judgments (n)."
    )
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


def agreement_answer(f: Frames, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N) -> Answer:
    """Appendix B.1's agreement: inter-human (each annotator against the mean of the other
    annotators) and each judge against the annotators left out in turn, for the behaviour counts
    and the Likert scores, tested with the paper's procedure (labelled so); detection totals per
    source and the B.3 coverage check."""
    inference.check_params(resamples=resamples, min_n=min_n)
    a = Answer("Do the LLM judges agree with human annotators?")
    humans = sorted(set(agreement.annotators(f, "counts")) | set(agreement.annotators(f, "likert")))
    judges = sorted(set(f.counts.filter(~pl.col("human"))["judge"]) | set(f.likert.filter(~pl.col("human"))["judge"]))
    if not f.counts.is_empty():
        a.tables["detection_totals"] = agreement.detection_totals(f)
    if not humans:
        a.text.append(
            not_run(
                f"this run has no human annotator ({len(judges)} LLM judge(s)), so there is no agreement to measure",
                HOW["humans"],
            )
        )
        if not f.counts.is_empty():
            a.text.append(agreement.detection_note(f, md_escape))
        return a
    a.text.append(
        f"Method ({agreement.PROCEDURE}); {resamples} resamples, seed {seed}; conversations that every rater "
        f"of a comparison rated validly; not tested below n = {min_n}. {len(humans)} human annotators: "
        + ", ".join(md_escape(h) for h in humans)
        + "."
    )
    if not f.counts.is_empty():
        a.text.append(agreement.detection_note(f, md_escape))
    table = agreement.agreement_table(f, resamples, seed, min_n=min_n)
    if not table.is_empty():
        a.tables["agreement"] = table
        shown = table.filter(pl.col("item").is_in(["all", *agreement.LIKERT]))
        a.charts["agreement"] = charts.agreement_chart(shown)
        for r in shown.iter_rows(named=True):
            who = (
                "inter-human"
                if r["comparison"] == agreement.INTER_HUMAN
                else f"{md_escape(r['comparison'])} vs {r['annotators']} annotator(s)"
            )
            what = "all behaviours (counts)" if r["item"] == "all" else r["item"]
            a.text.append(f"- {who}, {what}: {_rho(r)}.")
    else:
        a.text.append(
            not_run(
                "no comparison has at least two conversations rated by every rater",
                "annotate more of the same conversations: " + HOW["humans"],
            )
        )
    per = [
        agreement.agreement(f, None, resamples, seed, item, min_n=min_n)
        for scale in ("counts", "likert")
        for item in agreement.items_of(f, scale)
    ]
    per = [p.filter(pl.col("rater") != agreement.AVERAGE) for p in per if not p.is_empty()]
    if per:
        a.tables["inter_human_by_annotator"] = pl.concat(per)
    cov = agreement.taxonomy_coverage(f)
    if not cov.is_empty():
        a.tables["taxonomy_coverage"] = cov
        a.text.append(
            "Behaviours not in the taxonomy (Appendix B.3), share of labelled turns: "
            + "; ".join(
                f"{md_escape(r['annotator'])} {r['turns_not_in_taxonomy']} of {r['turns']} turns"
                + (f" ({r['rate']:.1%})" if r["rate"] is not None else "")
                for r in cov.iter_rows(named=True)
            )
            + "."
        )
    return a


def bench_summary(instances: list[Any], bench_dir: Any) -> Answer:
    """Notebook 00: what the benchmark contains, and what the builder skipped."""
    import json
    from pathlib import Path

    a = Answer("What does the benchmark contain?", judge_based=False)
    rows = [
        {
            "instance_id": i.id,
            "dataset": i.dataset,
            "split": i.split,
            "speakers": len({t.speaker for t in [*i.history, *i.reference]}),
            "history_turns": len(i.history),
            "reference_turns": len(i.reference),
            "mean_words_per_turn": sum(len(t.text.split()) for t in [*i.history, *i.reference])
            / max(1, len(i.history) + len(i.reference)),
            "summary_method": i.summary.method,
            "metadata_method": i.metadata.method,
        }
        for i in instances
    ]
    df = pl.DataFrame(rows)
    per = (
        df.group_by("dataset")
        .agg(
            instances=pl.len(),
            mean_speakers=pl.col("speakers").mean(),
            mean_words_per_turn=pl.col("mean_words_per_turn").mean(),
        )
        .sort("dataset")
    )
    a.tables["per_dataset"] = per
    a.tables["instances"] = df
    a.text.append(
        f"{df.height} instances in {per.height} datasets; each has {df['history_turns'].min()!s}–"
        f"{df['history_turns'].max()!s} history turns and {df['reference_turns'].min()!s}–"
        f"{df['reference_turns'].max()!s} reference turns."
    )
    report = Path(bench_dir) / "report.json"
    if report.exists():
        rep = json.loads(report.read_text())
        skipped = rep.get("skipped_conversations", [])
        a.text.append(
            f"The builder skipped {len(skipped)} conversation(s)"
            + (
                ": " + "; ".join(f"{md_escape(s['conversation'])} ({md_escape(s['reason'])})" for s in skipped[:10])
                if skipped
                else "."
            )
        )
        if skipped:
            a.tables["skipped"] = pl.DataFrame(skipped)
    a.charts["speakers"] = (
        alt.Chart(alt.Data(values=df.to_dicts()))
        .mark_bar()
        .encode(
            x=alt.X("speakers:O", title="distinct speakers in x + r"),
            y=alt.Y("count():Q", title="instances"),
            color=alt.Color("dataset:N"),
        )
        .properties(width=300, height=180)
    )
    return a
