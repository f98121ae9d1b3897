"""Polars frames of a run: instances, per-conversation behaviour counts, Likert scores, turn
labels, and validity (invalid continuations and judgments). Analysis reads only these."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, cast

import polars as pl

from cocoeval.core.schema import Instance, Judgment, conversation_of, is_human_ai, unknown_speaker_turns
from cocoeval.core.targets import (
    NO_TURNS,
    REFERENCE,
    behaviour_counts,
    judged_turns,
    unknown_behaviour,
)
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.run.rundir import UNKNOWN_INSTANCE

from . import convstats, documents  # noqa: F401  (they register derived frames: store.DERIVED)
from .coverage import run_facts
from .store import (
    DerivedFrame,
    RunLike,
    RunStore,
    derived_facts,
    frames_key,
    held_folder,
    keep_all,
    kept_frame,
    made_once,
    per_run,
    register_frame,
    register_frames_maker,
)

T = TypeVar("T")

HUMAN = "human reference"
"""How the human reference is labelled in tables and figures."""
NOT_SIMULATED = "not simulated"
"""Why an expected continuation is missing: the setup selects the instance, the run directory has
no continuation of it (the simulate stage was killed, failed or not run)."""
NOT_JUDGED = "not judged"
"""Why an expected judgment is missing: its target exists (the reference, or the setup's current
ok continuation) but no judgment of it does (the judge stage was killed, failed or not run; or
only a stale judgment, of an earlier continuation, exists)."""
NO_CONTINUATION = "no continuation"
"""Why an expected judgment of a setup is missing: the setup has no ok continuation of the
instance (it is invalid, or was never simulated: see the simulate rows), so there is nothing to
judge. Counted in ``missing`` and, apart, in ``no_continuation``."""
NOT_NEEDED = "not needed"
"""Why an expected continuation or judgment does not exist and is no failure: the run's
``stopping:`` rule stopped the setup before the instance's round (``not needed: stopped at round
k``), or every setup stopped before it (the reference's judgments). Never counted in ``missing``."""
NO_SCORE = "overall judgment without a consistency or collaborativeness score"
"""Why a usable-looking (ok or repaired) overall judgment is counted invalid: it lacks a score."""
EXPECTED_SCHEMA = {
    "stage": pl.Utf8,
    "judge": pl.Utf8,
    "target": pl.Utf8,
    "kind": pl.Utf8,
    "instance_id": pl.Utf8,
    "reason": pl.Utf8,
}


@dataclass(frozen=True)
class Frames:
    """The run's frames for one taxonomy (``run_frames``); frozen, so that frames the memo holds as
    the run's own (``store.is_own_frames``) are never changed in place (derive others with
    ``dataclasses.replace``)."""

    instances: pl.DataFrame
    """instance_id, dataset, conversation (the source conversation the instance was cut from,
    ``conversation_of``: the unit a clustered bootstrap resamples, since the windows of one meeting
    are not independent), n_participants (distinct speakers in x and r), n_participants_metadata
    (participants of the whole conversation listed in M), n_turns, human_ai (a human–AI chat,
    ``schema.is_human_ai``)."""
    counts: pl.DataFrame
    """judge, human (annotator), target, instance_id, dataset, behaviour, category, count:
    one row per valid fine-grained judgment and behaviour (invalid ones are absent, never 0)."""
    likert: pl.DataFrame
    """judge, human, target, instance_id, dataset, consistency, collaborativeness (valid only)."""
    labels: pl.DataFrame
    """judge, target, instance_id, turn (the target's turn index), position (its place among the
    judged turns: in a human–AI chat only the user turns are judged, so turn 4 is position 2),
    behaviour, evidence: one row per detected behaviour."""
    judgments: pl.DataFrame
    """judge, human, target, instance_id, kind, status (ok, repaired, invalid, skipped: its target
    has no turn to judge, reason ``NO_TURNS`` — or stale: of a continuation that is not the setup's
    current ok one, or of an instance not in instances.jsonl; skipped and stale are never counted;
    an ok overall judgment without a score is
    invalid, ``NO_SCORE``, as is one labelled with an id the taxonomy lacks,
    ``targets.unknown_behaviour``), reason, turns (labelled), not_in_taxonomy
    (turns an annotator marked with a behaviour the taxonomy lacks): every judgment, valid or not."""
    continuations: pl.DataFrame
    """setup, instance_id, dataset, status (ok, invalid, or stale: simulated with other settings
    than the manifest's setup id, or of an instance not in instances.jsonl, ``UNKNOWN_INSTANCE``;
    never counted), reason, turns (how many it has), unknown_speaker_turns (how many of them are
    by speakers who are not the instance's participants, ``schema.unknown_speaker_turns``; null
    for an instance not in instances.jsonl): every continuation (one marked ok with another number
    of turns than its reference is read as invalid: ``Run.open``)."""
    taxonomy: Taxonomy
    expected: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EXPECTED_SCHEMA))
    """stage (simulate or judge), judge, target, kind, instance_id, reason: one row per continuation
    and LLM judgment the run's params (the manifest) say should exist: each setup's selected
    instances (``Setup.select``); for each judge, each kind it makes and each instance it selects
    (``JudgeConfig.select``), the reference and every setup that selects the instance. ``reason``
    is null when it exists (a judgment of a stale continuation does not), else why it is missing:
    ``NOT_SIMULATED``, ``NOT_JUDGED`` or ``NO_CONTINUATION``. Setups and judges the params do not
    name, human annotators, and a run without params in its manifest have no expected rows: their
    ``missing`` is unknown (null), never 0."""

    @property
    def missing(self) -> pl.DataFrame:
        """The expected continuations and judgments absent from the run directory, with why (not
        those a stopping rule made unneeded: ``NOT_NEEDED``)."""
        return self.expected.filter(pl.col("reason").is_not_null() & ~pl.col("reason").str.starts_with(NOT_NEEDED))


def _df(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


_s, _b, _i64 = pl.Utf8, pl.Boolean, pl.Int64
FRAME_SCHEMAS: dict[str, dict[str, Any]] = {
    "instances": {
        "instance_id": _s,
        "dataset": _s,
        "conversation": _s,
        "n_participants": _i64,
        "n_participants_metadata": _i64,
        "n_turns": _i64,
        "human_ai": _b,
    },
    "counts": {
        "judge": _s,
        "human": _b,
        "target": _s,
        "instance_id": _s,
        "dataset": _s,
        "behaviour": _s,
        "category": _s,
        "count": _i64,
    },
    "likert": {
        "judge": _s,
        "human": _b,
        "target": _s,
        "instance_id": _s,
        "dataset": _s,
        "consistency": _i64,
        "collaborativeness": _i64,
    },
    "labels": {
        "judge": _s,
        "target": _s,
        "instance_id": _s,
        "turn": _i64,
        "position": _i64,
        "behaviour": _s,
        "evidence": _s,
    },
    "judgments": {
        "judge": _s,
        "human": _b,
        "target": _s,
        "instance_id": _s,
        "kind": _s,
        "status": _s,
        "reason": _s,
        "turns": _i64,
        "not_in_taxonomy": _i64,
    },
    "continuations": {
        "setup": _s,
        "instance_id": _s,
        "dataset": _s,
        "status": _s,
        "reason": _s,
        "turns": _i64,
        "unknown_speaker_turns": _i64,
    },
    "expected": EXPECTED_SCHEMA,
}
"""The columns of each frame (``Frames``), in order."""


def open_run_dir(path: str | Path, taxonomy: Taxonomy | None = None) -> RunStore:
    """The run directory as a ``RunStore`` (``RunStore.open_kept``): opened once per process
    while its files are unchanged, its frames for ``taxonomy`` (default: the shipped one) and its
    derived frames and facts kept beside it in its ``CACHE_DIR`` on the first opening of its
    content, read from there afterwards (no record read). This module and those it imports
    register what is kept (``Frames``' frames here, the derived frames of ``convstats`` and
    ``documents``, the coverage facts): open runs through here, so that every registration is
    made first."""
    return RunStore.open_kept(path, taxonomy or load_taxonomy())


def keep_frames(path: str | Path) -> Path | None:
    """What ``cocoeval run`` does last: read the run directory it wrote and keep its frames
    (``open_run_dir``) and the tables made from them (``store.keep_all``), so that the first
    report or notebook after the run reads them instead of every record. The folder they are
    kept in; None where nothing could be kept (a run folder that cannot be written)."""
    tax = load_taxonomy()
    run = open_run_dir(path, tax)
    keep_all(run, tax)
    return held_folder(run)


def run_frames(run: RunLike, taxonomy: Taxonomy | None = None) -> Frames:
    """The frames of a run, made once per run and taxonomy in a process (``per_run``: invalidated
    when the run's files change). For the store ``open_run_dir`` holds, the frames kept beside
    the run are read instead, when they are there (one that cannot be read: all made again)."""
    tax = taxonomy or load_taxonomy()
    return per_run(run, frames_key(tax), lambda: _kept_frames(run, tax))


register_frames_maker(run_frames)  # what the tables kept per taxonomy are made from (store.derived_frame)


log = logging.getLogger(__name__)
_FRAME_NAMES = [f.name for f in fields(Frames) if f.name != "taxonomy"]


def _kept_frames(run: RunLike, tax: Taxonomy) -> Frames:
    """The frames ``open_run_dir`` kept for ``run`` (the object it holds: one opened otherwise
    may have been changed in place before its first frames), else made (``_run_frames``)."""
    kept = {n: kept_frame(run, n, FRAME_SCHEMAS[n], tax) for n in _FRAME_NAMES}
    if all(df is not None for df in kept.values()):
        return Frames(taxonomy=tax, **cast("dict[str, pl.DataFrame]", kept))
    return _run_frames(run, tax)


def _frame_of(name: str) -> DerivedFrame:
    """The run's frame ``name`` (a field of ``Frames``) as the store keeps it: taken from
    ``run_frames`` (made once for all of them)."""

    def make(run: RunLike, tax: Taxonomy | None) -> pl.DataFrame:
        return cast(pl.DataFrame, getattr(run_frames(run, tax), name))

    make.__qualname__ = f"run_frames.{name}"
    return DerivedFrame(name, FRAME_SCHEMAS[name], make, required=True, by_taxonomy=True)


for _name in _FRAME_NAMES:
    register_frame(_frame_of(_name))
derived_facts("coverage")(run_facts)


def _run_frames(run: RunLike, tax: Taxonomy) -> Frames:
    cat = {b.id: b.category for b in tax.behaviours}
    insts = {i.id: i for i in run.instances}
    inst_rows = [
        {
            "instance_id": i.id,
            "dataset": i.dataset,
            "conversation": conversation_of(i),
            "n_participants": len({t.speaker for t in [*i.history, *i.reference]}),
            "n_participants_metadata": len(i.metadata.participants) or None,  # none listed: unknown
            "n_turns": len(i.reference),
            "human_ai": is_human_ai(i),
        }
        for i in run.instances
    ]
    # a continuation's judgment counts only while it judges the setup's current ok continuation:
    # after a setup's settings change (a new setup id) the old judgments are stale, never counted
    # and a continuation or judgment made with other settings than the run's params now give
    # (the manifest's setup and judge ids) is stale: never counted under the new settings
    current = {
        (name, c.instance_id): c.setup_id
        for name, cs in run.continuations.items()
        for c in cs
        if c.status == "ok" and not run.stale_reason(name, c)
    }
    counts, likert, labels, judg = [], [], [], []
    for name, js in run.all_judgments.items():
        for j in js:
            judge = j.judge_name or name
            human = j.judge_id.startswith("human:")
            target = j.target_name or j.target
            if j.instance_id not in insts:  # listed stale (Run.integrity_warnings says so), never counted
                judg.append(
                    {
                        "judge": judge,
                        "human": human,
                        "target": target,
                        "instance_id": j.instance_id,
                        "kind": j.kind,
                        "status": "stale",
                        "reason": UNKNOWN_INSTANCE,
                        "turns": len(j.labels),
                        "not_in_taxonomy": sum(1 for lb in j.labels if lb.not_in_taxonomy),
                    }
                )
                continue
            ds = insts[j.instance_id].dataset
            status: str  # the judgment's, or stale/skipped here
            status, reason = j.status, j.reason
            old = None if human else run.stale_reason(name, j)
            if old or (j.target != REFERENCE and current.get((target, j.instance_id)) != j.target):
                status, reason = "stale", old or "judges a continuation that is no longer the setup's current ok one"
            elif _nothing_judged(j, insts[j.instance_id]):
                status, reason = "skipped", NO_TURNS
            elif j.kind == "overall" and status != "invalid" and None in (j.consistency, j.collaborativeness):
                status, reason = "invalid", NO_SCORE  # a mean over a missing score is no number
            elif status != "invalid" and (unknown := unknown_behaviour(j, tax)):
                status, reason = "invalid", unknown  # counted without that label it would be a wrong count
            judg.append(
                {
                    "judge": judge,
                    "human": human,
                    "target": target,
                    "instance_id": j.instance_id,
                    "kind": j.kind,
                    "status": status,
                    "reason": reason,
                    "turns": len(j.labels),
                    "not_in_taxonomy": sum(1 for lb in j.labels if lb.not_in_taxonomy),
                }
            )
            if status in ("invalid", "stale", "skipped"):
                continue
            if j.kind == "overall":
                likert.append(
                    {
                        "judge": judge,
                        "human": human,
                        "target": target,
                        "instance_id": j.instance_id,
                        "dataset": ds,
                        "consistency": j.consistency,
                        "collaborativeness": j.collaborativeness,
                    }
                )
                continue
            for bid, c in (behaviour_counts(j, tax) or {}).items():
                counts.append(
                    {
                        "judge": judge,
                        "human": human,
                        "target": target,
                        "instance_id": j.instance_id,
                        "dataset": ds,
                        "behaviour": bid,
                        "category": cat[bid],
                        "count": c,
                    }
                )
            for pos, lb in enumerate(j.labels):
                for bid in lb.behaviours:
                    labels.append(
                        {
                            "judge": judge,
                            "target": target,
                            "instance_id": j.instance_id,
                            "turn": lb.turn,
                            "position": pos,
                            "behaviour": bid,
                            "evidence": lb.evidence.get(bid, ""),
                        }
                    )
    conts = [
        {
            "setup": name,
            "instance_id": c.instance_id,
            "dataset": insts[c.instance_id].dataset if c.instance_id in insts else None,
            **(
                {"status": "stale", "reason": old}
                if (old := run.stale_reason(name, c) or (None if c.instance_id in insts else UNKNOWN_INSTANCE))
                else {"status": c.status, "reason": c.reason}
            ),
            "turns": len(c.turns),
            "unknown_speaker_turns": len(unknown_speaker_turns(insts[c.instance_id], c.turns))
            if c.instance_id in insts
            else None,
        }
        for name, cs in run.continuations.items()
        for c in cs
    ]
    return Frames(
        taxonomy=tax,
        expected=_df(_expected(run, set(current), judg), EXPECTED_SCHEMA),
        **{
            n: _df(rows, FRAME_SCHEMAS[n])
            for n, rows in (
                ("instances", inst_rows),
                ("counts", counts),
                ("likert", likert),
                ("labels", labels),
                ("judgments", judg),
                ("continuations", conts),
            )
        },
    )


def judges_of(f: Frames) -> list[str]:
    """The LLM judges with fine-grained judgments in the run or expected by its params."""
    fg = pl.col("kind") == "fine_grained"
    names = (
        f.counts.filter(~pl.col("human"))["judge"].to_list()
        + f.judgments.filter(~pl.col("human") & fg & (pl.col("status") != "stale"))["judge"].to_list()
        + f.expected.filter((pl.col("stage") == "judge") & fg)["judge"].to_list()
    )
    return sorted({x for x in names if x is not None})


def setups_of(f: Frames, cond: pl.DataFrame | None) -> list[str]:
    """Every setup: the manifest's, then any other with continuations or judgments."""
    named = cond["setup"].to_list() if cond is not None else []
    seen = set(f.continuations["setup"].to_list()) | set(f.judgments["target"].to_list()) - {REFERENCE}
    return [*named, *sorted(seen - set(named))]


def _nothing_judged(j: Judgment, inst: Instance) -> bool:
    """A judgment of a target with no turn to judge: recorded so by the judge (``NO_TURNS``), a
    reference without a judged turn, or a fine-grained judgment that labelled no turn (an older
    run's valid all-zero judgment of an empty target) — never a valid zero."""
    if j.reason == NO_TURNS or (j.target == REFERENCE and not judged_turns(inst, inst.reference)):
        return True
    return j.kind == "fine_grained" and j.status != "invalid" and not j.labels and not j.judged_turns


def _expected(run: RunLike, ok: set[tuple[str, str]], judged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``Frames.expected``: what the params say should exist, and whether it does (``ok``: the
    (setup, instance) pairs with a current ok continuation; ``judged``: the judgments frame's rows)."""
    setups = run.setup_configs() or []
    judges = run.judge_configs() or []
    simulated = {
        (name, c.instance_id) for name, cs in run.continuations.items() for c in cs if not run.stale_reason(name, c)
    }
    have = {(r["judge"], r["target"], r["instance_id"], r["kind"]) for r in judged if r["status"] != "stale"}
    chosen = {s.name: {i.id for i in s.select(run.instances)} for s in setups}
    unneeded = _not_needed(run, setups)
    rows = [
        {
            "stage": "simulate",
            "judge": None,
            "target": s.name,
            "kind": None,
            "instance_id": i.id,
            "reason": None if (s.name, i.id) in simulated else unneeded.get((s.name, i.id), NOT_SIMULATED),
        }
        for s in setups
        for i in run.instances
        if i.id in chosen[s.name]
    ]
    for j in judges:
        for inst in j.select(run.instances):
            for t in [REFERENCE, *(s.name for s in setups if inst.id in chosen[s.name])]:
                for k in j.kind:
                    reason = (
                        None
                        if (j.name, t, inst.id, k) in have
                        else unneeded.get(
                            (t, inst.id),
                            NO_CONTINUATION if t != REFERENCE and (t, inst.id) not in ok else NOT_JUDGED,
                        )
                    )
                    rows.append(
                        {
                            "stage": "judge",
                            "judge": j.name,
                            "target": t,
                            "kind": k,
                            "instance_id": inst.id,
                            "reason": reason,
                        }
                    )
    return rows


def _not_needed(run: RunLike, setups: list[Any]) -> dict[tuple[str, str], str]:
    """{(setup or the reference, instance id): why it is not needed} for a run whose ``stopping:``
    rule stopped setups before some rounds (``NOT_NEEDED``): a setup's instances after its last
    round, and the reference of instances no setup reached."""
    from cocoeval.run.stopping import StoppingSection, processed_instances

    rec = run.manifest.stopping
    sec = run.manifest.params.stopping
    if rec is None or sec is None:
        return {}
    section = StoppingSection.model_validate(sec)
    out: dict[tuple[str, str], str] = {}
    reached: set[str] = set()
    for s in setups:
        stop = rec.setups.get(s.name)
        if stop is None or stop.status not in ("differs", "precise"):
            reached |= {i.id for i in run.instances}
            continue
        done = processed_instances(run.instances, section, stop.conversations)
        reached |= done
        why = f"{NOT_NEEDED}: {s.name} stopped at round {stop.round} ({stop.status})"
        out.update({(s.name, i.id): why for i in run.instances if i.id not in done})
    last = max((x.round for x in rec.setups.values()), default=0)
    out.update(
        {
            (REFERENCE, i.id): f"{NOT_NEEDED}: every setup stopped by round {last}"
            for i in run.instances
            if i.id not in reached
        }
    )
    return out


RATE_COLUMNS = [
    "stage",
    "judge",
    "target",
    "kind",
    "n",
    "invalid",
    "skipped",
    "stale",
    "missing",
    "no_continuation",
    "invalid_rate",
    "unknown_speaker_share",
]


def invalid_rates(f: Frames) -> pl.DataFrame:
    """Per setup (stage simulate) and per judge, target and kind (stage judge): ``n`` continuations
    or judgments present (stale ones excluded), of which ``invalid`` could not be used and
    ``skipped`` had no turn to judge (``NO_TURNS``); ``stale`` continuations and judgments made
    with other settings than the manifest's ids, and judgments of a continuation that is no
    longer the setup's current ok one; ``missing``: expected by the run's params but absent
    (``Frames.expected``; null where the params say nothing: a human annotator, a setup or judge
    they do not name), of which ``no_continuation`` are judgments of a setup with no ok
    continuation of the instance (invalid or never simulated). ``invalid_rate`` = invalid / (n −
    skipped): the share of the judgments that had something to judge which could not be used (null
    when there is none; a skipped item was never sent, so it dilutes no rate). Skipped, stale and
    missing items are in no mean. ``unknown_speaker_share`` (stage simulate): the share of the
    turns of a setup's continuations (stale ones excluded, invalid ones in) said by speakers who
    are not the instance's participants (``schema.unknown_speaker_turns``); a continuation where it
    is above ``simulate.validity.MAX_UNKNOWN_SPEAKER_SHARE`` is invalid. Null for judgments, and
    where there is no turn."""
    return made_once(f, ("invalid_rates",), lambda: _invalid_rates(f))  # the report and two analyses ask


def _invalid_rates(f: Frames) -> pl.DataFrame:
    i64, status = pl.Int64, pl.col("status")
    st = status == "stale"
    turns = pl.col("turns").filter(~st & pl.col("unknown_speaker_turns").is_not_null())
    c = (
        f.continuations.group_by("setup")
        .agg(
            n=(~st).sum(),
            invalid=(status == "invalid").sum(),
            stale=st.sum(),
            unknown=pl.col("unknown_speaker_turns").filter(~st).sum(),
            all_turns=turns.sum(),
        )
        .rename({"setup": "target"})
        .with_columns(
            stage=pl.lit("simulate"),
            judge=pl.lit(None, pl.Utf8),
            kind=pl.lit(None, pl.Utf8),
            skipped=pl.lit(0),
            unknown_speaker_share=pl.when(pl.col("all_turns") > 0).then(pl.col("unknown") / pl.col("all_turns")),
        )
    )
    share = c.select(pl.lit("simulate").alias("stage"), "target", "unknown_speaker_share")
    j = (
        f.judgments.group_by("judge", "target", "kind")
        .agg(n=(~st).sum(), invalid=(status == "invalid").sum(), skipped=(status == "skipped").sum(), stale=st.sum())
        .with_columns(stage=pl.lit("judge"))
    )
    keys = ["stage", "judge", "target", "kind"]
    present = pl.concat(
        [x.select(*keys, *[pl.col(k).cast(i64) for k in ("n", "invalid", "skipped", "stale")]) for x in (c, j)]
    )
    reason = pl.col("reason")
    exp = f.expected.group_by(keys).agg(
        missing=(reason.is_not_null() & ~reason.str.starts_with(NOT_NEEDED)).sum().cast(i64),
        no_continuation=(reason == NO_CONTINUATION).sum().cast(i64),
    )
    out = present.join(exp, on=keys, how="full", coalesce=True, nulls_equal=True).with_columns(
        [pl.col(k).fill_null(0) for k in ("n", "invalid", "skipped", "stale")]
    )
    out = out.with_columns(
        no_continuation=pl.when(pl.col("stage") == "judge").then(pl.col("no_continuation")),
        invalid_rate=pl.when(pl.col("n") > pl.col("skipped")).then(
            pl.col("invalid") / (pl.col("n") - pl.col("skipped"))
        ),
    )
    out = out.join(share, on=["stage", "target"], how="left").with_columns(
        pl.col("unknown_speaker_share").cast(pl.Float64)
    )
    return out.select(RATE_COLUMNS).sort(keys, nulls_last=True)


def validity_note(f: Frames, judge: str, target: str, kind: str = "fine_grained") -> str:
    """How many of ``judge``'s ``kind`` judgments of ``target`` are valid, and why the others are
    not (stale ones excluded): the reason a statistic over them has fewer instances, or none."""
    j = f.judgments.filter(
        (pl.col("judge") == judge)
        & (pl.col("target") == target)
        & (pl.col("kind") == kind)
        & (pl.col("status") != "stale")
    )
    what = kind.replace("_", "-")
    if j.is_empty():
        return f"{target}: no {what} judgment by {judge}"
    st = j["status"]
    bad = [f"{int((st == x).sum())} {x}" for x in ("invalid", "skipped") if (st == x).any()]
    return f"{target}: {int(st.is_in(['ok', 'repaired']).sum())} of {j.height} {what} judgments by {judge} valid" + (
        f" ({', '.join(bad)})" if bad else ""
    )
