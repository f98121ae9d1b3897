"""Judge ensembles (beyond the paper): the judgments of an ``EnsembleConfig`` made from its
members' judgments, with no call.

Per target and kind, a member is *valid* when its judgment is ok or repaired; a member with no
judgment of the target counts as invalid ("no judgment by <member>"). Where a strict majority of
the members is invalid, the ensemble's judgment is invalid with their reasons (a target that no
member had anything to judge of keeps the reason ``NO_TURNS``, so it is counted as skipped).
Otherwise, with the valid members: a behaviour is on a turn where a strict majority of them label
it (a tie is no majority), its evidence says which members; the Likert scores are the mean of
theirs, rounded to a whole score (halves up), the exact mean written in the rationale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from cocoeval.core.schema import Instance, Judgment, TurnLabel
from cocoeval.core.targets import NO_TURNS
from cocoeval.core.taxonomy import Taxonomy

from .config import EnsembleConfig

VALID = ("ok", "repaired")


def round_half_up(x: float) -> int:
    """The whole number nearest ``x``, halves up (7.5 -> 8): a Likert mean as a judgment's score."""
    return math.floor(x + 0.5)


def combine(
    ens: EnsembleConfig,
    members: Mapping[str, Sequence[Judgment]],
    ensemble_ids: Mapping[str, str],
    tax: Taxonomy,
    instances: Sequence[Instance] | None = None,
) -> list[Judgment]:
    """The ensemble's judgments: one per (instance, target, kind) that some member judged, of the
    instances the ensemble selects (``instances``: the run's, in order; None: every instance a
    member judged) and the kinds it makes. ``members``: {member name: its current judgments};
    ``ensemble_ids``: {kind: the ensemble's judge id} (``judge_ids``)."""
    chosen = None if instances is None else {i.id for i in ens.select(instances)}
    keys: dict[tuple[str, str, str], None] = {}
    by: dict[str, dict[tuple[str, str, str], Judgment]] = {}
    for m in ens.ensemble:
        by[m] = {}
        for j in members.get(m, []):
            key = (j.instance_id, j.target, j.kind)
            if j.kind in ens.kind and (chosen is None or j.instance_id in chosen):
                by[m][key] = j
                keys.setdefault(key, None)
    return [_one(ens, key, by, ensemble_ids[key[2]], tax) for key in keys]


def _one(
    ens: EnsembleConfig,
    key: tuple[str, str, str],
    by: Mapping[str, Mapping[tuple[str, str, str], Judgment]],
    judge_id: str,
    tax: Taxonomy,
) -> Judgment:
    iid, target, kind = key
    got = {m: by[m].get(key) for m in ens.ensemble}
    valid = {m: j for m, j in got.items() if j is not None and j.status in VALID}
    some = next(j for j in got.values() if j is not None)
    base: dict[str, Any] = dict(
        instance_id=iid,
        target=target,
        target_name=some.target_name,
        judge_id=judge_id,
        judge_name=ens.name,
        kind=kind,
        taxonomy_hash=tax.hash,
        judged_turns=some.judged_turns,
        attempts=0,
        instance_hash=some.instance_hash,
    )
    invalid = {
        m: ("no judgment by this member" if j is None else j.reason or "invalid")
        for m, j in got.items()
        if m not in valid
    }
    if 2 * len(invalid) > len(ens.ensemble):
        reasons = set(invalid.values())
        reason = (
            NO_TURNS
            if reasons == {NO_TURNS}
            else (
                f"{len(invalid)} of {len(ens.ensemble)} members invalid for this target: "
                + "; ".join(f"{m}: {r}" for m, r in invalid.items())
            )
        )
        return Judgment(**base, status="invalid", reason=reason)
    k = len(valid)
    if kind == "overall":
        means = {d: sum(getattr(j, d) or 0 for j in valid.values()) / k for d in ("consistency", "collaborativeness")}
        rationale = (
            f"mean of {k} member(s) ({', '.join(valid)}): consistency {means['consistency']:g}, "
            f"collaborativeness {means['collaborativeness']:g}"
        )
        return Judgment(
            **base,
            consistency=round_half_up(means["consistency"]),
            collaborativeness=round_half_up(means["collaborativeness"]),
            rationale=rationale,
        )
    # majority per turn and behaviour, over the valid members
    votes: dict[int, dict[str, list[str]]] = {}
    for m, j in valid.items():
        for lb in j.labels:
            for b in lb.behaviours:
                votes.setdefault(lb.turn, {}).setdefault(b, []).append(m)
    order = {b: n for n, b in enumerate(tax.ids)}
    labels = []
    for turn in some.judged_turns:  # every judged turn, as an LLM judge's answer gives them ([] for none)
        won = sorted(
            (b for b, ms in votes.get(turn, {}).items() if 2 * len(ms) > k), key=lambda b: order.get(b, len(order))
        )
        labels.append(
            TurnLabel(
                turn=turn,
                behaviours=won,
                evidence={b: f"{len(votes[turn][b])} of {k} members: {', '.join(votes[turn][b])}" for b in won},
            )
        )
    return Judgment(**base, labels=labels)
