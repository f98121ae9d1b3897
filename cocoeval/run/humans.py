"""Per-annotator stores of human judgments in a run directory (used by ``cocoeval.annotate.exchange``).

Each annotator has one file, ``RUN/judgments/human/<annotator>.jsonl``, of judgments with
``judge_id = human:<annotator>``, sorted by kind, instance and target, so that the same labels
always give the same bytes. LLM judges live beside it as ``RUN/judgments/<judge>.jsonl``; no judge
may share a name with an annotator (compared ignoring case), and ``human`` is reserved.

A *cell* is one labelled unit: an annotator's behaviours for one turn of one target (with their
description of a behaviour the taxonomy lacks, if any), or their two Likert scores for one target. Imports are merged cell by cell.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cocoeval.core.errors import ConfigError, InputError
from cocoeval.core.jsonio import read_json, read_unique_models, write_json
from cocoeval.core.schema import Judgment, TurnLabel
from cocoeval.core.targets import Target
from cocoeval.core.taxonomy import Taxonomy

HUMAN_DIR = Path("judgments") / "human"
LEGACY_STORE = Path("judgments") / "human.jsonl"
RESERVED = "human"
_BAD_NAME = re.compile(r"[/\\:\x00-\x1f\x7f]")

CellKey = tuple[str, str, str, int | None]
"""(annotator, instance_id, target name, 0-based turn or None for the overall scores)."""


@dataclass
class Cell:
    value: tuple[Any, ...]
    """Behaviour ids in taxonomy order, or (consistency, collaborativeness)."""
    where: str
    """'row 5' / 'line 5' of the imported file, or 'store'."""
    raw: str
    """The value as written (for reports)."""
    repairs: list[str] = field(default_factory=list)
    other: str = ""
    """A turn's behaviour not in the taxonomy, as the annotator described it ('' for none)."""

    def same(self, o: Cell) -> bool:
        return self.value == o.value and self.other == o.other


def store_path(run_dir: str | Path, annotator: str) -> Path:
    return Path(run_dir) / HUMAN_DIR / f"{annotator}.jsonl"


def name_problem(annotator: str) -> str | None:
    """Why ``annotator`` cannot name a store (None when it can)."""
    if _BAD_NAME.search(annotator) or annotator.startswith("."):
        return f"annotator {annotator!r} cannot name a file (no '/', '\\', ':', control characters or leading '.')"
    if hidden := invisible_chars(annotator):
        return (
            f"annotator {annotator!r} holds the invisible or direction-changing character(s) {hidden}: "
            "a file name shown with them reads differently from what it is"
        )
    if len(annotator) > 80:
        return f"annotator name longer than 80 characters: {annotator[:20]!r}..."
    if annotator.casefold() == RESERVED:
        return f"annotator {annotator!r}: 'human' is reserved (it marks human judgments)"
    return None


def invisible_chars(name: str) -> str:
    """The characters of ``name`` that print as nothing or change the text's direction (Unicode
    format, control, private-use, unassigned and line/paragraph separators: U+202E, U+200B...; the
    joiners U+200C and U+200D, which names in some scripts need, excepted), as U+XXXX; '' when
    there is none."""
    bad = dict.fromkeys(
        f"U+{ord(c):04X}"
        for c in name
        if c not in "\u200c\u200d" and (unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp"))
    )
    return ", ".join(bad)


def judge_name_problem(name: str) -> str | None:
    """Why an LLM judge may not have this name (its answers go to ``judgments/<name>.jsonl``)."""
    if name.casefold().split(":")[0] == RESERVED:
        return f"judge name {name!r}: 'human' marks human annotations; name the judge otherwise"
    if _BAD_NAME.search(name) or name.startswith(".") or not name.strip() or invisible_chars(name):
        return (
            f"judge name {name!r} cannot name a file (no '/', '\\', ':', control, invisible or "
            "direction-changing characters or leading '.')"
        )
    return None


def judgment_key(j: Judgment) -> tuple[str, str, str | None, str]:
    """What a judgments file holds once: a judgment of an instance's target (by id and name) of a kind."""
    return (j.instance_id, j.target, j.target_name, j.kind)


def describe_judgment(j: Judgment) -> str:
    return f"the {j.kind} judgment of {j.target_name or j.target!r} of instance {j.instance_id!r}"


def read_human_stores(run_dir: str | Path) -> dict[str, list[Judgment]]:
    """``{"human:<annotator>": judgments}`` for every store of the run (for ``Run.open``)."""
    out: dict[str, list[Judgment]] = {}
    for p in sorted((Path(run_dir) / HUMAN_DIR).glob("*.jsonl")):
        ann = p.name[: -len(".jsonl")]
        js = read_unique_models(
            p,
            Judgment,
            judgment_key,
            describe_judgment,
            "each annotator's file holds one judgment per instance, target and kind; re-import "
            "the annotation files instead of editing stores by hand",
        )
        for n, j in enumerate(js, start=1):
            if j.judge_id != f"human:{ann}":
                raise InputError(
                    f"judgment of {j.judge_id!r} in the store of annotator {ann!r}",
                    file=str(p),
                    record=f"line {n}",
                    hint="each annotator's file holds only their judgments; "
                    "re-import the annotation files instead of editing stores by hand",
                )
        out[f"human:{ann}"] = js
    return out


def llm_judge_names(run_dir: str | Path) -> set[str]:
    """Judges of the run: judgment files beside the human folder and the manifest's judges."""
    d = Path(run_dir)
    names = {p.name[: -len(".jsonl")] for p in (d / "judgments").glob("*.jsonl")} - {RESERVED}
    if (d / "manifest.json").exists():
        names |= set(read_json(d / "manifest.json").get("judges") or {})
    return names


def annotator_names(run_dir: str | Path) -> set[str]:
    return {p.name[: -len(".jsonl")] for p in (Path(run_dir) / HUMAN_DIR).glob("*.jsonl")}


def check_judge_names(run_dir: str | Path, judges: list[str]) -> None:
    """Refuse LLM judge names that are reserved or already name an annotator of the run."""
    anns = {a.casefold(): a for a in annotator_names(run_dir)}
    for name in judges:
        if bad := judge_name_problem(name):
            raise ConfigError(bad, hint="rename the judge in the params file")
        if name.casefold() in anns:
            raise ConfigError(
                f"judge {name!r} has the name of annotator {anns[name.casefold()]!r} of this run "
                f"({store_path(run_dir, anns[name.casefold()])})",
                hint="rename the judge in the params file: judges and annotators must be told apart in every table",
            )


def name_collisions(run_dir: str | Path, annotators: set[str]) -> list[str]:
    """Problems with the annotators of an import against the judges and annotators of the run."""
    judges = {j.casefold(): j for j in llm_judge_names(run_dir)}
    known = {a.casefold(): a for a in annotator_names(run_dir)}
    seen: dict[str, str] = {}
    out = []
    for a in sorted(annotators):
        if a.casefold() in judges:
            out.append(
                f"annotator {a!r} has the name of the LLM judge {judges[a.casefold()]!r}; "
                "give the annotator another name"
            )
        elif known.get(a.casefold(), a) != a:
            out.append(
                f"annotator {a!r} differs only by case from the existing annotator "
                f"{known[a.casefold()]!r}; use one spelling"
            )
        elif seen.get(a.casefold(), a) != a:
            out.append(f"annotators {seen[a.casefold()]!r} and {a!r} differ only by case; use one spelling")
        seen.setdefault(a.casefold(), a)
    return out


def cells_of(judgments: list[Judgment], annotator: str) -> dict[CellKey, Cell]:
    """The cells of an annotator's stored judgments (invalid judgments keep their labelled turns)."""
    out: dict[CellKey, Cell] = {}
    for j in judgments:
        target = j.target_name or j.target
        if j.kind == "overall":
            if j.consistency is not None and j.collaborativeness is not None:
                out[(annotator, j.instance_id, target, None)] = Cell(
                    (j.consistency, j.collaborativeness), "store", f"{j.consistency}, {j.collaborativeness}"
                )
            continue
        for lb in j.labels:
            pre = f"turn {lb.turn + 1}: "
            raw = ";".join(lb.behaviours)
            out[(annotator, j.instance_id, target, lb.turn)] = Cell(
                tuple(lb.behaviours),
                "store",
                f"{raw} [not in taxonomy: {lb.not_in_taxonomy}]" if lb.not_in_taxonomy else raw,
                [r[len(pre) :] for r in j.repairs if r.startswith(pre)],
                lb.not_in_taxonomy or "",
            )
    return out


def build_judgments(
    cells: dict[CellKey, Cell], targets: dict[tuple[str, str], Target], tax: Taxonomy
) -> list[Judgment]:
    """Judgments (sorted) from cells; a target with judged turns left unlabelled is invalid."""
    fine: dict[tuple[str, str, str], dict[int, Cell]] = {}
    out = []
    for (ann, inst, target, turn), c in sorted(
        cells.items(), key=lambda kv: (kv[0][:3], kv[0][3] is None, kv[0][3] or 0)
    ):
        if turn is None:
            t = targets[(inst, target)]
            out.append(
                Judgment(
                    instance_id=inst,
                    target=t.target_id,
                    target_name=target,
                    judge_id=f"human:{ann}",
                    judge_name=ann,
                    kind="overall",
                    taxonomy_hash=tax.hash,
                    consistency=c.value[0],
                    collaborativeness=c.value[1],
                    judged_turns=t.judged,
                    status="repaired" if c.repairs else "ok",
                    repairs=list(c.repairs),
                )
            )
        else:
            fine.setdefault((ann, inst, target), {})[turn] = c
    for (ann, inst, target), labels in fine.items():
        t = targets[(inst, target)]
        missing = [i + 1 for i in t.judged if i not in labels]
        repairs = [f"turn {i + 1}: {r}" for i in sorted(labels) for r in labels[i].repairs]
        out.append(
            Judgment(
                instance_id=inst,
                target=t.target_id,
                target_name=target,
                judge_id=f"human:{ann}",
                judge_name=ann,
                kind="fine_grained",
                taxonomy_hash=tax.hash,
                judged_turns=t.judged,
                repairs=repairs,
                labels=[
                    TurnLabel(turn=i, behaviours=list(labels[i].value), not_in_taxonomy=labels[i].other or None)
                    for i in sorted(labels)
                ],
                status="invalid" if missing else "repaired" if repairs else "ok",
                reason=f"turns not annotated: {', '.join(map(str, missing))}" if missing else None,
            )
        )
    return sorted(out, key=sort_key)


def sort_key(j: Judgment) -> tuple[str, str, str, str]:
    return (j.judge_id, j.kind, j.instance_id, j.target_name or j.target)


RANDOM_DRAWS = Path("annotation") / "random_draws.json"
"""The run's record of the conversations drawn at random for annotation (``annotate-export --random``;
the corrected rates of ``analysis.judge_check`` read it)."""


class DrawRecord(BaseModel):
    """One draw of the run's ``annotation/random_draws.json``, as ``record_random_draw`` wrote it: a
    random draw of ``annotate-export --random`` or an active one of ``annotate-next``; what the
    corrected rates (``analysis.judge_check``) weight each labelled conversation by. Keys a newer
    cocoeval writes are kept (``model_extra``)."""

    model_config = ConfigDict(extra="allow", frozen=True, coerce_numbers_to_str=True)

    targets: list[tuple[str, str]]
    """The conversations drawn, as (instance id, target) pairs."""
    task: str | None = None
    """The annotation task the draw is for (``fine_grained``)."""
    seed: int | None = None
    """The seed of the draw: the same seed and options on the same run give the same draw."""
    per_target: int | None = None
    """How many conversations were asked for per target (``--random N``, ``--budget N``)."""
    targets_drawn: list[str] | None = None
    """The targets drawn from (the reference and the setups chosen)."""
    exclude_annotated: bool = False
    """Whether conversations already annotated were left out of the pool (``--exclude-annotated``)."""
    excluded: list[tuple[str, str]] | None = None
    """The (instance id, target) pairs left out when ``exclude_annotated``: the same command then
    draws the same conversations after they were annotated."""
    per_stratum: dict[str, tuple[int, int]] = Field(default_factory=dict)
    """``{"target|dataset": (drawn, of)}``: a random draw's probability per dataset stratum."""
    mode: str | None = None
    """``active`` for a draw of ``annotate-next`` (``analysis.active.ACTIVE``); None for a random one."""
    method: str | None = None
    """How an active draw chose its probabilities (``analysis.active.METHOD``)."""
    judge: str | None = None
    """The LLM judge whose expected error an active draw followed."""
    floor: float | None = None
    """The uniform share of an active draw's probabilities (none is near 0)."""
    inclusion: dict[str, dict[str, float]] = Field(default_factory=dict)
    """An active draw's inclusion probability π of each conversation of its pool, by target and
    instance id: the corrected rates weight each label by 1/π."""
    pool: dict[str, int] = Field(default_factory=dict)
    """An active draw's pool size per target."""
    export: str | None = None
    """The folder the draw was exported to."""
    made: str | None = None
    """When the draw was made (ISO 8601, UTC)."""

    @property
    def conversations(self) -> set[tuple[str, str]]:
        """The (instance id, target) pairs drawn, as a set: two draws with the same are the same draw."""
        return set(self.targets)


class _DrawsFile(BaseModel):
    draws: list[DrawRecord]


def _read_draws(run_dir: Path | None) -> tuple[list[DrawRecord], list[Any]] | None:
    """The run's recorded draws, typed and as read (JSON, to be written back unchanged), or None
    when the run records none. An unreadable record is an InputError naming the file."""
    if run_dir is None or not (run_dir / RANDOM_DRAWS).is_file():
        return None
    rec = read_json(run_dir / RANDOM_DRAWS)
    try:
        return _DrawsFile.model_validate(rec).draws, list(rec["draws"])
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise InputError(
            f"not a record of random draws (field {loc}: {first['msg']})",
            file=str(run_dir / RANDOM_DRAWS),
            hint="it is written by cocoeval annotate-export --random; remove it or export again",
        ) from None


def recorded_draws(run_dir: Path | None) -> list[DrawRecord] | None:
    """The draws recorded in the run's ``annotation/random_draws.json``, oldest first, or None when
    the run records none. An unreadable record is an InputError naming the file."""
    read = _read_draws(run_dir)
    return None if read is None else read[0]


def _conversations(draw: dict[str, Any]) -> set[tuple[str, str]]:
    return {(str(iid), str(target)) for iid, target in draw["targets"]}


@dataclass(frozen=True)
class RecordedDraw:
    """Where a random draw is recorded in the run (``record_random_draw``)."""

    path: str
    """The run's ``annotation/random_draws.json``."""
    draw: int
    """The draw's 1-based number in that record."""
    added: bool
    """True: recorded now; False: the same draw was recorded already (and is left as it is)."""
    made: str | None
    """When the recorded draw was made (ISO 8601, UTC)."""
    export: str | None
    """The folder the recorded draw was exported to."""


def record_random_draw(run_dir: Path, draw: dict[str, Any], out: Path) -> RecordedDraw:
    """Add a random draw to the run's ``annotation/random_draws.json`` (earlier draws are kept),
    unless a recorded draw holds the very same conversations (the same seed and options on the
    same run give the same draw): then the record is left as it is."""
    import datetime as dt

    path = run_dir / RANDOM_DRAWS
    draws, raw = _read_draws(run_dir) or ([], [])
    same = _conversations(draw)
    for n, d in enumerate(draws, start=1):
        if d.conversations == same:
            return RecordedDraw(path=str(path), draw=n, added=False, made=d.made, export=d.export)
    rec = {
        "task": "fine_grained",
        "seed": draw["seed"],
        "per_target": draw["per_target"],
        "targets_drawn": draw["targets_drawn"],
        "exclude_annotated": draw.get("exclude_annotated", False),
        "targets": draw["targets"],
        "per_stratum": draw["per_stratum"],
        **({"excluded": draw["excluded"]} if draw.get("exclude_annotated") else {}),
        # an active draw (annotate-next): what the corrected rates weight each label by, 1/π
        **{str(k): draw[k] for k in ("mode", "method", "judge", "floor", "inclusion", "pool") if k in draw},
        "export": str(out),
        "made": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    write_json(path, {"draws": [*raw, rec]})  # the earlier draws as read
    return RecordedDraw(path=str(path), draw=len(draws) + 1, added=True, made=rec["made"], export=rec["export"])


def random_draws(run_dir: Path | None) -> dict[str, set[str]] | None:
    """{target: instance ids} drawn at random for annotation, or None when the run records no
    such draw. An unreadable record is an InputError naming the file."""
    draws = recorded_draws(run_dir)
    if draws is None:
        return None
    out: dict[str, set[str]] = {}
    for d in draws:
        for iid, target in d.conversations:
            out.setdefault(target, set()).add(iid)
    return out
