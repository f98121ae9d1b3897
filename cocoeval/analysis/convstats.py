"""Judge-free conversation statistics: what can be measured on the turns themselves, with no
model and no judge. Pure functions on turns give one row per conversation; ``conversation_frame``
builds that frame for every target of a run (the human reference of each instance and every ok
continuation). Comparisons with intervals and tests are in ``convcompare``.

**Tokens.** ``tokens(text)`` lowercases the text and takes the words of the regular expression
``[a-z0-9]+(?:'[a-z0-9]+)*`` (letters and digits, with inner apostrophes: "don't" is one token;
punctuation, "{vocalsound}" braces and hyphens separate tokens: "mm-hmm" is "mm", "hmm").

**Which turns.** Per-turn statistics are taken over the *scored* turns: every turn of the target,
except in chats (human-AI), where only the user turns count, as for the judges (``judge.judged_turns``).
Structure statistics (speakers, balance, switches, runs) use every turn of the target. "Earlier in
the conversation" means the history x and the target's turns before this one.

**Undefined, never zero.** A statistic that cannot be computed for a conversation (no question, no
turn long enough for an n-gram, no goals, a single turn for a switch rate...) is ``None`` (null in
the frame) and is left out of that statistic's means, which say how many conversations were left
out (``undefined``). Invalid continuations have no turns and no row; ``frames.invalid_rates``
counts them.

Each statistic (``STATISTICS``; every rate is between 0 and 1):

- ``turns``: turns in the target.
- ``tokens_per_turn``: mean tokens per scored turn.
- ``speakers``: distinct speakers in the target.
- ``balance``: participation balance, the Shannon entropy of the speakers' shares of the target's
  tokens divided by log P, P = the instance's participants (distinct speakers of x and r, or more
  if the target has more): 1 = every participant says as much, 0 = one person speaks. Undefined
  when P < 2 or the target has no tokens.
- ``switch_rate``: share of consecutive turn pairs where the speaker changes (undefined below 2 turns).
- ``mean_run``: mean length, in turns, of the maximal runs of consecutive turns by one speaker.
- ``rep_self`` / ``rep_any``: lexical repetition, the mean over scored turns of the share of a
  turn's word ``NGRAM``-grams (trigrams) that were already said earlier in the conversation by the
  same speaker / by anyone. Turns shorter than ``NGRAM`` tokens have no n-gram and are left out.
- ``distinct_1`` / ``distinct_2``: distinct unigrams (bigrams, within turns) over all unigrams
  (bigrams) of the scored turns. Longer texts score lower by construction: compare like lengths.
- ``question_share``: share of scored turns that are questions (the text contains "?").
- ``answered_share``: share of scored questions followed by an *answer-like turn*: the next turn
  of the target is by another speaker and is not itself a question. A question in the last turn
  has no next turn and is left out; undefined without such a question.
- ``backchannel_share``: share of scored turns that are very short or backchannels: at most
  ``SHORT_TOKENS`` (2) tokens, or only words of ``BACKCHANNEL`` ("yeah okay right").
- ``goal_overlap``: lexical overlap with the goals, the mean over scored turns of the share of a
  turn's content tokens (at least ``CONTENT_MIN_CHARS``, 4, characters) that occur in the instance's
  goals (metadata M). Undefined without goals; turns without content tokens are left out.

**Turn-taking realism** (``turn_taking_frame``, ``TURN_TAKING``), measured between a continuation
and the human reference of its own instance (every turn of both, chats included):

- ``transition_distance``: who speaks after whom. A conversation's speaker transitions are the
  pairs (speaker of turn i, speaker of turn i + 1) over its turns, preceded by the last turn of
  the history x (so the first turn's speaker counts too; same-speaker pairs included); their
  distribution is each pair's share. The distance is the total variation between the
  continuation's and the reference's distributions, ½ Σ |p − q| over every pair: 0 = the same
  turn-taking, 1 = no transition in common. Undefined when either side has no transition.
- ``speaker_entropy_diff``: the Shannon entropy (bits) of the distribution of the turns over their
  speakers, continuation minus reference: > 0 the turns are spread over more speakers (or more
  evenly) than the humans', < 0 fewer speakers dominate. Undefined without turns.

The same two measures between the last |r| turns of x (the same people a little earlier, as if
they were a continuation) and r, target ``HISTORY``, show how far human turn-taking itself moves
from one stretch of a conversation to the next: a yardstick for the setups' values.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import polars as pl

from cocoeval.core.schema import Turn, conversation_of, is_human_ai
from cocoeval.core.speakers import MALFORMED_NOTE, PASSED_NOTE
from cocoeval.core.targets import REFERENCE, targets_for

from .store import RunLike, derived_frame

WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
NGRAM = 3
SHORT_TOKENS = 2
CONTENT_MIN_CHARS = 4
BACKCHANNEL = frozenset(
    {
        "ah",
        "aha",
        "alright",
        "cool",
        "exactly",
        "hm",
        "hmm",
        "huh",
        "mhm",
        "mm",
        "mmm",
        "no",
        "nope",
        "oh",
        "ok",
        "okay",
        "right",
        "so",
        "sure",
        "true",
        "uh",
        "um",
        "well",
        "wow",
        "yeah",
        "yep",
        "yes",
        "yup",
    }
)

STATISTICS: dict[str, str] = {  # name: short label (charts); definitions above
    "turns": "turns in the target",
    "tokens_per_turn": "mean tokens per turn",
    "speakers": "distinct speakers",
    "balance": "participation balance (1 = even)",
    "switch_rate": "speaker switch rate",
    "mean_run": "mean same-speaker run (turns)",
    "rep_self": "repetition: same speaker (trigrams)",
    "rep_any": "repetition: anyone (trigrams)",
    "distinct_1": "distinct-1 (distinct words / words)",
    "distinct_2": "distinct-2 (distinct bigrams / bigrams)",
    "question_share": "question turns",
    "answered_share": "questions answered",
    "backchannel_share": "short / backchannel turns",
    "goal_overlap": "overlap with the goals",
}


def tokens(text: str) -> list[str]:
    """Lowercase word tokens (see the module docstring)."""
    return WORD.findall(text.lower())


def is_question(text: str) -> bool:
    return "?" in text


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def conversation_stats(
    turns: Sequence[Turn],
    *,
    history: Sequence[Turn] = (),
    goals: Sequence[str] = (),
    participants: int | None = None,
    scored: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Every statistic of ``STATISTICS`` for one conversation (a target's turns), ``None`` where
    undefined. ``history``: the turns before (x); ``goals``: the instance's goals (M);
    ``participants``: the instance's number of participants (for ``balance``); ``scored``: indices
    of the turns per-turn statistics use (default: all). Computed by the code that measures every
    conversation of a run (``conversation_frame``), for this one conversation."""
    from types import SimpleNamespace

    judged = range(len(turns)) if scored is None else scored
    target = SimpleNamespace(
        turns=turns,
        judged=judged,
        instance=SimpleNamespace(id="", history=history, metadata=SimpleNamespace(goals=goals)),
    )
    lens, tok = _token_statistics([target])
    s = _structure(turns, lens[0], judged, participants or 0) | {k: v[0] for k, v in tok.items()}
    return {k: s[k] for k in STATISTICS}


FRAME_SCHEMA: dict[str, Any] = {
    "target": pl.Utf8,
    "instance_id": pl.Utf8,
    "dataset": pl.Utf8,
    **{k: pl.Float64 for k in STATISTICS},
}


@derived_frame("convstats", FRAME_SCHEMA)
def conversation_frame(run: RunLike) -> pl.DataFrame:
    """One row per conversation of ``Run.open(run_dir)``: target ('reference' or the
    setup name), instance_id, dataset and every statistic (null where undefined); stale
    continuations (``Run.stale_reason``) are left out. The same values as ``conversation_stats``
    on each target (the same code: ``_token_statistics``, for every conversation at once); made once per run
    in a process and kept with the run's frames (``store.derived_frame``)."""
    targets = targets_for(run.instances, run.current_continuations)
    if not targets:
        return pl.DataFrame(schema=FRAME_SCHEMA)
    lens, tok = _batched(targets)
    rows = []
    for c, t in enumerate(targets):
        inst = t.instance
        p = len({x.speaker for x in [*inst.history, *inst.reference]})
        s = _structure(t.turns, lens[c], t.judged, p) | {k: v[c] for k, v in tok.items()}
        rows.append(
            {
                "target": t.name,
                "instance_id": inst.id,
                "dataset": inst.dataset,
                **{k: None if s[k] is None else float(s[k]) for k in STATISTICS},
            }
        )
    return pl.DataFrame(rows, schema=FRAME_SCHEMA, orient="row")


BATCH_INSTANCES = 32
"""Instances whose targets ``_token_statistics`` measures together (memory grows with a batch)."""


def _batched(targets: Sequence[Any]) -> tuple[list[list[int]], dict[str, list[float | None]]]:
    """``_token_statistics`` over batches of ``BATCH_INSTANCES`` instances (every target of an
    instance in the same batch: repetition looks at its history), results in ``targets``' order."""
    by_inst: dict[str, list[int]] = {}
    for c, t in enumerate(targets):
        by_inst.setdefault(t.instance.id, []).append(c)
    groups = list(by_inst.values())
    lens: list[list[int]] = [[] for _ in targets]
    tok: dict[str, list[float | None]] = {}
    for b in range(0, len(groups), BATCH_INSTANCES):
        idx = [c for g in groups[b : b + BATCH_INSTANCES] for c in g]
        part_lens, part = _token_statistics([targets[c] for c in idx])
        for name, values in part.items():
            column = tok.setdefault(name, [None] * len(targets))
            for c, v in zip(idx, values, strict=True):
                column[c] = v
        for c, n in zip(idx, part_lens, strict=True):
            lens[c] = n
    return lens, tok


def _structure(turns: Sequence[Turn], lens: Sequence[int], scored: Sequence[int], participants: int) -> dict[str, Any]:
    """The statistics of ``conversation_stats`` that need no token itself (``lens``: tokens per turn)."""
    idx = sorted(i for i in set(scored) if 0 <= i < len(turns))
    runs = sum(1 for i in range(len(turns)) if i == 0 or turns[i].speaker != turns[i - 1].speaker)
    switches = runs - 1 if turns else 0
    questions = [i for i in idx if is_question(turns[i].text)]
    followed = [i for i in questions if i + 1 < len(turns)]
    answered = [i for i in followed if turns[i + 1].speaker != turns[i].speaker and not is_question(turns[i + 1].text)]
    per: dict[str, int] = {}
    for t, n in zip(turns, lens, strict=True):
        per[t.speaker] = per.get(t.speaker, 0) + n
    total, p = sum(per.values()), max(len(per), participants or 0)
    balance = (
        None
        if p < 2 or total == 0
        else max(0.0, -sum(c / total * math.log(c / total) for c in per.values() if c)) / math.log(p)
    )
    return {
        "turns": len(turns),
        "speakers": len({t.speaker for t in turns}),
        "balance": balance,
        "switch_rate": switches / (len(turns) - 1) if len(turns) >= 2 else None,
        "mean_run": len(turns) / runs if runs else None,
        "question_share": _share(len(questions), len(idx)),
        "answered_share": _share(len(answered), len(followed)),
    }


def _token_statistics(targets: Sequence[Any]) -> tuple[list[list[int]], dict[str, list[float | None]]]:
    """Tokens per turn of every target, and its token statistics (tokens_per_turn, rep_self,
    rep_any, distinct_1, distinct_2, backchannel_share, goal_overlap), for all targets at once:
    the texts are tokenized in one polars call, tokens and n-grams become integer ids, and
    "said earlier" is the first position of each n-gram (numpy). Means are summed in turn order,
    as a Python loop over the turns sums them, so the values are those of the one-conversation-at-a-time
    definition to the last bit (``tests/analysis/convstats_reference.py``, the oracle)."""
    import numpy as np

    n_conv = len(targets)
    insts: dict[str, int] = {}
    for t in targets:
        insts.setdefault(t.instance.id, len(insts))
    inst_objs = {t.instance.id: t.instance for t in targets}
    speakers: dict[str, int] = {}
    texts: list[str] = []
    rows: list[tuple[int, int, int, int, bool]] = []  # per text: instance, conversation (-1 history, -2 goal),
    # position (history negative), speaker, scored
    for iid, k in insts.items():  # each instance's history once (rows with r_conv -1), then its goals
        inst = inst_objs[iid]
        h = len(inst.history)
        for j, turn in enumerate(inst.history):
            texts.append(turn.text)
            rows.append((k, -1, j - h, speakers.setdefault(turn.speaker, len(speakers)), False))
        for g in inst.metadata.goals:
            texts.append(g)
            rows.append((k, -2, 0, -1, False))
    for c, t in enumerate(targets):
        k = insts[t.instance.id]
        keep = {i for i in t.judged if 0 <= i < len(t.turns)}
        for j, turn in enumerate(t.turns):
            texts.append(turn.text)
            rows.append((k, c, j, speakers.setdefault(turn.speaker, len(speakers)), j in keep))
    toks = pl.Series(texts, dtype=pl.Utf8).str.to_lowercase().str.extract_all(WORD.pattern)
    lens = toks.list.len().fill_null(0).to_numpy().astype(np.int64)
    flat = toks.list.explode().drop_nulls()
    ids = flat.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)  # equal tokens, equal ids
    tlen = flat.str.len_chars().to_numpy().astype(np.int64)
    table = np.array(rows, np.int64).reshape(-1, 5)
    inst_r, conv_r, pos_r, spk_r, scored_r = table[:, 0], table[:, 1], table[:, 2], table[:, 3], table[:, 4] == 1
    n_rows = len(texts)
    row = np.repeat(np.arange(n_rows), lens)
    start = np.cumsum(lens) - lens  # each row's first token
    off = np.arange(len(ids)) - start[row]  # a token's place in its row
    target_row = conv_r >= 0
    vocab = int(ids.max()) + 1 if len(ids) else 1

    def grams(n: int) -> tuple[dict[str, Any], Any]:
        """The word n-grams within rows, as n columns of token ids, and the row of each."""
        at = np.flatnonzero(off + n <= lens[row])
        if vocab**n < 2**62:  # packed into one integer
            key = ids[at]
            for i in range(1, n):
                key = key * vocab + ids[at + i]
            return {"k": key}, row[at]
        return {f"t{i}": ids[at + i] for i in range(n)}, row[at]

    def per_row(hits: Any, rows: Any) -> Any:
        return np.bincount(rows, weights=hits, minlength=n_rows)

    def ordered_mean(values: Any, use: Any) -> list[float | None]:
        """Per conversation, the mean of ``values`` over its target rows where ``use``, summed
        left to right in turn order (as Python's ``sum`` does; padding adds exact zeros)."""
        sel = np.flatnonzero(use & target_row)
        conv = conv_r[sel]
        counts = np.bincount(conv, minlength=n_conv)
        first = np.cumsum(counts) - counts
        rank = np.arange(len(sel)) - first[conv]
        width = int(counts.max()) if len(counts) and counts.max() > 0 else 0
        m = np.zeros((n_conv, width))
        m[conv, rank] = values[sel]
        acc = np.zeros(n_conv)
        for j in range(width):
            acc = acc + m[:, j]
        return [float(acc[c] / counts[c]) if counts[c] else None for c in range(n_conv)]

    out: dict[str, list[float | None]] = {}
    out["tokens_per_turn"] = ordered_mean(lens.astype(np.float64), scored_r)
    # repetition: an n-gram of a scored turn said before it, by anyone / by the same speaker:
    # in the history (any row of the instance's history) or in an earlier turn of the target
    g, grow = grams(NGRAM)
    gcols = list(g)
    hist, tgt = conv_r[grow] == -1, conv_r[grow] >= 0
    trow = grow[tgt]
    said = pl.DataFrame({"i": inst_r[grow[hist]], "s": spk_r[grow[hist]], **{k: v[hist] for k, v in g.items()}})
    ts = pl.DataFrame(
        {"c": conv_r[trow], "i": inst_r[trow], "s": spk_r[trow], "p": pos_r[trow], **{k: v[tgt] for k, v in g.items()}}
    )
    h_any = said.select("i", *gcols).unique().with_columns(h_any=pl.lit(True))
    h_self = said.unique().with_columns(h_self=pl.lit(True))
    hits = (
        ts.join(h_any, on=["i", *gcols], how="left", maintain_order="left")
        .join(h_self, on=["i", "s", *gcols], how="left", maintain_order="left")
        .select(
            rep_any=pl.col("h_any").fill_null(False) | (pl.col("p").min().over("c", *gcols) < pl.col("p")),
            rep_self=pl.col("h_self").fill_null(False) | (pl.col("p").min().over("c", "s", *gcols) < pl.col("p")),
        )
    )
    n_grams = np.maximum(lens - NGRAM + 1, 0)
    has = n_grams > 0
    safe = np.where(has, n_grams, 1)
    for name in ("rep_self", "rep_any"):
        out[name] = ordered_mean(per_row(hits[name].to_numpy().astype(np.float64), trow) / safe, scored_r & has)
    for n in (1, 2):  # distinct n-grams (within turns) of the scored turns / all of them
        dg, drow = grams(n)
        use = scored_r[drow] & target_row[drow]
        conv = conv_r[drow[use]]
        total = np.bincount(conv, minlength=n_conv)
        distinct = np.zeros(n_conv, np.int64)
        if len(conv):
            per = (
                pl.DataFrame({"c": conv, **{k: v[use] for k, v in dg.items()}})
                .group_by("c")
                .agg(k=pl.struct(list(dg)).n_unique())
            )
            distinct[per["c"].to_numpy()] = per["k"].to_numpy()
        out[f"distinct_{n}"] = [float(distinct[c] / total[c]) if total[c] else None for c in range(n_conv)]
    not_back = per_row((~flat.is_in(sorted(BACKCHANNEL)).to_numpy()).astype(np.float64), row)
    back = (lens <= SHORT_TOKENS) | (not_back == 0)
    sc = np.bincount(conv_r[scored_r], minlength=n_conv)
    bc = np.bincount(conv_r[scored_r & back], minlength=n_conv)
    out["backchannel_share"] = [float(bc[c] / sc[c]) if sc[c] else None for c in range(n_conv)]
    # overlap with the goals: content tokens (>= CONTENT_MIN_CHARS) of a turn found in its goals
    goal = conv_r[row] == -2
    goal_keys = inst_r[row[goal]] * vocab + ids[goal]
    has_goals = np.bincount(inst_r[row[goal]], minlength=len(insts)) > 0
    content = tlen >= CONTENT_MIN_CHARS
    in_goal = content & _isin(inst_r[row] * vocab + ids, goal_keys)
    n_content = per_row(content.astype(np.float64), row)
    ratio = per_row(in_goal.astype(np.float64), row) / np.where(n_content > 0, n_content, 1)
    overlap = ordered_mean(ratio, scored_r & (n_content > 0))
    conv_inst = np.array([insts[t.instance.id] for t in targets], np.int64)
    out["goal_overlap"] = [v if has_goals[conv_inst[c]] else None for c, v in enumerate(overlap)]
    per_conv = np.bincount(conv_r[target_row], minlength=n_conv)
    flat_lens, ends = lens[target_row].tolist(), np.cumsum(per_conv).tolist()
    row_lens = [flat_lens[e - n : e] for e, n in zip(ends, per_conv.tolist(), strict=True)]
    return row_lens, out


def _isin(values: Any, among: Any) -> Any:
    return pl.Series(values).is_in(pl.Series(among).unique().implode()).to_numpy()


TURN_TAKING: dict[str, str] = {  # name: short label (charts); definitions in the module docstring
    "transition_distance": "speaker-transition distance to the humans (TV, 0–1)",
    "speaker_entropy_diff": "speaker entropy minus the humans' (bits)",
}
HISTORY = "history x (humans, earlier)"
"""The turn-taking yardstick's target: the last |r| turns of x compared with r (not a setup: a
setup name is a file name, with no space or parenthesis)."""
TURN_SCHEMA: dict[str, Any] = {
    "target": pl.Utf8,
    "instance_id": pl.Utf8,
    "dataset": pl.Utf8,
    "transition_distance": pl.Float64,
    "speaker_entropy": pl.Float64,
    "speaker_entropy_human": pl.Float64,
    "speaker_entropy_diff": pl.Float64,
}


def transitions(turns: Sequence[Turn], before: Turn | None = None) -> Counter[tuple[str, str]]:
    """The speaker transitions (speaker, next speaker) of ``turns``, from ``before`` (the turn
    before them, e.g. the last of x) on."""
    speakers = ([before.speaker] if before is not None else []) + [t.speaker for t in turns]
    return Counter(pairwise(speakers))


def transition_distance(a: Counter[tuple[str, str]], b: Counter[tuple[str, str]]) -> float | None:
    """Total variation between two transition distributions, ½ Σ |p − q| (0–1); None when either
    has no transition."""
    na, nb = sum(a.values()), sum(b.values())
    if not na or not nb:
        return None
    # in integers, ½ Σ |a_k·nb − b_k·na| / (na·nb): exact, so the same whatever order the set of
    # transitions is visited in (a float sum over a set of strings changed in its last bits from one
    # process to the next, with the hash seed)
    return sum(abs(a.get(k, 0) * nb - b.get(k, 0) * na) for k in a.keys() | b.keys()) / (2 * na * nb)


def speaker_entropy(turns: Sequence[Turn]) -> float | None:
    """Shannon entropy (bits) of the turns' distribution over their speakers; None without turns."""
    if not turns:
        return None
    n = len(turns)
    return max(0.0, -sum(c / n * math.log2(c / n) for c in Counter(t.speaker for t in turns).values()))


def turn_taking(
    turns: Sequence[Turn], reference: Sequence[Turn], before: Turn | None = None, before_reference: Turn | None = None
) -> dict[str, float | None]:
    """``TURN_TAKING`` of ``turns`` against ``reference`` (``before``: the turn before each)."""
    h, hr = speaker_entropy(turns), speaker_entropy(reference)
    return {
        "transition_distance": transition_distance(
            transitions(turns, before), transitions(reference, before_reference)
        ),
        "speaker_entropy": h,
        "speaker_entropy_human": hr,
        "speaker_entropy_diff": None if h is None or hr is None else round(h - hr, 12),
    }  # equal spreads: 0


@derived_frame("turn_taking", TURN_SCHEMA)
def turn_taking_frame(run: RunLike) -> pl.DataFrame:
    """One row per current ok continuation of ``run`` (target = its setup) and per instance
    (target ``HISTORY``: the last |r| turns of x against r): the turn-taking measures against the
    human reference of the same instance (``TURN_TAKING``, null where undefined), with both
    entropies. Made once per run in a process (``store.per_run``), or read where
    ``frames.open_run_dir`` kept it."""
    rows = []
    for t in targets_for(run.instances, run.current_continuations):
        inst = t.instance
        last = inst.history[-1] if inst.history else None
        if t.name == REFERENCE:
            m = len(inst.reference)
            tail = list(inst.history[-m:]) if m else []
            before = inst.history[-m - 1] if len(inst.history) > m else None
            row = turn_taking(tail, inst.reference, before, last)
            rows.append({"target": HISTORY, "instance_id": inst.id, "dataset": inst.dataset, **row})
            continue
        rows.append(
            {
                "target": t.name,
                "instance_id": inst.id,
                "dataset": inst.dataset,
                **turn_taking(t.turns, inst.reference, last, last),
            }
        )
    return pl.DataFrame(rows, schema=TURN_SCHEMA, orient="row") if rows else pl.DataFrame(schema=TURN_SCHEMA)


SPEAKER_SCHEMA: dict[str, Any] = {
    "target": pl.Utf8,
    "instance_id": pl.Utf8,
    "conversation": pl.Utf8,
    "position": pl.Int64,
    "speaker": pl.Utf8,
    "judged": pl.Boolean,
}
"""The columns of ``speaker_frame``."""


@derived_frame("speakers", SPEAKER_SCHEMA)
def speaker_frame(run: RunLike) -> pl.DataFrame:
    """One row per turn of every target of a multi-party instance of ``run`` (the human reference,
    then each current ok continuation, in ``targets_for``'s order; chats left out): target,
    instance_id, conversation (``schema.conversation_of``), position (0-based in the target's
    turns), speaker, and whether a judge labels the turn (``Target.judged``). What the turn-taking
    analysis (``turntaking``: free-running agreement, run lengths, per-speaker fidelity) needs of
    the continuations, so that it reads no record where ``frames.open_run_dir`` kept this frame.
    Made once per run in a process (``store.per_run``), or read where it was kept."""
    rows: list[dict[str, Any]] = []
    for t in targets_for(run.instances, run.current_continuations):
        if is_human_ai(t.instance):
            continue
        conv, judged = conversation_of(t.instance), set(t.judged)
        rows.extend(
            {
                "target": t.name,
                "instance_id": t.instance.id,
                "conversation": conv,
                "position": i,
                "speaker": turn.speaker,
                "judged": i in judged,
            }
            for i, turn in enumerate(t.turns)
        )
    return pl.DataFrame(rows, schema=SPEAKER_SCHEMA, orient="row") if rows else pl.DataFrame(schema=SPEAKER_SCHEMA)


SELF_SELECTION_SCHEMA: dict[str, Any] = {
    "setup": pl.Utf8,
    "continuations": pl.Int64,
    "turns_chosen": pl.Int64,
    "passes": pl.Int64,
    "malformed": pl.Int64,
    "all_passed": pl.Int64,
}
"""The columns of ``self_selection_frame``."""
_PASSES = re.compile(re.escape(PASSED_NOTE) + r" (\d+) passed \(")
"""The note ``self_selection`` writes once per turn: how many agents passed, then who spoke (or
that every agent passed)."""


@derived_frame("self_selection", SELF_SELECTION_SCHEMA)
def self_selection_frame(run: RunLike) -> pl.DataFrame:
    """Per ``self_selection`` agents setup of ``run``: its current continuations (ok or invalid),
    the turns an agent chose to take, the passes (every answer PASS, in those turns and in the
    turns where every agent passed), the malformed answers (counted, never read as passes) and the
    turns where every agent passed, from the notes the simulator keeps with each continuation.
    Made once per run in a process (``store.per_run``), or read where ``frames.open_run_dir`` kept
    it (no record read)."""
    rows = []
    for s in run.manifest.setup_params:
        if s.simulator != "agents" or (s.options or {}).get("policy") != "self_selection":
            continue
        cs = run.current_continuations.get(s.name, [])
        notes = [n for c in cs for n in c.notes]
        said = [(m, n) for n in notes if (m := _PASSES.search(n))]
        rows.append(
            {
                "setup": s.name,
                "continuations": len(cs),
                "turns_chosen": sum(n.endswith(" spoke") for _, n in said),
                "passes": sum(int(m.group(1)) for m, _ in said),
                "malformed": sum(MALFORMED_NOTE in n for n in notes),
                "all_passed": sum(n.endswith("every agent passed") for _, n in said),
            }
        )
    schema = SELF_SELECTION_SCHEMA
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
