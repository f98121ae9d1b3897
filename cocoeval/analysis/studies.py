"""The paper's other studies, answered from a run's data: the benchmark's summary
(``bench_summary``), the participants study (D.4, ``participants``), the paper's Figure 3 and
Tables 4 and 11 (``paper_tables``) and judge–human agreement (§3.3, B.1: ``agreement_answer``).
Setup metadata (model, prompt, k) comes from the run manifest; see ``paper_stats`` for the
statistics. RQ1–RQ5 are in ``rq``. Each study computes a typed result first (``studies_prose``:
``ParticipantsStudy``, ``PaperTables``, ``Agreement``, ``BenchSummary``), kept as ``Answer.result``,
and its text is rendered from that result alone."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import altair as alt
import polars as pl

from cocoeval.core.targets import REFERENCE
from cocoeval.core.text import md_escape

from . import agreement, charts, inference, paper_stats, stats
from .answer import Answer, chart_key, setup_labels
from .coverage import HOW
from .frames import Frames
from .paper_stats import multiparty_ids, participant_counts
from .rq_prose import Intervals, NotRun
from .studies_prose import (
    Agreement,
    AgreementRho,
    BenchSummary,
    DatasetCorrelations,
    DatasetVariance,
    PaperTables,
    ParticipantsStudy,
    Rho,
    SkippedConversation,
    TaxonomyCoverage,
    render_agreement,
    render_bench_summary,
    render_paper_tables,
    render_participants,
)

if TYPE_CHECKING:
    from .store import RunLike


def participants(
    f: Frames,
    judge: str,
    run: RunLike | None = None,
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
    x = _participants(a, f, judge, datasets, top, count, min_n, correction)
    a.text, a.result = render_participants(x), x
    return a


def _participants(
    a: Answer,
    f: Frames,
    judge: str,
    datasets: list[str] | None,
    top: int,
    count: str,
    min_n: int,
    correction: str,
) -> ParticipantsStudy:
    """The participants study's result; its tables and charts added to ``a``."""
    var = paper_stats.participant_variance(f, count)
    picked = datasets if datasets is not None else paper_stats.picked_datasets(var, top)
    var = var.with_columns(picked=pl.col("dataset").is_in(picked))
    a.tables["participant_variance"] = var
    variances = tuple(
        DatasetVariance(r["dataset"], r["variance"], r["instances"], r["min"], r["max"], r["picked"])
        for r in var.iter_rows(named=True)
    )
    study = ParticipantsStudy(judge, count, datasets is not None, top, min_n, correction, variances)
    sp = paper_stats.participants_spearman(
        f, judge, None, datasets, top=top, count=count, min_n=min_n, correction=correction
    )
    if sp.is_empty():
        ranked = var.filter(pl.col("variance").is_not_null())
        why = (
            f"no multi-party conversation judged by {md_escape(judge)} in the datasets "
            f"{', '.join(md_escape(d) for d in datasets)}"
            if datasets is not None
            else f"no multi-party conversation judged by {md_escape(judge)} in the {ranked.height} "
            "dataset(s) with a participant-count variance (a dataset needs at least two multi-party "
            "instances to have one)"
        )
        how = (
            "build the benchmark with more instances per dataset (build.options.per_dataset; the "
            f"paper: 50) and judge them: {HOW['judge']}"
        )
        return replace(study, missing=NotRun(why, how))
    chosen = sp["dataset"].unique(maintain_order=True).to_list()
    names = {**setup_labels(f), "all": "all behaviours"}

    def rho(r: dict[str, Any]) -> Rho:
        return Rho(r["target"], names[r["behaviour"]], r["rho"], r["p_adj"], r["n"])

    per_dataset = []
    for ds in chosen:
        d = sp.filter(pl.col("dataset") == ds)
        h = d.filter(pl.col("target") == REFERENCE)
        hv = h.filter(pl.col("rho").is_not_null())
        sig = tuple(rho(r) for r in d.filter(pl.col("p_adj") <= inference.ALPHA).iter_rows(named=True))
        if hv.is_empty():
            per_dataset.append(DatasetCorrelations(ds, h["note"][0] if h.height else "not judged", significant=sig))
            continue
        best = hv.filter(pl.col("behaviour") != "all").sort(pl.col("rho").abs(), descending=True)
        al = hv.filter(pl.col("behaviour") == "all")
        per_dataset.append(
            DatasetCorrelations(
                ds,
                None,
                human_all=rho(al.row(0, named=True)) if al.height else None,
                human_strongest=rho(best.row(0, named=True)) if best.height else None,
                significant=sig,
            )
        )
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
    return replace(
        study,
        chosen=tuple(chosen),
        n_tested=int(sp["p_adj"].is_not_null().sum()),
        datasets=tuple(per_dataset),
    )


def paper_tables(
    f: Frames, run: RunLike, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N
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
    iv = Intervals(resamples, seed, min_n)
    if not a.charts and "table4" not in a.tables and "table11" not in a.tables:
        why = f"no multi-party instance has a valid judgment by {md_escape(judge)}"
        x = PaperTables(judge, iv, missing=NotRun(why, HOW["judge"]))
    else:
        x = PaperTables(judge, iv, figures=len(a.charts), table4="table4" in a.tables, table11="table11" in a.tables)
    a.text, a.result = render_paper_tables(x), x
    return a


def agreement_answer(f: Frames, resamples: int = 1000, seed: int = 0, *, min_n: int = inference.MIN_N) -> Answer:
    """Appendix B.1's agreement: inter-human (each annotator against the mean of the other
    annotators) and each judge against the annotators left out in turn, for the behaviour counts
    and the Likert scores, tested with the paper's procedure (labelled so); detection totals per
    source and the B.3 coverage check."""
    inference.check_params(resamples=resamples, min_n=min_n)
    a = Answer("Do the LLM judges agree with human annotators?")
    x = _agreement(a, f, resamples, seed, min_n)
    a.text, a.result = render_agreement(x), x
    return a


def _agreement(a: Answer, f: Frames, resamples: int, seed: int, min_n: int) -> Agreement:
    """The agreement study's result; its tables and chart added to ``a``."""
    humans = sorted(set(agreement.annotators(f, "counts")) | set(agreement.annotators(f, "likert")))
    judges = sorted(set(f.counts.filter(~pl.col("human"))["judge"]) | set(f.likert.filter(~pl.col("human"))["judge"]))
    detections = None
    if not f.counts.is_empty():
        a.tables["detection_totals"] = agreement.detection_totals(f)
        detections = agreement.detection_note(f, md_escape)
    x = Agreement(resamples, seed, min_n, tuple(humans), len(judges), detections)
    if not humans:
        why = f"this run has no human annotator ({len(judges)} LLM judge(s)), so there is no agreement to measure"
        return replace(x, missing=NotRun(why, HOW["humans"]))
    table = agreement.agreement_table(f, resamples, seed, min_n=min_n)
    if not table.is_empty():
        a.tables["agreement"] = table
        shown = table.filter(pl.col("item").is_in(["all", *agreement.LIKERT]))
        a.charts["agreement"] = charts.agreement_chart(shown)
        x = replace(
            x,
            rhos=tuple(
                AgreementRho(
                    None if r["comparison"] == agreement.INTER_HUMAN else r["comparison"],
                    r["annotators"],
                    r["item"],
                    r["rho"],
                    r["n"],
                    r["note"],
                    r["significant"],
                    r["p5"],
                    r["ci_note"],
                )
                for r in shown.iter_rows(named=True)
            ),
        )
    else:
        x = replace(
            x,
            no_comparison=NotRun(
                "no comparison has at least two conversations rated by every rater",
                "annotate more of the same conversations: " + HOW["humans"],
            ),
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
        x = replace(
            x,
            coverage=tuple(
                TaxonomyCoverage(r["annotator"], r["turns_not_in_taxonomy"], r["turns"], r["rate"])
                for r in cov.iter_rows(named=True)
            ),
        )
    return x


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
    report = Path(bench_dir) / "report.json"
    skipped = None
    if report.exists():
        rep = json.loads(report.read_text())
        found = rep.get("skipped_conversations", [])
        skipped = tuple(SkippedConversation(s["conversation"], s["reason"]) for s in found)
        if found:
            a.tables["skipped"] = pl.DataFrame(found)
    x = BenchSummary(
        df.height,
        per.height,
        (df["history_turns"].min(), df["history_turns"].max()),  # type: ignore[arg-type]
        (df["reference_turns"].min(), df["reference_turns"].max()),  # type: ignore[arg-type]
        skipped,
    )
    a.text, a.result = render_bench_summary(x), x
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
