"""Where a continuation gets its status: every simulator ends in ``continuation`` (the paper's
simulator, ``engine.SimTask``; a plugin, ``plugins.PluginTask``; an imported record,
``exchange``), which marks it ok or invalid with the reason. What the simulator found (a failed
call, too few turns, a bad record) comes first; then the rules every continuation must meet
whatever wrote it (``speaker_problem``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cocoeval.core.schema import Continuation, Instance, Turn, unknown_speaker_turns

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


def continuation(inst: Instance, setup_id: str, setup_name: str, turns: Sequence[Turn], reason: str | None,
                 **fields: Any) -> Continuation:
    """The continuation of ``inst`` with its status: invalid with ``reason`` when the simulator
    gave one, else invalid when ``speaker_problem`` finds one, else ok. ``fields``: the other
    fields of ``Continuation`` (calls, notes, unknown_speakers, instance_hash, imported)."""
    reason = reason or speaker_problem(inst, turns)
    return Continuation(instance_id=inst.id, setup_id=setup_id, setup_name=setup_name, turns=list(turns),
                        status="invalid" if reason else "ok", reason=reason, **fields)
