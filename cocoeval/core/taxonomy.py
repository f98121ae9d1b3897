"""The behaviour taxonomy: data (a YAML file), not code.

``load_taxonomy()`` returns the default; ``load_taxonomy(path)`` a user's own file of the same
shape. ``Taxonomy.hash`` is a stable content hash that every judgment records.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import yamlio
from .errors import InputError
from .jsonio import read_text

Category = Literal["inconsistent", "uncollaborative"]


class Behaviour(BaseModel):
    """One behaviour of the taxonomy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Stable snake_case identifier used in labels and frames."""
    name: str = Field(min_length=1)
    """Human-readable name, as shown to judges and in charts."""
    category: Category
    """Which family the behaviour belongs to."""
    definition: str = Field(min_length=1)
    """One-sentence definition given to judges and to taxonomy-guided simulators."""


class Taxonomy(BaseModel):
    """A named, versioned list of behaviours."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Name of this taxonomy."""
    version: int | str = 1
    """Version chosen by the taxonomy's author."""
    categories: dict[str, str] = Field(default_factory=dict)
    """Category id to a one-line description."""
    behaviours: tuple[Behaviour, ...]
    """The behaviours, in display order."""

    @field_validator("behaviours")
    @classmethod
    def _non_empty(cls, v: tuple[Behaviour, ...]) -> tuple[Behaviour, ...]:
        if not v:
            raise ValueError("a taxonomy needs at least one behaviour")
        return v

    @model_validator(mode="after")
    def _unique(self) -> Taxonomy:
        for attr in ("id", "name"):
            seen: set[str] = set()
            for b in self.behaviours:
                key = getattr(b, attr).lower()
                if key in seen:
                    raise ValueError(f"duplicate behaviour {attr} {getattr(b, attr)!r}")
                seen.add(key)
        owner: dict[str, Behaviour] = {}  # judges' and annotators' names must find one behaviour
        for b in self.behaviours:
            for text in (b.id, b.name):
                for key in _forms(name_key(text)):
                    other = owner.setdefault(key, b)
                    if other.id != b.id:
                        raise ValueError(
                            f"behaviours {other.id!r} and {b.id!r} cannot be told apart once "
                            "case, spaces, hyphens, underscores and a plural ending are ignored"
                        )
        return self

    @property
    def hash(self) -> str:
        """sha256 (first 16 hex digits) of the canonical JSON of the content (computed each time:
        a cached value would survive ``model_copy`` and go stale)."""
        canon = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    @property
    def ids(self) -> list[str]:
        return [b.id for b in self.behaviours]

    def by_category(self, category: str) -> list[Behaviour]:
        return [b for b in self.behaviours if b.category == category]

    def get(self, key: str) -> Behaviour | None:
        """The behaviour whose id or name is ``key`` up to case, spaces, hyphens, underscores and a
        plural ending ("Off-topic", "OFF_TOPIC", "Interruptions"); None for anything else. Nothing
        is guessed: "On topic", "No interruption" or a misspelling are None."""
        k = name_key(key)
        if not k:
            return None
        for b in self.behaviours:
            if k in (name_key(b.id), name_key(b.name)):
                return b
        hits = {
            b.id: b
            for b in self.behaviours
            for t in (name_key(b.id), name_key(b.name))
            if k in _forms(t) or t in _forms(k)
        }
        return next(iter(hits.values())) if len(hits) == 1 else None


def name_key(s: str) -> str:
    """A name with case, whitespace, hyphens and underscores dropped: "Off-topic" -> "offtopic"."""
    return re.sub(r"[\s_\-]+", "", s.casefold())


def _forms(k: str) -> set[str]:
    """A name key and its plural spellings (only the ending changes, so no word is lost)."""
    out = {k, k + "s", k + "es"}
    if k.endswith("y"):
        out.add(k[:-1] + "ies")
    return out


def default_taxonomy_path() -> Path:
    return Path(str(resources.files("cocoeval.core").joinpath("taxonomy.yaml")))


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """Load a taxonomy YAML file (the default one when ``path`` is None)."""
    p = Path(path) if path is not None else default_taxonomy_path()
    text = read_text(p)  # missing, a folder, unreadable, empty, not UTF-8: a clear InputError
    try:
        data = yamlio.load(text, p)  # a key given twice: an InputError naming the line and the key
    except (yaml.YAMLError, RecursionError) as e:
        raise InputError(
            f"not a readable YAML file ({e})",
            file=str(p),
            hint="fix the YAML syntax; see cocoeval/core/taxonomy.yaml for the shape",
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            "expected a mapping with 'name' and 'behaviours'",
            file=str(p),
            hint="see cocoeval/core/taxonomy.yaml for the shape",
        )
    try:
        return Taxonomy.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise InputError(
            f"{loc}: {first['msg']}",
            file=str(p),
            hint="each behaviour needs id (snake_case), name, category (inconsistent|uncollaborative) and definition",
        ) from None
