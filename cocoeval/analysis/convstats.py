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
from typing import TYPE_CHECKING, Any

import polars as pl

from cocoeval.core.schema import Turn
from cocoeval.core.targets import REFERENCE, targets_for

if TYPE_CHECKING:
    from cocoeval.run import Run

WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
NGRAM = 3
SHORT_TOKENS = 2
CONTENT_MIN_CHARS = 4
BACKCHANNEL = frozenset({
    "ah", "aha", "alright", "cool", "exactly", "hm", "hmm", "huh", "mhm", "mm", "mmm", "no", "nope", "oh", "ok",
    "okay", "right", "so", "sure", "true", "uh", "um", "well", "wow", "yeah", "yep", "yes", "yup"})

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


def ngrams(toks: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]


def is_question(text: str) -> bool:
    return "?" in text


def is_backchannel(toks: Sequence[str]) -> bool:
    return len(toks) <= SHORT_TOKENS or all(t in BACKCHANNEL for t in toks)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def _balance(turns: Sequence[Turn], toks: Sequence[list[str]], participants: int | None) -> float | None:
    per: dict[str, int] = {}
    for t, tk in zip(turns, toks, strict=True):
        per[t.speaker] = per.get(t.speaker, 0) + len(tk)
    total = sum(per.values())
    p = max(len(per), participants or 0)
    if p < 2 or total == 0:
        return None
    h = -sum(c / total * math.log(c / total) for c in per.values() if c)
    return max(0.0, h) / math.log(p)


def _repetition(turns: Sequence[Turn], toks: Sequence[list[str]], history: Sequence[Turn],
                scored: Sequence[int]) -> tuple[float | None, float | None]:
    said_any: set[tuple[str, ...]] = set()
    said_by: dict[str, set[tuple[str, ...]]] = {}
    for t in history:
        g = ngrams(tokens(t.text), NGRAM)
        said_any.update(g)
        said_by.setdefault(t.speaker, set()).update(g)
    own, anyone = [], []
    keep = set(scored)
    for i, (t, tk) in enumerate(zip(turns, toks, strict=True)):
        g = ngrams(tk, NGRAM)
        if i in keep and g:
            mine = said_by.get(t.speaker, set())
            own.append(sum(x in mine for x in g) / len(g))
            anyone.append(sum(x in said_any for x in g) / len(g))
        said_any.update(g)
        said_by.setdefault(t.speaker, set()).update(g)
    return _mean(own), _mean(anyone)


def _distinct(toks: Sequence[list[str]], n: int) -> float | None:
    grams = [g for tk in toks for g in ngrams(tk, n)]
    return _share(len(set(grams)), len(grams))


def conversation_stats(turns: Sequence[Turn], *, history: Sequence[Turn] = (), goals: Sequence[str] = (),
                       participants: int | None = None, scored: Sequence[int] | None = None) -> dict[str, Any]:
    """Every statistic of ``STATISTICS`` for one conversation (a target's turns), ``None`` where
    undefined. ``history``: the turns before (x); ``goals``: the instance's goals (M);
    ``participants``: the instance's number of participants (for ``balance``); ``scored``: indices
    of the turns per-turn statistics use (default: all)."""
    toks = [tokens(t.text) for t in turns]
    idx = list(range(len(turns))) if scored is None else sorted(i for i in set(scored) if 0 <= i < len(turns))
    sc = [toks[i] for i in idx]
    runs = sum(1 for i in range(len(turns)) if i == 0 or turns[i].speaker != turns[i - 1].speaker)
    switches = runs - 1 if turns else 0
    questions = [i for i in idx if is_question(turns[i].text)]
    followed = [i for i in questions if i + 1 < len(turns)]
    answered = [i for i in followed if turns[i + 1].speaker != turns[i].speaker and not is_question(turns[i + 1].text)]
    rep_self, rep_any = _repetition(turns, toks, history, idx)
    goal_words = {w for g in goals for w in tokens(g)}
    overlap = []
    if goal_words:
        for tk in sc:
            content = [w for w in tk if len(w) >= CONTENT_MIN_CHARS]
            if content:
                overlap.append(sum(w in goal_words for w in content) / len(content))
    return {
        "turns": len(turns),
        "tokens_per_turn": _mean([len(tk) for tk in sc]),
        "speakers": len({t.speaker for t in turns}),
        "balance": _balance(turns, toks, participants),
        "switch_rate": switches / (len(turns) - 1) if len(turns) >= 2 else None,
        "mean_run": len(turns) / runs if runs else None,
        "rep_self": rep_self,
        "rep_any": rep_any,
        "distinct_1": _distinct(sc, 1),
        "distinct_2": _distinct(sc, 2),
        "question_share": _share(len(questions), len(idx)),
        "answered_share": _share(len(answered), len(followed)),
        "backchannel_share": _share(sum(is_backchannel(tk) for tk in sc), len(sc)),
        "goal_overlap": _mean(overlap),
    }


FRAME_SCHEMA: dict[str, Any] = {"target": pl.Utf8, "instance_id": pl.Utf8, "dataset": pl.Utf8,
                                **{k: pl.Float64 for k in STATISTICS}}


def conversation_frame(run: Run) -> pl.DataFrame:
    """One row per conversation of ``Run.open(run_dir)``: target ('reference' or the
    setup name), instance_id, dataset and every statistic (null where undefined); stale
    continuations (``Run.stale_reason``) are left out."""
    rows = []
    for t in targets_for(run.instances, run.current_continuations):
        inst = t.instance
        p = len({x.speaker for x in [*inst.history, *inst.reference]})
        s = conversation_stats(t.turns, history=inst.history, goals=inst.metadata.goals, participants=p,
                               scored=t.judged)
        rows.append({"target": t.name, "instance_id": inst.id, "dataset": inst.dataset,
                     **{k: None if v is None else float(v) for k, v in s.items()}})
    return pl.DataFrame(rows, schema=FRAME_SCHEMA, orient="row") if rows else pl.DataFrame(schema=FRAME_SCHEMA)


TURN_TAKING: dict[str, str] = {  # name: short label (charts); definitions in the module docstring
    "transition_distance": "speaker-transition distance to the humans (TV, 0–1)",
    "speaker_entropy_diff": "speaker entropy minus the humans' (bits)",
}
HISTORY = "history x (humans, earlier)"
"""The turn-taking yardstick's target: the last |r| turns of x compared with r (not a setup: a
setup name is a file name, with no space or parenthesis)."""
TURN_SCHEMA: dict[str, Any] = {"target": pl.Utf8, "instance_id": pl.Utf8, "dataset": pl.Utf8,
                               "transition_distance": pl.Float64, "speaker_entropy": pl.Float64,
                               "speaker_entropy_human": pl.Float64, "speaker_entropy_diff": pl.Float64}


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
    return 0.5 * sum(abs(a.get(k, 0) / na - b.get(k, 0) / nb) for k in a.keys() | b.keys())


def speaker_entropy(turns: Sequence[Turn]) -> float | None:
    """Shannon entropy (bits) of the turns' distribution over their speakers; None without turns."""
    if not turns:
        return None
    n = len(turns)
    return max(0.0, -sum(c / n * math.log2(c / n) for c in Counter(t.speaker for t in turns).values()))


def turn_taking(turns: Sequence[Turn], reference: Sequence[Turn], before: Turn | None = None,
                before_reference: Turn | None = None) -> dict[str, float | None]:
    """``TURN_TAKING`` of ``turns`` against ``reference`` (``before``: the turn before each)."""
    h, hr = speaker_entropy(turns), speaker_entropy(reference)
    return {"transition_distance": transition_distance(transitions(turns, before),
                                                       transitions(reference, before_reference)),
            "speaker_entropy": h, "speaker_entropy_human": hr,
            "speaker_entropy_diff": None if h is None or hr is None else round(h - hr, 12)}  # equal spreads: 0


def turn_taking_frame(run: Run) -> pl.DataFrame:
    """One row per current ok continuation of ``run`` (target = its setup) and per instance
    (target ``HISTORY``: the last |r| turns of x against r): the turn-taking measures against the
    human reference of the same instance (``TURN_TAKING``, null where undefined), with both
    entropies."""
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
        rows.append({"target": t.name, "instance_id": inst.id, "dataset": inst.dataset,
                     **turn_taking(t.turns, inst.reference, last, last)})
    return pl.DataFrame(rows, schema=TURN_SCHEMA, orient="row") if rows else pl.DataFrame(schema=TURN_SCHEMA)
