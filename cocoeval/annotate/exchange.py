"""Human annotations: blind export of the items to annotate, and import of the labels as
judgments with the annotator as judge (``judge_id = human:<annotator>``).

Row format (CSV with a header, or JSONL with the same keys):
    annotator, item_id | (instance_id, target), turn, behaviours, not_in_taxonomy, consistency,
    collaborativeness
- a fine-grained row names a turn (1-based, as shown) and its behaviours (names or ids separated
  by ';', or ``none`` for a turn without behaviour; JSONL: a list, ``[]`` for none), and in
  ``not_in_taxonomy`` optionally describes a behaviour of the turn that the taxonomy lacks (the
  paper's coverage check, Appendix B.3; kept on the turn's label);
- an overall row leaves ``turn`` empty and gives both Likert scores (integers 1-10).
A row left empty (behaviours empty, null or missing on a turn row; both scores empty on an overall
row) is *not annotated*: skipped and reported, never zero behaviours or a score. A target whose
judged turns are only partly annotated gets an invalid judgment naming the missing turns.
``target`` is ``reference`` or a setup name. Blind exports use ``item_id``, resolved through the
export's ``key.json``.

``import_into_run`` keeps each annotator's labels in their own store,
``RUN/judgments/human/<annotator>.jsonl`` (see ``cocoeval.run.humans``): imports merge, an identical
re-import changes nothing, and changed labels or conflicting rows are refused with a list of them.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cocoeval.core.errors import ConfigError, InputError
from cocoeval.core.jsonio import read_json, write_atomic, write_json, write_jsonl
from cocoeval.core.schema import MAX_ID, Judgment
from cocoeval.core.targets import REFERENCE, Target, behaviour_counts, targets_for  # noqa: F401  (re-exported for users)
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.run.humans import (
    LEGACY_STORE,
    Cell,
    CellKey,
    DrawRecord,
    RecordedDraw,
    build_judgments,
    cells_of,
    name_collisions,
    random_draws,
    record_random_draw,
    recorded_draws,
    sort_key,
    store_path,
)

from .rows import (
    FIELDS,
    NONE,
    KeyEntry,
    NotAnnotated,
    Reject,
    RowProblem,
    describe,
    parse_row,
    read_rows,
    rejected,
)
from .sample import PAPER_CONVERSATIONS, check_setups, draw, draw_random, instructions

if TYPE_CHECKING:
    from cocoeval.run import Run
    from cocoeval.run.params import AnnotationSection


TURN_NOTE = f"behaviours: names or ids separated by ;, or {NONE} (an empty cell is not annotated)"
OVERALL_NOTE = "consistency and collaborativeness: whole numbers 1-10 (empty: not annotated)"


@dataclass(frozen=True)
class ExportReport:
    """What ``export_items`` drew and wrote."""

    items: int
    """Items written to ``items.jsonl`` (one per conversation, its tasks listed)."""
    rows: int
    """Rows of ``template.csv`` to fill."""
    folder: str
    """The folder written."""
    sample: dict[str, dict[str, Any]]
    """The draw per task (overall, fine_grained), as ``export.json`` records it: counts, targets,
    seed, instances or targets drawn, per dataset or stratum, and notes."""
    recorded: RecordedDraw | None
    """Where a random draw (``random_per_target``) is recorded in the run; None otherwise."""


@dataclass(frozen=True)
class AnnotatorImport:
    """What an import did to one annotator's store (``import_into_run``)."""

    added: int
    """Cells (turn labels and overall scores) new to the store."""
    unchanged: int
    """Cells equal to the stored ones (nothing changes)."""
    replaced: int
    """Cells that replaced a stored value (``replace`` only)."""
    store: str
    """The annotator's store, ``judgments/human/<annotator>.jsonl``."""
    judgments: int
    """Judgments in the store after the import."""
    invalid: int
    """Of those, invalid ones (judged turns left unlabelled)."""
    invalid_reasons: list[str]
    """Up to five distinct reasons of the invalid judgments."""
    written: bool
    """Whether the store was written (something changed and not a dry run)."""


@dataclass(frozen=True)
class ImportReport:
    """The report of ``import_into_run``."""

    file: str
    """The annotation file imported."""
    rows: int
    """Its rows."""
    not_annotated: int
    """Rows left empty (skipped, each with a note)."""
    dry_run: bool
    """Nothing was written."""
    annotators: dict[str, AnnotatorImport]
    """Per annotator of the file: what the import did to the store."""
    notes: list[dict[str, str]]
    """{file, row, value, action} for every repaired, duplicate, not annotated or replaced row."""


def _item_id(seed: int, t: Target) -> str:
    return hashlib.sha256(f"{seed}|{t.instance.id}|{t.name}".encode()).hexdigest()[:10]


def export_items(
    run: Run,
    out_dir: str | Path,
    *,
    seed: int = 0,
    setups: list[str] | None = None,
    overall_conversations: int = PAPER_CONVERSATIONS["overall"],
    fine_conversations: int = PAPER_CONVERSATIONS["fine_grained"],
    overall_setups: list[str] | None = None,
    fine_setups: list[str] | None = None,
    taxonomy: Taxonomy | None = None,
    plan: AnnotationSection | None = None,
    random_per_target: int | None = None,
    exclude_annotated: bool = False,
    active: DrawRecord | None = None,
) -> ExportReport:
    """Draw the conversations to annotate as in the paper's Appendix B.1 and write them blind.

    Per task, ``*_conversations`` conversations: instances drawn at random (``seed``), evenly over
    the source datasets, each with every target (the human reference and the setups: ``setups``,
    or per task ``overall_setups`` / ``fine_setups``; default every setup of the run); see
    ``sample.draw``. 0 leaves a task out. Writes ``items.jsonl`` (what annotators see:
    context and numbered turns, the tasks of each item, no hint of who wrote them, shuffled),
    ``template.csv`` (one row per numbered turn of a fine-grained item, one overall row per
    overall item; its ``note`` column says what to fill: an empty cell is *not annotated*, ``none``
    says no behaviour), ``instructions.md (the judge's own instructions and rubric, from its prompt
    files), and, for the organiser only, ``key.json`` (item id -> instance and target) and
    ``export.json`` (the draw, its notes, the prompts and taxonomy).

    ``plan``, a params file's ``annotation:`` section, replaces the seed, setup and count arguments:
    its tasks (a task it leaves out is not exported), each with its setups, conversations, evenness
    and seed.

    ``random_per_target`` (beyond the paper) replaces B.1's draws: for the fine-grained task,
    that many conversations of each target (the reference and ``setups``), drawn at random
    stratified by dataset (``sample.draw_random``), for the corrected rates of
    ``analysis.judge_check``; the draw is also recorded in the run directory
    (``annotation/random_draws.json``, which those rates read) unless a recorded draw holds the same
    conversations (the same seed gives the same draw: it is recorded once; ``recorded`` in the
    result says which). Asking for more conversations than a target has is a ConfigError, before
    anything is written. ``exclude_annotated`` (with ``random_per_target`` only) leaves out the
    conversations already annotated by a human (``annotated_conversations``), for a further round:
    the conversations it left out are recorded with the draw, and the same seed, count and targets
    again give the same draw. ``active`` (beyond the paper) is a draw made by ``cocoeval
    annotate-next`` (``analysis.active.plan_next``'s record, mode "active", with each pool
    conversation's inclusion probability): its conversations are exported for the fine-grained task
    as a random draw's are, and it is recorded in the run the same way."""
    tax = taxonomy or load_taxonomy()
    run_tax = run.manifest.taxonomy
    if run_tax.get("hash") not in (None, tax.hash):
        raise ConfigError(
            f"the run uses taxonomy {run_tax.get('name')!r} ({run_tax['hash']}), the export {tax.name!r} ({tax.hash})",
            hint="pass the run's taxonomy file (--taxonomy FILE)",
        )
    if random_per_target is not None or active is not None:
        specs = []
    elif plan is not None:
        seed = plan.seed
        specs = [
            (task, d.conversations, d.setups, d.even_over_datasets, plan.seed if d.seed is None else d.seed)
            for task in ("overall", "fine_grained")
            if (d := getattr(plan, task)) is not None
        ]
    else:
        if overall_conversations < 0 or fine_conversations < 0 or not (overall_conversations or fine_conversations):
            raise ConfigError(
                f"nothing to export: {overall_conversations} overall and {fine_conversations} "
                "fine-grained conversations",
                hint="the paper's numbers are 54 and 36",
            )
        specs = [
            ("overall", overall_conversations, overall_setups if overall_setups is not None else setups, True, seed),
            ("fine_grained", fine_conversations, fine_setups if fine_setups is not None else setups, True, seed),
        ]
    available = sorted(run.continuations)
    all_targets = targets_for(run.instances, run.continuations)
    sample: dict[str, dict[str, Any]] = {}
    tasks_of: dict[tuple[str, str], list[str]] = {}
    for task, n, own, even, draw_seed in specs:
        if not n:
            continue
        names = [REFERENCE, *check_setups(own, available, f"{task} task")]
        d = draw(all_targets, names, n, random.Random(f"{draw_seed}|{task}"), even=even)
        chosen = set(d.instances)
        for t in all_targets:
            if t.instance.id in chosen and t.name in names:
                tasks_of.setdefault((t.instance.id, t.name), []).append(task)
        sample[task] = {
            "conversations_requested": n,
            "targets": names,
            "seed": draw_seed,
            "even_over_datasets": even,
            **d.to_json(),
            "conversations": len(d.instances) * len(names),
        }
    if random_per_target is not None:
        if random_per_target < 1:
            raise ConfigError(f"--random {random_per_target}: draw at least 1 conversation per target")
        names = [REFERENCE, *check_setups(setups, available, "random draw")]
        excluded = _excluded(run, all_targets, names, seed, random_per_target) if exclude_annotated else []
        rd = draw_random(
            all_targets,
            names,
            random_per_target,
            random.Random(f"{seed}|random"),
            exclude={(i, n) for i, n in excluded},
        )
        if excluded and (outside := _outside_random_draws(run, excluded)):
            rd.notes.append(
                f"{outside} of the conversations left out were annotated outside a recorded random "
                "draw (e.g. B.1's): this draw is random over the rest of the conversations only"
            )
        for iid, name in rd.targets:
            tasks_of.setdefault((iid, name), []).append("fine_grained")
        sample["fine_grained"] = {
            "mode": "random",
            "per_target": random_per_target,
            "targets_drawn": names,
            "seed": seed,
            "exclude_annotated": exclude_annotated,
            **rd.to_json(),
            "conversations": len(rd.targets),
            **({"excluded": excluded} if exclude_annotated else {}),
        }
    elif active is not None:
        for iid, name in active.targets:
            tasks_of.setdefault((iid, name), []).append("fine_grained")
        sample["fine_grained"] = {
            **active.model_dump(mode="json", exclude_unset=True),
            "notes": [],
            "conversations": len(active.targets),
        }
    elif exclude_annotated:
        raise ConfigError(
            "leaving out the conversations already annotated (--exclude-annotated) is for a random draw",
            hint="add --random N",
        )
    targets = [t for t in all_targets if (t.instance.id, t.name) in tasks_of]
    random.Random(seed).shuffle(targets)
    out = Path(out_dir)
    items, key, rows = [], {}, []
    for t in targets:
        iid = _item_id(seed, t)
        tasks = tasks_of[(t.instance.id, t.name)]
        fine = "fine_grained" in tasks
        key[iid] = {"instance_id": t.instance.id, "target": t.name, "target_id": t.target_id, "tasks": tasks}
        inst = t.instance
        items.append(
            {
                "item_id": iid,
                "tasks": tasks,
                "goals": inst.metadata.goals,
                "participants": [p.model_dump(exclude_none=True) for p in inst.metadata.participants],
                "summary": inst.summary.text,
                "history": [{"speaker": x.speaker, "text": x.text} for x in inst.history],
                "turns": [
                    {"turn": i + 1, "speaker": x.speaker, "text": x.text, "annotate": fine and i in t.judged}
                    for i, x in enumerate(t.turns)
                ],
            }
        )
        if fine:
            rows += [{"item_id": iid, "turn": i + 1, "note": TURN_NOTE} for i in t.judged]
        if "overall" in tasks:
            rows.append({"item_id": iid, "note": OVERALL_NOTE})
    text, refs = instructions(tax, list(sample))
    write_atomic(out / "instructions.md", text)
    write_jsonl(out / "items.jsonl", items)
    write_json(out / "key.json", key)
    write_json(
        out / "export.json",
        {"seed": seed, "taxonomy": {"name": tax.name, "hash": tax.hash}, "prompts": refs, "sample": sample},
    )
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_atomic(out / "template.csv", buf.getvalue())
    recorded = None
    if (random_per_target is not None or active is not None) and run.path is not None:
        recorded = record_random_draw(run.path, sample["fine_grained"], out)
    return ExportReport(items=len(items), rows=len(rows), folder=str(out), sample=sample, recorded=recorded)


def annotated_conversations(run: Run) -> set[tuple[str, str]]:
    """(instance id, target name) of every conversation some annotator labelled turn by turn (a
    fine-grained human judgment, even a partly annotated one) of the target's current
    continuation (a judgment of an earlier continuation of the setup does not count)."""
    ids = {(t.instance.id, t.name): t.target_id for t in targets_for(run.instances, run.continuations)}
    return {
        (j.instance_id, name)
        for js in run.human.values()
        for j in js
        if j.kind == "fine_grained" and ids.get((j.instance_id, name := j.target_name or j.target)) == j.target
    }


def _excluded(run: Run, targets: list[Target], names: list[str], seed: int, per_target: int) -> list[list[str]]:
    """The conversations an ``exclude_annotated`` draw leaves out, as [instance id, target] pairs:
    those a recorded draw with the same seed, count and targets left out (so that the same command
    gives the same draw after its conversations were annotated), else the ones annotated now."""
    for d in recorded_draws(run.path) or []:
        if (
            d.exclude_annotated
            and d.seed == seed
            and d.per_target == per_target
            and d.targets_drawn == names
            and d.excluded is not None
        ):
            return [[i, n] for i, n in d.excluded]
    done = annotated_conversations(run)
    return sorted([t.instance.id, t.name] for t in targets if t.name in names and (t.instance.id, t.name) in done)


def _outside_random_draws(run: Run, excluded: list[list[str]]) -> int:
    """How many of the ``excluded`` conversations no recorded random draw holds."""
    drawn = random_draws(run.path) or {}
    return sum(i not in drawn.get(n, set()) for i, n in excluded)


def format_export(rep: ExportReport) -> str:
    """What ``export_items`` drew, per task, with every note, and what to hand to whom."""
    lines = []
    for task, d in rep.sample.items():
        if d.get("mode") in ("random", "active"):
            lines += _format_random(task, d, rep.recorded)
            continue
        per = ", ".join(f"{k} {v}" for k, v in d["per_dataset"].items()) or "none"
        lines.append(
            f"{task}: {d['conversations']} conversations ({len(d['instances'])} instances x "
            f"{len(d['targets'])} targets: {', '.join(d['targets'])}); instances per dataset: {per}"
        )
        lines += [f"  note: {note}" for note in d["notes"]]
    lines.append(
        f"{rep.items} items ({rep.rows} rows to fill) in {rep.folder}: give annotators items.jsonl, "
        "template.csv and instructions.md; keep key.json (for the import) and export.json"
    )
    lines.append(
        f"in template.csv, {NONE} in behaviours says a turn shows no behaviour; a row left empty is not "
        "annotated (skipped and reported by annotate-import, never counted as zero)"
    )
    return "\n".join(lines)


def _format_random(task: str, d: dict[str, Any], recorded: RecordedDraw | None) -> list[str]:
    """The lines of ``format_export`` for a random draw: per target, the conversations drawn of each
    dataset, and whether the draw was recorded in the run or was already."""
    names = d["targets_drawn"]
    lines = [
        f"{task}: {d['conversations']} conversations drawn "
        + (
            f"with recorded inclusion probabilities (annotate-next, seed {d['seed']}), up to {d['per_target']} of "
            f"each of {len(names)} target(s) not yet annotated"
            if d.get("mode") == "active"
            else f"at random (seed {d['seed']}), {d['per_target']} of each of {len(names)} target(s), stratified "
            "by dataset" + (", leaving out those already annotated" if d.get("exclude_annotated") else "")
        )
        + ":"
    ]
    for name in names if d.get("mode") != "active" else []:
        strata = [(k.split("|", 1)[1], v) for k, v in d["per_stratum"].items() if k.split("|", 1)[0] == name]
        lines.append(f"  {name}: " + ", ".join(f"{ds} {drawn} of {of}" for ds, (drawn, of) in strata))
    lines += [f"  note: {note}" for note in d["notes"]]
    if recorded is not None and recorded.added:
        lines.append(f"recorded as draw {recorded.draw} in {recorded.path} (the corrected rates read it)")
    elif recorded is not None:
        lines.append(
            f"the same draw is already recorded as draw {recorded.draw} in {recorded.path} (made "
            f"{recorded.made}, exported to {recorded.export}): not recorded again (the same "
            "seed gives the same draw; for a further round "
            + (
                "give another --seed)"
                if d.get("exclude_annotated")
                else "import this one's annotations and add --exclude-annotated)"
            )
        )
    return lines


@dataclass
class Parsed:
    """The cells of one annotation file, and a note for every repaired or duplicate row."""

    file: str
    rows: int
    cells: dict[CellKey, Cell]
    notes: list[dict[str, str]] = field(default_factory=list)
    """{file, row, value, action} for every repaired value, duplicate and not annotated row."""
    not_annotated: int = 0
    """Rows left empty (skipped, each with a note)."""


def read_key(path: str | Path) -> dict[str, KeyEntry]:
    """An export's ``key.json``: {item id: its entry}; an entry without a non-empty ``instance_id``
    or ``target``, or with ``tasks`` not a list of texts, is an InputError naming the file and the item."""
    keymap = read_json(path)
    hint = "pass the key.json that annotate-export wrote with these items, unedited"
    if not isinstance(keymap, dict):
        raise InputError(f"expected a JSON object of item ids, got {type(keymap).__name__}", file=str(path), hint=hint)
    for item, k in keymap.items():
        if not isinstance(k, dict):
            raise InputError(
                f"expected an object with instance_id and target, got {type(k).__name__}",
                file=str(path),
                record=f"item {item!r}",
                hint=hint,
            )
        if bad := [f for f in ("instance_id", "target") if not isinstance(k.get(f), str) or not k[f]]:
            raise InputError(
                f"no {' and no '.join(bad)} (a text) in the entry", file=str(path), record=f"item {item!r}", hint=hint
            )
        for f in ("instance_id", "target"):
            v = k[f]
            odd = [c for c in v if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]
            if odd or len(v) > MAX_ID:
                why = (
                    f"a control or invisible character (U+{ord(odd[0]):04X})"
                    if odd
                    else f"{len(v)} characters (at most {MAX_ID})"
                )
                raise InputError(
                    f"its {f} has {why}: no instance or target of a run has one",
                    file=str(path),
                    record=f"item {item!r}",
                    hint=hint,
                )
        tasks = k.get("tasks") or []
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            raise InputError("its tasks are not a list of texts", file=str(path), record=f"item {item!r}", hint=hint)
    return {
        item: KeyEntry(
            instance_id=k["instance_id"],
            target=k["target"],
            target_id=k["target_id"] if isinstance(k.get("target_id"), str) else None,
            tasks=tuple(k.get("tasks") or ()),
        )
        for item, k in keymap.items()
    }


def parse_annotations(
    path: str | Path, run: Run, *, key: str | Path | None = None, taxonomy: Taxonomy | None = None
) -> Parsed:
    """Read an annotation file into cells. Every unusable row and every pair of rows that give
    different values for the same cell is collected; if there is any, one InputError lists them all
    (``.rejected``: file, row, value, action) and nothing is imported. Agreeing duplicates are kept
    once and noted, as is every repaired value. Rows left empty are not annotated: skipped and
    noted ("not annotated, skipped"); a file with no annotated row at all is an InputError."""
    tax = taxonomy or load_taxonomy()
    p = Path(path)
    keymap = read_key(key) if key else {}
    targets = {(t.instance.id, t.name): t for t in targets_for(run.instances, run.continuations)}
    notes: list[dict[str, str]] = []
    if p.suffix == ".json":  # a Label Studio export of annotate-export --format labelstudio's tasks
        from .labelstudio import read_labelstudio

        rows, notes = read_labelstudio(p)
    else:
        rows = read_rows(p)
    cells: dict[CellKey, Cell] = {}
    problems: list[RowProblem] = []
    skipped = 0
    for where, r in rows:
        try:
            k, cell = parse_row(r, p.suffix == ".jsonl", keymap, targets, tax)
        except Reject as e:
            problems.append(RowProblem(row=where, reason=e.reason, value=e.value, hint=e.hint))
            continue
        except NotAnnotated as e:
            skipped += 1
            notes.append(
                {"file": str(p), "row": where, "value": str(e.value), "action": f"not annotated, skipped: {e.what}"}
            )
            continue
        cell.where = where
        notes += [{"file": str(p), "row": where, "value": cell.raw, "action": f"repaired: {x}"} for x in cell.repairs]
        first = cells.get(k)
        if first is None:
            cells[k] = cell
        elif first.same(cell):
            notes.append(
                {
                    "file": str(p),
                    "row": where,
                    "value": cell.raw,
                    "action": f"duplicate of {first.where} (same value); kept once",
                }
            )
        else:
            problems.append(
                RowProblem(
                    row=where,
                    value=cell.raw,
                    reason=f"conflict for {describe(k)}: {first.where} gives {first.raw!r}, {where} gives {cell.raw!r}",
                )
            )
    if problems:
        raise rejected(p, problems, "rows rejected", "fix or remove these rows and import again")
    if not cells:
        raise InputError(
            f"none of the {len(rows)} rows is annotated (behaviours or scores left empty); nothing was imported",
            file=str(p),
            hint=f"fill behaviours on turn rows ({NONE} for a turn without behaviour) and both scores on overall rows",
        )
    return Parsed(str(p), len(rows), cells, notes, skipped)


def import_annotations(
    path: str | Path, run: Run, *, key: str | Path | None = None, taxonomy: Taxonomy | None = None
) -> list[Judgment]:
    """The judgments of one annotation file (nothing is written; see ``import_into_run``). An
    annotator who left judged turns unlabelled gets an invalid judgment saying which."""
    tax = taxonomy or load_taxonomy()
    parsed = parse_annotations(path, run, key=key, taxonomy=tax)
    targets = {(t.instance.id, t.name): t for t in targets_for(run.instances, run.continuations)}
    return build_judgments(parsed.cells, targets, tax)


def import_into_run(
    path: str | Path,
    run_dir: str | Path,
    *,
    key: str | Path | None = None,
    taxonomy: Taxonomy | None = None,
    replace: bool = False,
    dry_run: bool = False,
) -> ImportReport:
    """Merge an annotation file into the run's per-annotator stores (``judgments/human/<annotator>.jsonl``).

    New turns and items are added; a value equal to the stored one changes nothing (importing a
    file twice leaves the stores byte for byte); a different value is a conflict, refused with a
    list of them unless ``replace``. Annotator names that collide with a judge of the run (or with
    another annotator, ignoring case) are refused. Nothing is written when anything is refused or
    with ``dry_run``. Returns the report: rows, per annotator the cells added, unchanged and replaced,
    and ``notes`` ({file, row, value, action}) for every repaired, duplicate or replaced row."""
    from cocoeval.run import Run

    rd = Path(run_dir)
    tax = taxonomy or load_taxonomy()
    if (rd / LEGACY_STORE).exists():
        raise InputError(
            "this run keeps human labels in one file written by an older cocoeval; they are now kept per annotator",
            file=str(rd / LEGACY_STORE),
            hint=f"move that file out of the run (e.g. to {rd / 'human-old.jsonl'}) and import the "
            "original annotation files again",
        )
    run = Run.open(rd)
    run_tax = run.manifest.taxonomy
    if run_tax.get("hash") not in (None, tax.hash):
        raise ConfigError(
            f"the run uses taxonomy {run_tax.get('name')!r} ({run_tax['hash']}), the import {tax.name!r} ({tax.hash})",
            hint="pass the run's taxonomy file (--taxonomy FILE)",
        )
    parsed = parse_annotations(path, run, key=key, taxonomy=tax)
    p = Path(path)
    annotators = sorted({k[0] for k in parsed.cells})
    if clashes := name_collisions(rd, set(annotators)):
        raise InputError("; ".join(clashes), file=str(p), hint="rename the annotator in the file; nothing was imported")
    targets = {(t.instance.id, t.name): t for t in targets_for(run.instances, run.continuations)}
    notes = list(parsed.notes)
    done: dict[str, AnnotatorImport] = {}
    conflicts, writes = [], {}
    for ann in annotators:
        stored = run.all_judgments.get(f"human:{ann}", [])
        for j in stored:
            if j.taxonomy_hash != tax.hash:
                raise InputError(
                    f"the store of {ann!r} was made with another taxonomy ({j.taxonomy_hash})",
                    file=str(store_path(rd, ann)),
                    hint="import with the taxonomy of the run",
                )
        merged = cells_of(stored, ann)
        counts = {"added": 0, "unchanged": 0, "replaced": 0}
        touched = set()
        for k, cell in parsed.cells.items():
            if k[0] != ann:
                continue
            old = merged.get(k)
            if old is not None and old.same(cell):
                counts["unchanged"] += 1
                continue
            if old is not None and not replace:
                conflicts.append(
                    RowProblem(
                        row=cell.where,
                        value=cell.raw,
                        reason=f"{describe(k)}: stored {old.raw!r}, the file gives {cell.raw!r}",
                    )
                )
                continue
            if old is not None:
                notes.append(
                    {"file": str(p), "row": cell.where, "value": cell.raw, "action": f"replaced the stored {old.raw!r}"}
                )
            counts["added" if old is None else "replaced"] += 1
            merged[k] = cell
            touched.add((k[1], k[2], k[3] is None))
        kept = [j for j in stored if (j.instance_id, j.target_name or j.target, j.kind == "overall") not in touched]
        rebuilt = build_judgments(
            {k: c for k, c in merged.items() if (k[1], k[2], k[3] is None) in touched}, targets, tax
        )
        js = sorted(kept + rebuilt, key=sort_key)
        out = store_path(rd, ann)
        writes[out] = js if touched else None
        bad = [j for j in js if j.status == "invalid"]
        done[ann] = AnnotatorImport(
            **counts,
            store=str(out),
            judgments=len(js),
            invalid=len(bad),
            invalid_reasons=sorted({j.reason or "" for j in bad})[:5],
            written=bool(touched) and not dry_run,
        )
    if conflicts:
        raise rejected(
            p,
            conflicts,
            "rows change labels already imported",
            "to correct stored labels on purpose import with --replace (replace=True); "
            "labels of another person need their own annotator name",
        )
    if not dry_run:
        for out, written in writes.items():
            if written is not None:
                write_jsonl(out, written)
    return ImportReport(
        file=str(p), rows=parsed.rows, not_annotated=parsed.not_annotated, dry_run=dry_run, annotators=done, notes=notes
    )


def format_report(rep: ImportReport) -> str:
    """The import report as text: one line per annotator, one per noted row."""
    skipped = rep.not_annotated
    lines = [
        f"{rep.file}: {rep.rows} rows"
        + (
            f", {skipped} not annotated (left empty; skipped, listed below; write {NONE} for a turn without behaviour)"
            if skipped
            else ""
        )
        + (" (dry run: nothing written)" if rep.dry_run else "")
    ]
    for ann, a in rep.annotators.items():
        change = (
            "nothing new (already imported)"
            if not (a.added or a.replaced)
            else f"{a.added} added, {a.replaced} replaced, {a.unchanged} unchanged"
        )
        lines.append(
            f"  annotator {ann}: {change} -> {a.store} ({a.judgments} judgments"
            + (f", {a.invalid} invalid: {'; '.join(a.invalid_reasons)}" if a.invalid else "")
            + ")"
        )
    lines += [f"  {n['row']}: {n['value']!r}: {n['action']}" for n in rep.notes]
    return "\n".join(lines)


def export_annotations(judgments: list[Judgment], path: str | Path) -> None:
    """Write judgments (human or LLM) in the row format above (CSV or JSONL by extension)."""
    p = Path(path)
    jsonl = p.suffix == ".jsonl"
    rows: list[dict[str, Any]] = []
    for j in judgments:
        base = {
            "annotator": j.judge_name or j.judge_id,
            "instance_id": j.instance_id,
            "target": j.target_name or j.target,
        }
        if j.kind == "overall":
            rows.append({**base, "consistency": j.consistency, "collaborativeness": j.collaborativeness})
        else:
            rows += [
                {
                    **base,
                    "turn": lb.turn + 1,
                    "behaviours": lb.behaviours if jsonl else ";".join(lb.behaviours) or NONE,
                    **({"not_in_taxonomy": lb.not_in_taxonomy} if lb.not_in_taxonomy else {}),
                }
                for lb in j.labels
            ]
    if jsonl:
        write_jsonl(p, rows)
        return
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_atomic(p, buf.getvalue())
