"""The run directory, typed: ``Run.open(path)`` reads what ``cocoeval run`` wrote.

A run directory holds ``manifest.json`` (``Manifest``: package version, git revision, params,
taxonomy hash, prompt versions, setup and judge ids, status, summary), ``instances.jsonl``,
``continuations/<setup>.jsonl``, ``judgments/<judge>.jsonl``, the human annotators' stores
``judgments/human/<annotator>.jsonl`` and ``usage.json``. ``Run`` is the plain record of all of
it, read whole; the analysis layer opens a run in parts (``analysis.store.RunStore``: the manifest
first, each record at its first use) with the readers here (``read_manifest``, ``parse_part``,
``checked_part``), so both read a file alike.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import subprocess
import weakref
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cocoeval import __version__
from cocoeval.core.errors import InputError, NotFoundError
from cocoeval.core.jsonio import (
    read_json,
    read_unique_models,
    recorded_reads,
    write_atomic,
    write_json,
)
from cocoeval.core.schema import Continuation, Instance, Judgment
from cocoeval.core.text import has_text
from cocoeval.judge.config import JudgeConfig
from cocoeval.simulate.setup import Setup
from cocoeval.simulate.validity import MAX_TURN_CHARS

from .humans import HUMAN_DIR, describe_judgment, judgment_key, read_human_stores
from .recorded import RecordedJudge, RecordedParams, RecordedSetup
from .stopping import StoppingRecord

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cocoeval.llm import Runner

HUMAN_PREFIX = "human:"
PIPELINE_LABEL = "pipeline-check"
UNKNOWN_INSTANCE = (
    "of an instance not in instances.jsonl (instances.jsonl changed after it was made, or the file "
    "was copied from another run): stale, never counted"
)
"""Why a continuation or judgment is stale in the frames: its instance is not one of the run's."""
READ_INVALID = "read as invalid: "
"""How the reason of a continuation that ``checked_turns`` made invalid starts."""
JUDGMENTS_ONCE = (
    "cocoeval writes one judgment per instance, target and kind: remove the extra line, or run the "
    "judge stage again to rewrite the file"
)


RUN_FORMAT = 1
"""The version of the run directory's layout and records that this cocoeval writes and reads
(``Manifest.format``). A manifest without it was written before the format was versioned and is
read as version 1; a larger version, written by a newer cocoeval whose files this one may
misread, is refused when the run is opened."""


class ParamsFileRead(BaseModel):
    """A params file a run read (``Manifest.params_files``): its path and the SHA-256 of its text."""

    path: str
    sha256: str


class Manifest(BaseModel):
    """``manifest.json``: what a run is (spec), which code made it (revision) and how it went
    (status, summary). Unknown keys are kept (a newer cocoeval may write more)."""

    model_config = ConfigDict(extra="allow")

    format: int = Field(RUN_FORMAT, ge=1)
    """The run directory's format version (``RUN_FORMAT``)."""
    cocoeval_version: str | None = None
    git_revision: str | None = None
    params_file: str | None = None
    params: RecordedParams = Field(default_factory=RecordedParams)
    """The params as loaded (``ExperimentParams`` dumped to JSON), read back as recorded: the fields
    cocoeval reads typed, every other key kept (``recorded.RecordedParams``: an old or a newer run's
    params open whatever today's params schema says)."""
    params_files: list[ParamsFileRead] = Field(default_factory=list)
    """The params files read: the file named first, then each file it ``extends:`` (``params`` is
    them merged)."""
    params_set: list[str] = Field(default_factory=list)
    """The ``--set KEY=VALUE`` overrides of the command line, in order (in ``params`` already)."""
    taxonomy: dict[str, Any] = Field(default_factory=dict)
    """``{"name", "hash"}`` of the taxonomy the run used."""
    prompts: dict[str, Any] = Field(default_factory=dict)
    setups: dict[str, str] = Field(default_factory=dict)
    """{setup name: setup id}."""
    judges: dict[str, dict[str, str]] = Field(default_factory=dict)
    """{judge name: {kind: judge id}}."""
    imported: dict[str, dict[str, str]] = Field(default_factory=dict)
    """{imported setup name: {file, sha256, description[, model]}}: where its continuations came from."""
    status: str | None = None
    """``running``, ``complete``, ``interrupted`` (a Ctrl-C: what finished is kept; run it again to
    resume), or ``stopped`` (the cost cap was reached, ``stopped_reason``: run it again with a larger cap)."""
    started: str | None = None
    finished: str | None = None
    llm_mode: dict[str, Any] | None = None
    instances: int | None = None
    stages: list[str] | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
    """Per stage what ended ok / invalid / failed, and ``warnings``."""
    stopping: StoppingRecord | None = None
    """Where each setup stopped and why, when the params have a ``stopping:`` section (beyond the
    paper; ``cocoeval.run.stopping``)."""

    @property
    def setup_params(self) -> list[RecordedSetup]:
        """The ``setups:`` of the params, as written into the manifest (empty when they say none)."""
        return list(self.params.setups or [])

    @property
    def pipeline_check(self) -> bool:
        """Whether the params say ``label: pipeline-check`` (a tiny model: not results)."""
        return self.params.label == PIPELINE_LABEL


class Run(BaseModel):
    """A run directory in memory, read whole: manifest, instances, continuations by setup, LLM
    judgments by judge and human annotations by annotator. ``Run.open(path)`` reads one; tests and
    notebooks may build one from parts (a ``judgments`` key ``human:<annotator>`` goes to
    ``human``). A plain record: reading a run lazily, one line or one file at a time, and what is
    kept of it, are ``analysis.store.RunStore``'s."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: Path | None = None
    manifest: Manifest = Field(default_factory=Manifest)
    instances: list[Instance] = Field(default_factory=list)
    continuations: dict[str, list[Continuation]] = Field(default_factory=dict)
    judgments: dict[str, list[Judgment]] = Field(default_factory=dict)
    """{LLM judge name: its judgments}."""
    human: dict[str, list[Judgment]] = Field(default_factory=dict)
    """{annotator: their judgments} (``judgments/human/<annotator>.jsonl``)."""

    @model_validator(mode="before")
    @classmethod
    def _split_human(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("judgments"), dict):
            js = data["judgments"]
            human = {k[len(HUMAN_PREFIX) :]: v for k, v in js.items() if k.startswith(HUMAN_PREFIX)}
            if human:
                data = {
                    **data,
                    "judgments": {k: v for k, v in js.items() if not k.startswith(HUMAN_PREFIX)},
                    "human": {**(data.get("human") or {}), **human},
                }
        return data

    @classmethod
    def open(cls, path: str | Path) -> Run:
        """Read a run directory whole; a missing folder or a bad file is an error naming it (and
        the line)."""
        return cls.read(path)[0]

    @classmethod
    def read(cls, path: str | Path) -> tuple[Run, dict[str, str]]:
        """``open``, with {file in the run: SHA-256 of the bytes parsed} (``record_files``): what
        a store keyed by the files' content (``analysis.store.RunStore``) needs."""
        d = run_folder(path)
        # in this order: the first bad file is the error
        with recorded_reads() as seen:
            raw = {part: parse_part(d, part) for part in ("continuations", "judgments", "human")}
            manifest = read_manifest(d)
            instances = parse_part(d, "instances")
            refs = {i.id: len(i.reference) for i in instances}
            run = cls(
                path=d,
                manifest=manifest,
                instances=instances,
                **{part: checked_part(part, v, refs, manifest) for part, v in raw.items()},
            )
        return run, {Path(f).relative_to(d).as_posix(): h for f, h in seen.items()}

    def instance(self, instance_id: str) -> Instance | None:
        """The instance ``instance_id`` (None: the run has none)."""
        return next((i for i in self.instances if i.id == instance_id), None)

    def continuation(self, setup: str, instance_id: str) -> Continuation | None:
        """Setup ``setup``'s continuation of instance ``instance_id`` (None: it has none)."""
        return next((c for c in self.continuations.get(setup, []) if c.instance_id == instance_id), None)

    def names(self, part: str) -> list[str]:
        """The names ``part`` is keyed by, in its order: the setups (``"continuations"``), the LLM
        judges (``"judgments"``), the annotators (``"human"``), or both as ``all_judgments``
        names them (``"all_judgments"``)."""
        if part == "all_judgments":
            return list(self.all_judgments)
        if part not in RECORDS[1:]:
            raise ValueError(f"part must be one of {', '.join(RECORDS[1:])} or all_judgments, not {part!r}")
        return list(getattr(self, part))

    def integrity_warnings(self) -> list[str]:
        """What the run directory holds that its instances or manifest do not account for, one
        line each (``cocoeval report`` prints them and lists them in the index): a manifest of
        another cocoeval version, an instances.jsonl of another size than the manifest says,
        continuations and judgments of instances not in instances.jsonl (stale in the frames,
        never counted) and continuations read as invalid (``checked_turns``). Empty for a run as
        ``cocoeval run`` wrote it."""
        out = []
        m = self.manifest
        if m.cocoeval_version and m.cocoeval_version != __version__:
            out.append(
                f"manifest.json was written by cocoeval {m.cocoeval_version}, this is cocoeval "
                f"{__version__}: the run is read with this version's rules (run it again with this "
                "version to have it made by one version)"
            )
        if m.instances is not None and m.instances != len(self.instances):
            out.append(
                f"manifest.json says the run has {m.instances} instances, instances.jsonl holds "
                f"{len(self.instances)}: instances.jsonl was changed after the run (run it again)"
            )
        ids = {i.id for i in self.instances}
        groups: list[tuple[str, str, list[Continuation] | list[Judgment]]] = [
            (f"continuations/{n}.jsonl", "continuation", cs) for n, cs in self.continuations.items()
        ]
        groups += [(f"judgments/{n}.jsonl", "judgment", js) for n, js in self.judgments.items()]
        groups += [(f"judgments/human/{n}.jsonl", "judgment", js) for n, js in self.human.items()]
        for file, what, items in groups:
            if outside := [x.instance_id for x in items if x.instance_id not in ids]:
                out.append(
                    f"{file}: {len(outside)} {what}(s) of instances not in instances.jsonl (e.g. "
                    f"{outside[0]!r}): {UNKNOWN_INSTANCE}"
                )
        for name, cs in self.continuations.items():
            if bad := [c for c in cs if c.status == "invalid" and (c.reason or "").startswith(READ_INVALID)]:
                out.append(
                    f"continuations/{name}.jsonl: {len(bad)} continuation(s) marked ok have another "
                    f"number of turns than their reference or an over-long turn (e.g. {bad[0].instance_id!r}: "
                    f"{(bad[0].reason or '')[len(READ_INVALID) :]}): counted invalid"
                )
        for file, js in [
            *((f"judgments/{n}.jsonl", js) for n, js in self.judgments.items()),
            *((f"judgments/human/{n}.jsonl", js) for n, js in self.human.items()),
        ]:
            if bad_j := [j for j in js if j.status == "invalid" and (j.reason or "").startswith(READ_INVALID)]:
                out.append(
                    f"{file}: {len(bad_j)} judgment(s) marked ok are not what cocoeval stores (e.g. "
                    f"{bad_j[0].instance_id!r}, {bad_j[0].target_name or bad_j[0].target}, {bad_j[0].kind}: "
                    f"{(bad_j[0].reason or '')[len(READ_INVALID) :]}): counted invalid"
                )
        return out

    def stale_reason(self, name: str, item: Continuation | Judgment) -> str | None:
        """Why a continuation of setup ``name`` or a judgment of LLM judge ``name`` is stale
        (``stale_reason``); None when it is current or the manifest does not say."""
        now = None if item.instance_hash is None else instance_hashes(self, self.instances).get(item.instance_id)
        return stale_reason(self.manifest, name, item, now)

    def setup_configs(self) -> list[Setup] | None:
        """The setups of the manifest's params, read for what selects instances (name, kind,
        datasets, max_per_dataset); None when the params do not say (a Run built from parts)."""
        return configs(self.manifest, self.path, "setups")

    def judge_configs(self) -> list[JudgeConfig] | None:
        """The judges of the manifest's params, read as ``setup_configs`` reads the setups."""
        return configs(self.manifest, self.path, "judges")

    @property
    def current_continuations(self) -> dict[str, list[Continuation]]:
        """``continuations`` without the stale ones (``stale_reason``): what statistics count."""
        return {name: [c for c in cs if self.stale_reason(name, c) is None] for name, cs in self.continuations.items()}

    @property
    def all_judgments(self) -> dict[str, list[Judgment]]:
        """LLM judges by name, then every annotator as ``human:<annotator>`` (the judge name
        the frames and figures use)."""
        return {**self.judgments, **{f"{HUMAN_PREFIX}{a}": js for a, js in self.human.items()}}


SetupConfigs = list[Setup] | None
"""What ``Run.setup_configs`` gives."""
JudgeConfigs = list[JudgeConfig] | None
"""What ``Run.judge_configs`` gives."""
_HASHES: dict[int, tuple[list[Instance], tuple[int, ...], dict[str, str]]] = {}
"""{id of a run: (its instances, the ids of their items, ``Instance.content_hash()`` by instance
id)} (``instance_hashes``)."""


def instance_hashes(owner: object, instances: list[Instance]) -> dict[str, str]:
    """``Instance.content_hash()`` by instance id of ``instances``, the instances of ``owner`` (a
    run): computed once while ``owner`` lives and holds that same list with the same items (what
    ``stale_reason`` asks of every continuation and judgment; an instance replaced in the list, a
    notebook's edit, is hashed again), kept outside the record."""
    items = tuple(map(id, instances))
    hit = _HASHES.get(id(owner))
    if hit is None or hit[0] is not instances or hit[1] != items:
        if hit is None:
            weakref.finalize(owner, _HASHES.pop, id(owner), None)
        hit = _HASHES[id(owner)] = (instances, items, {i.id: i.content_hash() for i in instances})
    return hit[2]


def stale_reason(manifest: Manifest, name: str, item: Continuation | Judgment, now: str | None) -> str | None:
    """Why a continuation of setup ``name`` or a judgment of LLM judge ``name`` is stale: it was
    made with other settings than the manifest's setup or judge id (the params changed after its
    stage ran: only the other stage was run again, or the run stopped before it rewrote the file),
    or made from another version of its instance, whose ``Instance.content_hash()`` is ``now``
    (None: not in the run) (``instance_hash``: the instance was edited since). None when it is
    current or the manifest does not say."""
    if item.instance_hash is not None and now is not None and now != item.instance_hash:
        return (
            f"made from another version of instance {item.instance_id!r} (instance hash "
            f"{item.instance_hash}; instances.jsonl now gives {now}): the instance was edited "
            "after it was made; run the params file again"
        )
    if isinstance(item, Continuation):
        have, want, what = item.setup_id, manifest.setups.get(name), "simulated with other setup settings"
    else:
        have, what = item.judge_id, "made with other judge settings"
        want = (manifest.judges.get(name) or {}).get(item.kind)
    return None if want is None or have == want else f"{what} (id {have}; the run's params give {want})"


@overload
def configs(manifest: Manifest, path: Path | None, key: Literal["setups"]) -> list[Setup] | None: ...
@overload
def configs(manifest: Manifest, path: Path | None, key: Literal["judges"]) -> list[JudgeConfig] | None: ...
def configs(manifest: Manifest, path: Path | None, key: Literal["setups", "judges"]) -> list[Any] | None:
    """The setups or judges of the manifest's params, read for what selects instances (name,
    kind, datasets, max_per_dataset); None when the params do not say (a Run built from parts).
    ``path``: the run folder, for the error."""
    file = str(path / "manifest.json") if path else "manifest.json"
    params = manifest.params
    cls: type[BaseModel] = Setup if key == "setups" else JudgeConfig
    items: Sequence[RecordedSetup | RecordedJudge] | None = params.setups if key == "setups" else params.judges
    if items is None:
        return None
    out = []
    for i, d in enumerate(items):
        try:
            keep = d.model_dump(include={"name", "kind", "datasets", "max_per_dataset"}, exclude_unset=True)
            out.append(cls.model_validate({"model": d.model or "?", **keep}))
        except ValidationError as e:
            why = e.errors()[0]["msg"]
            raise InputError(
                f"cannot tell which instances it selects: {why}",
                file=file,
                record=f"params.{key}[{i}]",
                hint="the manifest is written by cocoeval run; run the params file again",
            ) from None
    return out


RECORDS = ("instances", "continuations", "judgments", "human")
"""The records of a run (``Run`` fields), read after the manifest."""


def run_folder(path: str | Path) -> Path:
    """``path`` as a run folder; NotFoundError where there is none."""
    d = Path(path)
    if not d.is_dir():
        raise NotFoundError(
            f"no run directory at {d}" + (" (it is a file)" if d.exists() else ""),
            hint="give a folder written by cocoeval run",
        )
    return d


def read_manifest(d: Path) -> Manifest:
    """``d/manifest.json``; an InputError naming it when it is not one cocoeval (this or an older
    version) wrote. A manifest without ``format`` is of format 1."""
    raw = read_json(d / "manifest.json")
    if not isinstance(raw, dict):
        raise InputError(
            "expected a JSON object",
            file=str(d / "manifest.json"),
            hint="the manifest is written by cocoeval run; run it again",
        )
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise InputError(
            f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}",
            file=str(d / "manifest.json"),
            hint="the manifest is written by cocoeval run; run it again",
        ) from None
    if manifest.format > RUN_FORMAT:
        raise InputError(
            f"the run directory has format {manifest.format}, written by a newer cocoeval "
            f"({manifest.cocoeval_version or 'version unknown'}); this one reads format {RUN_FORMAT} and "
            "could misread it",
            file=str(d / "manifest.json"),
            hint="upgrade cocoeval (pip install -U cocoeval) to read this run",
        )
    return manifest


def changed_since_opening(d: Path, rel: str) -> InputError:
    """The error of a run read in parts whose file ``rel`` changed after the opening."""
    return InputError(
        f"{rel} changed after the run was opened: its records would mix two versions",
        file=str(d / rel),
        hint="open the run again (rerun the cell or the command)",
    )


def parse_part(d: Path, part: str) -> Any:
    """The instances (a list), or the continuations, LLM judgments or annotators' judgments (by
    name) of a run folder as their files hold them (``checked_part`` then reads the latter
    against the instances)."""
    if part == "instances":
        return read_unique_models(
            d / "instances.jsonl",
            Instance,
            lambda i: i.id,
            lambda i: f"instance {i.id!r}",
            "cocoeval writes each instance of a run once: remove the extra line, or run "
            "the params file again to rewrite instances.jsonl",
        )
    if part == "continuations":
        return {p.stem: read_continuations(p) for p in sorted((d / "continuations").glob("*.jsonl"))}
    if part == "judgments":
        return {
            p.stem: read_unique_models(p, Judgment, judgment_key, describe_judgment, JUDGMENTS_ONCE)
            for p in sorted((d / "judgments").glob("*.jsonl"))
        }
    return {k[len(HUMAN_PREFIX) :]: v for k, v in read_human_stores(d).items()}


def checked_part(part: str, value: dict[str, list[Any]], refs: dict[str, int], manifest: Manifest) -> dict[str, Any]:
    """``parse_part``'s records read against the instances' reference lengths (``refs``): what
    does not fit is invalid (``checked_turns``, ``checked_judgment``)."""
    if part == "continuations":
        limits = turn_char_limits(manifest)
        return {
            name: [checked_turns(c, refs.get(c.instance_id), limits.get(name)) for c in cs]
            for name, cs in value.items()
        }
    return {name: [checked_judgment(j, refs.get(j.instance_id)) for j in js] for name, js in value.items()}


def record_files(d: Path) -> list[Path]:
    """The files ``Run.open`` reads, in its order of reading."""
    return [
        *sorted((d / "continuations").glob("*.jsonl")),
        *sorted((d / "judgments").glob("*.jsonl")),
        *sorted((d / HUMAN_DIR).glob("*.jsonl")),
        d / "manifest.json",
        d / "instances.jsonl",
    ]


def part_of(rel: str) -> str:
    """Which record a file of the run (its path in the run) holds: the manifest is ``manifest``."""
    parts = PurePosixPath(rel).parts
    if parts[0] == "continuations":
        return "continuations"
    if parts[0] == "judgments":
        return "human" if len(parts) > 2 else "judgments"
    return "instances" if parts[-1] == "instances.jsonl" else "manifest"


def file_digests(d: Path) -> dict[str, str]:
    """{path in the run: SHA-256 of its bytes} of every file ``Run.open`` reads (missing ones left out)."""
    out = {}
    for f in record_files(d):
        try:
            out[f.relative_to(d).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
        except OSError:
            continue
    return out


def read_continuations(path: Path) -> list[Continuation]:
    """A continuations file; one that holds an instance twice is refused (InputError naming both
    lines): cocoeval writes each instance once per setup, and a second one would be counted twice."""
    return read_unique_models(
        path,
        Continuation,
        lambda c: c.instance_id,
        lambda c: f"a continuation of instance {c.instance_id!r}",
        "cocoeval writes one continuation per instance: remove the extra line, or run the "
        "simulate stage again to rewrite the file",
    )


def turn_char_limits(manifest: Manifest) -> dict[str, int]:
    """{setup name: the most characters one turn of its continuations can have}: the output budget
    of one of its calls (60 + ``max_tokens_per_turn`` x (k + the copied turns), k = 4 for the chatbot's
    calls) at ``CHARS_PER_TOKEN`` characters a token, as ``prompts.parse.over_budget`` holds
    answers to it. Setups the manifest's params do not describe are not limited."""
    from cocoeval.prompts.parse import CHARS_PER_TOKEN

    out: dict[str, int] = {}
    defaults = Setup.model_fields
    for d in manifest.setup_params:
        got = {k: getattr(d, k) for k in ("max_tokens_per_turn", "turns_per_call", "n_copy")}
        vals = [defaults[k].default if v is None else v for k, v in got.items()]
        if all(v > 0 for v in vals):
            per_turn, k, n_copy = vals
            out[d.name] = CHARS_PER_TOKEN * (60 + per_turn * (max(k, 4) + n_copy))
    return out


def checked_turns(c: Continuation, n_reference: int | None, max_chars: int | None = None) -> Continuation:
    """``c``, or, when it is marked ok with another number of turns than its instance's reference
    (``n_reference``; None: instance unknown, nothing to compare), an invalid copy saying why:
    cocoeval stores an ok continuation only with exactly as many turns as the reference, so it was
    edited by hand, or instances.jsonl changed after it was simulated. Never a valid short (or
    empty) conversation. Also invalid: an empty turn (the parser drops them; only invisible
    characters count as empty, ``core.text.has_text``), a turn longer than
    ``simulate.validity.MAX_TURN_CHARS`` (whatever wrote it) or than ``max_chars``
    (``turn_char_limits``: no answer held to the setup's output budget can be that long)."""
    if c.status != "ok":
        return c
    if n_reference is not None and len(c.turns) != n_reference:
        why = (
            f"{READ_INVALID}marked ok but has {len(c.turns)} turn(s) where the reference has {n_reference} "
            "(edited by hand, or instances.jsonl changed after it was simulated; run the simulate stage again)"
        )
        return c.model_copy(update={"status": "invalid", "reason": why})
    if empty := [i for i, t in enumerate(c.turns) if not has_text(t.text)]:  # the parser drops empty turns
        why = (
            f"{READ_INVALID}marked ok but turn {empty[0] + 1} is empty (or only invisible characters), which "
            "cocoeval never stores (edited by hand; run the simulate stage again)"
        )
        return c.model_copy(update={"status": "invalid", "reason": why})
    if max_chars is not None and (long := [i for i, t in enumerate(c.turns) if len(t.text) > max_chars]):
        why = (
            f"{READ_INVALID}marked ok but turn {long[0] + 1} has {len(c.turns[long[0]].text)} characters, more "
            f"than the setup's output budget can hold ({max_chars}; edited by hand, or a server that ignored "
            "max_tokens; run the simulate stage again)"
        )
        return c.model_copy(update={"status": "invalid", "reason": why})
    if long := [i for i, t in enumerate(c.turns) if len(t.text) > MAX_TURN_CHARS]:
        why = (
            f"{READ_INVALID}marked ok but turn {long[0] + 1} has {len(c.turns[long[0]].text):,} characters, more "
            f"than any turn may have ({MAX_TURN_CHARS:,}: simulate.validity.MAX_TURN_CHARS), which cocoeval never "
            "stores as ok (edited by hand; run the simulate stage again)"
        )
        return c.model_copy(update={"status": "invalid", "reason": why})
    return c


def judgment_problem(j: Judgment, n_turns: int | None) -> str | None:
    """What makes a judgment marked ok or repaired one that cocoeval never stores (edited by hand,
    or instances.jsonl changed after it was judged), or None: an overall judgment without both
    scores; judged turns repeated, or outside the target's ``n_turns`` (None: instance unknown,
    not compared); a fine-grained judgment with no judged turn, or a label of a turn that is not
    judged or labelled twice."""
    if j.status == "invalid":
        return None
    if j.kind == "overall" and (j.consistency is None or j.collaborativeness is None):
        return "an overall judgment without both scores"
    if len(set(j.judged_turns)) != len(j.judged_turns):
        return "a judged turn is listed twice"
    if n_turns is not None and any(not 0 <= t < n_turns for t in j.judged_turns):
        return f"a judged turn lies outside the target's {n_turns} turns"
    if j.kind == "fine_grained":
        if not j.judged_turns:
            return "a fine-grained judgment with no judged turn"
        turns = [lb.turn for lb in j.labels]
        if len(set(turns)) != len(turns):
            return "a turn is labelled twice"
        if outside := sorted(set(turns) - set(j.judged_turns)):
            return f"turn {outside[0]} is labelled but not among the judged turns"
    return None


def checked_judgment(j: Judgment, n_turns: int | None) -> Judgment:
    """``j``, or an invalid copy saying why (``judgment_problem``): never counted as a valid verdict."""
    why = judgment_problem(j, n_turns)
    if why is None:
        return j
    return j.model_copy(
        update={
            "status": "invalid",
            "reason": f"{READ_INVALID}marked {j.status} but {why} (edited by "
            "hand, or instances.jsonl changed after it was "
            "judged; run the judge stage again)",
        }
    )


# ----------------------------------------------------------------------------- writing
def now() -> str:
    """The time stamps of the manifest: UTC, seconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def git_revision() -> str | None:
    """The git revision of the cocoeval checkout, when it is one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """``manifest.json``, atomically, with the keys that were given (a running run has no summary).
    What looks like a key in a URL of the params (a model spec's, refused when the params are
    read) would be ``[REDACTED]`` (``secrets.redact_urls``)."""
    from cocoeval.llm.secrets import redact_urls

    text = json.dumps(
        manifest.model_dump(mode="json", exclude_unset=True), ensure_ascii=False, indent=2, sort_keys=True
    )
    write_atomic(run_dir / "manifest.json", redact_urls(text) + "\n")


PAID_FIELDS = (
    "cost_usd",
    "lost_cost_usd",
    "lost_cost_unknown_calls",
    "cost_unknown_calls",
    "failed",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "lost_attempts",
    "lost_input_tokens",
    "usage_unknown_calls",
)
"""The ledger totals that say what an invocation paid (summed over invocations in ``all_invocations``)."""
USAGE_JOURNAL = "usage.journal.jsonl"
"""Beside usage.json: a line for each call that may have paid, appended as it is counted
(``Ledger.journal``), so that an invocation killed before it wrote usage.json is counted by the next."""


def _count_problem(where: str, totals: Any) -> str | None:
    if not isinstance(totals, dict):
        return f"{where} is not an object"
    for k in (*PAID_FIELDS, "calls", "cache_hits", "requests_sent", "requests_batched"):
        v = totals.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0 <= v <= 10**15:
            return f"{where}.{k} is {json.dumps(v)[:40]}, not a count"
    return None


def _usage_problem(prev: Any) -> str | None:
    """Why an earlier usage.json is not one cocoeval wrote (its totals would be summed into
    ``all_invocations``): not an object with totals, or a total or an earlier invocation's total
    that is not a non-negative number."""
    if not (isinstance(prev, dict) and isinstance(prev.get("totals"), dict)):
        return "not the shape cocoeval writes (an object with totals)"
    if (why := _count_problem("totals", prev["totals"]) or _count_problem("usage.json", prev)) is not None:
        return why
    earlier = prev.get("earlier_invocations")
    if earlier is not None and not isinstance(earlier, list):
        return "earlier_invocations is not a list"
    for i, e in enumerate(earlier or []):
        if isinstance(e, dict) and "totals" in e:
            if (why := _count_problem(f"earlier_invocations[{i}].totals", e["totals"])) is not None:
                return why
            if (why := _count_problem(f"earlier_invocations[{i}]", e)) is not None:
                return why
    return None


def spent_outside_journal(run_dir: Path) -> tuple[float, int]:
    """What the invocations that ``usage.json`` counts and the usage journal does not (those from
    before the journal was kept) paid: (USD at known prices, calls of unknown cost). ``write_usage``
    counts them in ``all_invocations`` beside the journal's, and so does a cost cap (``Runner``'s
    ``earlier``). (0.0, 0) without a readable usage.json (``write_usage`` keeps one aside and warns)."""
    from cocoeval.llm.usage import journal_totals

    path = run_dir / "usage.json"
    try:
        prev = read_json(path) if path.is_file() else None
    except Exception:  # unreadable: write_usage names it and keeps it aside
        return 0.0, 0
    if prev is None or _usage_problem(prev) is not None:
        return 0.0, 0
    in_journal = set(journal_totals(run_dir / USAGE_JOURNAL))
    entries = [e for e in prev.get("earlier_invocations") or [] if isinstance(e, dict)] + [prev]
    usd, unknown = 0.0, 0
    for e in entries:
        t = e.get("totals")
        if isinstance(t, dict) and e.get("invocation") not in in_journal:
            usd += float(t.get("cost_usd") or 0.0)
            unknown += int(t.get("cost_unknown_calls") or 0)
    return usd, unknown


def write_usage(run_dir: Path, runner: Runner) -> None:
    """``usage.json``: this invocation's ledger rows and totals (what it paid; cached answers it
    re-used in ``reused_*``, not paid again), cache statistics and request counts, the totals of
    the earlier invocations on this run directory (``earlier_invocations``, from the usage.json it
    replaces) and what all of them paid together (``all_invocations``). An invocation killed
    before it could write usage.json is counted from the usage journal (``USAGE_JOURNAL``): an
    entry with ``"not_in_usage_json": true`` and its totals summed from the journal (the requests
    it sent are unknown). A usage.json from before that cannot be
    read (not JSON, not this shape) is never overwritten: it is kept as
    ``usage.json.unreadable-<UTC time>`` (``unreadable_kept_as``), with a warning, since its
    totals are not in ``all_invocations``. A journal line that cannot be read (other than a last
    line a kill cut short) is warned of and listed in ``journal_unreadable_lines``, never dropped
    silently."""
    from cocoeval.llm.usage import journal_totals, shown_costs

    path = run_dir / "usage.json"
    earlier: list[dict[str, Any]] = []
    kept: str | None = None
    try:
        prev = read_json(path) if path.exists() or path.is_symlink() else None
        if prev is not None and (why := _usage_problem(prev)) is not None:
            raise ValueError(why)
    except Exception as e:  # an unreadable file from before: named and kept, never a crash at the end of a run
        prev, earlier = None, [{"unreadable": str(path)}]
        aside = path.with_name(f"usage.json.unreadable-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S.%fZ}")
        try:
            path.replace(aside)
        except OSError as err:
            raise InputError(
                f"cannot be read, nor kept aside as {aside.name} ({err.strerror or err})",
                file=str(path),
                hint="move it aside yourself; this invocation's usage is not written over it",
            ) from None
        kept = str(aside)
        logging.getLogger("cocoeval").warning(
            "warning: %s could not be read (%s): kept as %s; the totals of the invocations it counted are not in "
            "all_invocations of the new usage.json",
            path,
            str(e).splitlines()[0][:200],
            aside,
        )
    if isinstance(prev, dict) and isinstance(prev.get("totals"), dict):
        earlier = [e for e in prev.get("earlier_invocations") or [] if isinstance(e, dict)]
        earlier.append(
            {k: prev.get(k) for k in ("written", "totals", "requests_sent", "requests_batched")}
            | ({"invocation": prev["invocation"]} if "invocation" in prev else {})
        )
    known = {e.get("invocation") for e in earlier} | {runner.ledger.invocation}
    unreadable: list[int] = []  # lines of the journal that are not journal lines: warned of, counted here
    for inv, paid_then in journal_totals(run_dir / USAGE_JOURNAL, unreadable).items():
        if inv not in known:  # killed before its usage.json (or that file was unreadable)
            earlier.append(
                {
                    "invocation": inv,
                    "not_in_usage_json": True,
                    "totals": paid_then,
                    "requests_sent": None,
                    "requests_batched": None,
                }
            )
    totals = runner.ledger.totals()
    paid = [e for e in earlier if isinstance(e.get("totals"), dict)]
    everything = {k: totals[k] + sum(e["totals"].get(k) or 0 for e in paid) for k in PAID_FIELDS}
    everything.update(
        invocations=len(paid) + 1,
        requests_sent=runner.sent + sum(e.get("requests_sent") or 0 for e in paid),
        requests_batched=runner.batched + sum(e.get("requests_batched") or 0 for e in paid),
    )
    write_json(
        path,
        {
            "rows": runner.ledger.rows(),  # a cost none of whose calls has a known price is null, never 0
            "totals": shown_costs(totals),
            "cache": runner.cache.stats(),
            "requests_sent": runner.sent,
            "requests_batched": runner.batched,
            "written": now(),
            "invocation": runner.ledger.invocation,
            "earlier_invocations": earlier,
            "all_invocations": shown_costs(everything),
            **({"unreadable_kept_as": kept} if kept else {}),
            **({"journal_unreadable_lines": {"file": USAGE_JOURNAL, "lines": unreadable}} if unreadable else {}),
        },
    )
