"""Turn-taking as a measured object (beyond the paper): who speaks next, how long each speaker
holds the floor, and whether each real participant is simulated as itself. Judge-free except the
per-speaker fidelity, which reads a judge's labels.

**Next-speaker accuracy, teacher-forced** (``next_speaker_frame``, ``accuracy``). For every
multi-party instance and every position t of its human reference r, each model-free rule is given
the *true* conversation so far (x, then r[:t]) and predicts the speaker of r[t]; its accuracy is
the share of positions where it names r[t]'s speaker. The rules (``POLICIES``) are the functions
``simulator: agents`` itself uses (``core.speakers``):

- ``same_as_previous``: the speaker of the last turn speaks again;
- ``most_frequent``: the speaker with the most turns so far (x and r[:t]);
- ``history`` (the history-frequency baseline, the agents' ``history`` policy): a draw from x's
  speaker transitions after the last speaker. Its accuracy at a position is the probability its
  draw names the actual speaker (the expected accuracy of the seeded draw, without its noise);
- ``round_robin``: the participant after the last speaker in M's order (the agents' policy);
- ``addressee``: the one other participant the last turn names, else the ``history`` draw (the
  agents' policy; ``addressee_named`` in the table: the share of positions where a name decided).

Chats (human–AI) are left out: a chat alternates by construction.

**Speaker agreement, free-running** (``speaker_match_frame``): what a run has for the policies
that call a model (moderator, self_selection) and for every other setup: the share of positions t
where the speaker of the setup's continuation is the speaker of r[t]. Not teacher-forced: the
continuation follows its own turns, so one early difference shifts every later position; it
measures the sequence, not the rule. The yardstick (``HISTORY``): the last |r| turns of x against
r, the humans against themselves a little earlier.

**Intervals.** Every accuracy is a ratio (positions right / positions) pooled over instances, with
a 95% bootstrap interval that resamples *source conversations* (``frames.conversation_of``: the
windows of one meeting are not independent), its percentiles centred on the estimate and widened
for few conversations (``small_sample_interval``), undefined below ``min_n`` conversations.
Coverage on worlds with a known speaker process: ``benchmarks/turn_taking.py``, figures in
docs/testing.md.

**Run lengths** (``run_length_frame``): a run is a maximal stretch of consecutive turns by one
speaker within a target's turns (the reference's or a continuation's; multi-party instances). Per target, the mean run
length (turns / runs, the conversation bootstrap as above) and the share of runs of 1, 2, 3 and 4
or more turns; per participant (by name) the same.

**Per-speaker fidelity** (``speaker_fidelity``, per LLM judge): each participant's behaviour
profile, the per-turn rate of each behaviour over the turns it speaks, in the human reference
against the same participant (same name) in a setup's continuations, on the instances where the
judge judged both validly and the participant speaks in both. The distance is the root mean
square over behaviours of the true difference of rates, estimated without the upward bias of
squared noise from products of per-instance differences of *different* source conversations
(``paired.cluster_square``), so it needs the participant in two conversations at least;
interval: the conversation bootstrap, re-centred (``paired.recentred_interval``). A
participant with fewer than ``MIN_SPEAKER_TURNS`` turns on either side, or in one conversation
only, is listed with the reason, not scored.

What the module needs of the continuations, the speaker of every turn and the self-selection
notes' counts, it reads from ``convstats.speaker_frame`` and ``self_selection_frame``: frames kept
with the run's frames (``frames.open_run_dir``), so a report on a run whose frames are kept reads
no continuation record for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from cocoeval.core.schema import Instance, Turn, is_human_ai, participant_names
from cocoeval.core.speakers import (
    history_weights,
    most_frequent,
    named_participant,
    round_robin_next,
)
from cocoeval.core.targets import REFERENCE

from . import inference
from .convstats import HISTORY, self_selection_frame, speaker_frame
from .frames import Frames, conversation_of, judges_of
from .store import derived_frame, is_own_frames

if TYPE_CHECKING:
    from .answer import Answer
    from .judge_free_prose import SpeakerAccuracy, TurnTakingMeasured
    from .store import RunLike

BEYOND = "beyond the paper"
POLICIES: dict[str, str] = {
    "same_as_previous": "same as the previous speaker",
    "most_frequent": "most frequent speaker so far",
    "history": "history-frequency draw (agents: history)",
    "round_robin": "round robin in M's order (agents: round_robin)",
    "addressee": "the participant named, else history (agents: addressee)",
}
"""The teacher-forced rules, by name: what each predicts (definitions in the module's text)."""
TEACHER_FORCED, FREE_RUNNING = "teacher-forced", "free-running (not teacher-forced)"
MIN_SPEAKER_TURNS = 5
"""Fewest turns a participant must speak in the reference and in the setup's continuations (on
the instances both have) for its fidelity to be scored."""
RUN_BUCKETS = (1, 2, 3)
"""Run lengths counted one by one in the tables; longer runs are counted together ("4+")."""

POSITION_SCHEMA: dict[str, Any] = {
    "instance_id": pl.Utf8,
    "conversation": pl.Utf8,
    "position": pl.Int64,
    "actual": pl.Utf8,
    "addressee_named": pl.Boolean,
    **{p: pl.Float64 for p in POLICIES},
}
ACCURACY_SCHEMA: dict[str, Any] = {
    "kind": pl.Utf8,
    "predictor": pl.Utf8,
    "what": pl.Utf8,
    "accuracy": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "n": pl.Int64,
    "instances": pl.Int64,
    "conversations": pl.Int64,
    "note": pl.Utf8,
}
RUNS_SCHEMA: dict[str, Any] = {
    "target": pl.Utf8,
    "instance_id": pl.Utf8,
    "conversation": pl.Utf8,
    "speaker": pl.Utf8,
    "length": pl.Int64,
}
RUN_SUMMARY_SCHEMA: dict[str, Any] = {
    "target": pl.Utf8,
    "runs": pl.Int64,
    "turns": pl.Int64,
    "mean_run": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    **{f"share_{k}": pl.Float64 for k in RUN_BUCKETS},
    f"share_{RUN_BUCKETS[-1] + 1}plus": pl.Float64,
    "longest": pl.Int64,
    "n": pl.Int64,
    "conversations": pl.Int64,
}
PER_SPEAKER_SCHEMA: dict[str, Any] = {
    "speaker": pl.Utf8,
    "target": pl.Utf8,
    "runs": pl.Int64,
    "turns": pl.Int64,
    "mean_run": pl.Float64,
    "reference_mean_run": pl.Float64,
    "instances": pl.Int64,
}
FIDELITY_SCHEMA: dict[str, Any] = {
    "judge": pl.Utf8,
    "setup": pl.Utf8,
    "speaker": pl.Utf8,
    "distance": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "ci_note": pl.Utf8,
    "turns_reference": pl.Int64,
    "turns_setup": pl.Int64,
    "n": pl.Int64,
    "conversations": pl.Int64,
    "scored": pl.Boolean,
    "reason": pl.Utf8,
}


# ---------------------------------------------------------------- next-speaker accuracy


def position_scores(inst: Instance) -> list[dict[str, Any]]:
    """One row per position t of ``inst``'s reference: the actual speaker, whether a single name
    decided the addressee rule, and per rule of ``POLICIES`` the probability it names the actual
    speaker given x and r[:t] (0 or 1 for the deterministic rules)."""
    participants = participant_names(inst)
    hist = [t.speaker for t in inst.history]
    so_far: list[Turn] = list(inst.history)
    conv = conversation_of(inst)
    rows = []
    weights: dict[str | None, dict[str, int]] = {}  # x is fixed: the weights depend on the last speaker only
    for t, turn in enumerate(inst.reference):
        actual = turn.speaker
        last = so_far[-1] if so_far else None
        who = last.speaker if last else None
        if who not in weights:
            weights[who] = history_weights(hist, who, participants)
        w = weights[who]
        p_hist = w.get(actual, 0) / sum(w.values()) if w else 0.0
        named = named_participant(last.text, last.speaker, participants) if last else None
        rows.append(
            {
                "instance_id": inst.id,
                "conversation": conv,
                "position": t,
                "actual": actual,
                "addressee_named": named is not None,
                "same_as_previous": float(last is not None and last.speaker == actual),
                "most_frequent": float(most_frequent([x.speaker for x in so_far], participants) == actual),
                "history": float(p_hist),
                "round_robin": float(round_robin_next(participants, last.speaker if last else None) == actual),
                "addressee": float(named == actual) if named is not None else float(p_hist),
            }
        )
        so_far.append(turn)
    return rows


def next_speaker_frame(instances: Sequence[Instance]) -> pl.DataFrame:
    """``position_scores`` of every multi-party instance (chats left out), one frame."""
    rows = [r for inst in instances if not is_human_ai(inst) for r in position_scores(inst)]
    return pl.DataFrame(rows, schema=POSITION_SCHEMA, orient="row") if rows else pl.DataFrame(schema=POSITION_SCHEMA)


def cluster_draws(conversations: Sequence[str], resamples: int, seed: int, *what: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, weights): each row's conversation as a code 0..C−1 (in order of first appearance)
    and (B, C) how often each bootstrap resample draws each conversation (with replacement, C per
    resample), seeded by ``seed`` and ``what`` the draws are of."""
    seen: dict[str, int] = {}
    codes = np.array([seen.setdefault(c, len(seen)) for c in conversations], dtype=np.int64)
    c = len(seen)
    if c == 0:
        return codes, np.zeros((resamples, 0))
    idx = inference.rng_for(seed, "cluster-bootstrap", *what).integers(0, c, size=(resamples, c))
    flat = (idx + np.arange(resamples)[:, None] * c).ravel()  # resample b's draws counted in row b
    return codes, np.bincount(flat, minlength=resamples * c).reshape(resamples, c).astype(np.float64)


def _per_conversation(note: str | None, clusters: int, min_n: int) -> str | None:
    """``inference.ci_notes``' note, its "n too small" said in source conversations."""
    return f"n too small ({clusters} source conversations < {min_n})" if note and "too small" in note else note


def clustered_ratio(
    hits: np.ndarray,
    conversations: Sequence[str],
    *,
    resamples: int,
    seed: int,
    min_n: int,
    what: Sequence[str] = (),
    draws: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[float | None, float | None, float | None, str | None, int]:
    """(share, ci_low, ci_high, ci_note, conversations) of ``hits`` (one value in [0, 1] per
    position): the pooled mean, and its 95% percentile interval from resampling whole
    conversations (the ratio of the drawn conversations' sums of hits to their positions);
    undefined below ``min_n`` conversations or when every resample is equal. ``draws``:
    ``cluster_draws`` of these conversations, ``what`` and seed, where the caller has them."""
    if len(hits) == 0:
        return None, None, None, "no position", 0
    codes, w = draws if draws is not None else cluster_draws(conversations, resamples, seed, *what)
    c = w.shape[1]
    sums = np.bincount(codes, weights=hits, minlength=c)
    sizes = np.bincount(codes, minlength=c).astype(np.float64)
    boot = (w @ sums) / (w @ sizes)
    note = inference.ci_notes(c, boot[:, None], min_n)[0]
    note = _per_conversation(note, c, min_n)
    point = float(hits.mean())
    lo, hi = small_sample_interval(point, boot, c, low=0.0, high=1.0)
    a, b = inference.interval(lo, hi, note)
    return point, a, b, note, c


def small_sample_interval(
    point: float, boot: np.ndarray, clusters: int, *, low: float, high: float
) -> tuple[float, float]:
    """The 95% percentile interval of the conversation-bootstrap resamples ``boot``, centred on
    ``point`` and widened for few conversations as ``paired.recentred_interval`` does (by
    √(C/(C − 1))·t_{C−1}/z: a resample's spread is the sample's with ddof 0, and Student's t for
    C conversations), then kept within [``low``, ``high``]. The plain percentile interval of 12
    conversations covers 0.90–0.92 of the time (``benchmarks/turn_taking.py``)."""
    from .paired import recentred

    if clusters < 2:
        return point, point
    lo, hi = (float(v) for v in recentred(point, boot, clusters))
    return max(low, lo), min(high, hi)


def accuracy(
    positions: pl.DataFrame, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """Teacher-forced accuracy of each rule of ``POLICIES`` over ``next_speaker_frame`` rows, with
    the conversation bootstrap's 95% interval (the same draws for every rule)."""
    inference.check_params(resamples=resamples, min_n=min_n)
    rows = []
    conv = positions["conversation"].to_list()
    named = float(positions["addressee_named"].mean()) if positions.height else None  # type: ignore[arg-type]
    draws = cluster_draws(conv, resamples, seed, "next")  # the same draws for every rule: made once
    for p, what in POLICIES.items():
        x = positions[p].to_numpy().astype(np.float64)
        acc, lo, hi, note, c = clustered_ratio(
            x, conv, resamples=resamples, seed=seed, min_n=min_n, what=["next"], draws=draws
        )
        rows.append(
            {
                "kind": TEACHER_FORCED,
                "predictor": p,
                "what": what,
                "accuracy": acc,
                "ci_low": lo,
                "ci_high": hi,
                "ci_note": note,
                "n": len(x),
                "instances": positions["instance_id"].n_unique(),
                "conversations": c,
                "note": (
                    f"a name decided {named:.0%} of the positions; the history draw the others"
                    if p == "addressee" and named is not None
                    else "expected accuracy of the seeded draw"
                    if p == "history"
                    else None
                ),
            }
        )
    return pl.DataFrame(rows, schema=ACCURACY_SCHEMA, orient="row")


def speaker_match_frame(run: RunLike) -> pl.DataFrame:
    """One row per position of every current ok continuation of a multi-party instance (target
    the setup) and of the last |r| turns of x (target ``HISTORY``): whether its speaker at t is
    the reference's speaker at t (free-running, not teacher-forced). The continuations' speakers
    come from ``convstats.speaker_frame`` (kept with the run's frames: no record read)."""
    rows: list[dict[str, Any]] = []
    refs: dict[str, list[str]] = {}
    for inst in run.instances:
        if is_human_ai(inst):
            continue
        refs[inst.id] = [t.speaker for t in inst.reference]
        turns = list(inst.history[-len(inst.reference) :])
        if len(turns) < len(inst.reference):
            continue  # x shorter than r: no yardstick for this instance
        conv = conversation_of(inst)
        rows.extend(
            {
                "target": HISTORY,
                "instance_id": inst.id,
                "conversation": conv,
                "position": k,
                "match": float(x.speaker == r),
            }
            for k, (x, r) in enumerate(zip(turns, refs[inst.id], strict=False))
        )
    schema = {
        "target": pl.Utf8,
        "instance_id": pl.Utf8,
        "conversation": pl.Utf8,
        "position": pl.Int64,
        "match": pl.Float64,
    }
    yardstick = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    ref = pl.DataFrame(
        [(iid, k, r) for iid, speakers in refs.items() for k, r in enumerate(speakers)],
        schema={"instance_id": pl.Utf8, "position": pl.Int64, "reference": pl.Utf8},
        orient="row",
    )
    sims = (  # each setup's position against the reference's, in the frame's order
        speaker_frame(run)
        .filter(pl.col("target") != REFERENCE)
        .select("target", "instance_id", "conversation", "position", "speaker")
        .with_row_index("row")
        .join(ref, on=["instance_id", "position"])
        .sort("row")
        .select(
            "target",
            "instance_id",
            "conversation",
            "position",
            match=pl.col("speaker").eq_missing(pl.col("reference")).cast(pl.Float64),
        )
    )
    return pl.concat([yardstick, sims.cast(pl.Schema(schema))])


def setup_policies(run: RunLike) -> dict[str, str]:
    """{setup: what decides its speakers}: an agents setup's policy, else how it was made."""
    out = {}
    for s in run.manifest.setup_params:
        if s.simulator == "agents":
            out[s.name] = f"agents, policy {(s.options or {}).get('policy', 'oracle')}"
        elif s.simulator:
            out[s.name] = f"plugin {s.simulator}"
        elif s.continuations:
            out[s.name] = "imported continuations"
        else:
            k = 30 if s.turns_per_call is None else s.turns_per_call
            out[s.name] = f"one LLM writes every turn ({k} per call)"
    return out


def free_running(
    matches: pl.DataFrame,
    policies: dict[str, str] | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
) -> pl.DataFrame:
    """Per target of ``speaker_match_frame``: the share of positions whose speaker is the
    reference's, with the conversation bootstrap's interval; the yardstick (``HISTORY``) first."""
    inference.check_params(resamples=resamples, min_n=min_n)
    rows = []
    names = matches["target"].unique(maintain_order=True).to_list()
    for name in sorted(names, key=lambda n: (n != HISTORY, n)):
        g = matches.filter(pl.col("target") == name)
        x = g["match"].to_numpy().astype(np.float64)
        acc, lo, hi, note, c = clustered_ratio(
            x, g["conversation"].to_list(), resamples=resamples, seed=seed, min_n=min_n, what=["match", name]
        )
        rows.append(
            {
                "kind": FREE_RUNNING,
                "predictor": name,
                "what": "the humans' own last |r| turns of x (yardstick)"
                if name == HISTORY
                else (policies or {}).get(name, "setup"),
                "accuracy": acc,
                "ci_low": lo,
                "ci_high": hi,
                "ci_note": note,
                "n": len(x),
                "instances": g["instance_id"].n_unique(),
                "conversations": c,
                "note": "position by position against r; the continuation follows its own turns",
            }
        )
    return pl.DataFrame(rows, schema=ACCURACY_SCHEMA, orient="row") if rows else pl.DataFrame(schema=ACCURACY_SCHEMA)


# ---------------------------------------------------------------- run lengths


def runs_of(turns: Sequence[Turn] | Sequence[str]) -> list[tuple[str, int]]:
    """(speaker, length) of each maximal run of consecutive turns (or their speakers) by one
    speaker, in order."""
    out: list[tuple[str, int]] = []
    for t in turns:
        speaker = t if isinstance(t, str) else t.speaker
        if out and out[-1][0] == speaker:
            out[-1] = (speaker, out[-1][1] + 1)
        else:
            out.append((speaker, 1))
    return out


def run_length_frame(run: RunLike) -> pl.DataFrame:
    """One row per run of every target of a multi-party instance (the reference, each current ok
    continuation; chats alternate by construction and are left out): target, instance_id,
    conversation, speaker, length. From ``convstats.speaker_frame`` (kept with the run's frames):
    the turns of each target in the frame's order, a run starting at each change of speaker
    (``runs_of``), in one query over every target."""
    key = ["target", "instance_id", "conversation"]
    turns = (
        speaker_frame(run)
        .select(*key, "speaker")
        .with_row_index("row")
        .with_columns(first=pl.col("row").min().over(key))
        .sort("first", "row")  # a target's turns together, the targets in order of first appearance
    )
    new = pl.col("speaker").ne_missing(pl.col("speaker").shift(1)) | pl.col("first").ne_missing(
        pl.col("first").shift(1)
    )
    return (
        turns.with_columns(run=new.cum_sum())
        .group_by("run", maintain_order=True)
        .agg(*(pl.col(c).first() for c in (*key, "speaker")), length=pl.len())
        .select(list(RUNS_SCHEMA))
        .cast(pl.Schema(RUNS_SCHEMA))
    )


def _buckets(lengths: np.ndarray) -> dict[str, float | None]:
    n = len(lengths)
    out: dict[str, float | None] = {f"share_{k}": float((lengths == k).sum() / n) if n else None for k in RUN_BUCKETS}
    out[f"share_{RUN_BUCKETS[-1] + 1}plus"] = float((lengths > RUN_BUCKETS[-1]).sum() / n) if n else None
    return out


def run_lengths(
    runs: pl.DataFrame, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """Per target (the reference first): runs, turns, the mean run length (turns / runs) with the
    conversation bootstrap's 95% interval, the share of runs of each length and the longest."""
    inference.check_params(resamples=resamples, min_n=min_n)
    rows = []
    names = runs["target"].unique(maintain_order=True).to_list()
    for name in sorted(names, key=lambda n: (n != REFERENCE, n)):
        g = runs.filter(pl.col("target") == name)
        lengths = g["length"].to_numpy()
        codes, w = cluster_draws(g["conversation"].to_list(), resamples, seed, "runs", name)
        c = w.shape[1]
        turns = np.bincount(codes, weights=lengths.astype(np.float64), minlength=c)
        count = np.bincount(codes, minlength=c).astype(np.float64)
        boot = (w @ turns) / (w @ count)
        note = inference.ci_notes(c, boot[:, None], min_n)[0]
        note = _per_conversation(note, c, min_n)
        mean_run = float(lengths.sum() / len(lengths))
        lo, hi = small_sample_interval(mean_run, boot, c, low=1.0, high=float(lengths.max()))
        a, b = inference.interval(lo, hi, note)
        rows.append(
            {
                "target": name,
                "runs": len(lengths),
                "turns": int(lengths.sum()),
                "mean_run": mean_run,
                "ci_low": a,
                "ci_high": b,
                "ci_note": note,
                **_buckets(lengths),
                "longest": int(lengths.max()),
                "n": g["instance_id"].n_unique(),
                "conversations": c,
            }
        )
    return (
        pl.DataFrame(rows, schema=RUN_SUMMARY_SCHEMA, orient="row") if rows else pl.DataFrame(schema=RUN_SUMMARY_SCHEMA)
    )


def run_lengths_per_speaker(runs: pl.DataFrame) -> pl.DataFrame:
    """Per participant (by name) and target: its runs, turns and mean run length over the
    instances, beside the same participant's mean run in the reference of the same instances."""
    if runs.is_empty():
        return pl.DataFrame(schema=PER_SPEAKER_SCHEMA)
    per = runs.group_by("target", "speaker", "instance_id").agg(runs=pl.len(), turns=pl.col("length").sum())
    ref = per.filter(pl.col("target") == REFERENCE).select(
        "speaker", "instance_id", ref_runs=pl.col("runs"), ref_turns=pl.col("turns")
    )
    out = (
        per.join(ref, on=["speaker", "instance_id"], how="left")
        .group_by("speaker", "target")
        .agg(
            runs=pl.col("runs").sum().cast(pl.Int64),
            turns=pl.col("turns").sum().cast(pl.Int64),
            instances=pl.col("instance_id").n_unique().cast(pl.Int64),
            ref_runs=pl.col("ref_runs").sum(),
            ref_turns=pl.col("ref_turns").sum(),
        )
        .select(
            "speaker",
            "target",
            "runs",
            "turns",
            mean_run=pl.col("turns") / pl.col("runs"),
            reference_mean_run=pl.when(pl.col("ref_runs") > 0).then(pl.col("ref_turns") / pl.col("ref_runs")),
            instances="instances",
        )
        .cast(pl.Schema(PER_SPEAKER_SCHEMA))
    )
    return out.sort("speaker", pl.col("target") != REFERENCE, "target")


# ---------------------------------------------------------------- per-speaker fidelity


@dataclass(frozen=True)
class SpeakerTurns:
    """One participant's turns in one target of one instance, and its per-turn behaviour rates."""

    instance_id: str
    conversation: str
    speaker: str
    turns: int
    rates: tuple[float, ...]
    """Per behaviour (the taxonomy's order): labelled turns of this speaker / its turns."""


def speaker_rates(run: RunLike, f: Frames, judge: str) -> dict[tuple[str, str], list[SpeakerTurns]]:
    """{(target, instance_id): each speaker's turns and per-turn behaviour rates} of every target
    the LLM judge ``judge`` judged validly (fine-grained) whose judged turns have a speaker: the
    targets in the order of ``convstats.speaker_frame``, each one's speakers in the order they
    first speak (``_rate_table``)."""
    groups, rates = _rate_table(run, f, judge)
    out: dict[tuple[str, str], list[SpeakerTurns]] = {}
    for (target, iid, speaker, conv, k), r in zip(
        groups.select("target", "instance_id", "speaker", "conversation", "turns").iter_rows(),
        rates.tolist(),
        strict=True,
    ):
        out.setdefault((target, iid), []).append(SpeakerTurns(iid, conv, speaker, k, tuple(r)))
    return out


def _rate_table(run: RunLike, f: Frames, judge: str) -> tuple[pl.DataFrame, np.ndarray]:
    """``speaker_rates`` as one frame and one array, in one query over every target: a row ``g``
    per (target, instance_id, speaker) with its conversation, turns and ``target_first`` (the
    target's first row in ``convstats.speaker_frame``), in ``speaker_rates``' order, and the (G, K)
    rates: the labelled (turn, behaviour) pairs of the judge (each pair once) counted over the
    speaker's judged turns, divided by its turns (as Python's int / int rounds it)."""
    behaviours = list(f.taxonomy.ids)
    key = ["target", "instance_id"]
    valid = f.counts.filter((pl.col("judge") == judge) & ~pl.col("human")).select(key).unique()
    turns = (
        speaker_frame(run)
        .filter(pl.col("judged"))
        .select(*key, "conversation", "position", "speaker")
        .with_row_index("row")
        .join(valid, on=key, how="semi")
        .sort("row")
    )
    groups = (
        turns.group_by(*key, "speaker")
        .agg(first=pl.col("row").min(), turns=pl.len().cast(pl.Int64))
        .join(
            turns.group_by(key).agg(target_first=pl.col("row").min(), conversation=pl.col("conversation").first()),
            on=key,
        )
        .sort("target_first", "first")
        .with_row_index("g")
    )
    hits = np.zeros((groups.height, len(behaviours)))
    if groups.height:
        marks = (
            f.labels.filter((pl.col("judge") == judge) & pl.col("behaviour").is_in(behaviours))
            .select(*key, pl.col("turn").alias("position"), "behaviour")
            .unique()
        )
        counts = (
            turns.join(marks, on=[*key, "position"])
            .join(groups.select(*key, "speaker", "g"), on=[*key, "speaker"])
            .group_by("g", "behaviour")
            .len()
        )
        col = {b: k for k, b in enumerate(behaviours)}
        hits[counts["g"].to_numpy(), [col[b] for b in counts["behaviour"].to_list()]] = counts["len"].to_numpy()
    return groups, hits / groups["turns"].to_numpy().astype(np.float64)[:, None]


def speaker_fidelity(
    run: RunLike,
    f: Frames,
    judges: Sequence[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
    min_turns: int = MIN_SPEAKER_TURNS,
) -> pl.DataFrame:
    """Per LLM judge, setup and participant (by name): the distance between the participant's
    per-turn behaviour rates in the reference and in the setup's continuations (see the module's
    text), or why it is not scored."""
    from .paired import cluster_square, cluster_sums, distance_of, recentred_interval

    inference.check_params(resamples=resamples, min_n=min_n)
    rows = []
    for judge in judges:
        groups, rates = _rate_table(run, f, judge)
        ref = groups.filter(pl.col("target") == REFERENCE).select(
            "instance_id", "speaker", g_ref="g", turns_ref="turns"
        )
        sims = groups.filter(pl.col("target") != REFERENCE)
        by: dict[tuple[str, str], list[tuple[str, int, int, int, int]]] = {}
        for setup, speaker, conv, g, g_ref, t_sim, t_ref in (  # the setup's instances in the frame's order
            sims.join(ref, on=["instance_id", "speaker"])
            .sort("target_first")
            .select("target", "speaker", "conversation", "g", "g_ref", "turns", "turns_ref")
            .iter_rows()
        ):
            by.setdefault((setup, speaker), []).append((conv, g, g_ref, t_sim, t_ref))
        for setup in sorted(set(sims["target"].to_list())):
            for speaker in sorted(s for t, s in by if t == setup):
                pairs = by[(setup, speaker)]
                t_ref, t_sim = sum(p[4] for p in pairs), sum(p[3] for p in pairs)
                convs = [p[0] for p in pairs]
                k = len(set(convs))
                row: dict[str, Any] = {
                    "judge": judge,
                    "setup": setup,
                    "speaker": speaker,
                    "turns_reference": t_ref,
                    "turns_setup": t_sim,
                    "n": len(pairs),
                    "conversations": k,
                }
                reason = (
                    f"too few turns (reference {t_ref}, setup {t_sim}; at least {min_turns} each)"
                    if min(t_ref, t_sim) < min_turns
                    else "in one source conversation only: the distance needs two (products across conversations)"
                    if k < 2
                    else None
                )
                if reason:
                    rows.append(
                        {
                            **row,
                            "distance": None,
                            "ci_low": None,
                            "ci_high": None,
                            "ci_note": None,
                            "scored": False,
                            "reason": reason,
                        }
                    )
                    continue
                d = rates[[p[1] for p in pairs]] - rates[[p[2] for p in pairs]]
                codes, w = cluster_draws(convs, resamples, seed, "fidelity", judge, setup, speaker)
                sums, sizes = cluster_sums(d, codes)
                square = float(cluster_square(sums, sizes))
                boot = cluster_square(sums, sizes, w)
                boot = boot[np.isfinite(boot)]
                note = inference.ci_notes(k, boot[:, None], min_n)[0] if len(boot) else "undefined in every resample"
                note = _per_conversation(note, k, min_n)
                lo, hi = recentred_interval(square, boot, k) if len(boot) else (np.nan, np.nan)
                a, b = inference.interval(float(distance_of(lo)), float(distance_of(hi)), note)
                rows.append(
                    {
                        **row,
                        "distance": float(distance_of(square)),
                        "ci_low": a,
                        "ci_high": b,
                        "ci_note": note,
                        "scored": True,
                        "reason": None,
                    }
                )
    return pl.DataFrame(rows, schema=FIDELITY_SCHEMA, orient="row") if rows else pl.DataFrame(schema=FIDELITY_SCHEMA)


def self_selection_counts(run: RunLike) -> pl.DataFrame:
    """Per ``self_selection`` agents setup: the turns an agent chose to take, the passes, the
    malformed answers (counted, never read as passes) and the turns where every agent passed
    (``convstats.self_selection_frame``: from the simulator's notes, kept with the run's frames)."""
    return self_selection_frame(run)


# ---------------------------------------------------------------- charts and the answer


def next_speaker_chart(acc: pl.DataFrame) -> Any:
    """Next-speaker accuracy (``accuracy`` and ``free_running`` rows together): one point per rule
    or setup with its 95% interval (a cross where undefined), coloured by teacher-forced or
    free-running; titled as beyond the paper."""
    import altair as alt

    from .charts import _records, _undefined, _whiskers, with_words

    d = with_words(acc.filter(pl.col("accuracy").is_not_null()), digits=3)
    order = d["predictor"].to_list()
    base = alt.Chart(_records(d)).encode(y=alt.Y("predictor:N", title=None, sort=order))
    tip = [
        alt.Tooltip("predictor:N"),
        alt.Tooltip("what:N"),
        alt.Tooltip("kind:N"),
        alt.Tooltip("accuracy:Q", format=".3f"),
        alt.Tooltip("interval:N"),
        alt.Tooltip("conversations:Q", title="source conversations"),
    ]
    pts = base.mark_point(filled=True, size=60).encode(
        x=alt.X("accuracy:Q", title="share of positions with the humans' next speaker", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("kind:N", title=None, scale=alt.Scale(domain=[TEACHER_FORCED, FREE_RUNNING])),
        tooltip=tip,
    )
    return alt.layer(
        _whiskers(base, "x"),
        pts,
        _undefined(base, "x", "accuracy", tooltip=tip),
        width=420,
        height=20 * max(1, len(order)),
        title=f"Next-speaker accuracy against the human reference ({BEYOND})",
    )


def run_length_chart(summary: pl.DataFrame) -> Any:
    """How the turns fall into runs per target (``run_lengths``): stacked shares of runs of 1, 2,
    3 and 4+ turns, the reference first; titled as beyond the paper."""
    import altair as alt

    from .charts import _records

    cols = [c for c in summary.columns if c.startswith("share_")]
    long = summary.unpivot(index=["target", "mean_run", "runs"], on=cols, variable_name="bucket", value_name="share")
    rank = {c: k for k, c in enumerate(cols)}
    long = long.with_columns(
        length=pl.col("bucket").str.replace("share_", "").str.replace("plus", "+"),
        rank=pl.col("bucket").replace_strict(rank, return_dtype=pl.Int64),
    )
    order = summary["target"].to_list()
    return (
        alt.Chart(_records(long), width=420, height=22 * max(1, len(order)))
        .mark_bar()
        .encode(
            y=alt.Y("target:N", title=None, sort=order),
            x=alt.X("share:Q", stack="normalize", title="share of runs (consecutive turns by one speaker)"),
            color=alt.Color(
                "length:N",
                title="run length (turns)",
                sort=[b.replace("share_", "").replace("plus", "+") for b in cols],
            ),
            order=alt.Order("rank:Q"),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("length:N", title="run length"),
                alt.Tooltip("share:Q", format=".3f"),
                alt.Tooltip("mean_run:Q", format=".2f", title="mean run"),
                alt.Tooltip("runs:Q"),
            ],
        )
        .properties(title=f"Run lengths, human reference and each setup ({BEYOND})")
    )


@derived_frame("next_speaker", ACCURACY_SCHEMA, lazy=True)
def next_speaker_table(
    run: RunLike, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """The next-speaker table: each rule teacher-forced (``accuracy``), then each setup
    free-running (``free_running``); that of the default settings is kept with the run's frames
    (``store.derived_frame``), so that a report reads neither the instances nor the bootstraps."""
    forced = accuracy(next_speaker_frame(run.instances), resamples=resamples, seed=seed, min_n=min_n)
    free = free_running(speaker_match_frame(run), setup_policies(run), resamples=resamples, seed=seed, min_n=min_n)
    return pl.concat([forced, free]) if not free.is_empty() else forced


@derived_frame("run_lengths", RUN_SUMMARY_SCHEMA, lazy=True)
def run_length_table(
    run: RunLike, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """``run_lengths`` of the run's targets; that of the default settings kept with the run's frames."""
    return run_lengths(run_length_frame(run), resamples=resamples, seed=seed, min_n=min_n)


@derived_frame("speaker_fidelity", FIDELITY_SCHEMA, by_taxonomy=True, lazy=True)
def speaker_fidelity_table(
    run: RunLike, f: Frames, *, resamples: int = 1000, seed: int = 0, min_n: int = inference.MIN_N
) -> pl.DataFrame:
    """``speaker_fidelity`` of every LLM judge in the frames ``f`` (``frames.judges_of``); for the
    run's own frames, that of the default settings kept with them."""
    return speaker_fidelity(run, f, judges_of(f), resamples=resamples, seed=seed, min_n=min_n)


def _fidelity(run: RunLike, f: Frames, judges: Sequence[str], *, resamples: int, seed: int, min_n: int) -> pl.DataFrame:
    """``speaker_fidelity`` of ``judges``: for the run's own frames, the rows of each from
    ``speaker_fidelity_table`` (each judge's rows are its own: its draws are seeded by its name);
    else computed for those judges alone (the table would compute every judge of ``f``)."""
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "min_n": min_n}
    if not judges or not is_own_frames(run, f) or not set(judges) <= set(judges_of(f)):
        return speaker_fidelity(run, f, judges, **kw)
    table = speaker_fidelity_table(run, f, **kw)
    return pl.concat([table.filter(pl.col("judge") == j) for j in judges])


@dataclass(frozen=True)
class TurnTakingTables:
    """The tables of ``turn_taking_answer``: next-speaker accuracy (teacher-forced rules and the
    free-running setups), run lengths per target and per participant, per-speaker fidelity per
    judge and the self-selection counts."""

    next_speaker: pl.DataFrame
    run_lengths: pl.DataFrame
    run_lengths_per_speaker: pl.DataFrame
    speaker_fidelity: pl.DataFrame
    self_selection: pl.DataFrame


def turn_taking_tables(
    run: RunLike,
    f: Frames | None,
    judges: Sequence[str] = (),
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
) -> TurnTakingTables:
    """Every table of the module for ``run`` (per-speaker fidelity for ``judges``, with ``f``)."""
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed, "min_n": min_n}
    return TurnTakingTables(
        next_speaker=next_speaker_table(run, **kw),
        run_lengths=run_length_table(run, **kw),
        run_lengths_per_speaker=run_lengths_per_speaker(run_length_frame(run)),
        speaker_fidelity=_fidelity(run, f, judges, **kw)
        if f is not None and judges
        else pl.DataFrame(schema=FIDELITY_SCHEMA),
        self_selection=self_selection_counts(run),
    )


def _accuracy(r: dict[str, Any], label: str) -> SpeakerAccuracy:
    """A row of the next-speaker table (``ACCURACY_SCHEMA``) as a result."""
    from .judge_free_prose import SpeakerAccuracy

    return SpeakerAccuracy(
        r["predictor"], label, r["what"], r["accuracy"], r["ci_low"], r["ci_high"], r["conversations"], r["ci_note"]
    )


def turn_taking_measured(t: TurnTakingTables, resamples: int, seed: int, min_n: int) -> TurnTakingMeasured:
    """The tables' result: each rule's and setup's accuracy, run lengths, self-selection counts and
    how many fidelity distances were scored."""
    from .judge_free_prose import RunLength, SelfSelectionCounts, TurnTakingMeasured
    from .rq_prose import Intervals

    forced = t.next_speaker.filter(pl.col("kind") == TEACHER_FORCED)
    free = t.next_speaker.filter(pl.col("kind") == FREE_RUNNING)
    scored = t.speaker_fidelity.filter(pl.col("scored")).height if not t.speaker_fidelity.is_empty() else 0
    return TurnTakingMeasured(
        Intervals(resamples, seed, min_n),
        TEACHER_FORCED,
        FREE_RUNNING,
        MIN_SPEAKER_TURNS,
        rules=tuple(_accuracy(r, POLICIES[r["predictor"]]) for r in forced.iter_rows(named=True)),
        setups=tuple(_accuracy(r, r["predictor"]) for r in free.iter_rows(named=True)),
        run_lengths=tuple(
            RunLength(r["target"], r["mean_run"], r["runs"], r["longest"]) for r in t.run_lengths.iter_rows(named=True)
        ),
        self_selection=tuple(
            SelfSelectionCounts(r["setup"], r["turns_chosen"], r["passes"], r["malformed"], r["all_passed"])
            for r in t.self_selection.iter_rows(named=True)
        ),
        fidelity_scored=scored,
        fidelity_unscored=t.speaker_fidelity.height - scored,
    )


def turn_taking_answer(
    run: RunLike,
    f: Frames | None,
    judges: Sequence[str] = (),
    *,
    resamples: int = 1000,
    seed: int = 0,
    min_n: int = inference.MIN_N,
) -> Answer:
    """The ``turn_taking_measured`` analysis: ``turn_taking_tables`` with their charts and the text
    rendered from ``judge_free_prose.TurnTakingMeasured``."""
    from .answer import Answer
    from .judge_free_prose import TurnTakingMeasured, render_turn_taking_measured
    from .rq_prose import Intervals

    a = Answer(
        "Who speaks next, and for how long? Turn-taking measured against the humans (beyond the paper)",
        judge_based=False,
    )
    t = turn_taking_tables(run, f, judges, resamples=resamples, seed=seed, min_n=min_n)
    if t.next_speaker["n"].sum() == 0 and t.run_lengths.is_empty():
        x = TurnTakingMeasured(
            Intervals(resamples, seed, min_n), TEACHER_FORCED, FREE_RUNNING, MIN_SPEAKER_TURNS, empty=True
        )
        a.text, a.result = render_turn_taking_measured(x), x
        return a
    a.tables.update(
        next_speaker=t.next_speaker,
        run_lengths=t.run_lengths,
        run_lengths_per_speaker=t.run_lengths_per_speaker,
        speaker_fidelity=t.speaker_fidelity,
        self_selection=t.self_selection,
    )
    x = turn_taking_measured(t, resamples, seed, min_n)
    a.text, a.result = render_turn_taking_measured(x), x
    a.charts["next_speaker"] = next_speaker_chart(t.next_speaker)
    if not t.run_lengths.is_empty():
        a.charts["run_lengths"] = run_length_chart(t.run_lengths)
    return a
