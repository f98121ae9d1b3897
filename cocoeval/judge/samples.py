"""A judge's k samples (beyond the paper): ``samples: k`` on a judge asks each target k times, and
its judgment is the majority of the valid samples (``combine_samples``).

A sample whose call failed (network, rate limit, ...) makes the judgment failed: its reason starts
"call failed" (so the run counts it failed and exits with ``outcome.INVALID_EXIT``), and since a
failed call is not cached, a re-run sends that sample again while the others come from the cache;
a majority of the samples that did answer would quietly be a weaker judgment (a tie is no label).
Otherwise a sample is *valid* when its judgment is ok or repaired. With none valid the judgment is invalid
with every sample's reason (``NO_TURNS`` when there was nothing to judge, so it is counted as
skipped). Otherwise: a behaviour is on a turn where strictly more than half of the valid samples
label it (a tie is no label), with the votes as its evidence; the Likert scores are the mean of
the valid samples' scores rounded to a whole score, halves up (the exact mean in the rationale).
The samples themselves are kept in the judgment's ``samples``, invalid ones with their reasons:
the vote fractions and the calibration of ``cocoeval.analysis.calibration`` read them.
"""

from __future__ import annotations

from collections.abc import Sequence

from cocoeval.core.schema import Judgment, TurnLabel
from cocoeval.core.targets import NO_TURNS

from .ensemble import VALID, round_half_up


def combine_samples(parts: Sequence[Judgment], order: Sequence[str]) -> Judgment:
    """The judgment of one target and kind from its samples ``parts`` (in sample order, one judge
    id); ``order``: the taxonomy's behaviour ids, the order labels are listed in."""
    first = parts[0]
    calls = [c for p in parts for c in p.calls]
    kept = [p.model_copy(update={"calls": []}) for p in parts]
    base = first.model_copy(
        update={
            "calls": calls,
            "attempts": sum(p.attempts for p in parts),
            "max_tokens": max((p.max_tokens or 0 for p in parts), default=0) or None,
            "samples": kept,
            "raw": None,
            "repairs": [],
            "labels": [],
            "rationale": None,
            "consistency": None,
            "collaborativeness": None,
            "reason": None,
            "status": "ok",
        }
    )
    failed = [(n, p) for n, p in enumerate(parts) if (p.reason or "").startswith("call failed")]
    if failed:
        reason = f"call failed in {len(failed)} of {len(parts)} samples: " + "; ".join(
            f"sample {n}: {p.reason}" for n, p in failed
        )
        return base.model_copy(update={"status": "invalid", "reason": reason})
    valid = [(n, p) for n, p in enumerate(parts) if p.status in VALID]
    if not valid:
        reasons = {p.reason or "invalid" for p in parts}
        reason = (
            NO_TURNS
            if reasons == {NO_TURNS}
            else f"all {len(parts)} samples invalid: "
            + "; ".join(f"sample {n}: {p.reason}" for n, p in enumerate(parts))
        )
        return base.model_copy(update={"status": "invalid", "reason": reason})
    k = len(valid)
    repairs = [f"sample {n}: {r}" for n, p in valid for r in p.repairs]
    status = "repaired" if any(p.status == "repaired" for _, p in valid) else "ok"
    note = "" if k == len(parts) else f" ({len(parts) - k} invalid sample(s) left out)"
    if first.kind == "overall":
        means = {d: sum(getattr(p, d) or 0 for _, p in valid) / k for d in ("consistency", "collaborativeness")}
        return base.model_copy(
            update={
                "status": status,
                "repairs": repairs,
                "consistency": round_half_up(means["consistency"]),
                "collaborativeness": round_half_up(means["collaborativeness"]),
                "rationale": f"mean of {k} valid sample(s){note}: consistency {means['consistency']:g}, "
                f"collaborativeness {means['collaborativeness']:g}",
            }
        )
    votes: dict[int, dict[str, int]] = {}
    for _, p in valid:
        for lb in p.labels:
            for b in set(lb.behaviours):
                votes.setdefault(lb.turn, {}).setdefault(b, 0)
                votes[lb.turn][b] += 1
    rank = {b: n for n, b in enumerate(order)}
    labels = []
    for turn in first.judged_turns:
        won = sorted((b for b, v in votes.get(turn, {}).items() if 2 * v > k), key=lambda b: rank.get(b, len(rank)))
        labels.append(
            TurnLabel(
                turn=turn, behaviours=won, evidence={b: f"{votes[turn][b]} of {k} valid samples{note}" for b in won}
            )
        )
    return base.model_copy(update={"status": status, "repairs": repairs, "labels": labels})
