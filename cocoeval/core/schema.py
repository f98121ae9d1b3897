"""The data model: turns, conversations, benchmark instances, continuations and judgments.

Everything is a pydantic model persisted as one JSON object per line (JSONL); never pickle.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

Split = Literal["eval", "train"]
ConversationKind = Literal["multiparty", "human_ai"]
"""A multi-party conversation (meetings, debates, ...) or a human–AI chat (a user with a chatbot)."""
MAX_ID = 1000
"""The most characters an instance id may have."""
Index = Annotated[int, Strict(), Field(ge=0)]
"""A turn index or a count read from a file: a whole non-negative number, never ``true`` (read as
1), ``3.0`` or ``"3"`` (pydantic's lax mode would take them silently)."""
Score = Annotated[int, Strict(), Field(ge=1, le=10)]
"""A 1-10 Likert score, strict as ``Index``."""
Tokens = Annotated[int, Strict(), Field(ge=0, le=10**12)]
"""A call's token count: strict as ``Index``, and no absurd value."""


MAX_EXTRA_DEPTH = 32
"""The deepest nesting of lists and objects ``Metadata.extra`` may have (the sources' extras nest
two or three levels): a file nested hundreds of levels deep would be read, then fail in every
recursive walk of it (serialising, hashing, exporting) with Python's RecursionError."""


def nesting_depth(v: Any, stop: int) -> int:
    """How deeply lists and dicts nest in ``v`` (0 for a scalar), counted without recursion and
    no further than ``stop + 1``: enough to tell a value over ``stop`` levels."""
    depth, level = 0, [v]
    while depth <= stop:
        containers = [y for y in level if isinstance(y, (dict, list))]
        if not containers:
            break
        depth += 1
        level = [x for y in containers for x in (y.values() if isinstance(y, dict) else y)]
    return depth


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> str:
        """Compact, deterministic JSON (fields in declaration order; unset optionals omitted)."""
        return self.model_dump_json(exclude_none=True)


class Turn(_Model):
    """One utterance."""

    speaker: str
    """Who speaks (a participant's name as in the source, or user/assistant in chats)."""
    text: str
    """What they say, cleaned of transcription artefacts."""
    raw_text: str | None = None
    """The source text, kept only when cleaning changed it."""
    source_index: int | None = None
    """Position of the utterance in the source file's turn list (the first one when merged)."""
    merged: int | None = None
    """How many consecutive source utterances were merged into this turn (only when > 1)."""


class Participant(_Model):
    """A participant of a conversation."""

    name: str
    """The speaker label used in turns."""
    role: str | None = None
    """Their role (e.g. 'Project Manager', 'moderator'), where the data says it."""
    stance: str | None = None
    """Their stance in a debate ('for', 'against', ...), where known."""


class Conversation(_Model):
    """A whole conversation as loaded from a source file."""

    id: str
    """Identifier, unique within its dataset."""
    dataset: str
    """Dataset name, e.g. qmsum_product, iq2, sim, ncpc, sharechat, or a user's own."""
    source_format: str
    """Loader that read it (qmsum, convokit, tcr, chat)."""
    source_file: str
    """File it came from."""
    kind: ConversationKind | None = None
    """Set by the loader; None only in files written before it was (see ``is_human_ai``)."""
    participants: list[Participant] = Field(default_factory=list)
    """Speakers in order of first appearance, with roles/stances where the data has them."""
    goals: list[str] = Field(default_factory=list)
    """Conversation goals: meeting topics, debate motion, agenda."""
    turns: list[Turn]
    """The turns, in order, after cleaning."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Anything else the source provides (topic spans, votes, dates, dropped-turn counts)."""


class Metadata(_Model):
    """M: what a simulator is told about the conversation."""

    goals: list[str]
    """Conversation goals (topics, motion, agenda)."""
    participants: list[Participant]
    """Participants, with roles/stances where known."""
    method: str = "extractive"
    """How M was made: 'extractive' (from the data) or 'llm'."""
    model: str | None = None
    """Model spec when method is 'llm'."""
    prompt: str | None = None
    """The prompt (name@version#hash) when method is 'llm'."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Source-specific extras (e.g. the topics under discussion in the history), nested at most
    ``MAX_EXTRA_DEPTH`` levels."""

    @field_validator("extra", mode="before")
    @classmethod
    def _shallow(cls, v: Any) -> Any:
        """Deeper nesting than ``MAX_EXTRA_DEPTH`` is refused here, before anything walks it
        recursively (pydantic's serialiser, ``json.dumps``, the parquet export) and fails."""
        if (depth := nesting_depth(v, MAX_EXTRA_DEPTH)) > MAX_EXTRA_DEPTH:
            raise ValueError(
                f"metadata.extra is nested more than {MAX_EXTRA_DEPTH} levels deep (at least {depth}); "
                "no source nests more than a few: rebuild the benchmark, or flatten the extra field"
            )
        return v


class Summary(_Model):
    """S: a paragraph summarising the conversation before the history window."""

    text: str
    """The paragraph (empty when no turn precedes the history)."""
    method: str = "extractive"
    """How S was made: 'extractive' or 'llm'."""
    model: str | None = None
    """Model spec when method is 'llm'."""
    prompt: str | None = None
    """The prompt (name@version#hash) when method is 'llm'."""
    covers_turns: int = 0
    """Number of turns before the history that the summary covers."""


class Provenance(_Model):
    """Where an instance comes from, enough to find its turns again in the source."""

    source_file: str
    source_format: str
    conversation_id: str
    start_index: Index
    """Index, in the loaded conversation's turns, of the first history turn."""
    history_source_index: int | None = None
    """source_index of the first history turn."""
    seed: int
    builder_version: str
    text_method: str = "rule"
    """How the turn texts were made from the source: 'rule' (the loader's rule-based removal of
    transcription artefacts, where the format has them; the offline default) or 'llm' (an LLM
    clean-up of disfluencies, fillers, repetitions and special tokens, paper A.3; the source
    text stays in each turn's raw_text)."""
    text_model: str | None = None
    """Model spec of the clean-up when text_method is 'llm'."""
    text_prompt: str | None = None
    """The clean-up prompt (name@version#hash) when text_method is 'llm'."""


class Instance(_Model):
    """A CoCoEval benchmark instance: M, S, x (history) and r (human reference)."""

    id: str
    dataset: str
    split: Split
    metadata: Metadata
    summary: Summary
    history: list[Turn]
    """x: the turns shown to the simulator."""
    reference: list[Turn]
    """r: the turns the humans actually said next."""
    provenance: Provenance
    kind: ConversationKind | None = None
    """Its conversation's kind, from the loader; None only in files written before it was
    (see ``is_human_ai``)."""

    @field_validator("id")
    @classmethod
    def _plain_id(cls, v: str) -> str:
        """An id names the instance in every file, figure and command line (``cocoeval show``):
        never empty, at most ``MAX_ID`` characters, no control or invisible character (a NUL, an
        escape sequence, a bidi override would show another id than the one stored)."""
        if not v.strip():
            raise ValueError("an instance id is never empty")
        if len(v) > MAX_ID:
            raise ValueError(f"an instance id of {len(v)} characters (at most {MAX_ID})")
        if bad := [c for c in v if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]:
            raise ValueError(f"an instance id with a control or invisible character (U+{ord(bad[0]):04X})")
        return v

    @field_validator("dataset")
    @classmethod
    def _plain_dataset(cls, v: str) -> str:
        """A dataset name heads tables, charts and the dataset card, as an id does: never empty, no
        control or invisible character (a newline would break the line it is written in)."""
        if not v.strip():
            raise ValueError("an instance's dataset name is never empty")
        if bad := [c for c in v if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]:
            raise ValueError(f"a dataset name with a control or invisible character (U+{ord(bad[0]):04X})")
        return v

    @field_validator("reference")
    @classmethod
    def _has_reference(cls, v: list[Turn]) -> list[Turn]:
        """r is what every continuation is as long as and is compared with: an instance without it
        would give continuations of 0 turns, each counted valid, and nothing to judge."""
        if not v:
            raise ValueError(
                "the instance has no reference turn (r is empty): a continuation of it would have "
                "0 turns; rebuild the benchmark (cocoeval build), or remove the instance"
            )
        return v

    @property
    def human_ai(self) -> bool:
        """A human–AI chat (a user with a chatbot, e.g. ShareChat) rather than a multi-party
        conversation; see ``is_human_ai``."""
        return is_human_ai(self)

    def content_hash(self) -> str:
        """16 hex digits of sha256 over what a simulator and a judge see of the instance and what
        the simulations are compared with: M, S, x and r. A continuation or judgment records it
        (``instance_hash``), so one made from an instance edited since is known to be stale."""
        data = self.model_dump(mode="json", include={"metadata", "summary", "history", "reference"})
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def speakers(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in [*self.history, *self.reference]:
            seen.setdefault(t.speaker, None)
        return list(seen)


def conversation_of(instance: Instance) -> str:
    """The source conversation an instance was cut from, as ``dataset/conversation_id``
    (conversation ids are only unique within a dataset): the unit that clustered resampling and
    the stopping rule's rounds draw, since the windows of one meeting are not independent."""
    return f"{instance.dataset}/{instance.provenance.conversation_id}"


def is_human_ai(item: Instance | Conversation) -> bool:
    """The one place that says whether an instance (or conversation) is a human–AI chat (the
    paper's D.1 setting): its ``kind``, set by the loader that read it; files written before
    ``kind`` existed fall back to the loader's name (the chat loader). Multi-party studies
    (RQ1–RQ5, Tables 4, 11, 12) leave them out; the generalization study uses only them."""
    if item.kind is not None:
        return item.kind == "human_ai"
    fmt = item.source_format if isinstance(item, Conversation) else item.provenance.source_format
    return fmt == "chat"


def participant_names(inst: Instance) -> list[str]:
    """The names a continuation's speakers are matched against (``prompts.parse.match_speaker``,
    ``Continuation.unknown_speakers``): M's participants, then any other speaker of the history x.
    In a human–AI chat M lists ``user`` and ``assistant``."""
    names = [p.name for p in inst.metadata.participants]
    for t in inst.history:
        if t.speaker not in names:
            names.append(t.speaker)
    return names


def unknown_speaker_turns(inst: Instance, turns: Sequence[Turn]) -> list[int]:
    """0-based indices of the ``turns`` whose speaker is not among the instance's participants
    (``participant_names``): the turns a simulator gave to a name nobody in the conversation has
    ("Goals", "Participants", "Narrator"). The simulators match their speakers to the
    participants first (case, spacing, punctuation), so a name still unknown is nobody's."""
    names = set(participant_names(inst))
    return [i for i, t in enumerate(turns) if t.speaker not in names]


def first_per_dataset(instances: Sequence[Instance], n: int | None) -> list[Instance]:
    """The first ``n`` instances of each dataset, in the order given (None: every instance).
    Setups and judges share it (``max_per_dataset``), so a judge capped to n judges exactly the
    instances a setup capped to n simulated."""
    if n is None:
        return list(instances)
    seen: dict[str, int] = {}
    out = []
    for inst in instances:
        if seen.get(inst.dataset, 0) < n:
            seen[inst.dataset] = seen.get(inst.dataset, 0) + 1
            out.append(inst)
    return out


TOKEN_FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
"""A ``CallRecord``'s token counts (all None when its usage is unknown)."""


class CallRecord(_Model):
    """One LLM call behind a continuation or judgment."""

    request_hash: str
    model: str
    input_tokens: Tokens | None = 0
    """None (null) when the call's usage is unknown (``usage_unknown``), as are the other counts."""
    cached_input_tokens: Tokens | None = 0
    cache_write_tokens: Tokens | None = 0
    """Input tokens written to the provider's prompt cache (Anthropic)."""
    output_tokens: Tokens | None = 0
    reasoning_tokens: Tokens | None = 0
    """Of the output tokens, those a reasoning model spent thinking."""
    usage_unknown: str | None = None
    """Why the provider's token counts are unknown (``Usage.unknown``: it reported none, or a
    negative or absurd count); then every token count is None, never 0, and readers leave the call
    out of token sums and means."""
    latency_s: float | None = None
    cache_hit: bool = False
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    finish_reason: str | None = None
    dropped_params: list[str] = Field(default_factory=list)
    """Request parameters the model does not accept, left out of the call."""
    max_tokens: int | None = None
    """The call's output budget (judges ask again with a larger one after a cut-off answer)."""

    @model_validator(mode="before")
    @classmethod
    def _unknown_counts_are_null(cls, data: Any) -> Any:
        # written without its null counts (``to_json`` omits None): read back as null, not the 0 default
        if isinstance(data, dict) and data.get("usage_unknown") is not None:
            data = {**{k: None for k in TOKEN_FIELDS}, **data}
        return data

    @model_validator(mode="after")
    def _counts_null_exactly_when_unknown(self) -> CallRecord:
        null = [k for k in TOKEN_FIELDS if getattr(self, k) is None]
        if self.usage_unknown is not None and len(null) < len(TOKEN_FIELDS):
            raise ValueError(
                "a call of unknown usage (usage_unknown) has null token counts, not "
                + ", ".join(k for k in TOKEN_FIELDS if k not in null)
            )
        if self.usage_unknown is None and null:
            raise ValueError(f"null token counts ({', '.join(null)}) need usage_unknown, the reason they are unknown")
        return self

    @classmethod
    def of(cls, res: Any, max_tokens: int | None = None) -> CallRecord:
        """The record of a runner's ``CallResult``: its tokens are what the provider billed, a
        failed call's too (a refusal: ``CallResult.usage``); None, with the reason in
        ``usage_unknown``, when the provider's usage is unknown (``Usage.unknown``), never 0."""
        r, u = res.response, res.usage
        known = u.unknown is None
        return cls(
            request_hash=res.key,
            model=res.model,
            cache_hit=res.cache_hit,
            status=res.status,
            error=f"{res.reason}: {res.detail}" if res.reason else None,
            **{k: getattr(u, k) if known else None for k in TOKEN_FIELDS},
            usage_unknown=u.unknown,
            latency_s=r.latency_s if r else None,
            finish_reason=r.finish_reason if r else None,
            dropped_params=r.dropped_params if r else [],
            max_tokens=max_tokens,
        )


class Continuation(_Model):
    """y: a simulated continuation of an instance under one setup."""

    instance_id: str
    setup_id: str
    """Hash of everything that defines the setup."""
    setup_name: str | None = None
    """The setup's label in the params file."""
    turns: list[Turn] = Field(default_factory=list)
    calls: list[CallRecord] = Field(default_factory=list)
    status: Literal["ok", "invalid"] = "ok"
    reason: str | None = None
    """Why the continuation is invalid."""
    notes: list[str] = Field(default_factory=list)
    """Recoverable problems met while generating (repaired speakers, extra turns dropped...)."""
    unknown_speakers: list[str] = Field(default_factory=list)
    """Speaker names the simulator used that match no participant (their turns are kept)."""
    instance_hash: str | None = None
    """``Instance.content_hash()`` of the instance it was simulated from (None in files of
    cocoeval 0.1): another hash than the run's instance has makes it stale."""
    imported: dict[str, Any] | None = None
    """An imported continuation (``simulate.exchange``): what its record gave besides the turns
    (model, usage as the simulator counted it, the file's line); None when cocoeval simulated it."""


class TurnLabel(_Model):
    """The behaviours a judge found in one turn."""

    turn: Index
    """0-based index into the judged turns."""
    behaviours: list[str] = Field(default_factory=list)
    """Behaviour ids from the taxonomy."""
    evidence: dict[str, str] = Field(default_factory=dict)
    """Behaviour id to the judge's short evidence."""
    not_in_taxonomy: str | None = None
    """A human annotator's description of a behaviour in this turn that the taxonomy lacks
    (Appendix B.3's coverage check); None when they saw none."""


class Judgment(_Model):
    """A judge's verdict on one target (the human reference or a continuation)."""

    instance_id: str
    target: str
    """'reference' or a setup id."""
    target_name: str | None = None
    """'reference' or the setup's name."""
    judge_id: str
    """Hash of model, prompt, taxonomy and parameters (or human:<annotator>)."""
    judge_name: str | None = None
    kind: Literal["overall", "fine_grained"]
    taxonomy_hash: str
    consistency: Score | None = None
    collaborativeness: Score | None = None
    rationale: str | None = None
    labels: list[TurnLabel] = Field(default_factory=list)
    judged_turns: list[Index] = Field(default_factory=list)
    """0-based indices of the target turns that were to be labelled (all, or the user turns)."""
    status: Literal["ok", "repaired", "invalid"] = "ok"
    reason: str | None = None
    """Why the judgment is invalid."""
    repairs: list[str] = Field(default_factory=list)
    """What was repaired in the judge's answer (a name in another case or plural, near-valid JSON...)."""
    attempts: int = 1
    max_tokens: int | None = None
    """Output budget of the last call, the one whose answer counts (LLM judges)."""
    raw: str | None = None
    """The raw judge answer, kept when it was repaired or invalid."""
    calls: list[CallRecord] = Field(default_factory=list)
    instance_hash: str | None = None
    """``Instance.content_hash()`` of the instance the judge saw (None in files of cocoeval 0.1 and
    in human annotations): another hash than the run's instance has makes it stale."""
    samples: list[Judgment] | None = None
    """The k answers of a judge with ``samples: k > 1`` (beyond the paper), in sample order, each a
    judgment of its own (an invalid one with its reason; their calls are in this judgment's
    ``calls``); this judgment is their majority (``cocoeval.judge.samples.combine_samples``)."""
