"""A fine-grained judgment as the viewers show it (the notebooks' conversation viewer and the HTML
report's): from the frames, so that they show what the statistics count (``frames``: a judgment's
status there, ok, repaired, invalid, skipped or stale, and the labels of the valid ones only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .frames import Frames

__all__ = ["Verdict", "verdicts"]


@dataclass
class Verdict:
    """A fine-grained judgment as the viewer shows it, from the frames (as the statistics and
    the HTML report's viewer see it): its status there (ok, repaired, invalid, skipped, stale)
    and why, and the behaviours it found per judged turn (a valid judgment's only)."""

    status: str
    reason: str | None
    labels: dict[int, tuple[list[str], dict[str, str]]] = field(default_factory=dict)
    """{turn: (behaviour ids, {behaviour id: evidence})}, in the judgment's order of turns."""

    @property
    def valid(self) -> bool:
        return self.status in ("ok", "repaired")


def verdicts(f: Frames) -> dict[tuple[str, str, str], Verdict]:
    """{(judge, instance, target name): its fine-grained judgment} (``Verdict``; where a stale
    judgment and a counted one share the key, the counted one)."""
    out: dict[tuple[str, str, str], Verdict] = {}
    fine = f.judgments.filter(kind="fine_grained").select("judge", "instance_id", "target", "status", "reason")
    for judge, iid, target, status, reason in fine.iter_rows():
        old = out.get((judge, iid, target))
        if old is None or old.status == "stale" or status != "stale":
            out[(judge, iid, target)] = Verdict(status, reason)
    for judge, target, iid, turn, beh, ev in f.labels.select(
        "judge", "target", "instance_id", "turn", "behaviour", "evidence"
    ).iter_rows():
        v = out.get((judge, iid, target))
        if v is not None and v.valid:
            behaviours, evidence = v.labels.setdefault(turn, ([], {}))
            behaviours.append(beh)
            if ev:
                evidence[beh] = ev
    return out
