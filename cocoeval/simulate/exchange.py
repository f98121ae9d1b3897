"""Bring your own continuations (docs/simulators.md).

``cocoeval export-instances`` writes what a simulator needs per instance (``SimulatorInput``, one
JSON object per line; JSON Schema ``schemas/simulator_input.schema.json``); a simulator written
elsewhere answers with one record per instance (``ImportedRecord``; JSON Schema
``schemas/continuation.schema.json``); a setup ``{name, continuations: FILE, description}``
imports them (``import_continuations``), and they are judged, analysed and browsed like
simulated ones.

What the import does with a bad file: a record that cannot be read (not JSON, not an object, no
``instance_id``, a field the schema lacks, ``turns`` not a list), an instance id the run does not
have and an instance given twice are errors naming the file, the line and the fix (nothing is
imported). A record that can be read but is no valid continuation (a turn without speaker or
text, too few or too many turns, made from another version of the instance: its ``instance_hash``
is not the run's instance's) is kept, counted invalid with the reason (never padded, cut or
dropped): once, in ``import-continuations --check``, the run's summary and the invalid accounting
alike. Speakers not among the participants are kept and noted (``unknown_speakers``), as for a
simulated continuation; when they say most of the turns, the continuation is invalid
(``validity.MAX_UNKNOWN_SPEAKER_SHARE``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from cocoeval.core.errors import InputError
from cocoeval.core.files import MAX_IMPORT_BYTES, read_bounded_text
from cocoeval.core.jsonio import parse_json_line, write_jsonl
from cocoeval.core.schema import Continuation, Instance, Turn, is_human_ai, participant_names

from .setup import ImportedSetup
from .validity import continuation

FORMAT: Literal["cocoeval-simulator-input/1"] = "cocoeval-simulator-input/1"
"""The ``format`` of an exported instance line; a new version when its fields change meaning."""


class InputTurn(BaseModel):
    """One turn: who said it and what."""

    model_config = ConfigDict(extra="forbid")

    speaker: str
    text: str


class InputParticipant(BaseModel):
    """A participant as M lists it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    role: str | None = None
    """Their role (a meeting's chair, a debate side), when known."""
    stance: str | None = None
    """Their stance (debates: for or against the motion), when known."""


class SimulatorInput(BaseModel):
    """One line of ``cocoeval export-instances``: what a simulator needs to write one instance's
    continuation. Write ``n_turns`` turns that continue ``history``, each ``{speaker, text}``."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["cocoeval-simulator-input/1"] = FORMAT
    id: str
    """The instance id: give it back as ``instance_id`` in the continuation's record."""
    dataset: str
    kind: Literal["multiparty", "human_ai"]
    """multiparty (meetings, debates: write every participant's turns) or human_ai (write the
    user's turns; the assistant's come from a chatbot)."""
    goals: list[str]
    """M: the conversation's goals."""
    participants: list[InputParticipant]
    """M: the participants (name, role, stance)."""
    summary: str
    """S: a paragraph on what was said before the history."""
    history: list[InputTurn]
    """x: the turns just before the continuation, oldest first."""
    n_turns: int
    """How many turns to write (the human reference's length)."""
    instance_hash: str
    """The instance's content hash: give it back, so a continuation of an instance edited since is
    found out (stale)."""


class ImportedRecord(BaseModel):
    """One line of a continuations file to import: one instance's continuation."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    """The ``id`` of the exported instance."""
    turns: list[dict[str, Any]]
    """The turns written, each ``{"speaker": ..., "text": ...}``, exactly ``n_turns`` of them."""
    model: str | None = None
    """The model or system that wrote them."""
    notes: list[str] | str | None = None
    """Anything to keep with the continuation (kept in its notes)."""
    usage: dict[str, Any] | None = None
    """What writing it cost, as the simulator counted it (e.g. input_tokens, output_tokens,
    cost_usd); kept as given, not added to the run's usage."""
    instance_hash: str | None = None
    """The exported ``instance_hash``: another one than the run's instance has makes the
    continuation invalid (it continues another version of the instance)."""


def simulator_input(inst: Instance) -> SimulatorInput:
    m = inst.metadata
    return SimulatorInput(
        id=inst.id,
        dataset=inst.dataset,
        kind="human_ai" if is_human_ai(inst) else "multiparty",
        goals=m.goals,
        participants=[InputParticipant(name=p.name, role=p.role, stance=p.stance) for p in m.participants],
        summary=inst.summary.text,
        history=[InputTurn(speaker=t.speaker, text=t.text) for t in inst.history],
        n_turns=len(inst.reference),
        instance_hash=inst.content_hash(),
    )


def export_instances(instances: Sequence[Instance], out: str | Path) -> int:
    """Write one ``SimulatorInput`` per instance to ``out`` (JSONL); returns the count. The human
    reference is not written (only its length)."""
    return write_jsonl(out, [simulator_input(i) for i in instances])


def json_schemas() -> dict[str, dict[str, Any]]:
    """{file name: JSON Schema} of the two formats, as shipped in ``cocoeval/simulate/schemas``."""
    return {
        "simulator_input.schema.json": SimulatorInput.model_json_schema(),
        "continuation.schema.json": ImportedRecord.model_json_schema(),
    }


_HINT = "see docs/simulators.md for the record's shape (schema: cocoeval/simulate/schemas/continuation.schema.json)"


IMPORT_HINT = (
    "give a continuations file (JSONL, one record per instance; at most "
    f"{MAX_IMPORT_BYTES >> 20} MiB): a regular file, not a pipe, device or folder (see docs/simulators.md)"
)


def read_import_file(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) of each non-blank line of a continuations file to import,
    read as untrusted data (``core.files.read_bounded``): a named pipe, a device (a link to
    ``/dev/zero``), a folder or a file over ``MAX_IMPORT_BYTES`` is an InputError naming the file,
    before a byte is parsed."""
    text = read_bounded_text(path, MAX_IMPORT_BYTES, hint=IMPORT_HINT)
    for n, line in enumerate(text.split("\n"), start=1):  # JSONL lines end at \n only (as iter_jsonl)
        if line.strip():
            yield n, parse_json_line(line, path, n)


def import_continuations(
    setup: ImportedSetup, setup_id: str, instances: Sequence[Instance], warn: Callable[[str], None] | None = None
) -> list[Continuation]:
    """The continuations of an imported setup, one per record of its file (see the module's text
    for what is an error and what an invalid continuation). ``instances``: the run's; records of
    instances the setup does not select (``datasets``, ``max_per_dataset``) are left out, and said
    (``warn``), as are the selected instances the file has no record of."""
    path = Path(setup.continuations)
    by_id = {i.id: i for i in instances}
    chosen = {i.id for i in setup.select(instances)}
    seen: dict[str, int] = {}
    out: list[Continuation] = []
    skipped = 0
    for n, obj in read_import_file(path):  # not JSON, empty, special or oversize: an InputError naming it
        where = dict(file=str(path), record=f"line {n}")
        try:
            rec = ImportedRecord.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "(the record)"
            raise InputError(f"imported setup {setup.name!r}: {loc}: {err['msg']}", **where, hint=_HINT) from None
        if rec.instance_id not in by_id:
            raise InputError(
                f"imported setup {setup.name!r}: instance {rec.instance_id!r} is not among the run's "
                f"{len(by_id)} instances",
                **where,
                hint="export the instances of this run (cocoeval export-instances RUN) and simulate "
                "those, or remove the line",
            )
        if rec.instance_id in seen:
            raise InputError(
                f"imported setup {setup.name!r}: instance {rec.instance_id!r} is here twice (lines "
                f"{seen[rec.instance_id]} and {n}); it would be counted twice",
                **where,
                hint="keep one continuation per instance",
            )
        seen[rec.instance_id] = n
        if rec.instance_id not in chosen:
            skipped += 1
            continue
        out.append(_continuation(rec, by_id[rec.instance_id], setup, setup_id, n))
    if warn and skipped:
        warn(
            f"imported setup {setup.name}: {skipped} record(s) in {path} are of instances the setup does not "
            "select (datasets, max_per_dataset); not imported"
        )
    if warn and (missing := len(chosen - set(seen))):
        warn(
            f"imported setup {setup.name}: {path} has no continuation of {missing} of the {len(chosen)} instances "
            "it selects (counted not simulated)"
        )
    return out


def _json_type(v: Any) -> str:
    """A JSON value's type as the file's author wrote it: number, true/false, list, object."""
    return (
        "true/false"
        if isinstance(v, bool)
        else "number"
        if isinstance(v, int | float)
        else "list"
        if isinstance(v, list)
        else "object"
        if isinstance(v, dict)
        else type(v).__name__
    )


def _continuation(rec: ImportedRecord, inst: Instance, setup: ImportedSetup, setup_id: str, line: int) -> Continuation:
    problems: list[str] = []
    turns: list[Turn] = []
    for i, t in enumerate(rec.turns, start=1):
        sp, tx = t.get("speaker"), t.get("text")
        extra = sorted(set(t) - {"speaker", "text"})
        if sp is not None and not isinstance(sp, str):
            problems.append(f"turn {i}'s speaker is a {_json_type(sp)}, not text")
        elif not isinstance(sp, str) or not sp.strip():
            problems.append(f"turn {i} has no speaker")
        elif tx is not None and not isinstance(tx, str):
            problems.append(f"turn {i}'s text ({sp}) is a {_json_type(tx)}, not text")
        elif not isinstance(tx, str) or not tx.strip():
            problems.append(f"turn {i} ({sp}) has no text")
        else:
            turns.append(Turn(speaker=sp.strip(), text=tx.strip()))
        if extra:
            problems.append(f"turn {i} has fields other than speaker and text: {', '.join(extra)}")
    want = len(inst.reference)
    if len(rec.turns) != want:
        problems.append(f"has {len(rec.turns)} turn(s) where the reference has {want} (never padded or cut)")
    now = inst.content_hash()
    if rec.instance_hash is not None and rec.instance_hash != now:
        problems.append(
            f"made from another version of the instance (instance_hash {rec.instance_hash}; the run's "
            f"instance has {now}): export the instances again and simulate those"
        )
    names = set(participant_names(inst))
    unknown = list(dict.fromkeys(t.speaker for t in turns if t.speaker not in names))
    notes = [rec.notes] if isinstance(rec.notes, str) else list(rec.notes or [])
    notes.insert(0, f"imported from {setup.continuations}, line {line}")
    if unknown:
        notes.append(f"speakers not among the participants: {', '.join(unknown)} (their turns are kept)")
    meta = {
        k: v
        for k, v in (("model", rec.model), ("usage", rec.usage), ("line", line), ("instance_hash", rec.instance_hash))
        if v is not None
    }
    reason = None
    if problems:
        reason = (
            "imported continuation: "
            + "; ".join(problems[:5])
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        )
    # checked against the run's instance as it is now: its hash, so that the continuation is current
    # (invalid with the reason above, never also stale and missing), and stale once the instance is edited
    return continuation(
        inst,
        setup_id,
        setup.name,
        turns,
        reason,
        notes=notes,
        unknown_speakers=unknown,
        instance_hash=now,
        imported=meta,
    )


def schema_text(name: str) -> str:
    """A shipped schema file's text, as ``json_schemas`` makes it (the test compares them)."""
    return json.dumps(json_schemas()[name], indent=2, sort_keys=True) + "\n"
