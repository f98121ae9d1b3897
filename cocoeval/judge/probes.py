"""Judge probes (beyond the paper): the altered targets ``cocoeval probe`` sends to a judge, and
their configuration (the ``probes:`` section of a params file, ``ProbeSection``).

- *names*: a target with its participants' names consistently replaced by letters (A, B, C…, in
  order of first appearance) in M (participants, goals, extras), S, the history x and the target's
  turns (speakers and texts, whole names as written): a judge that reads the conversation, not the
  names, labels it as before.
- *planted*: a copy of a human reference with one turn replaced by a known behaviour from a
  versioned template file (``probe_templates.yaml``): a repetition (an earlier turn restated), an
  off-topic turn, a persona flip, a contradiction of the speaker's own earlier turn; the planted
  turn is a judged one, drawn with the probe's seed.
- *stability*: the same target and request, asked as another sample (the request's ``sample``:
  cached apart), so that the two judgments can be compared.

Self-preference needs no call: it is computed from the run's judgments (``cocoeval.analysis.probes``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from cocoeval.core import yamlio
from cocoeval.core.errors import InputError
from cocoeval.core.schema import Instance, Turn, is_human_ai
from cocoeval.core.targets import Target

ProbeKind = Literal["names", "planted", "stability"]
PlantedBehaviour = Literal["repetition", "off_topic", "persona_flip", "contradiction"]
PROBE_KINDS: tuple[ProbeKind, ...] = ("names", "planted", "stability")
PLANTED: tuple[PlantedBehaviour, ...] = ("repetition", "off_topic", "persona_flip", "contradiction")
TEMPLATES = Path(__file__).with_name("probe_templates.yaml")
MAX_QUOTE = 300
"""The most characters of an earlier turn a template quotes."""


class ProbeSection(BaseModel):
    """The ``probes:`` section of a params file: what ``cocoeval probe PARAMS`` sends (and
    ``cocoeval estimate`` forecasts). Probes judge with the run's judges, through the run's call
    cache; their records go to ``<run>/probes/<judge>.jsonl``."""

    model_config = ConfigDict(extra="forbid")

    kinds: list[ProbeKind] = Field(default_factory=lambda: list(PROBE_KINDS))
    """Which probes: names, planted, stability (each once; default all three). Self-preference
    needs no call and is always computed from the run's judgments."""
    judges: list[str] | None = None
    """The LLM judges to probe, by name (None: every LLM judge of the params; ensembles make no
    call and are not probed)."""
    targets: int = Field(20, ge=1, le=100_000, strict=True)
    """How many targets each probe draws per judge: names and stability draw targets (the human
    reference or a continuation of an instance) among those the judge judged validly; planted
    draws this many human references and plants each behaviour once into each (so ``targets`` x
    behaviours copies)."""
    behaviours: list[PlantedBehaviour] = Field(default_factory=lambda: list(PLANTED))
    """The planted behaviours: repetition, off_topic, persona_flip, contradiction (default all)."""
    seed: int = Field(0, strict=True)
    """Seed of the draws (targets, planted turns, templates)."""
    sample: int = Field(1, ge=1, le=1_000, strict=True)
    """The sample index of the stability probe's second judgment (the run's judgments are sample 0;
    a judge with ``samples: k`` asks this plus k − 1, past the run's samples 0 to k − 1)."""

    @field_validator("kinds", "behaviours")
    @classmethod
    def _once(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("is empty: give at least one, or leave the key out (all)")
        if twice := sorted({k for k in v if v.count(k) > 1}):
            raise ValueError(f"lists {', '.join(twice)} more than once: give each once")
        return v


@cache
def load_templates() -> dict[str, Any]:
    """The planted-behaviour templates (``probe_templates.yaml``): {version, behaviours: {name:
    {expects: taxonomy id, what, templates: [...]}}}."""
    try:
        data = yamlio.load(TEMPLATES.read_text(encoding="utf-8"), TEMPLATES)
    except yaml.YAMLError as e:
        raise InputError(f"not valid YAML: {e}", file=str(TEMPLATES), hint="reinstall cocoeval") from None
    if not isinstance(data, dict) or set(data.get("behaviours") or {}) != set(PLANTED):
        raise InputError(
            f"expected the behaviours {', '.join(PLANTED)}", file=str(TEMPLATES), hint="reinstall cocoeval"
        )
    return data


def templates_version() -> str:
    d = load_templates()
    return f"{d.get('name', 'probe-templates')}@{d.get('version')}"


def expected_behaviour(planted: str) -> str:
    """The taxonomy id a planted behaviour should be labelled with."""
    return str(load_templates()["behaviours"][planted]["expects"])


# ---------------------------------------------------------------- names
def letters(n: int) -> str:
    """The n-th anonymous name (0 -> A, 25 -> Z, 26 -> AA)."""
    out = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


def name_map(inst: Instance, turns: list[Turn]) -> dict[str, str]:
    """{participant name: letter}: the speakers of x and the target, then M's participants, in
    order of first appearance. Empty for a human–AI chat (user and assistant are roles, not names)."""
    if is_human_ai(inst):
        return {}
    seen: dict[str, None] = {}
    for name in [*(t.speaker for t in [*inst.history, *turns]), *(p.name for p in inst.metadata.participants)]:
        if name.strip():
            seen.setdefault(name, None)
    return {name: letters(i) for i, name in enumerate(seen)}


def _replacer(mapping: dict[str, str]) -> Any:
    if not mapping:
        return lambda s: s
    names = sorted(mapping, key=len, reverse=True)  # "Ann Lee" before "Ann"
    rx = re.compile("|".join(rf"(?<!\w){re.escape(n)}(?!\w)" for n in names))
    return lambda s: rx.sub(lambda m: mapping[m.group(0)], s)


def _deep(x: Any, f: Any) -> Any:
    if isinstance(x, str):
        return f(x)
    if isinstance(x, list):
        return [_deep(v, f) for v in x]
    if isinstance(x, dict):
        return {k: _deep(v, f) for k, v in x.items()}
    return x


def anonymise(target: Target) -> tuple[Target, dict[str, str]]:
    """The target with every participant's name replaced by its letter (``name_map``) in M, S, x
    and its turns, and the mapping."""
    mapping = name_map(target.instance, target.turns)
    sub = _replacer(mapping)
    inst = target.instance
    data = inst.model_dump(mode="json")
    for key in ("metadata", "summary"):
        data[key] = _deep(data[key], sub)
    for key in ("history", "reference"):
        data[key] = [
            {**t, "speaker": mapping.get(t["speaker"], t["speaker"]), "text": sub(t["text"])} for t in data[key]
        ]
    new = Instance.model_validate(data)
    turns = [
        t.model_copy(update={"speaker": mapping.get(t.speaker, t.speaker), "text": sub(t.text)}) for t in target.turns
    ]
    return Target(new, target.name, target.target_id, turns, list(target.judged)), mapping


# ---------------------------------------------------------------- planted behaviours
@dataclass
class Planted:
    """One planted copy: the altered target and what was changed."""

    target: Target
    behaviour: str
    """The planted behaviour (repetition, off_topic, persona_flip, contradiction)."""
    expects: str
    """The taxonomy id it should be labelled with."""
    turn: int
    """0-based index, in the target's turns, of the planted turn."""
    changed: dict[str, Any] = field(default_factory=dict)
    """turn, speaker, before, after, template (its index)."""


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_QUOTE else text[: MAX_QUOTE - 1].rstrip() + "…"


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:1].isupper() and not s[1:2].isupper() else s


def plant(target: Target, behaviour: str, rng: random.Random) -> Planted | None:
    """A copy of ``target`` with one of its judged turns replaced by ``behaviour`` (a template of
    ``probe_templates.yaml`` filled from the conversation), or None when it has no turn to plant
    it in (no judged turn; a contradiction needs a judged turn whose speaker spoke before)."""
    spec = load_templates()["behaviours"][behaviour]
    inst, turns = target.instance, target.turns
    before = list(inst.history)

    def earlier_of(p: int, own: bool) -> str | None:
        prior = [*before, *turns[:p]]
        mine = [t for t in prior if t.speaker == turns[p].speaker and t.text.strip()]
        if mine:
            return mine[-1].text
        if own:
            return None
        rest = [t for t in prior if t.text.strip()]
        return rest[-1].text if rest else None

    places = [p for p in target.judged if behaviour != "contradiction" or earlier_of(p, True) is not None]
    if behaviour == "repetition":
        places = [p for p in places if earlier_of(p, False) is not None]
    if not places:
        return None
    p = rng.choice(places)
    n = rng.randrange(len(spec["templates"]))
    speaker = turns[p].speaker
    roles = {x.name: x.role for x in inst.metadata.participants}
    others = [x.role or x.name for x in inst.metadata.participants if x.name != speaker and (x.role or x.name)]
    slots = {
        "earlier": _quote(earlier_of(p, False) or ""),
        "earlier_own": _quote(earlier_of(p, True) or ""),
        "role": roles.get(speaker) or "participant",
        "other_role": rng.choice(others) if others else "chair",
        "goal": _lower_first(inst.metadata.goals[0]) if inst.metadata.goals else "this",
    }
    text = str(spec["templates"][n]).format(**slots)
    new_turns = list(turns)
    new_turns[p] = turns[p].model_copy(update={"text": text, "raw_text": None})
    return Planted(
        Target(inst, target.name, target.target_id, new_turns, list(target.judged)),
        behaviour,
        str(spec["expects"]),
        p,
        {"turn": p, "speaker": speaker, "before": turns[p].text, "after": text, "template": n},
    )
