"""The research questions, answered from a run's data: each function returns computed text
(no hard-coded conclusions), tables and charts for its notebook."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import altair as alt
import polars as pl

from . import charts, stats
from ._text import md_escape
from .frames import REFERENCE, Frames

SETUP_FIELDS = ("name", "model", "prompt", "turns_per_call", "kind")


@dataclass
class Answer:
    question: str
    text: list[str] = field(default_factory=list)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    charts: dict[str, alt.TopLevelMixin] = field(default_factory=dict)
    judge_based: bool = True
    """Whether its figures rest on a judge (marked in a pipeline-check run) or not (judge-free)."""

    def markdown(self) -> str:
        return f"**{self.question}**\n\n" + "\n\n".join(self.text or ["_No data to answer this yet._"])


def setups_table(run: dict[str, Any]) -> pl.DataFrame:
    rows = [{k: s.get(k) for k in SETUP_FIELDS} for s in run["manifest"].get("params", {}).get("setups", [])]
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={k: pl.Utf8 for k in SETUP_FIELDS})


def _names(f: Frames) -> dict[str, str]:
    return {b.id: b.name for b in f.taxonomy.behaviours}


def _fmt_ci(m: float, lo: float | None, hi: float | None, n: int, note: str | None = None) -> str:
    """An estimate with its interval and the instances it rests on, or why it has no interval."""
    if note or lo is None or hi is None:
        return f"{m:.2f} (no interval: {note or 'undefined'})"
    return f"{m:.2f} (95% CI {lo:.2f}–{hi:.2f}, n = {n})"


def _ci(r: dict[str, Any], value: str = "mean", lo: str = "ci_low", hi: str = "ci_high") -> str:
    return _fmt_ci(r[value], r[lo], r[hi], r["n"], r.get("ci_note"))


def _interval_method(resamples: int, seed: int, min_n: int) -> str:
    return (f"intervals: 95% percentile bootstrap over instances ({resamples} resamples, seed {seed}), undefined "
            f"(not shown) below n = {min_n} or when every resample is equal")


def human_rates(f: Frames, judge: str, resamples: int = 1000, seed: int = 0, *, min_n: int = stats.MIN_N,
                correction: str = "bh") -> Answer:
    """RQ1: how often humans show each behaviour (estimates and intervals; no test, so
    ``correction`` is accepted for a uniform call and has nothing to correct)."""
    stats.check_params(resamples=resamples, min_n=min_n, correction=correction)
    a = Answer("RQ1 — How often do humans show each inconsistent or uncollaborative behaviour?")
    ref = f.counts.filter((pl.col("judge") == judge) & (pl.col("target") == REFERENCE))
    if ref.is_empty():
        return a
    sub = Frames(**{**f.__dict__, "counts": ref})
    means = stats.mean_occurrences(sub, resamples=resamples, seed=seed, min_n=min_n)
    a.tables["human_means"] = means
    names = _names(f)
    top = means.sort("mean", descending=True)
    total = ref.group_by("instance_id").agg(pl.col("count").sum())["count"]
    n = means["n"][0]
    a.text.append(f"Judged by **{md_escape(judge)}** over {n} human references, a conversation shows "
                  f"{total.mean():.2f} behaviours on average (median {total.median():.0f}).")
    a.text.append(f"Method: n = {n} instances; {_interval_method(resamples, seed, min_n)}; no test is made "
                  "here, so no correction applies.")
    lines = [f"- {names[r['behaviour']]} ({r['category']}): {_ci(r)}" for r in top.iter_rows(named=True)]
    a.text.append("Mean occurrences per conversation, most frequent first:\n" + "\n".join(lines))
    absent = [names[r["behaviour"]] for r in top.iter_rows(named=True) if r["mean"] == 0]
    if absent:
        a.text.append(f"Never detected in the {n} human references: " + ", ".join(absent) + ".")
    lk = f.likert.filter((pl.col("judge") == judge) & (pl.col("target") == REFERENCE))
    if not lk.is_empty():
        lm = stats.likert_means(Frames(**{**f.__dict__, "likert": lk}), resamples=resamples, seed=seed, min_n=min_n)
        a.tables["human_likert"] = lm
        a.text.append("Overall scores of the human references: " + "; ".join(
            f"{r['score']} {_ci(r)}" for r in lm.iter_rows(named=True)))
    a.charts["human_behaviours"] = charts.behaviour_bars(means, f.taxonomy, judge=judge)
    return a


def compare_to_humans(f: Frames, judge: str, setups: list[str], question: str, resamples: int = 1000,
                      seed: int = 0, *, min_n: int = stats.MIN_N, correction: str = "bh") -> Answer:
    """RQ2-RQ5 and generalization: each setup against the human reference on the same instances.
    Over/under-production verdicts come from the paired sign-flip test, corrected over every
    behaviour x setup this judge judged (the same family in every notebook and the report)."""
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
                      f"D = {_ci(best, 'distance')} (among setups with n ≥ {min_n}).")
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
    if not fig3.is_empty():
        a.charts["behaviours_vs_humans"] = charts.behaviour_bars(fig3, f.taxonomy, judge=judge, setups=setups)
    lk = stats.likert_means(f, resamples=resamples, seed=seed, min_n=min_n) if not f.likert.is_empty() \
        else pl.DataFrame()
    if not lk.is_empty():
        lk = lk.filter((pl.col("judge") == judge) & pl.col("target").is_in([REFERENCE, *setups]))
        a.tables["likert"] = lk
        a.charts["likert"] = charts.likert_chart(lk)
    return a


def pick_setups(run: dict[str, Any], **where: Any) -> list[str]:
    """Setup names whose params match every ``field=value`` (a callable value is a predicate)."""
    out = []
    for s in run["manifest"].get("params", {}).get("setups", []):
        if all((v(s.get(k)) if callable(v) else s.get(k) == v) for k, v in where.items()):
            out.append(s["name"])
    return out


def by_turns_per_call(f: Frames, run: dict[str, Any], judge: str, resamples: int = 1000, seed: int = 0, *,
                      min_n: int = stats.MIN_N, correction: str = "bh") -> Answer:
    """RQ5: 1 vs 5 vs 30 turns per call."""
    setups = pick_setups(run, kind="multiparty")
    a = compare_to_humans(f, judge, setups, "RQ5 — Does the number of turns generated per call change how "
                          "human the simulations are?", resamples, seed, min_n=min_n, correction=correction)
    if "distance" in a.tables:
        k = setups_table(run).select("name", "turns_per_call").rename({"name": "target"})
        d = a.tables["distance"].join(k, on="target")
        small = d.filter(pl.col("n") < min_n)["target"].to_list()
        summary = d.filter(pl.col("n") >= min_n).group_by("turns_per_call").agg(
            pl.col("distance").mean().alias("mean_distance"), pl.col("target").alias("setups"),
            pl.col("n").min().alias("min_n_instances")).sort("turns_per_call")
        a.tables["distance_by_k"] = summary
        left_out = (f" Left out (fewer than {min_n} instances): {', '.join(md_escape(x) for x in small)}."
                    if small else "")
        a.text.insert(0, ("Mean profile distance by turns per call, over setups with n ≥ " f"{min_n}: " + "; ".join(
            f"k = {r['turns_per_call']}: {r['mean_distance']:.2f} ({len(r['setups'])} setup(s), n ≥ "
            f"{r['min_n_instances']} each)" for r in summary.iter_rows(named=True)) + "."
            if not summary.is_empty() else f"No setup has n ≥ {min_n} instances: turns per call are not compared.")
            + left_out)
    return a


def participants(f: Frames, judge: str, *, min_n: int = stats.MIN_N) -> Answer:
    """Spearman between behaviour counts and participants per dataset (the paper's Table 12)."""
    stats.check_params(min_n=min_n)
    a = Answer("Do behaviour counts grow with the number of participants?")
    pc = stats.participants_correlation(f, judge)
    if pc.is_empty():
        return a
    a.tables["spearman"] = pc
    a.text.append(f"Method: Spearman ρ per dataset over the human references judged by {md_escape(judge)}, as the "
                  f"paper's Table 12, with scipy's p-value (raw, not corrected: no verdict is drawn from it); "
                  f"not shown below n = {min_n} conversations.")
    for r in pc.filter(pl.col("behaviour") == "all").iter_rows(named=True):
        ds = md_escape(r["dataset"])
        if r["n"] < min_n:
            a.text.append(f"- {ds}: not shown (n too small: {r['n']} < {min_n}).")
        elif r["rho"] != r["rho"]:
            a.text.append(f"- {ds}: undefined (no variation in participants or counts; n = {r['n']}).")
        else:
            a.text.append(f"- {ds}: Spearman ρ = {r['rho']:.2f} (p = {r['p_value']:.3f}, n = {r['n']}).")
    per_conv = (f.counts.filter((pl.col("judge") == judge) & (pl.col("target") == REFERENCE))
                .group_by("instance_id", "dataset").agg(total=pl.col("count").sum())
                .join(f.instances.select("instance_id", "n_participants"), on="instance_id"))
    a.charts["participants"] = charts.participants_chart(per_conv)
    return a


def _paper_verdict(r: dict[str, Any]) -> str:
    if r["significant"] is None:
        return f"not tested: {r['ci_note'] or 'undefined'}"
    p5 = f"5th percentile {r['p5']:.2f}" if r["p5"] is not None else f"no range: {r['ci_note']}"
    return f"{p5}: {'significant' if r['significant'] else 'not significant'}"


def agreement_answer(f: Frames, resamples: int = 1000, seed: int = 0, *, min_n: int = stats.MIN_N) -> Answer:
    """Leave-one-out Spearman agreement, tested with the paper's procedure (labelled so)."""
    stats.check_params(resamples=resamples, min_n=min_n)
    a = Answer("Do the LLM judges agree with human annotators?")
    humans = sorted(f.counts.filter(pl.col("human"))["judge"].unique().to_list())
    judges = sorted(f.counts.filter(~pl.col("human"))["judge"].unique().to_list())
    a.tables["detections"] = stats.detections(f)
    if len(humans) + len(judges) < 2:
        a.text.append(f"Agreement needs at least two raters; this run has {len(judges)} LLM judge(s) and "
                      f"{len(humans)} human annotator(s). Export items with `cocoeval annotate-export` or use the "
                      "annotator widget, then import the labels.")
        return a
    a.text.append(f"Method (the paper's procedure): leave-one-out Spearman ρ on the conversations all raters "
                  f"judged validly; one-sided bootstrap over conversations ({resamples} resamples, seed {seed}), "
                  f"significant when the 5th percentile is above 0; not corrected for multiple comparisons, as in "
                  f"the paper; not tested below n = {min_n} conversations.")
    ag = stats.agreement(f, resamples=resamples, seed=seed, min_n=min_n)
    if not ag.is_empty():
        a.tables["leave_one_out"] = ag
        a.charts["agreement"] = charts.agreement_chart(ag)
        avg = ag.filter(pl.col("rater") == "average (leave-one-out)").row(0, named=True)
        a.text.append(f"Average leave-one-out Spearman over {ag.height - 1} raters and n = {avg['n']} conversations: "
                      f"ρ = {avg['rho']:.2f} ({_paper_verdict(avg)}).")
    for j in judges:
        jh = stats.judge_vs_humans(f, j, resamples=resamples, seed=seed, min_n=min_n)
        if not jh.is_empty():
            a.tables[f"{j}_vs_humans"] = jh
            r = jh.filter(pl.col("behaviour") == "all").row(0, named=True)
            a.text.append(f"- {md_escape(j)} vs the mean of {r['humans']} annotator(s), n = {r['n']}: "
                          f"ρ = {r['rho']:.2f} ({_paper_verdict(r)}).")
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
