"""The paper's study, grouped as the paper reads it (private; import from ``cocoeval.analysis.stats``).

- Setup conditions come from the run manifest: model, prompt, turns per call k, kind. A
  fine-tuned model (``ft:`` ids, one per k in the paper) belongs to the group of its base model
  marked "SFT", so its k values are compared with each other.
- RQ3: for each model group and k having both prompts, taxonomy − vanilla per behaviour, paired
  over the instances both have valid judgments for.
- RQ5: within each model group × prompt, every pair of the k values it has, k_b − k_a, paired
  the same way. Never pooled across models or prompts; a k a model lacks is never compared.
- Both: a two-sided paired sign-flip test per behaviour and pair, corrected over the family of
  every behaviour × pair of the question (``correction``); nothing is tested below ``min_n``.
- Multi-party studies exclude human–AI chat instances (``schema.is_human_ai``).
- Likert scores beside paired results (``likert_vs_human``) are paired the same way: each setup
  and the human reference on the instances both have valid overall judgments for, n per row.
  Table 4 (``table4``) keeps the paper's layout: each row over its own valid judgments (unpaired).
- Participants (D.4, Table 12): Spearman per dataset between an instance's number of
  participants and each behaviour's count, for the human reference and every setup.
"""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from cocoeval.core.errors import ConfigError
from cocoeval.core.targets import REFERENCE

from . import stats
from .agreement import spearman_tests
from .answer import SIMULATED, setup_label, setup_view
from .frames import HUMAN, Frames, validity_note
from .inference import (
    ALPHA,
    FLIPS,
    MIN_N,
    NO_DIFF,
    OVER,
    UNDER,
    adjust_pvalues,
    check_params,
    ci_notes,
    interval,
    too_small,
)
from .inference import verdict as _verdict

if TYPE_CHECKING:
    from .store import RunLike

HIGHER, LOWER = "higher", "lower"
COUNTS = {"conversation": "n_participants_metadata", "window": "n_participants"}
COUNT_NAMES = {
    "conversation": "participants of the whole conversation, as listed in its metadata M",
    "window": "distinct speakers in the history x and the reference r",
}
COND_SCHEMA = {
    "setup": pl.Utf8,
    "model": pl.Utf8,
    "model_group": pl.Utf8,
    "prompt": pl.Utf8,
    "turns_per_call": pl.Int64,
    "kind": pl.Utf8,
    "origin": pl.Utf8,
    "condition": pl.Utf8,
}


def is_fine_tuned(model: str) -> bool:
    return model.startswith("ft:") or ":ft:" in model or "/ft:" in model


def model_group(model: str) -> str:
    """``openai/ft:gpt-4.1-2025-04-14:org:k1:id`` -> ``openai/gpt-4.1-2025-04-14 SFT``; others unchanged."""
    if not is_fine_tuned(model):
        return model
    head, _, rest = model.partition("ft:")
    return f"{head}{rest.split(':')[0]} SFT"


def conditions(run: RunLike) -> pl.DataFrame:
    """One row per setup of the run's manifest: setup, model, model_group, prompt,
    turns_per_call, kind, origin (``answer.setup_origin``), condition (model group · prompt, the
    paper's figure grouping). An imported or plugin setup has no prompt and no k (null) and is a
    group of its own, ``answer.setup_label``: "imported: <name>", "plugin <simulator> · <model>";
    it is in every comparison with the humans, never in an RQ3 or RQ5 pair."""
    setups = run.manifest.setup_params  # typed when the manifest is read: a malformed one never opens
    rows = []
    for s in setups:
        v = setup_view(s)
        kind = str(v["kind"])
        if v["origin"] != SIMULATED:  # imported or plugin: a group of its own, no prompt, no k
            g = setup_label(s)
            rows.append(
                {
                    "setup": s.name,
                    "model": None if v["model"] is None else str(v["model"]),
                    "model_group": g,
                    "prompt": None,
                    "turns_per_call": None,
                    "kind": kind,
                    "origin": v["origin"],
                    "condition": g + (" (human–AI)" if kind == "human_ai" else ""),
                }
            )
            continue
        model, prompt = str(v["model"] or ""), str(s.prompt or "vanilla")
        g = model_group(model)
        rows.append(
            {
                "setup": s.name,
                "model": model,
                "model_group": g,
                "prompt": prompt,
                "turns_per_call": s.turns_per_call,
                "kind": kind,
                "origin": SIMULATED,
                "condition": f"{g} · {prompt}" + (" (human–AI)" if kind == "human_ai" else ""),
            }
        )
    return pl.DataFrame(rows, schema=COND_SCHEMA).sort(
        "kind", "model_group", "prompt", "turns_per_call", nulls_last=True
    )


def figure_groups(cond: pl.DataFrame, setups: list[str] | None = None) -> dict[str, list[str]]:
    """Condition -> its setups by k: one Figure 3 panel group per model/condition."""
    out: dict[str, list[str]] = {}
    for r in cond.iter_rows(named=True):
        if setups is None or r["setup"] in setups:
            out.setdefault(r["condition"], []).append(r["setup"])
    return out


def multiparty_ids(f: Frames) -> pl.Series:
    return f.instances.filter(~pl.col("human_ai"))["instance_id"]


def rq3_pairs(cond: pl.DataFrame, baseline: str = "vanilla", treatment: str = "taxonomy") -> list[tuple]:
    """(baseline setup, treatment setup, keys) per model group and k having both prompts."""
    mp = cond.filter(
        (pl.col("kind") == "multiparty") & (pl.col("origin") == SIMULATED) & pl.col("turns_per_call").is_not_null()
    )
    out = []
    for (g, k), part in mp.group_by("model_group", "turns_per_call", maintain_order=True):
        for a in part.filter(pl.col("prompt") == baseline)["setup"]:
            for b in part.filter(pl.col("prompt") == treatment)["setup"]:
                out.append((a, b, {"model_group": g, "turns_per_call": k}))
    return out


def rq5_pairs(cond: pl.DataFrame) -> list[tuple]:
    """(setup at k_a, setup at k_b, keys) for each k_a < k_b within each model group × prompt."""
    mp = cond.filter(
        (pl.col("kind") == "multiparty") & (pl.col("origin") == SIMULATED) & pl.col("turns_per_call").is_not_null()
    )
    out = []
    for (g, p), part in mp.group_by("model_group", "prompt", maintain_order=True):
        ks = sorted(set(part["turns_per_call"].to_list()))
        for i, ka in enumerate(ks):
            for kb in ks[i + 1 :]:
                for a in part.filter(pl.col("turns_per_call") == ka)["setup"]:
                    for b in part.filter(pl.col("turns_per_call") == kb)["setup"]:
                        out.append((a, b, {"model_group": g, "prompt": p, "k_a": ka, "k_b": kb}))
    return out


PAIR_COLS = {
    "setup_a": pl.Utf8,
    "setup_b": pl.Utf8,
    "behaviour": pl.Utf8,
    "mean_a": pl.Float64,
    "mean_b": pl.Float64,
    "diff": pl.Float64,
    "diff_ci_low": pl.Float64,
    "diff_ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "n": pl.Int64,
    "p": pl.Float64,
    "p_adj": pl.Float64,
    "correction": pl.Utf8,
    "family": pl.Int64,
    "direction": pl.Utf8,
}


def paired_between(
    f: Frames,
    judge: str,
    pairs: list[tuple],
    resamples: int = 1000,
    seed: int = 0,
    *,
    min_n: int = MIN_N,
    correction: str = "bh",
    flips: int = FLIPS,
    alpha: float = ALPHA,
) -> pl.DataFrame:
    """For each (a, b, keys): per behaviour, mean_b − mean_a over the instances both have valid
    judgments for (pairs resampled together), with the paired sign-flip p (not tested below
    ``min_n``) corrected over every tested behaviour × pair; ``direction``: b higher, lower or
    no significant difference (null: not tested)."""

    check_params(resamples=resamples, min_n=min_n, correction=correction, flips=flips)
    beh = f.taxonomy.ids
    c = f.counts.filter((pl.col("judge") == judge) & pl.col("instance_id").is_in(multiparty_ids(f).implode()))
    mats = {t: stats.count_matrix(g, beh) for (t,), g in c.group_by("target")}
    rows: list[dict[str, Any]] = []
    key_cols: dict[str, Any] = {}
    blocks: list[tuple[int, np.ndarray, np.ndarray]] = []
    for a, b, keys in pairs:
        key_cols.update({k: pl.Int64 if isinstance(v, int) else pl.Utf8 for k, v in keys.items()})
        pos_a = {i: k for k, i in enumerate(mats[a][0])} if a in mats else {}
        shared = [(pos_a[i], k) for k, i in enumerate(mats[b][0]) if i in pos_a] if b in mats else []
        if not shared:  # a pair with nothing to compare is a row saying why, never left out
            why = (
                f"no multi-party instance where both {a} and {b} have a valid judgment by {judge} "
                f"({validity_note(f, judge, a)}; {validity_note(f, judge, b)})"
            )
            rows += [
                {**keys, "setup_a": a, "setup_b": b, "behaviour": bid, "ci_note": why, "n": 0, "p": None} for bid in beh
            ]
            continue
        xa = mats[a][1][[s[0] for s in shared]]
        xb = mats[b][1][[s[1] for s in shared]]
        r = stats.paired_differences(xb, xa, resamples, seed, min_n=min_n, flips=flips, test=False)
        blocks.append((len(rows), xb, xa))  # tested below, with the other pairs of its length
        for k, bid in enumerate(beh):
            lo, hi = interval(r["diff_lo"][k], r["diff_hi"][k], r["notes"][k])
            rows.append(
                {
                    **keys,
                    "setup_a": a,
                    "setup_b": b,
                    "behaviour": bid,
                    "mean_a": float(xa[:, k].mean()),
                    "mean_b": float(xb[:, k].mean()),
                    "diff": float(r["diff"][k]),
                    "diff_ci_low": lo,
                    "diff_ci_high": hi,
                    "ci_note": r["notes"][k],
                    "n": len(shared),
                }
            )
    stats.fill_tested(rows, blocks, flips, seed, min_n=min_n)
    p = np.array([np.nan if x["p"] is None else x["p"] for x in rows])
    q = adjust_pvalues(p, correction)
    family = int(np.isfinite(p).sum())
    words: dict[str | None, str] = {OVER: HIGHER, UNDER: LOWER, NO_DIFF: NO_DIFF}  # (tested: never None)
    for row, qa in zip(rows, q, strict=True):
        tested = bool(np.isfinite(qa))
        row.update(
            p_adj=float(qa) if tested else None,
            correction=correction,
            family=family,
            direction=words[_verdict(row["diff"], qa, alpha)] if tested else None,
        )
    return pl.DataFrame(rows, schema={**key_cols, **PAIR_COLS})


def participant_counts(f: Frames, count: str = "conversation") -> pl.DataFrame:
    """instance_id, dataset, participants: multi-party instances only, counted as ``count`` says."""
    if count not in COUNTS:
        raise ConfigError(f"unknown participant count {count!r}", hint=f"use one of {', '.join(COUNTS)}")
    return f.instances.filter(~pl.col("human_ai")).select("instance_id", "dataset", participants=pl.col(COUNTS[count]))


def participant_variance(f: Frames, count: str = "conversation") -> pl.DataFrame:
    """Per dataset: instances with a participant count, variance (ddof 1) and range of their
    counts, and ``unknown``: instances without one (M lists no participant), largest variance first."""
    pc, known = participant_counts(f, count), pl.col("participants").is_not_null()
    return (
        pc.group_by("dataset")
        .agg(
            instances=known.sum(),
            unknown=(~known).sum(),
            variance=pl.col("participants").var(),
            min=pl.col("participants").min(),
            max=pl.col("participants").max(),
        )
        .sort(["variance", "dataset"], descending=[True, False], nulls_last=True)
    )


def picked_datasets(var: pl.DataFrame, top: int = 2) -> list[str]:
    """The ``top`` datasets of ``participant_variance`` with the largest variance of participant
    counts (ties by name; a dataset without a variance, under two instances with a count, never)."""
    return var.filter(pl.col("variance").is_not_null())["dataset"].to_list()[:top]


PART_SCHEMA = {
    "judge": pl.Utf8,
    "target": pl.Utf8,
    "dataset": pl.Utf8,
    "behaviour": pl.Utf8,
    "rho": pl.Float64,
    "p_value": pl.Float64,
    "p_adj": pl.Float64,
    "note": pl.Utf8,
    "n": pl.Int64,
}


def participants_spearman(
    f: Frames,
    judge: str,
    targets: list[str] | None = None,
    datasets: list[str] | None = None,
    *,
    top: int = 2,
    count: str = "conversation",
    min_n: int = MIN_N,
    correction: str = "bh",
) -> pl.DataFrame:
    """Table 12: per dataset, target (the human reference and every setup by default) and behaviour
    ('all' = the total), Spearman ρ between the instance's participant count and the count, with
    scipy's spearmanr p (``agreement.spearman_tests``) and ``p_adj`` corrected over the table. ρ is null with a ``note`` below ``min_n``
    instances or when either side is constant. ``datasets`` None: the ``top`` datasets with the
    largest variance of participant counts."""
    check_params(min_n=min_n, correction=correction)
    pc = participant_counts(f, count)
    if datasets is None:
        datasets = picked_datasets(participant_variance(f, count), top)
    c = f.counts.filter(pl.col("judge") == judge)
    targets = targets or [REFERENCE, *sorted(set(c["target"].unique().to_list()) - {REFERENCE})]
    c = c.filter(pl.col("target").is_in(targets)).select("target", "instance_id", "behaviour", "count")
    c = (
        pl.concat(
            [
                c,
                c.group_by("target", "instance_id")
                .agg(pl.col("count").sum())
                .with_columns(behaviour=pl.lit("all"))
                .select(c.columns),
            ]
        )
        .join(pc, on="instance_id")
        .filter(pl.col("dataset").is_in(datasets))
    )
    rows: list[dict[str, Any]] = []
    tested: list[tuple[int, np.ndarray, np.ndarray]] = []  # (row, participants, counts)
    # each group's rows in their order (a stable sort), sliced: partition_by queries once per group
    c = c.sort("dataset", "target", "behaviour", maintain_order=True)
    sizes = c.group_by("dataset", "target", "behaviour", maintain_order=True).agg(n=pl.len())
    starts = [0, *accumulate(sizes["n"].to_list())][:-1]  # [] when there is no group
    parts = {(ds, t, b): (start, n) for (ds, t, b, n), start in zip(sizes.iter_rows(), starts, strict=True)}
    for ds in datasets:
        for t in targets:
            for b in ["all", *f.taxonomy.ids]:
                if (ds, t, b) not in parts:
                    continue
                start, size = parts[ds, t, b]
                part, cnt = c["participants"].slice(start, size), c["count"].slice(start, size)
                if part.has_nulls():  # M lists no participant: unknown, left out
                    known = part.is_not_null()
                    part, cnt = part.filter(known), cnt.filter(known)
                x, y = part.to_numpy(), cnt.to_numpy()
                note = too_small(len(x), min_n) or (
                    None if np.ptp(x) > 0 and np.ptp(y) > 0 else "undefined: participants or counts constant"
                )
                if len(x) < size:
                    note = "; ".join(
                        filter(None, [note, f"{size - len(x)} instance(s) without a participant count left out"])
                    )
                if len(x) >= min_n and np.ptp(x) > 0 and np.ptp(y) > 0:
                    tested.append((len(rows), x, y))
                rows.append(
                    {
                        "judge": judge,
                        "target": t,
                        "dataset": ds,
                        "behaviour": b,
                        "rho": None,
                        "p_value": None,
                        "note": note,
                        "n": len(x),
                    }
                )
    # scipy's spearmanr, bit for bit, every pair at once
    for (i, _, _), (rho, p) in zip(tested, spearman_tests([(x, y) for _, x, y in tested]), strict=True):
        rows[i]["rho"], rows[i]["p_value"] = rho, p
    q = adjust_pvalues(np.array([np.nan if r["p_value"] is None else r["p_value"] for r in rows]), correction)
    for r, qa in zip(rows, q, strict=True):
        r["p_adj"] = float(qa) if np.isfinite(qa) else None
    return pl.DataFrame(rows, schema=PART_SCHEMA)


def _ordered(df: pl.DataFrame, cond: pl.DataFrame) -> pl.DataFrame:
    """Human reference first, then setups by model group, prompt and k, with their condition."""
    d = df.join(
        cond.select("setup", "model_group", "prompt", "turns_per_call"), left_on="target", right_on="setup", how="left"
    )
    return (
        d.with_columns(_h=pl.col("target") != REFERENCE)
        .sort(["_h", "model_group", "prompt", "turns_per_call", "target"], nulls_last=True)
        .drop("_h")
    )


def _tried(f: Frames, judge: str, kind: str) -> set[str]:
    """The targets ``judge`` judged (``kind``, valid or not) or the params expect it to judge."""
    mine = (pl.col("judge") == judge) & (pl.col("kind") == kind)
    return set(f.judgments.filter(mine & (pl.col("status") != "stale"))["target"].to_list()) | set(
        f.expected.filter(mine & (pl.col("stage") == "judge"))["target"].to_list()
    )


DIFFERENCE = "simulated − human"
LIKERT_PAIRED_SCHEMA = {
    "judge": pl.Utf8,
    "target": pl.Utf8,
    "series": pl.Utf8,
    "score": pl.Utf8,
    "mean": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "n": pl.Int64,
}


def likert_vs_human(
    f: Frames, judge: str, setups: list[str] | None = None, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> pl.DataFrame:
    """Mean consistency and collaborativeness (1–10) of each setup (``target``) paired with the
    human reference: on the instances where both have a valid overall judgment by ``judge`` (``n``),
    three ``series`` per setup and score: "simulated", "human reference" (the reference's mean on
    those same instances) and "simulated − human" (the paired difference), each with a 95%
    bootstrap CI over the pairs (the same resamples for all three; undefined below ``min_n`` or
    when every resample is equal, ``ci_note`` says why). ``setups`` None: every judged setup. A
    setup judged (or expected) with no instance to pair has its rows: n = 0, no mean, why."""

    check_params(resamples=resamples, min_n=min_n)
    scores = ["consistency", "collaborativeness"]
    lk = f.likert.filter(pl.col("judge") == judge)
    ref = lk.filter(pl.col("target") == REFERENCE).select("instance_id", *[pl.col(x).alias(f"h_{x}") for x in scores])
    names = setups if setups is not None else sorted(set(lk["target"].to_list()) - {REFERENCE})
    rows, tried = [], _tried(f, judge, "overall")
    for s in names:
        pair = lk.lazy().filter(pl.col("target") == s).join(ref.lazy(), on="instance_id").sort("instance_id").collect()
        if pair.is_empty():  # judged (or expected) but nothing to pair: rows saying why, never left out
            why = (
                f"no instance where both {s} and the human reference have a valid overall judgment by {judge} "
                f"({validity_note(f, judge, s, 'overall')}; {validity_note(f, judge, REFERENCE, 'overall')})"
            )
            rows += (
                [
                    {"judge": judge, "target": s, "series": series, "score": score, "ci_note": why, "n": 0}
                    for series in ("simulated", HUMAN, DIFFERENCE)
                    for score in scores
                ]
                if s in tried
                else []
            )
            continue
        n = pair.height
        xs = pair.select(scores).to_numpy().astype(float)
        xh = pair.select(f"h_{x}" for x in scores).to_numpy().astype(float)
        idx = stats.boot_index(n, resamples, seed)  # one set of resampled instances: the pairs stay pairs
        bs, bh = stats.resample_means(xs, idx), stats.resample_means(xh, idx)
        for series, x, boot in (("simulated", xs, bs), (HUMAN, xh, bh), (DIFFERENCE, xs - xh, bs - bh)):
            lo, hi = np.percentile(boot, stats.PERCENTILES, axis=0)
            for k, (score, note) in enumerate(zip(scores, ci_notes(n, boot, min_n), strict=True)):
                a, b = interval(lo[k], hi[k], note)
                rows.append(
                    {
                        "judge": judge,
                        "target": s,
                        "series": series,
                        "score": score,
                        "mean": float(x[:, k].mean()),
                        "ci_low": a,
                        "ci_high": b,
                        "ci_note": note,
                        "n": n,
                    }
                )
    return pl.DataFrame(rows, schema=LIKERT_PAIRED_SCHEMA)


def table4(
    f: Frames, judge: str, cond: pl.DataFrame, resamples: int = 1000, seed: int = 0, *, min_n: int = MIN_N
) -> pl.DataFrame:
    """Table 4: mean consistency and collaborativeness (1–10) with 95% bootstrap CIs, the human
    reference and each multi-party setup, over multi-party instances, as the paper lays it out:
    each row over its own valid judgments (``n``), not paired (``likert_vs_human`` pairs them). A
    target judged (or expected) without a valid overall judgment keeps its row: n = 0, no mean,
    the notes say why."""

    setups = cond.filter(pl.col("kind") == "multiparty")["setup"].to_list()
    lk = f.likert.filter(
        (pl.col("judge") == judge)
        & pl.col("target").is_in([REFERENCE, *setups])
        & pl.col("instance_id").is_in(multiparty_ids(f).implode())
    )
    if lk.is_empty():
        return pl.DataFrame()
    m = stats.likert_means(Frames(**{**f.__dict__, "likert": lk}), resamples=resamples, seed=seed, min_n=min_n)
    wide = None
    for score in ("consistency", "collaborativeness"):
        part = m.filter(pl.col("score") == score).select(
            "target", "n", *[pl.col(x).alias(f"{score}_{x}") for x in ("mean", "ci_low", "ci_high", "ci_note")]
        )
        wide = part if wide is None else wide.join(part.drop("n"), on="target")
    assert wide is not None  # set by the loop
    tried = _tried(f, judge, "overall")
    absent = [t for t in [REFERENCE, *setups] if t in tried and t not in set(wide["target"].to_list())]
    if absent:  # judged (or expected) without a valid overall judgment: a row with n = 0 and why
        why = {t: f"no valid overall judgment: {validity_note(f, judge, t, 'overall')}" for t in absent}
        wide = pl.concat(
            [
                wide,
                pl.DataFrame(
                    [
                        {"target": t, "n": 0, "consistency_ci_note": why[t], "collaborativeness_ci_note": why[t]}
                        for t in absent
                    ],
                    schema=wide.schema,
                ),
            ]
        )
    return _ordered(wide, cond).select(
        "target",
        "model_group",
        "prompt",
        "turns_per_call",
        "n",
        pl.exclude("target", "model_group", "prompt", "turns_per_call", "n"),
    )


def table11(f: Frames, judge: str, cond: pl.DataFrame) -> pl.DataFrame:
    """Table 11: mean occurrences per conversation of each behaviour (columns), per dataset, for
    the human reference and each multi-party setup (rows), each over its own valid judgments (n);
    a target judged (or expected) in a dataset without a valid judgment there is a row with n = 0
    and no means."""
    setups = cond.filter(pl.col("kind") == "multiparty")["setup"].to_list()
    c = f.counts.filter(
        (pl.col("judge") == judge)
        & pl.col("target").is_in([REFERENCE, *setups])
        & pl.col("instance_id").is_in(multiparty_ids(f).implode())
    )
    if c.is_empty():
        return pl.DataFrame()
    wide = (
        c.group_by("dataset", "target", "behaviour")
        .agg(mean=pl.col("count").mean(), n=pl.col("instance_id").n_unique())
        .pivot(on="behaviour", index=["dataset", "target", "n"], values="mean")
    )
    mine = (
        (pl.col("judge") == judge) & (pl.col("kind") == "fine_grained") & pl.col("target").is_in([REFERENCE, *setups])
    )
    tried = pl.concat(
        [
            f.judgments.filter(mine & (pl.col("status") != "stale")).select("target", "instance_id"),
            f.expected.filter(mine & (pl.col("stage") == "judge")).select("target", "instance_id"),
        ]
    )
    absent = (
        tried.join(f.instances.filter(~pl.col("human_ai")).select("instance_id", "dataset"), on="instance_id")
        .select("dataset", "target")
        .unique()
        .join(wide.select("dataset", "target"), on=["dataset", "target"], how="anti")
    )
    if absent.height:  # judged (or expected) in a dataset without one valid judgment there: n = 0, no mean
        wide = pl.concat([wide, absent.with_columns(n=pl.lit(0, wide["n"].dtype))], how="diagonal")
    out = _ordered(wide, cond).sort("dataset", maintain_order=True)
    return out.select(
        "dataset",
        "target",
        "model_group",
        "prompt",
        "turns_per_call",
        "n",
        *[b for b in f.taxonomy.ids if b in out.columns],
    )
