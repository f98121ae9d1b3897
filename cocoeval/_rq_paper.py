"""RQ3, RQ5, the participants study (D.4) and the paper's Figure 3 / Tables 4 and 11, grouped as
the paper reads them (private; import from ``cocoeval.rq``). Setup metadata (model, prompt, k)
comes from the run manifest; see ``_rq_stats`` for the statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from . import charts, stats
from ._answer import Answer, _ci, _interval_method, _names, chart_key
from ._inference import CORRECTION_NAMES
from ._rq_stats import COUNT_NAMES, HIGHER, LOWER, multiparty_ids, participant_counts
from ._text import md_escape
from .frames import REFERENCE, Frames

if TYPE_CHECKING:
    from .run import Run


def _n_range(df: pl.DataFrame) -> str:
    lo, hi = df["n"].min(), df["n"].max()
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def _pair_line(f: Frames, rows: pl.DataFrame, head: str, min_n: int, b_word: str) -> str:
    """One comparison: what is significantly higher / lower in b after the correction."""
    names = _names(f)
    n = rows["n"][0]
    if n < min_n:
        return f"- {head} (n = {n}): not tested ({rows['ci_note'][0] if n == 0 else f'n too small: {n} < {min_n}'})."

    def listed(d: str) -> str:
        return ", ".join(f"{names[r['behaviour']]} ({r['diff']:+.2f}, p_adj {r['p_adj']:.3g})"
                         for r in rows.filter(pl.col("direction") == d).iter_rows(named=True)) or "none"

    same = rows.filter(pl.col("direction") == stats.NO_DIFF).height
    return (f"- {head} (n = {n}): higher {b_word}: {listed(HIGHER)}; lower {b_word}: {listed(LOWER)}; "
            f"no significant difference for {same} behaviour(s).")


def _method(pr: pl.DataFrame, resamples: int, seed: int, min_n: int, correction: str, what: str) -> str:
    fam = int(pr["family"][0]) if pr.height else 0
    return (f"Method: differences per behaviour in mean occurrences per conversation, paired over the instances "
            f"both setups have valid judgments for (n = {_n_range(pr)}); {_interval_method(resamples, seed, min_n)}; "
            f"{stats.describe_test(correction, fam)} (the family: {len(pr['behaviour'].unique())} behaviours × "
            f"{what}, those with n ≥ {min_n}). Human–AI chat instances are left out.")


def prompting(f: Frames, run: Run, judge: str, resamples: int = 1000, seed: int = 0, *,
              min_n: int = stats.MIN_N, correction: str = "bh", baseline: str = "vanilla",
              treatment: str = "taxonomy") -> Answer:
    """RQ3: ``treatment`` − ``baseline`` prompting per model and per k (turns per call), paired
    per instance, tested per behaviour and corrected over behaviours × (model, k) pairs."""
    a = Answer("RQ3 — Does taxonomy-guided prompting change the behaviours, per model and turns per call?")
    pairs = stats.rq3_pairs(stats.conditions(run), baseline, treatment)
    if not pairs:
        a.text.append(f"No model has both a {md_escape(baseline)} and a {md_escape(treatment)} multi-party setup "
                      "at the same turns per call in this run: there is nothing to contrast.")
        return a
    pr = stats.paired_between(f, judge, pairs, resamples, seed, min_n=min_n, correction=correction)
    if pr.is_empty():
        a.text.append(f"None of the {len(pairs)} {md_escape(baseline)}/{md_escape(treatment)} pair(s) has instances "
                      f"both judged validly by {md_escape(judge)}.")
        return a
    a.tables["contrasts"] = pr
    n_pairs = pr.select("setup_a", "setup_b").unique().height
    a.text.append(_method(pr, resamples, seed, min_n, correction, f"the {n_pairs} (model, k) pair(s)")
                  + f" Judge: **{md_escape(judge)}**; difference = {md_escape(treatment)} − {md_escape(baseline)}.")
    pr = pr.with_columns(comparison=pl.format("k = {} ({} → {})", "turns_per_call", "setup_a", "setup_b"))
    for (g,), part in pr.group_by("model_group", maintain_order=True):
        for (k, sa, sb), rows in part.group_by("turns_per_call", "setup_a", "setup_b", maintain_order=True):
            a.text.append(_pair_line(f, rows, f"**{md_escape(g)}**, k = {k} ({md_escape(sa)} → {md_escape(sb)})",
                                     min_n, f"with {md_escape(treatment)}"))
        a.charts[chart_key("rq3", g)] = charts.contrast_chart(
            part, f.taxonomy, title=f"{g}: {treatment} − {baseline} per turns per call")
    return a


def by_turns_per_call(f: Frames, run: Run, judge: str, resamples: int = 1000, seed: int = 0, *,
                      min_n: int = stats.MIN_N, correction: str = "bh") -> Answer:
    """RQ5: within each model × prompt, the k values (turns per call) it has, compared pairwise
    per behaviour (paired per instance, corrected over behaviours × pairs); means per k with the
    human reference on the same instances. Never pooled across models or prompts."""
    a = Answer("RQ5 — Does the number of turns generated per call change the behaviours, within each model and "
               "prompt?")
    cond = stats.conditions(run).filter(pl.col("kind") == "multiparty")
    ks = cond.group_by("condition", maintain_order=True).agg(pl.col("turns_per_call").unique().sort())
    single = [f"{md_escape(r['condition'])} (only k = {r['turns_per_call'][0]})" for r in ks.iter_rows(named=True)
              if len(r["turns_per_call"]) < 2]
    if single:
        a.text.append("Not compared (one k only): " + "; ".join(single) + ".")
    pairs = stats.rq5_pairs(cond)
    pr = stats.paired_between(f, judge, pairs, resamples, seed, min_n=min_n, correction=correction) if pairs \
        else pl.DataFrame()
    if pr.is_empty():
        a.text.append("No model × prompt has two turns-per-call values judged validly by "
                      f"{md_escape(judge)} on shared instances: nothing to compare.")
        return a
    a.tables["k_pairs"] = pr
    a.text.append(_method(pr, resamples, seed, min_n, correction,
                          f"the {pr.select('setup_a', 'setup_b').unique().height} k pair(s) within model × prompt")
                  + f" Judge: **{md_escape(judge)}**; difference = larger k − smaller k.")
    setups = cond["setup"].to_list()
    fig3 = stats.figure3_means(f, judge, setups, resamples=resamples, seed=seed, min_n=min_n)
    if not fig3.is_empty():
        a.tables["k_means"] = fig3.join(cond.select("setup", "model_group", "prompt", "turns_per_call"),
                                        left_on="panel", right_on="setup")
    _, dist = stats.paired_vs_human(f, judge, resamples=resamples, seed=seed, min_n=min_n, correction=correction)
    dist = dist.join(cond.select("setup", "condition", "turns_per_call"), left_on="target", right_on="setup") \
        .sort("condition", "turns_per_call")
    a.tables["distance_by_k"] = dist
    pr = pr.with_columns(comparison=pl.format("k = {} → {}", "k_a", "k_b"))
    groups = stats.figure_groups(cond)
    for (g, p), part in pr.group_by("model_group", "prompt", maintain_order=True):
        label = f"{g} · {p}"
        d = dist.filter(pl.col("condition") == label)
        if not d.is_empty():
            a.text.append(f"**{md_escape(label)}** — profile distance D to the humans by k: " + "; ".join(
                f"k = {r['turns_per_call']}: {_ci(r, 'distance')}" for r in d.iter_rows(named=True)) + ".")
        for (ka, kb, sa, sb), rows in part.group_by("k_a", "k_b", "setup_a", "setup_b", maintain_order=True):
            a.text.append(_pair_line(f, rows, f"k = {ka} → {kb} ({md_escape(sa)} → {md_escape(sb)})", min_n,
                                     f"with k = {kb}"))
        a.charts[chart_key("rq5", label)] = charts.contrast_chart(part, f.taxonomy, title=f"{label}: k_b − k_a")
        if not fig3.is_empty():
            a.charts.update({chart_key("figure3", lb): ch for lb, ch in charts.figure3_groups(
                fig3, f.taxonomy, {label: groups.get(label, [])}, judge=judge).items()})
    return a


def participants(f: Frames, judge: str, run: Run | None = None, *, datasets: list[str] | None = None,
                 top: int = 2, count: str = "conversation", min_n: int = stats.MIN_N,
                 correction: str = "bh") -> Answer:
    """D.4 / Table 12: per dataset, Spearman between an instance's participant count and each
    behaviour's count, for the human reference and every setup. ``datasets`` None: the ``top``
    datasets with the largest variance of participant counts. ``run`` is accepted for a uniform
    call (targets come from the judgments)."""
    stats.check_params(min_n=min_n, correction=correction)
    a = Answer("Do behaviour counts change with the number of participants (D.4, Table 12)?")
    var = stats.participant_variance(f, count)
    a.tables["participant_variance"] = var
    sp = stats.participants_spearman(f, judge, None, datasets, top=top, count=count, min_n=min_n,
                                     correction=correction)
    if sp.is_empty():
        ranked = var.filter(pl.col("variance").is_not_null())
        a.text.append(f"No multi-party conversation judged by {md_escape(judge)} in the datasets "
                      f"{', '.join(md_escape(d) for d in datasets)}." if datasets is not None else
                      f"No multi-party conversation judged by {md_escape(judge)} in the {ranked.height} dataset(s) with "
                      "a participant-count variance (a dataset needs at least two multi-party instances to have one).")
        return a
    chosen = sp["dataset"].unique(maintain_order=True).to_list()
    how = ("given" if datasets is not None else
           f"the {top} with the largest variance of participant counts, as the paper picks them")
    a.text.append(f"Datasets ({how}): " + "; ".join(
        f"{md_escape(r['dataset'])} (variance {r['variance']:.2f}, {r['min']}–{r['max']} participants, "
        f"{r['instances']} instances)" for r in var.filter(pl.col("dataset").is_in(chosen)).iter_rows(named=True))
        + ".")
    a.text.append(f"Method: participants counted as the {COUNT_NAMES[count]} (count = \"{count}\"); Spearman ρ per "
                  f"dataset, target and behaviour over the instances judged validly by {md_escape(judge)}; scipy's "
                  f"p, {CORRECTION_NAMES[correction]} over the {int(sp['p_adj'].is_not_null().sum())} "
                  f"correlations of the table (p_adj); no ρ below n = {min_n} or when a side is constant "
                  "(note says why). Human–AI chat instances are left out.")
    names = {**_names(f), "all": "all behaviours"}
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
        sig = d.filter(pl.col("p_adj") <= stats.ALPHA)
        line += "; significant after the correction: " + (", ".join(
            f"{md_escape(r['target'])}/{names[r['behaviour']]} ρ = {r['rho']:.2f}" for r in sig.iter_rows(named=True))
            or "none") + "."
        a.text.append(line)
    a.tables["spearman"] = sp
    a.tables["table12"] = sp.pivot(on="target", index=["dataset", "behaviour"], values="rho")
    a.charts["table12"] = charts.participants_heatmap(sp, f.taxonomy)
    col = participant_counts(f, count)
    per_conv = (f.counts.filter((pl.col("judge") == judge) & (pl.col("target") == REFERENCE))
                .group_by("instance_id").agg(total=pl.col("count").sum())
                .join(col.filter(pl.col("dataset").is_in(chosen)), on="instance_id")
                .rename({"participants": "n_participants"}))
    a.charts["participants"] = charts.participants_chart(per_conv, x_title=f"participants ({count})")
    return a


def paper_tables(f: Frames, run: Run, judge: str, resamples: int = 1000, seed: int = 0, *,
                 min_n: int = stats.MIN_N) -> Answer:
    """Figure 3 (one figure per model/condition with the human reference of the same instances,
    and the humans alone as 3(a)), Table 4 (Likert means with CIs) and Table 11 (behaviour means
    per dataset), from this run's multi-party data."""
    a = Answer("The paper's Figure 3 and Tables 4 and 11 for this run")
    cond = stats.conditions(run)
    mp = cond.filter(pl.col("kind") == "multiparty")
    ids = multiparty_ids(f).implode()
    ref = f.counts.filter((pl.col("judge") == judge) & (pl.col("target") == REFERENCE) & pl.col("instance_id").is_in(ids))
    human = stats.mean_occurrences(Frames(**{**f.__dict__, "counts": ref}), resamples=resamples, seed=seed,
                                   min_n=min_n) if not ref.is_empty() else None
    fig3 = stats.figure3_means(f, judge, mp["setup"].to_list(), resamples=resamples, seed=seed, min_n=min_n) \
        if mp.height else pl.DataFrame()
    if not fig3.is_empty():
        a.tables["figure3"] = fig3
    for label, ch in charts.figure3_groups(fig3, f.taxonomy, stats.figure_groups(mp), judge=judge,
                                           human=human).items():
        a.charts[chart_key("figure3", label)] = ch
    t4 = stats.table4(f, judge, cond, resamples, seed, min_n=min_n)
    if not t4.is_empty():
        a.tables["table4"] = t4
    t11 = stats.table11(f, judge, cond)
    if not t11.is_empty():
        a.tables["table11"] = t11
    a.text.append(f"Judge **{md_escape(judge)}**, multi-party instances only (human–AI chats are the generalization "
                  f"study). Figure 3: {len(a.charts)} figure(s), one per model/condition, each panel a setup (k) "
                  "beside the human reference on the same instances. Table 4: consistency and collaborativeness "
                  f"(1–10), each row over its own valid judgments (n; not paired, as the paper lays it out: the "
                  f"paired scores are in the answers' likert tables), {_interval_method(resamples, seed, min_n)}. Table 11: mean occurrences per "
                  "conversation per dataset, each row over its own valid judgments (n).")
    return a
