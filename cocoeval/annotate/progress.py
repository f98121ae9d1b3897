"""Where the annotation stands after an import (``cocoeval annotate-import``): each annotator's
progress through an export (items labelled completely, of the items in its ``key.json``) and the
agreement so far among all the annotators whose labels the run holds (``judgments/human/``):
Krippendorff's nominal α per behaviour (beyond the paper, whose validation used the leave-one-out
Spearman ρ over conversations) over the turns at least two annotators labelled.

The α values are computed by the analysis layer (``cocoeval.analysis.agreement.nominal_alpha``,
the ``krippendorff`` package, the same numbers as the judge check's turn-level α among
annotators); the annotate layer may not import analysis (tests/test_architecture.py), so the
command passes that function in (``alpha``). Only labels of a target's current continuation count
(a label of an earlier continuation of the setup is stale); a partly labelled conversation's
labelled turns count (α is agreement on the turns labelled so far)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cocoeval.core.targets import targets_for
from cocoeval.core.taxonomy import Taxonomy
from cocoeval.run.humans import read_human_stores

if TYPE_CHECKING:
    from cocoeval.run import Run

    from .rows import KeyEntry

BEYOND = "beyond the paper"
ANY = "any behaviour"
VALID = ("ok", "repaired")


@dataclass(frozen=True)
class AnnotatorProgress:
    """One annotator's progress through an export."""

    annotator: str
    labelled: int
    """Items of the export labelled completely: every numbered turn of a fine-grained item (a
    behaviour or none) and both scores of an overall item."""
    partly: int
    """Items begun but not complete."""
    total: int
    """Items of the export (``key.json``)."""


@dataclass(frozen=True)
class BehaviourAlpha:
    """Krippendorff's nominal α of one behaviour among the annotators, so far."""

    behaviour: str
    """The behaviour's id, or ``any behaviour``."""
    name: str
    alpha: float | None
    """None where undefined (fewer than two annotators, no turn two of them labelled, or the same
    value on every such turn: see ``note``)."""
    turns: int
    """Turns labelled by at least two annotators (the turns α rests on)."""
    positive: int
    """Of the labels on those turns, how many mark the behaviour."""
    note: str | None


@dataclass(frozen=True)
class ImportStatus:
    """Progress and agreement after an import (see the module's text)."""

    annotators: list[str]
    """Every annotator whose labels the run holds."""
    key: str | None
    """The export's key.json progress is counted against; None when none was given."""
    progress: list[AnnotatorProgress]
    """Per annotator (empty without a key)."""
    alpha: list[BehaviourAlpha]
    """Per behaviour of the taxonomy, then any behaviour."""
    label: str = BEYOND
    """Agreement per behaviour so far is beyond the paper."""


def import_status(
    run: Run,
    run_dir: str | Path,
    taxonomy: Taxonomy,
    alpha: Callable[[np.ndarray], float],
    key: dict[str, KeyEntry] | None = None,
    key_path: str | Path | None = None,
) -> ImportStatus:
    """Each annotator's progress through the export of ``key`` (``exchange.read_key``) and α per
    behaviour over all annotators' stored labels; ``alpha`` computes Krippendorff's nominal α of a
    (units, raters) matrix with NaN where a rater did not label a unit (NaN when undefined)."""
    current = {(t.instance.id, t.name): t for t in targets_for(run.instances, run.continuations)}
    stores = read_human_stores(run_dir)
    names = sorted(j[len("human:") :] for j in stores)
    fine: dict[str, dict[tuple[str, str], dict[int, tuple[str, ...]]]] = {}
    done: dict[str, dict[tuple[str, str, str], bool]] = {}
    for ann in names:
        per = fine.setdefault(ann, {})
        status = done.setdefault(ann, {})
        for j in stores[f"human:{ann}"]:
            name = j.target_name or j.target
            t = current.get((j.instance_id, name))
            if t is None or j.target != t.target_id or j.taxonomy_hash != taxonomy.hash:
                continue  # an earlier continuation, or another taxonomy: not counted
            status[(j.instance_id, name, j.kind)] = j.status in VALID
            if j.kind == "fine_grained":
                per[(j.instance_id, name)] = {lb.turn: tuple(lb.behaviours) for lb in j.labels}
    progress = []
    if key is not None:
        for ann in names:
            full = part = 0
            for k in key.values():
                tasks = k.tasks or ("fine_grained", "overall")
                cell = (k.instance_id, k.target)
                got = [done[ann].get((*cell, task)) for task in tasks]
                if all(got):
                    full += 1
                elif any(g is not None for g in got) or fine[ann].get(cell):
                    part += 1
            progress.append(AnnotatorProgress(ann, full, part, len(key)))
    return ImportStatus(
        annotators=names,
        key=None if key_path is None else str(key_path),
        progress=progress,
        alpha=_alphas(fine, names, taxonomy, alpha),
    )


def _alphas(
    fine: dict[str, dict[tuple[str, str], dict[int, tuple[str, ...]]]],
    names: list[str],
    taxonomy: Taxonomy,
    alpha: Callable[[np.ndarray], float],
) -> list[BehaviourAlpha]:
    """α per behaviour (and any behaviour) over the turns labelled by at least two annotators."""
    units = sorted({(*c, turn) for ann in names for c, turns in fine[ann].items() for turn in turns})
    ids = [b.id for b in taxonomy.behaviours]
    x = np.full((len(units), len(names), len(ids) + 1), np.nan)
    for r, ann in enumerate(names):
        for u, (iid, target, turn) in enumerate(units):
            labels = fine[ann].get((iid, target), {})
            if turn in labels:
                x[u, r, :-1] = [b in labels[turn] for b in ids]
                x[u, r, -1] = bool(labels[turn])
    pair = np.isfinite(x[:, :, 0]).sum(axis=1) >= 2 if units else np.zeros(0, dtype=bool)
    turns = int(pair.sum())
    out = []
    for i, (bid, name) in enumerate([*((b.id, b.name) for b in taxonomy.behaviours), (ANY, ANY)]):
        m = x[pair][:, :, i]
        positive = int(np.nansum(m)) if turns else 0
        note = None
        value: float | None = None
        if len(names) < 2:
            note = f"{len(names)} annotator(s) so far: α needs two"
        elif not turns:
            note = "no turn labelled by two annotators yet"
        else:
            v = alpha(m)
            value = float(v) if np.isfinite(v) else None
            if value is None:
                note = "α undefined, " + ("no turn marked with it" if not positive else "every label marks it")
        out.append(BehaviourAlpha(bid, name, value, turns, positive, note))
    return out


def format_status(st: ImportStatus, dry_run: bool = False) -> str:
    """The progress and agreement lines of the import report."""
    lines = []
    when = " (dry run: the stores as they were)" if dry_run else ""
    if st.progress:
        total = st.progress[0].total
        lines.append(f"progress through the export of {st.key} ({total} items){when}:")
        lines += [
            f"  {p.annotator}: {p.labelled} of {p.total} items labelled" + (f", {p.partly} begun" if p.partly else "")
            for p in st.progress
        ]
    elif st.key is None:
        lines.append("progress: give the export's key.json (--key) to see each annotator's progress through it")
    a = st.alpha
    head = (
        f"agreement so far ({BEYOND}): Krippendorff's α (nominal) per behaviour among "
        f"{len(st.annotators)} annotator(s), over the {a[0].turns if a else 0} turn(s) two or more labelled{when}"
    )
    lines.append(head + ":")
    if a and a[0].note and all(r.note == a[0].note for r in a):
        lines.append(f"  {a[0].note}")
        return "\n".join(lines)
    undefined: dict[str, list[str]] = {}
    for r in a:
        if r.alpha is None:
            undefined.setdefault(r.note or "undefined", []).append(r.name)
        else:
            lines.append(f"  {r.name}: α {r.alpha:.2f} ({r.positive} positive label(s))")
    lines += [f"  {note}: {', '.join(ns)}" for note, ns in undefined.items()]
    return "\n".join(lines)
