"""``cocoeval report RUN_DIR --out DIR``: every figure (PNG + SVG), every table (CSV +
Markdown) and an index listing them, with the invalid rates beside the statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from . import charts, stats
from .experiment import read_run
from .frames import REFERENCE, Frames, invalid_rates, run_frames
from .jsonio import write_atomic


def markdown_table(df: pl.DataFrame, digits: int = 3) -> str:
    if df.is_empty():
        return "_(no rows)_\n"

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "–" if v != v else f"{v:.{digits}f}"
        return "" if v is None else str(v)

    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(fmt(v) for v in row) + " |\n" for row in df.iter_rows())


def default_judge(f: Frames) -> str | None:
    """The first LLM judge with fine-grained judgments (else any judge)."""
    llm = f.counts.filter(~pl.col("human"))["judge"].unique(maintain_order=True).to_list()
    every = f.counts["judge"].unique(maintain_order=True).to_list()
    return (llm or every or [None])[0]


def write_report(run_dir: str | Path, out_dir: str | Path, *, judge: str | None = None,
                 resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    f = run_frames(read_run(run_dir))
    out = Path(out_dir)
    judge = judge or default_judge(f)
    tables: dict[str, tuple[pl.DataFrame, str]] = {}
    figures: dict[str, tuple[list[Path], str]] = {}

    def table(name: str, df: pl.DataFrame, what: str) -> None:
        tables[name] = (df, what)
        out.mkdir(parents=True, exist_ok=True)
        df.write_csv(out / f"{name}.csv")
        write_atomic(out / f"{name}.md", f"# {what}\n\n" + markdown_table(df))

    rates = invalid_rates(f)
    table("invalid_rates", rates, "Invalid continuations (per setup) and judgments (per judge, target, kind)")
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
        means = with_rates(stats.mean_occurrences(f, resamples=resamples, seed=seed), "fine_grained")
        table("behaviour_means", means, "Mean occurrences per conversation, 95% bootstrap CIs (Figure 3)")
        by_ds = stats.mean_occurrences(f, by=("judge", "target", "dataset"), resamples=resamples, seed=seed)
        table("behaviour_means_by_dataset", by_ds, "Mean occurrences per dataset (Table 11)")
        table("detections", stats.detections(f), "Total detections per behaviour (Tables 3, 9, 10)")
        fig3 = stats.figure3_means(f, judge, resamples=resamples, seed=seed) if judge else means
        figures["figure3_behaviours"] = (charts.save(charts.behaviour_bars(fig3, f.taxonomy, judge=judge),
                                                     out / "figure3_behaviours"),
                                         f"Mean occurrences per behaviour, each setup vs the human reference ({judge})")
        figures["dataset_heatmap"] = (charts.save(charts.dataset_heatmap(by_ds, f.taxonomy, judge=judge),
                                                  out / "dataset_heatmap"), f"Behaviours per dataset ({judge})")
        if judge is not None:
            per_b, dist = stats.paired_vs_human(f, judge, resamples=resamples, seed=seed)
            table("paired_vs_human", per_b, f"Simulated minus human, per behaviour, paired over instances ({judge})")
            table("profile_distance", dist, "Distance D = Σ|mean_sim − mean_human| over behaviours, 95% CI")
            table("participants", stats.participants_correlation(f, judge),
                  f"Spearman: behaviour counts vs participants, human reference, per dataset ({judge}; Table 12)")
            per_conv = (f.counts.filter((pl.col("judge") == judge) & (pl.col("target") == REFERENCE))
                        .group_by("instance_id", "dataset").agg(total=pl.col("count").sum())
                        .join(f.instances.select("instance_id", "n_participants"), on="instance_id"))
            figures["participants"] = (charts.save(charts.participants_chart(per_conv), out / "participants"),
                                       "Behaviours per conversation vs participants (human reference)")
        if f.counts["judge"].n_unique() >= 2:
            agree = stats.agreement(f, resamples=resamples, seed=seed)
            if not agree.is_empty():
                table("agreement", agree, "Leave-one-out Spearman agreement (one-sided bootstrap, 5th pct > 0)")
                figures["agreement"] = (charts.save(charts.agreement_chart(agree), out / "agreement"),
                                        "Agreement between judges/annotators")
    if not f.likert.is_empty():
        lk = with_rates(stats.likert_means(f, resamples=resamples, seed=seed), "overall")
        table("likert_means", lk, "Mean consistency and collaborativeness, 95% bootstrap CIs (Table 4)")
        figures["likert"] = (charts.save(charts.likert_chart(lk, judge=judge), out / "likert"),
                             f"Likert scores ({judge})")
    index = [f"# Report for {Path(run_dir).name}\n", f"Judge shown in the figures: {judge}.",
             f"Bootstrap: {resamples} resamples over instances, seed {seed}. Invalid judgments are excluded"
             " and counted in invalid_rates.\n", "## Figures\n"]
    index += [f"- **{k}**: {what} — [{paths[0].name}]({paths[0].name}), [{paths[1].name}]({paths[1].name})"
              for k, (paths, what) in figures.items()]
    index += ["\n## Tables\n"] + [f"- **{k}**: {what} — [{k}.csv]({k}.csv), [{k}.md]({k}.md) ({df.height} rows)"
                                  for k, (df, what) in tables.items()]
    write_atomic(out / "index.md", "\n".join(index) + "\n")
    return {"judge": judge, "figures": sorted(figures), "tables": sorted(tables), "out": str(out)}
