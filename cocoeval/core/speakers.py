"""Who speaks next: the turn-taking rules of ``simulator: agents`` that need no model, as pure
functions of the conversation so far (beyond the paper). One definition serves both the simulator
(``simulate.agents`` picks its next speaker with them) and the analysis that measures how often
each rule names the speaker the humans actually had next (``analysis.turntaking``), so the rule
measured is the rule simulated.

- ``history_weights``: the speaker-transition counts of the history x after the last speaker (the
  ``history`` policy draws from them);
- ``round_robin_next``: the participant after the last speaker in a fixed order;
- ``named_participant``: the one other participant the last turn names (the ``addressee`` policy);
- ``same_as_previous`` and ``most_frequent``: the two simplest baselines of next-speaker prediction.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

__all__ = [
    "MALFORMED_NOTE",
    "PASSED_NOTE",
    "history_weights",
    "most_frequent",
    "name_patterns",
    "named_participant",
    "round_robin_next",
    "same_as_previous",
]

MALFORMED_NOTE = "malformed self-selection answer"
"""How a continuation's note starts when a ``self_selection`` agent's answer was neither a turn nor
``PASS`` (the analysis counts these notes per setup)."""
PASSED_NOTE = "self-selection:"
"""How the note of ``self_selection`` that lists a turn's passes and its speaker starts."""


def history_weights(history: Sequence[str], last: str | None, participants: Sequence[str]) -> dict[str, int]:
    """{speaker: weight} the ``history`` policy draws the next speaker from, names sorted: after
    ``last``, each speaker as often as it followed ``last`` in ``history`` (x's speakers, in order);
    when x never shows ``last`` followed, each speaker by its turns in x; an empty x, every
    participant once."""
    after = Counter(b for a, b in itertools.pairwise(history) if a == last)
    counts = after or Counter(history) or Counter(participants)
    return {n: counts[n] for n in sorted(counts)}


def round_robin_next(order: Sequence[str], last: str | None) -> str | None:
    """The participant after ``last`` in ``order`` (the first after the last of them); the first
    of ``order`` when ``last`` is not in it (or None); None when ``order`` is empty."""
    if not order:
        return None
    if last is None or last not in order:
        return order[0]
    return order[(list(order).index(last) + 1) % len(order)]


def same_as_previous(last: str | None) -> str | None:
    """The baseline "the speaker of the last turn speaks again"."""
    return last


def most_frequent(speakers: Sequence[str], participants: Sequence[str]) -> str | None:
    """The speaker with the most turns in ``speakers`` (the conversation so far); a tie goes to the
    one listed first in ``participants``, then to the one that spoke first."""
    if not speakers:
        return None
    counts = Counter(speakers)
    rank = {p: i for i, p in enumerate(participants)}
    first = {s: i for i, s in reversed(list(enumerate(speakers)))}
    return min(counts, key=lambda s: (-counts[s], rank.get(s, len(rank)), first[s]))


@lru_cache(maxsize=4096)
def name_patterns(name: str, first_name_ok: bool) -> re.Pattern[str]:
    """The regular expression that finds a participant's name in a text: the whole name, or (when
    ``first_name_ok``) its first word, case as written, never inside another word (no letter,
    digit or underscore on either side)."""
    forms = [re.escape(name.strip())]
    first = name.strip().split()[0] if name.strip() else ""
    if first_name_ok and first and first != name.strip():
        forms.append(re.escape(first))
    return re.compile(r"(?<![\w])(?:" + "|".join(forms) + r")(?![\w])")


def named_participant(text: str, speaker: str, participants: Sequence[str]) -> str | None:
    """The participant other than ``speaker`` that ``text`` names, when it names exactly one
    (None: none or several). A name counts written whole or by its first word (as written, capital
    included, and only where no other participant's name begins with the same word: "PhD A" and
    "PhD B" are each found only whole), as a word of its own: "Al" is not found in "Also" or
    "Alan"."""
    names = [p for p in participants if p.strip()]
    firsts = Counter(p.strip().split()[0] for p in names)
    found = {
        p
        for p in names
        if p != speaker and name_patterns(p, firsts[p.strip().split()[0]] == 1).search(text) is not None
    }
    return found.pop() if len(found) == 1 else None
