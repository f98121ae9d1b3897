"""``cocoeval report RUN_DIR --out DIR``: every figure (PNG + SVG), every table (CSV +
Markdown) and an index listing them, with the invalid rates beside the statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from . import charts, convcompare, stats
from .convstats import STATISTICS, conversation_frame
from .errors import ConfigError
from .frames import Frames, invalid_rates, run_frames
from .jsonio import write_atomic
from .rq import md_escape
from .rq_free import judge_free_note, pipeline_check
from .run import Run
from .run.rundir import PIPELINE_LABEL


def markdown_table(df: pl.DataFrame, digits: int = 3) -> str:
    """A Markdown table; null and NaN cells show "–" (undefined), text cells are escaped."""
    if df.is_empty():
        return "_(no rows)_\n"

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "–" if v != v else f"{v:.{digits}f}"
        return "–" if v is None else md_escape(v) if isinstance(v, str) else str(v)

    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(fmt(v) for v in row) + " |\n" for row in df.iter_rows())


def default_judge(f: Frames) -> str | None:
    """The first LLM judge with fine-grained judgments (else any judge)."""
    llm = f.counts.filter(~pl.col("human"))["judge"].unique(maintain_order=True).to_list()
    every = f.counts["judge"].unique(maintain_order=True).to_list()
    return (llm or every or [None])[0]


def check_judge(f: Frames, judge: str | None) -> str | None:
    """The judge to show: the one asked for (it must have judgments in this run) or the default."""
    if judge is None:
        return default_judge(f)
    known = sorted(set(f.judgments["judge"].unique().to_list()) | set(f.counts["judge"].unique().to_list()))
    if judge not in known:
        raise ConfigError(f"judge {judge!r} has no judgments in this run",
                          hint=f"use one of: {', '.join(known) or '(none: the run has no judgments yet)'}")
    return judge


PAPER_TABLES = {  # (answer, table) -> (report name, what)
    ("paper", "table4"): ("table4", "Table 4: mean consistency and collaborativeness (1–10), 95% bootstrap CIs, "
                                    "human reference and each multi-party setup"),
    ("paper", "table11"): ("table11", "Table 11: mean occurrences per conversation of each behaviour, per dataset "
                                      "(each row over its own valid judgments, n)"),
    ("rq1", "human_means"): ("rq1_human_means", "RQ1: the human reference over multi-party instances (human–AI "
                                                "chats left out)"),
    ("rq3", "contrasts"): ("rq3_contrasts", "RQ3: taxonomy − vanilla per model and k, paired per instance; "
                                            "sign-flip p, p_adj corrected over behaviours × (model, k) pairs"),
    ("rq5", "k_pairs"): ("rq5_k_pairs", "RQ5: larger k − smaller k within each model × prompt, paired per "
                                        "instance; p_adj corrected over behaviours × k pairs"),
    ("rq5", "k_means"): ("rq5_k_means", "RQ5: mean occurrences per k, with the human reference on the same "
                                        "instances, 95% bootstrap CIs"),
    ("rq5", "distance_by_k"): ("rq5_distance_by_k", "RQ5: profile distance D to the humans per setup, by "
                                                    "model × prompt and k (never pooled)"),
    ("participants", "spearman"): ("participants", "Table 12 (D.4): Spearman between participants and behaviour "
                                                   "counts, human reference and every setup, per dataset"),
    ("participants", "table12"): ("table12", "Table 12 (D.4): Spearman ρ, behaviours × targets, per dataset"),
    ("participants", "participant_variance"): ("participant_variance", "Participants per dataset: variance and range "
                                                                       "(the two largest are Table 12's default)"),
}


def _paper_sections(run: Run, f: Frames, judge: str, kw: dict[str, Any], correction: str,
                    table: Any, figure: Any) -> None:
    """The paper's study: Figure 3 per model/condition, Tables 4, 11, 12, RQ1, RQ3, RQ5."""
    from . import rq

    answers = {"paper": rq.paper_tables(f, run, judge, **kw),
               "rq1": rq.human_rates(f, judge, **kw, correction=correction),
               "rq3": rq.prompting(f, run, judge, **kw, correction=correction),
               "rq5": rq.by_turns_per_call(f, run, judge, **kw, correction=correction),
               "participants": rq.participants(f, judge, run, min_n=kw["min_n"], correction=correction)}
    for (key, name), (out_name, what) in PAPER_TABLES.items():
        df = answers[key].tables.get(name)
        if df is not None and not df.is_empty():
            table(out_name, df, f"{what} ({md_escape(judge)})")
    for key, a in answers.items():
        for name, chart in a.charts.items():
            title = chart.title if isinstance(chart.title, str) else a.question
            figure(f"rq1_{name}" if key == "rq1" else name, chart, f"{md_escape(title)} ({md_escape(judge)})",
                   judged=True)


JUDGE_FREE = ("convstats", "convstats_means", "convstats_vs_human")
"""The report's judge-free figures and tables (listed first in the index)."""


def judge_free_section(run: Run, f: Frames, table: Any, figure: Any, *, resamples: int, seed: int,
                       min_n: int, correction: str) -> str | None:
    """The judge-free tables and figures of a run (``convstats``, ``convcompare``); returns the
    method line of the paired test, or None when the run has no conversation."""
    conv = conversation_frame(run)
    if conv.is_empty():
        return None
    kw = {"resamples": resamples, "seed": seed, "min_n": min_n}
    table("convstats", conv, "Judge-free statistics per conversation (target x instance; – = undefined)")
    m = convcompare.means(conv, **kw)
    table("convstats_means", m, "Judge-free statistics: mean per target over the conversations where defined, "
          "95% bootstrap CIs over instances (undefined: conversations left out)")
    figure("convstats", charts.convstats_chart(m, labels=STATISTICS),
           "Judge-free statistics per target, 95% CIs (human reference in black)")
    paired = convcompare.paired_vs_human(conv, **kw, correction=correction)
    method = stats.describe_test(correction, int(paired["p"].is_not_null().sum()) if not paired.is_empty() else 0)
    if not paired.is_empty():
        table("convstats_vs_human", paired, "Judge-free statistics, setup minus human reference, paired over "
              f"instances; p: {method} (the family: statistics × setups); verdict empty: not tested, n too small")
        figure("convstats_vs_human", charts.convstats_diff_chart(paired, labels=STATISTICS),
               "Judge-free statistics, setup minus human reference with 95% CIs, coloured by the corrected verdict")
    if not f.counts.is_empty():
        table("judge_sanity", convcompare.judge_sanity(f, conv, **kw),
              "Judge sanity: Spearman between each judge's per-conversation counts and the closest judge-free "
              "statistic, 95% bootstrap CI over conversations (descriptive; a judge answering at random gives ρ ≈ 0)")
    return method


def write_report(run_dir: str | Path, out_dir: str | Path, *, judge: str | None = None,
                 resamples: int = 1000, seed: int = 0, min_n: int = stats.MIN_N,
                 correction: str = "bh") -> dict[str, Any]:
    """Every figure and table of a run. Intervals over fewer than ``min_n`` instances (or with
    every resample equal) are undefined; verdicts of ``paired_vs_human`` are corrected over
    behaviours x setups with ``correction`` (bh, holm or none)."""
    stats.check_params(resamples=resamples, min_n=min_n, correction=correction)
    run = Run.open(run_dir)
    f = run_frames(run)
    out = Path(out_dir)
    check = pipeline_check(run.manifest)
    mark = f" — {charts.PIPELINE_CHECK}" if check else ""
    judge = check_judge(f, judge)
    jn = md_escape(judge)  # in Markdown
    kw = {"resamples": resamples, "seed": seed, "min_n": min_n}
    tables: dict[str, tuple[pl.DataFrame, str]] = {}
    figures: dict[str, tuple[list[Path], str]] = {}

    def table(name: str, df: pl.DataFrame, what: str) -> None:
        if check and name not in JUDGE_FREE and name != "invalid_rates":
            what += mark
        tables[name] = (df, what)
        out.mkdir(parents=True, exist_ok=True)
        df.write_csv(out / f"{name}.csv")
        write_atomic(out / f"{name}.md", f"# {what}\n\n" + markdown_table(df))

    def figure(name: str, chart: Any, what: str, *, judged: bool = False) -> None:
        if name in figures:
            return
        if judged and check:
            chart, what = charts.titled(chart, f"{what} — {charts.PIPELINE_CHECK}"), f"{what}{mark}"
        figures[name] = (charts.save(chart, out / name), what)

    free = judge_free_section(run, f, table, figure, resamples=resamples, seed=seed, min_n=min_n,
                              correction=correction)
    rates = invalid_rates(f)
    table("invalid_rates", rates, "Invalid continuations (per setup) and judgments (per judge, target, kind); skipped = no turn "
          "to judge; stale = judgments of a continuation the setup no longer has; missing = expected by the params but "
          "absent (no_continuation: the setup has no ok continuation to judge; empty: unknown); none of these counted")
    judged = rates.filter(pl.col("stage") == "judge")
    simulated = rates.filter(pl.col("stage") == "simulate").select(
        "target", continuations_invalid_rate="invalid_rate")

    def with_rates(df: pl.DataFrame, kind: str) -> pl.DataFrame:
        """Beside every statistic: how many judgments (and continuations) were invalid."""
        if df.is_empty():
            return df
        j = judged.filter(pl.col("kind") == kind).select("judge", "target", judgments_invalid_rate="invalid_rate")
        return df.join(j, on=["judge", "target"], how="left").join(simulated, on="target", how="left")

    if not f.counts.is_empty():
        means = with_rates(stats.mean_occurrences(f, **kw), "fine_grained")
        table("behaviour_means", means, "Mean occurrences per conversation, 95% bootstrap CIs (Figure 3)")
        by_ds = stats.mean_occurrences(f, by=("judge", "target", "dataset"), **kw)
        table("behaviour_means_by_dataset", by_ds, "Mean occurrences per dataset with 95% CIs, every target (Table 11's layout: table11)")
        table("detections", stats.detections(f), "Total detections per judge/annotator, target and behaviour")
        table("detection_totals", stats.detection_totals(f), "Detections per source and behaviour on the "
              "conversations every annotator labelled (Tables 3, 10)")
        fig3 = stats.figure3_means(f, judge, **kw) if judge else means
        if fig3.is_empty():  # no setup judged (RQ1 alone): the human references by themselves
            fig3 = means
        figure("figure3_behaviours", charts.behaviour_bars(fig3, f.taxonomy, judge=judge),
               f"Mean occurrences per behaviour, each setup vs the human reference ({jn})", judged=True)
        figure("dataset_heatmap", charts.dataset_heatmap(by_ds, f.taxonomy, judge=judge),
               f"Behaviours per dataset ({jn})", judged=True)
        if judge is not None:
            per_b, dist = stats.paired_vs_human(f, judge, **kw, correction=correction)
            table("paired_vs_human", per_b, f"Simulated minus human, per behaviour, paired over instances ({jn}); "
                  f"p: {stats.describe_test(correction, int(per_b['p'].is_not_null().sum()))}; p_adj and "
                  "verdict after the correction (verdict empty: not tested, n too small)")
            table("profile_distance", dist, "Distance D = Σ|mean_sim − mean_human| over behaviours, 95% CI")
            _paper_sections(run, f, judge, kw, correction, table, figure)
    if not f.likert.is_empty():
        lk = with_rates(stats.likert_means(f, **kw), "overall")
        table("likert_means", lk, "Mean consistency and collaborativeness, 95% bootstrap CIs, every target, each over its own valid judgments (n; unpaired: table4's layout)")
        figure("likert", charts.likert_chart(lk, judge=judge), f"Likert scores ({jn})", judged=True)
    agree = stats.agreement_table(f, **kw)
    if not agree.is_empty():
        table("agreement", agree, f"Agreement, inter-human and each judge vs the annotators (Tables 3, 9, 10; "
              f"{stats.PROCEDURE})")
        shown = agree.filter(pl.col("item").is_in(["all", *stats.LIKERT]))
        figure("agreement", charts.agreement_chart(shown),
               "Average leave-one-out Spearman: inter-human and each judge vs the annotators", judged=True)
    coverage = stats.taxonomy_coverage(f)
    if not coverage.is_empty():
        table("taxonomy_coverage", coverage, "Turns annotators marked with a behaviour not in the taxonomy, per "
              "annotator (Appendix B.3)")
    paired = tables.get("paired_vs_human")
    tested = ("Over/under-production (paired_vs_human): "
              f"{stats.describe_test(correction, int(paired[0]['p'].is_not_null().sum()))}." if paired else "")
    def listing(names: list[str]) -> list[str]:
        figs = [f"- **{k}**: {figures[k][1]} — [{figures[k][0][0].name}]({figures[k][0][0].name}), "
                f"[{figures[k][0][1].name}]({figures[k][0][1].name})" for k in names if k in figures]
        tabs = [f"- **{k}**: {tables[k][1]} — [{k}.csv]({k}.csv), [{k}.md]({k}.md) ({tables[k][0].height} rows)"
                for k in names if k in tables]
        return (["Figures:\n", *figs, ""] if figs else []) + (["Tables:\n", *tabs, ""] if tabs else [])

    index = [f"# Report for {md_escape(Path(run_dir).name)}\n"]
    if check:
        index.append(f"**{charts.PIPELINE_CHECK[0].upper()}{charts.PIPELINE_CHECK[1:]}.** This run is labelled "
                     f"`label: {PIPELINE_LABEL}`: its judges are a tiny model, so the judge-based figures and tables "
                     "show that every path of the workbench runs end to end; they are not findings.\n")
    index.append(f"Bootstrap: {resamples} resamples over instances, seed {seed}; an interval over fewer than {min_n} "
                 "instances, or with every resample equal, is undefined (– in the tables, a cross instead of a "
                 "whisker in the figures; ci_note says why).\n")
    index.append("## Judge-free statistics (no model needed)\n")
    if free is None:
        index.append("_No conversation in this run._\n")
    else:
        index += [f"{judge_free_note(run.manifest)} Definitions: `cocoeval/convstats.py` and README "
                  f"(Judge-free statistics). Setup vs human: {free} (the family: statistics × setups).\n",
                  *listing(list(JUDGE_FREE))]
    index += [f"## Judge-based statistics{mark}\n", f"Judge shown in the figures: {jn}. {tested}",
              "Invalid judgments are excluded and counted in invalid_rates.\n",
              *listing([k for k in dict.fromkeys([*figures, *tables]) if k not in JUDGE_FREE])]
    write_atomic(out / "index.md", "\n".join(index) + "\n")
    return {"judge": judge, "figures": sorted(figures), "tables": sorted(tables), "out": str(out),
            "pipeline_check": check}
