"""Polars frames of a run: instances, per-conversation behaviour counts, Likert scores, turn
labels, and validity (invalid continuations and judgments). Analysis reads only these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from .judge import behaviour_counts
from .schema import is_human_ai
from .taxonomy import Taxonomy, load_taxonomy

if TYPE_CHECKING:
    from .run import Run

REFERENCE = "reference"
HUMAN = "human reference"
"""How the human reference is labelled in tables and figures."""


@dataclass
class Frames:
    instances: pl.DataFrame
    """instance_id, dataset, n_participants (distinct speakers in x and r), n_participants_metadata
    (participants of the whole conversation listed in M), n_turns, human_ai (a human–AI chat,
    ``schema.is_human_ai``)."""
    counts: pl.DataFrame
    """judge, human (annotator), target, instance_id, dataset, behaviour, category, count:
    one row per valid fine-grained judgment and behaviour (invalid ones are absent, never 0)."""
    likert: pl.DataFrame
    """judge, human, target, instance_id, dataset, consistency, collaborativeness (valid only)."""
    labels: pl.DataFrame
    """judge, target, instance_id, turn, behaviour, evidence: one row per detected behaviour."""
    judgments: pl.DataFrame
    """judge, human, target, instance_id, kind, status (ok, repaired, invalid, or stale: of a
    continuation that is not the setup's current ok one — never counted), reason, turns (labelled), not_in_taxonomy
    (turns an annotator marked with a behaviour the taxonomy lacks): every judgment, valid or not."""
    continuations: pl.DataFrame
    """setup, instance_id, dataset, status, reason: every continuation."""
    taxonomy: Taxonomy


def _df(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def run_frames(run: Run, taxonomy: Taxonomy | None = None) -> Frames:
    """Build the frames from ``Run.open(run_dir)``."""
    tax = taxonomy or load_taxonomy()
    cat = {b.id: b.category for b in tax.behaviours}
    insts = {i.id: i for i in run.instances}
    inst_rows = [{"instance_id": i.id, "dataset": i.dataset,
                  "n_participants": len({t.speaker for t in [*i.history, *i.reference]}),
                  "n_participants_metadata": len(i.metadata.participants) or None,  # none listed: unknown
                  "n_turns": len(i.reference), "human_ai": is_human_ai(i)} for i in run.instances]
    # a continuation's judgment counts only while it judges the setup's current ok continuation:
    # after a setup's settings change (a new setup id) the old judgments are stale, never counted
    current = {(name, c.instance_id): c.setup_id for name, cs in run.continuations.items()
               for c in cs if c.status == "ok"}
    counts, likert, labels, judg = [], [], [], []
    for name, js in run.all_judgments.items():
        for j in js:
            if j.instance_id not in insts:
                continue
            judge = j.judge_name or name
            human = j.judge_id.startswith("human:")
            target = j.target_name or j.target
            ds = insts[j.instance_id].dataset
            status, reason = j.status, j.reason
            if j.target != REFERENCE and current.get((target, j.instance_id)) != j.target:
                status, reason = "stale", "judges a continuation that is no longer the setup's current ok one"
            judg.append({"judge": judge, "human": human, "target": target, "instance_id": j.instance_id,
                         "kind": j.kind, "status": status, "reason": reason, "turns": len(j.labels),
                         "not_in_taxonomy": sum(1 for lb in j.labels if lb.not_in_taxonomy)})
            if status in ("invalid", "stale"):
                continue
            if j.kind == "overall":
                likert.append({"judge": judge, "human": human, "target": target, "instance_id": j.instance_id,
                               "dataset": ds, "consistency": j.consistency, "collaborativeness": j.collaborativeness})
                continue
            for b, c in (behaviour_counts(j, tax) or {}).items():
                counts.append({"judge": judge, "human": human, "target": target, "instance_id": j.instance_id,
                               "dataset": ds, "behaviour": b, "category": cat[b], "count": c})
            for lb in j.labels:
                for b in lb.behaviours:
                    labels.append({"judge": judge, "target": target, "instance_id": j.instance_id,
                                   "turn": lb.turn, "behaviour": b, "evidence": lb.evidence.get(b, "")})
    conts = [{"setup": name, "instance_id": c.instance_id,
              "dataset": insts[c.instance_id].dataset if c.instance_id in insts else None,
              "status": c.status, "reason": c.reason}
             for name, cs in run.continuations.items() for c in cs]
    s, b, i64 = pl.Utf8, pl.Boolean, pl.Int64
    return Frames(
        instances=_df(inst_rows, {"instance_id": s, "dataset": s, "n_participants": i64,
                                  "n_participants_metadata": i64, "n_turns": i64, "human_ai": b}),
        counts=_df(counts, {"judge": s, "human": b, "target": s, "instance_id": s, "dataset": s,
                            "behaviour": s, "category": s, "count": i64}),
        likert=_df(likert, {"judge": s, "human": b, "target": s, "instance_id": s, "dataset": s,
                            "consistency": i64, "collaborativeness": i64}),
        labels=_df(labels, {"judge": s, "target": s, "instance_id": s, "turn": i64, "behaviour": s, "evidence": s}),
        judgments=_df(judg, {"judge": s, "human": b, "target": s, "instance_id": s, "kind": s, "status": s,
                             "reason": s, "turns": i64, "not_in_taxonomy": i64}),
        continuations=_df(conts, {"setup": s, "instance_id": s, "dataset": s, "status": s, "reason": s}),
        taxonomy=tax,
    )


def invalid_rates(f: Frames) -> pl.DataFrame:
    """Invalid continuations per setup and invalid judgments per judge, target and kind; ``stale``
    counts judgments of a continuation that is no longer the setup's current ok one (excluded
    from ``n``, ``invalid`` and every mean)."""
    c = (f.continuations.group_by("setup").agg(n=pl.len(), invalid=(pl.col("status") == "invalid").sum())
         .with_columns(stage=pl.lit("simulate"), judge=pl.lit(None, pl.Utf8), kind=pl.lit(None, pl.Utf8))
         .rename({"setup": "target"}))
    c = c.with_columns(stale=pl.lit(0, pl.UInt32))
    st = pl.col("status") == "stale"
    j = (f.judgments.group_by("judge", "target", "kind")
         .agg(n=(~st).sum(), invalid=(pl.col("status") == "invalid").sum(), stale=st.sum())
         .with_columns(stage=pl.lit("judge")))
    cols = ["stage", "judge", "target", "kind", "n", "invalid", "stale"]
    out = pl.concat([c.select(cols), j.select(cols)], how="vertical_relaxed")
    return out.with_columns(invalid_rate=pl.col("invalid") / pl.col("n")).sort("stage", "judge", "target", "kind",
                                                                                  nulls_last=True)
