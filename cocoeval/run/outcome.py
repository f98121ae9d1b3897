"""What a run ended with: counts per stage (ok / repaired / invalid / failed, top reasons), the
warnings, and whether anything ended invalid (``cocoeval run`` then exits with INVALID_EXIT).

"skipped": a target with no turn to judge (a chat window without a user turn); no call is made,
it is stored as invalid with the reason ``judge.NO_TURNS`` and is in no statistic, but the run did
not fail on it, so it does not set the exit status.
"failed": a call failed (network, rate limit, context length, ...): failed calls are not cached,
so a re-run sends them again. "invalid": the answer came back but could not be used; it is
cached, so a re-run with the same params gives the same result.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cocoeval.core.schema import Continuation, Judgment
from cocoeval.core.targets import NO_TURNS

INVALID_EXIT = 3
"""Exit status of ``cocoeval run`` when it completed but something ended invalid or failed."""
STAGES = {"simulate": "setup", "judge": "judge"}


@dataclass(frozen=True)
class Tally:
    """How the continuations of one setup or the judgments of one judge ended (``tally``); kept in
    the manifest's ``summary`` as ``to_json`` writes it (``RunSummary`` reads it back)."""

    total: int
    """Every continuation or judgment counted."""
    ok: int
    """Those that ended ok."""
    repaired: int
    """Those that ended usable after a repair (they count as ok in the statistics)."""
    invalid: int
    """Those whose answer came back but could not be used (cached: a re-run gives the same)."""
    failed: int
    """Those whose call failed (not cached: a re-run sends it again)."""
    skipped: int = 0
    """Targets with no turn to judge (``NO_TURNS``): in no statistic, and not a failure of the run."""
    reasons: dict[str, int] = field(default_factory=dict)
    """The ``top`` most frequent reasons of the invalid and failed ones, grouped (``reason_group``),
    with their counts, most frequent first: what to fix first."""

    def to_json(self) -> dict[str, Any]:
        """The manifest's form: ``{total, ok, repaired, invalid, failed, skipped, reasons}``."""
        return {
            "total": self.total,
            "ok": self.ok,
            "repaired": self.repaired,
            "invalid": self.invalid,
            "failed": self.failed,
            "skipped": self.skipped,
            "reasons": dict(self.reasons),
        }


def tally(items: Iterable[Continuation | Judgment], top: int = 3) -> Tally:
    """How ``items`` (continuations or judgments) ended: counts per outcome and the ``top`` reasons;
    reasons are grouped without their details in brackets and with numbers as N."""
    n: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for x in items:
        n["total"] += 1
        if x.status in ("ok", "repaired"):
            n[x.status] += 1
            continue
        why = x.reason or "(no reason recorded)"
        if why == NO_TURNS:
            n["skipped"] += 1
            continue
        n["failed" if why.startswith("call failed") else "invalid"] += 1
        reasons[reason_group(why)] += 1
    return Tally(
        total=n["total"],
        ok=n["ok"],
        repaired=n["repaired"],
        invalid=n["invalid"],
        failed=n["failed"],
        skipped=n["skipped"],
        reasons=dict(reasons.most_common(top)),
    )


def reason_group(why: str) -> str:
    """A reason as it is counted with others: without its details in brackets (a speaker, a file
    line, an exception's place) and with numbers as N, so "turn 3 (Alice) has no text" and "turn 7
    (Bob) has no text" are one reason, and what follows a bracket (the cause) is kept."""
    prev = None
    while prev != why:  # innermost brackets first, for nested ones
        prev, why = why, re.sub(r"\s*\([^()]*\)", "", why)
    return re.sub(r"\d+", "N", why).strip()[:160]


class RunSummary(BaseModel):
    """The manifest's ``summary``, read back: what ``cocoeval run`` prints at its end and whether
    it exits with ``INVALID_EXIT``. Keys a newer cocoeval writes are kept."""

    model_config = ConfigDict(extra="allow")

    simulate: dict[str, Tally] = Field(default_factory=dict)
    """{setup: how its continuations ended}."""
    simulate_from_files: bool = False
    """True when the continuations were read from the run directory, not simulated by this run."""
    judge: dict[str, Tally] = Field(default_factory=dict)
    """{judge: how its judgments ended}."""
    warnings: list[str] = Field(default_factory=list)
    """The warnings of the run, as printed when they happened."""

    def stages(self) -> dict[str, dict[str, Tally]]:
        """{stage: its tallies by name}, in ``STAGES`` order."""
        return {"simulate": self.simulate, "judge": self.judge}


def bad_count(summary: RunSummary) -> int:
    """Continuations and judgments of a run summary that ended invalid or failed."""
    return sum(s.invalid + s.failed for rows in summary.stages().values() for s in rows.values())


def describe(summary: RunSummary) -> list[str]:
    """Lines for the end of ``cocoeval run``: per stage and name the counts and top reasons."""
    out = []
    for stage, rows in summary.stages().items():
        what = STAGES[stage]
        if not rows:
            continue
        bad = sum(s.invalid + s.failed for s in rows.values())
        src = (
            " (read from the run directory; not simulated by this run)"
            if stage == "simulate" and summary.simulate_from_files
            else ""
        )
        out.append(
            f"{stage}: {sum(s.total for s in rows.values())} "
            f"{'continuations' if stage == 'simulate' else 'judgments'}, {bad} invalid or failed{src}"
        )
        for name, s in rows.items():
            if s.skipped:
                out.append(f"  {what} {name}: {s.skipped} skipped ({NO_TURNS}; in no statistic)")
            if s.invalid or s.failed:
                out.append(
                    f"  {what} {name}: {s.ok + s.repaired} ok, {s.invalid} invalid, {s.failed} failed of {s.total}"
                )
                out += [f"    {c} x {r}" for r, c in s.reasons.items()]
    return out
