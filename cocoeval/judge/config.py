"""A judge's configuration: ``JudgeConfig`` (one judge of a params file, its id and which instances
it judges), the two kinds of judgment and their prompts, and the answer schemas sent to models
that take one."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, field_validator

from cocoeval.core.schema import Instance, first_per_dataset
from cocoeval.core.taxonomy import Taxonomy
from cocoeval.llm.base import canonical_json
from cocoeval.prompts.files import load_prompt

Kind = Literal["overall", "fine_grained"]
PROMPTS: dict[str, str] = {"overall": "judge_overall", "fine_grained": "judge_fine_grained"}


def _both_kinds() -> list[Kind]:
    return ["overall", "fine_grained"]


class JudgeConfig(BaseModel):
    """One judge. Its id hashes model, prompt, taxonomy and parameters: changing any of them
    never reuses stale judgments."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Label used in files (judgments/<name>.jsonl) and tables; in a params file a safe file name
    (``cocoeval.core.names``), not 'human'."""
    model: str
    """Judge model spec, e.g. openai/o4-mini."""
    kind: list[Kind] = Field(default_factory=_both_kinds)
    """Which evaluations this judge makes: overall, fine_grained or both, each once."""
    temperature: float | None = Field(0.0, ge=0, le=2)
    """Sampling temperature (dropped for reasoning models)."""
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    """For reasoning models (o4-mini, gpt-5.1)."""
    max_attempts: int = Field(3, ge=1, le=100, strict=True)
    """First answer plus re-asks with the validation error (1 to 100)."""
    max_tokens_overall: int = Field(600, ge=1, le=1_000_000, strict=True)
    """Output budget of an overall judgment (reasoning models need more; at most 1,000,000)."""
    max_tokens_per_turn: int = Field(80, ge=1, le=100_000, strict=True)
    """Output budget per judged turn of a fine-grained judgment (plus 200; at most 100,000)."""
    max_tokens_cap: int = Field(32_000, ge=1, le=1_000_000, strict=True)
    """Largest output budget (at most 1,000,000). An answer cut off at its budget (finish_reason length/max_tokens)
    is asked again with twice the budget, up to this cap (32,000: Claude Opus 4's output limit;
    o4-mini and gpt-5.1 allow more); cut off at the cap, or cut off short of its budget (the
    model's context is full, a larger budget cannot help), the judgment is invalid with the
    reason "truncated at N tokens". Each call records its budget (``CallRecord.max_tokens``)."""
    max_behaviours_per_turn: int | None = Field(None, ge=1, le=1_000, strict=True)
    """Cap on behaviours listed per turn in the answer schema (None: the taxonomy's size; at most 1,000). For
    small local models that otherwise list everything and run out of tokens."""
    samples: int = Field(1, ge=1, le=100, strict=True)
    """Answers per target and kind (beyond the paper; 1 to 100). With k > 1 the same request is
    sent k times, each a call of its own cached by its sample index (sample 0 is the one answer of
    ``samples: 1``, so raising k pays only the new samples, and a resumed run sends none it has),
    and the judgment is the majority of the valid samples: a behaviour on a turn where strictly
    more than half of them label it (a tie is no label; an odd k avoids ties while every sample
    is valid), the Likert scores their mean rounded halves up; invalid only when every sample
    is. Each sample is kept in the judgment's ``samples`` (an invalid one with its reason); the
    vote fractions are ``cocoeval.analysis.calibration.judge_votes``. Part of the judge id only
    when k > 1: k = 1 labels as before (same id), while a majority of k answers is another
    label than one answer, or than a majority of another k."""
    datasets: list[str] | None = None
    """Only judge instances of these datasets (their reference and every continuation; None: all).
    Chooses what is judged, so it is not part of the judge id."""
    max_per_dataset: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    """Only the first N instances of each dataset (in the run's order; None: all; at most 1,000,000), as a setup's
    ``max_per_dataset`` chooses them. Not part of the judge id."""

    @field_validator("kind")
    @classmethod
    def _kinds(cls, v: list[Kind]) -> list[Kind]:
        if not v:
            raise ValueError(
                "kind is empty, so this judge would judge nothing: give overall, fine_grained "
                "or both (or leave kind out: both), or remove the judge"
            )
        twice = sorted({k for k in v if v.count(k) > 1})
        if twice:
            raise ValueError(
                f"kind lists {', '.join(twice)} more than once (every target would be judged "
                "twice): give each kind once"
            )
        return v

    def select(self, instances: Sequence[Instance]) -> list[Instance]:
        """The instances this judge judges."""
        return first_per_dataset(
            [i for i in instances if self.datasets is None or i.dataset in self.datasets], self.max_per_dataset
        )

    def judge_id(self, kind: Kind, taxonomy: Taxonomy) -> str:
        data = self.model_dump(exclude={"name", "kind", "datasets", "max_per_dataset"})
        if data["samples"] == 1:  # one answer, as before samples existed: the same id
            del data["samples"]
        data.update(kind=kind, prompt=load_prompt(PROMPTS[kind]).ref, taxonomy=taxonomy.hash)
        return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:12]


def fine_schema(tax: Taxonomy, n_turns: int | None = None, max_per_turn: int | None = None) -> dict[str, Any]:
    """The fine-grained answer's JSON schema: behaviour names from the taxonomy; with
    ``n_turns`` exactly that many turn entries (grammar-constrained models then cannot stop
    early); ``max_per_turn`` caps the behaviours listed per turn."""
    item = {
        "type": "object",
        "properties": {
            "behaviour": {"type": "string", "enum": [b.name for b in tax.behaviours]},
            "evidence": {"type": "string", "maxLength": 60},
        },
        "required": ["behaviour", "evidence"],
        "additionalProperties": False,
    }
    turn = {
        "type": "object",
        "properties": {
            "turn": {"type": "integer"},
            "behaviours": {"type": "array", "items": item, "maxItems": max_per_turn or len(tax.behaviours)},
        },
        "required": ["turn", "behaviours"],
        "additionalProperties": False,
    }
    turns: dict[str, Any] = {"type": "array", "items": turn}
    if n_turns:
        turns.update(minItems=n_turns, maxItems=n_turns)
    return {"type": "object", "properties": {"turns": turns}, "required": ["turns"], "additionalProperties": False}


OVERALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "consistency": {"type": "integer"},
        "collaborativeness": {"type": "integer"},
        "rationale": {"type": "string", "maxLength": 300},
    },
    "required": ["consistency", "collaborativeness", "rationale"],
    "additionalProperties": False,
}


EnsembleRule = Literal["majority"]


class EnsembleConfig(BaseModel):
    """A judge ensemble (beyond the paper): a judge made of other judges of the params file,
    ``{name, ensemble: [judge names], kind: [...]}``. It makes no call: after its members are
    judged, its judgment of a target combines theirs by its ``rule`` (``cocoeval.judge.ensemble``):
    a behaviour on a turn where a strict majority of the valid members label it, the mean of the
    valid members' Likert scores; invalid where a strict majority of its members is invalid for
    that target (or has no judgment of it), with their reasons. Its judge id hashes the rule, the
    kinds and the members' judge ids: a member's new id makes the ensemble's judgments stale."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """As a judge's: judgments/<name>.jsonl."""
    ensemble: list[str] = Field(min_length=2)
    """The member judges, by name: LLM judges of the same params file (not ensembles), each making
    every kind of ``kind``; at least two, each once (an odd number avoids ties: a behaviour labelled
    by exactly half the valid members is not a majority)."""
    kind: list[Kind] = Field(default_factory=_both_kinds)
    """Which evaluations the ensemble combines (every member must make them)."""
    rule: EnsembleRule = "majority"
    """majority: per turn and behaviour a strict majority of the valid members; Likert the mean of
    the valid members' scores, rounded to a whole score (halves up; the exact mean is in the
    judgment's rationale)."""
    datasets: list[str] | None = None
    """Only these datasets (None: all), as a judge's; the members should judge them too (a target
    a member did not judge counts as invalid for that member)."""
    max_per_dataset: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    """Only the first N instances of each dataset, as a judge's."""
    _members: list[JudgeConfig] = PrivateAttr(default_factory=list)

    _kinds = field_validator("kind")(JudgeConfig._kinds.__func__)  # type: ignore[attr-defined]

    @field_validator("ensemble")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        twice = sorted({m for m in v if v.count(m) > 1})
        if twice:
            raise ValueError(f"ensemble lists {', '.join(twice)} more than once: give each member once")
        return v

    def select(self, instances: Sequence[Instance]) -> list[Instance]:
        """The instances this ensemble judges."""
        return first_per_dataset(
            [i for i in instances if self.datasets is None or i.dataset in self.datasets], self.max_per_dataset
        )

    def judge_id(self, kind: Kind, taxonomy: Taxonomy) -> str:
        """As a judge's ``judge_id``, from the members the params file resolved (``members``; the
        run uses ``judge_ids``, which resolves them from the judges it is given)."""
        if len(self._members) != len(self.ensemble):
            raise ValueError(
                f"ensemble {self.name!r}: its members are not resolved; read it in a params file, "
                "or use judge_ids(judges, taxonomy)"
            )
        return self.ensemble_id(kind, [m.judge_id(kind, taxonomy) for m in self._members], taxonomy)

    def resolve(self, members: Sequence[JudgeConfig]) -> None:
        """Keep the member judges' configurations (in the order of ``ensemble``) for ``judge_id``."""
        self._members = list(members)

    def ensemble_id(self, kind: Kind, member_ids: Sequence[str], taxonomy: Taxonomy) -> str:
        """The judge id of its ``kind`` judgments: the rule, the kind, the taxonomy and the members'
        judge ids of that kind (``member_ids``, in the order of ``ensemble``)."""
        data = {
            "ensemble": [[m, i] for m, i in zip(self.ensemble, member_ids, strict=True)],
            "rule": self.rule,
            "kind": kind,
            "taxonomy": taxonomy.hash,
        }
        return "ens-" + hashlib.sha256(canonical_json(data).encode()).hexdigest()[:12]


def _judge_tag(v: Any) -> str:
    if isinstance(v, dict):
        return "ensemble" if "ensemble" in v else "llm"
    return "ensemble" if isinstance(v, EnsembleConfig) else "llm"


AnyJudge = Annotated[
    Annotated[JudgeConfig, Tag("llm")] | Annotated[EnsembleConfig, Tag("ensemble")],
    Discriminator(_judge_tag),
]
"""A judge of a params file: ``ensemble:`` makes it an ensemble of other judges, else an LLM judge."""


def judge_ids(judges: Sequence[JudgeConfig | EnsembleConfig], taxonomy: Taxonomy) -> dict[str, dict[str, str]]:
    """{judge name: {kind: judge id}} of every judge, ensembles from their members' ids (a member
    an ensemble names that is not among ``judges`` is a params error, refused when read)."""
    out: dict[str, dict[str, str]] = {
        j.name: {k: j.judge_id(k, taxonomy) for k in j.kind} for j in judges if isinstance(j, JudgeConfig)
    }
    for e in judges:
        if isinstance(e, EnsembleConfig):
            out[e.name] = {k: e.ensemble_id(k, [out[m][k] for m in e.ensemble], taxonomy) for k in e.kind}
    return out
