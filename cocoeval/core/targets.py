"""What a judge judges: a *target* is the human reference or one continuation of an instance, with
the turns of it that are labelled; and what a fine-grained judgment counts.

The one home of the word: ``REFERENCE`` names the human reference as a target everywhere
(judgments, frames, tables, annotation files)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .schema import Continuation, Instance, Judgment, Turn, is_human_ai
from .taxonomy import Taxonomy

REFERENCE = "reference"
"""The target name (and target id) of the human reference r of an instance."""

NO_TURNS = "no turns to judge"
"""The reason recorded for a target with no turn the judge should judge (an empty continuation,
or a chat window without a user turn): never sent to the judge, stored invalid with this reason
(``frames`` counts it as ``skipped``), never a valid all-zero judgment."""


@dataclass
class Target:
    instance: Instance
    name: str
    """'reference' or the setup name."""
    target_id: str
    """'reference' or the setup id."""
    turns: list[Turn]
    judged: list[int]
    """0-based indices of the turns to label."""


@dataclass
class TargetRef:
    """A target known by its instance and name alone, its records read when it is first asked
    for (``target``): an annotator over a whole run lists thousands and shows one at a time."""

    instance_id: str
    name: str
    """'reference' or the setup name."""
    load: Callable[[], Target] = field(repr=False, compare=False)
    """Reads the target (its instance, its continuation)."""
    _target: Target | None = field(default=None, init=False, repr=False, compare=False)

    def target(self) -> Target:
        if self._target is None:
            self._target = self.load()
        return self._target


def reference_target(inst: Instance) -> Target:
    """The human reference of ``inst`` as a target."""
    return Target(inst, REFERENCE, REFERENCE, inst.reference, judged_turns(inst, inst.reference))


def continuation_target(inst: Instance, name: str, c: Continuation) -> Target:
    """Setup ``name``'s continuation ``c`` of ``inst`` as a target."""
    return Target(inst, name, c.setup_id, c.turns, judged_turns(inst, c.turns))


def targets_for(instances: Sequence[Instance], continuations: dict[str, list[Continuation]]) -> list[Target]:
    """The reference of every instance and every ok continuation. In chats only user turns are
    judged. Invalid continuations have nothing to judge; they count in the invalid rates."""
    out = []
    by_id = {i.id: i for i in instances}
    for inst in instances:
        out.append(reference_target(inst))
    for name, conts in continuations.items():
        for c in conts:
            if c.status == "ok" and c.instance_id in by_id:
                out.append(continuation_target(by_id[c.instance_id], name, c))
    return out


def judged_turns(inst: Instance, turns: list[Turn]) -> list[int]:
    """0-based indices of the turns of a target (``turns``) that a judge labels: every turn, or
    in chats only the user turns. Empty: the target has nothing to judge (``NO_TURNS``)."""
    if is_human_ai(inst):
        return [i for i, t in enumerate(turns) if t.speaker == "user"]
    return list(range(len(turns)))


def unknown_behaviour(j: Judgment, tax: Taxonomy) -> str | None:
    """Why the labels of ``j`` cannot be counted with ``tax``: the first behaviour id that is not
    one of its ids (judges and annotators are held to the taxonomy's ids when their answer is read,
    so such a label was written another way: a judgment edited by hand, or one made with another
    taxonomy); None when every label is one of its behaviours."""
    ids = set(tax.ids)
    for lb in j.labels:
        for b in lb.behaviours:
            if b not in ids:
                return (
                    f"turn {lb.turn + 1} is labelled {b!r}, which is no behaviour of the taxonomy "
                    f"{tax.name!r} (edited by hand, or made with another taxonomy; run the judge stage again)"
                )
    return None


def behaviour_counts(j: Judgment, tax: Taxonomy) -> dict[str, int] | None:
    """Occurrences of each behaviour in a fine-grained judgment; None when it is invalid, or has
    a label that is no behaviour of ``tax`` (``unknown_behaviour``): an invalid judgment is never a
    zero count, and a label is never dropped from a count that is kept."""
    if j.kind != "fine_grained" or j.status == "invalid" or unknown_behaviour(j, tax) is not None:
        return None
    counts = dict.fromkeys(tax.ids, 0)
    for lb in j.labels:
        for b in lb.behaviours:
            if b in counts:
                counts[b] += 1
    return counts
