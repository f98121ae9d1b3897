"""Where a continuation gets its status: every simulator ends in ``continuation`` (the paper's
simulator, ``engine.SimTask``; a plugin, ``plugins.PluginTask``; an imported record,
``exchange``), which marks it ok or invalid with the reason. What the simulator found (a failed
call, too few turns, a bad record) comes first; then the rules every continuation must meet
whatever wrote it (``turn_problem``: no empty turn, none over ``MAX_TURN_CHARS``;
``speaker_problem``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cocoeval.core.schema import Continuation, Instance, Turn, unknown_speaker_turns
from cocoeval.core.text import has_text

MAX_TURN_CHARS = 50_000
"""The most characters one turn of a continuation may have, whatever wrote it (the paper's
simulator, a plugin, an imported file); a longer turn makes the continuation invalid before it is
judged. A judge is sent every turn of the continuation: one 5 MB turn is a call of 1.25 million
input tokens, paid once per judge and kind, and no context window holds it. 50,000 characters
(about 12,500 tokens, 8,000 words: forty minutes of speech) is several times the longest human
turn in the sources (debate opening statements, committee answers: under 10,000 characters), so
a turn over it is no turn of a conversation but a runaway generation or a broken file."""

MAX_UNKNOWN_SPEAKER_SHARE = 0.5
"""The largest share of a continuation's turns that speakers who are not participants may say
(``core.schema.unknown_speaker_turns``); more, and it is invalid. A simulator that writes most of
its turns as "Goals", "Participants" or "Summary" (a small model copying the prompt's headings as
speakers: 342 of 360 turns in one run) has not continued the conversation of these people, and
judging or measuring its turns as theirs (turn-taking, participation balance, behaviours of
speakers) would count the prompt's echo as a simulation. A few such turns in a usable continuation
(a moderator the data do not list, a name the model spelled its own way) are kept and noted
(``unknown_speakers``); when more than half of the turns are nobody's, the continuation is mostly
not one of this conversation. Human–AI chats list ``user`` and ``assistant`` as participants, and
their simulated turns take the reference's speakers, so the rule does not touch them."""


def speaker_problem(inst: Instance, turns: Sequence[Turn]) -> str | None:
    """Why ``turns`` are no continuation of ``inst``'s conversation: more than
    ``MAX_UNKNOWN_SPEAKER_SHARE`` of them by speakers who are not participants (the first names
    given, with their turn counts); None when they are."""
    unknown = unknown_speaker_turns(inst, turns)
    if not turns or len(unknown) <= MAX_UNKNOWN_SPEAKER_SHARE * len(turns):
        return None
    names: dict[str, int] = {}
    for i in unknown:
        names[turns[i].speaker] = names.get(turns[i].speaker, 0) + 1
    top = sorted(names, key=lambda n: -names[n])
    listed = ", ".join(f"{n!r} ({names[n]})" for n in top[:5]) + (f" and {len(top) - 5} more" if len(top) > 5 else "")
    return f"{len(unknown)} of {len(turns)} turns by speakers who are not participants: {listed}"


def turn_problem(turns: Sequence[Turn]) -> str | None:
    """Why ``turns`` cannot be judged as said: the first turn with no visible text (empty, or only
    spaces, zero-width or other invisible characters: ``core.text.has_text``) or longer than
    ``MAX_TURN_CHARS``; None when every turn is fine."""
    for i, t in enumerate(turns, start=1):
        if not has_text(t.text):
            return f"turn {i} ({t.speaker}) has no visible text (empty, or only spaces or invisible characters)"
        if len(t.text) > MAX_TURN_CHARS:
            return (
                f"turn {i} ({t.speaker}) has {len(t.text):,} characters, more than the {MAX_TURN_CHARS:,} a turn "
                "may have (validity.MAX_TURN_CHARS: it is never sent to a judge)"
            )
    return None


def continuation(
    inst: Instance, setup_id: str, setup_name: str, turns: Sequence[Turn], reason: str | None, **fields: Any
) -> Continuation:
    """The continuation of ``inst`` with its status: invalid with ``reason`` when the simulator
    gave one, else invalid when ``turn_problem`` or ``speaker_problem`` finds one, else ok.
    ``fields``: the other fields of ``Continuation`` (calls, notes, unknown_speakers, instance_hash,
    imported)."""
    reason = reason or turn_problem(turns) or speaker_problem(inst, turns)
    return Continuation(
        instance_id=inst.id,
        setup_id=setup_id,
        setup_name=setup_name,
        turns=list(turns),
        status="invalid" if reason else "ok",
        reason=reason,
        **fields,
    )
