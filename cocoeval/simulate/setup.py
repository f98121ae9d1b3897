"""A simulation setup: one simulator of a params file, its id (a hash of everything that changes
the output) and the instances it simulates. Three kinds (``AnySetup``, told apart by their keys):

- ``Setup``: the paper's simulator, one LLM writing every participant's turns, k turns per call
  (model × prompt × turns per call × sampling);
- ``PluginSetup`` (``simulator: NAME``): a simulator plugin, e.g. the built-in ``agents`` (one
  agent per participant), defined beside the plugin API (``cocoeval.simulate.plugins``);
- ``ImportedSetup`` (``continuations: FILE``): continuations written elsewhere, imported from a
  JSONL file (``cocoeval.simulate.exchange``)."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from cocoeval.core.errors import InputError
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import CHATBOT_SYSTEM_PROMPT

from .plugins import PluginSetup
from .setupbase import SetupBase, setup_hash

__all__ = ["COPY_PROMPTS", "AnySetup", "ImportedSetup", "PluginSetup", "Setup", "SetupBase"]

COPY_PROMPTS = ("copy_then_continue", "taxonomy_copy_then_continue")
"""The presence-penalty variants (C.2): the model begins its response with the ``n_copy`` most
recent turns, copied (checked and stripped), and presence_penalty defaults to 2.0."""


class Setup(SetupBase):
    """The paper's simulator: one LLM writes every participant's turns, k per call. Its id hashes
    everything that changes the output."""

    source: Literal["simulated"] = "simulated"
    model: str
    """Simulator model spec, e.g. openai/gpt-4.1 or a fine-tuned openai/ft:gpt-4.1-...:id."""
    prompt: str = "vanilla"
    """vanilla, taxonomy, copy_then_continue or taxonomy_copy_then_continue (presence-penalty
    variants, ``COPY_PROMPTS``), user_simulator, or a path."""
    turns_per_call: int = Field(30, ge=1, le=1_000, strict=True)
    """k: turns generated per call (1, 5, 30 or any other up to 1,000)."""
    temperature: float | None = Field(None, ge=0, le=2)
    """Sampling temperature, 0 to 2 (None: the provider's default)."""
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    """Presence penalty; copy_then_continue defaults to 2.0. Dropped where unsupported."""
    max_tokens_per_turn: int = Field(120, ge=8, le=10_000, strict=True)
    """Output budget per requested turn (plus 60 per call), 8 to 10,000."""
    n_copy: int = Field(5, ge=1, le=1_000, strict=True)
    """copy_then_continue: how many recent turns the model copies first (at most 1,000)."""
    chatbot: str | None = None
    """human_ai: the assistant model (system prompt "You are a helpful assistant."); default: model."""
    max_attempts: int = Field(3, ge=1, le=100, strict=True)
    """Calls in a row that may yield no usable turn before the continuation is invalid (1 to 100)."""
    sample: int = Field(0, ge=0, le=1_000_000, strict=True)
    """Replicate index: the same setup sampled again gets new calls (0 to 1,000,000)."""

    @model_validator(mode="after")
    def _defaults(self) -> Setup:
        if self.kind == "human_ai":
            if self.prompt == "vanilla":
                self.prompt = "user_simulator"
            self.turns_per_call = 1
            self.chatbot = self.chatbot or self.model
        if self.prompt in COPY_PROMPTS and self.presence_penalty is None:
            self.presence_penalty = 2.0
        return self

    def model_specs(self) -> dict[str, str]:
        return {"model": self.model, **({"chatbot": self.chatbot} if self.chatbot else {})}

    def prompt_names(self) -> list[str]:
        return [self.prompt, *([CHATBOT_SYSTEM_PROMPT] if self.kind == "human_ai" else [])]

    @property
    def copies(self) -> int:
        """Turns the model copies before the new ones: ``n_copy`` for a copy prompt, else 0."""
        return self.n_copy if self.prompt in COPY_PROMPTS else 0

    def setup_id(self, taxonomy: Taxonomy | None = None) -> str:
        prompt = load_prompt(self.prompt)
        data = self.model_dump(exclude={"name", "datasets", "max_per_dataset", "source"})
        data["prompt"] = prompt.ref
        if self.kind == "human_ai":
            data["chatbot_prompt"] = load_prompt(CHATBOT_SYSTEM_PROMPT).ref
        if "${behaviours}" in prompt.system + prompt.user:
            data["taxonomy"] = (taxonomy or load_taxonomy()).hash
        return setup_hash(data)


class ImportedSetup(SetupBase):
    """Continuations written elsewhere, imported from a JSONL file (docs/simulators.md). Its id
    hashes the file's content and the description: a changed file is a new setup, and the
    judgments of the old one are stale."""

    source: Literal["imported"] = "imported"
    continuations: str
    """The JSONL file (one record per instance; schema ``continuations.schema.json``); a relative
    path is read from the params file's folder."""
    description: str = ""
    """What made them (the system, its settings), shown in the report beside the file's sha256."""
    model: str | None = None
    """The model or system that wrote them, for tables (never called)."""

    def file_sha256(self) -> str:
        """The sha256 of the continuations file, read as untrusted data (``core.files.read_bounded``):
        an InputError naming the file when it is missing, unreadable, no regular file (a named pipe
        would make the read wait forever, a link to ``/dev/zero`` fill the memory) or larger than
        ``core.files.MAX_IMPORT_BYTES``."""
        from cocoeval.core.files import MAX_IMPORT_BYTES, read_bounded

        hint = (
            "fix the setup's continuations: path (relative paths are read from the params file's folder); "
            f"it names a regular JSONL file of at most {MAX_IMPORT_BYTES >> 20} MiB"
        )
        try:
            return hashlib.sha256(read_bounded(self.continuations, MAX_IMPORT_BYTES, hint=hint)).hexdigest()
        except InputError as e:
            raise InputError(
                f"cannot read the continuations of imported setup {self.name!r}: {e.problem}", file=e.file, hint=e.hint
            ) from None

    def setup_id(self, taxonomy: Taxonomy | None = None) -> str:
        return setup_hash({"imported": self.file_sha256(), "description": self.description, "kind": self.kind})


def _setup_tag(v: Any) -> str:
    if isinstance(v, dict):
        return "imported" if "continuations" in v else "plugin" if "simulator" in v else "simulated"
    return getattr(v, "source", "simulated")


AnySetup = Annotated[
    Annotated[Setup, Tag("simulated")]
    | Annotated[PluginSetup, Tag("plugin")]
    | Annotated[ImportedSetup, Tag("imported")],
    Discriminator(_setup_tag),
]
"""A setup of a params file: ``continuations:`` makes it imported, ``simulator:`` a plugin, else
the paper's LLM simulator."""
