"""A simulation setup: one simulator configuration of a params file (model × prompt × turns per
call × sampling), its id (a hash of everything that changes the output) and the instances it
simulates."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cocoeval.core.schema import Instance, first_per_dataset, is_human_ai
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.llm.base import canonical_json
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import CHATBOT_SYSTEM_PROMPT

COPY_PROMPTS = ("copy_then_continue", "taxonomy_copy_then_continue")
"""The presence-penalty variants (C.2): the model begins its response with the ``n_copy`` most
recent turns, copied (checked and stripped), and presence_penalty defaults to 2.0."""


class Setup(BaseModel):
    """One simulator configuration. Its id hashes everything that changes the output."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Label used in files (continuations/<name>.jsonl), tables and charts; in a params file a safe
    file name (``cocoeval.core.names``), not 'reference'."""
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
    kind: Literal["multiparty", "human_ai"] = "multiparty"
    """multiparty meetings/debates, or human_ai (the simulator plays the user of a chatbot)."""
    chatbot: str | None = None
    """human_ai: the assistant model (system prompt "You are a helpful assistant."); default: model."""
    datasets: list[str] | None = None
    """Only simulate instances of these datasets (None: every compatible instance)."""
    max_per_dataset: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    """Only the first N instances of each dataset (in the run's order; None: all): a pilot on a
    subset. Like ``datasets``, it chooses instances and is not part of the setup id."""
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

    @property
    def copies(self) -> int:
        """Turns the model copies before the new ones: ``n_copy`` for a copy prompt, else 0."""
        return self.n_copy if self.prompt in COPY_PROMPTS else 0

    def setup_id(self, taxonomy: Taxonomy | None = None) -> str:
        prompt = load_prompt(self.prompt)
        data = self.model_dump(exclude={"name", "datasets", "max_per_dataset"})
        data["prompt"] = prompt.ref
        if self.kind == "human_ai":
            data["chatbot_prompt"] = load_prompt(CHATBOT_SYSTEM_PROMPT).ref
        if "${behaviours}" in prompt.system + prompt.user:
            data["taxonomy"] = (taxonomy or load_taxonomy()).hash
        return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:12]

    def applies_to(self, inst: Instance) -> bool:
        if self.datasets is not None and inst.dataset not in self.datasets:
            return False
        is_chat = is_human_ai(inst)
        return is_chat if self.kind == "human_ai" else not is_chat

    def select(self, instances: Sequence[Instance]) -> list[Instance]:
        """The instances this setup simulates: those it applies to, capped by ``max_per_dataset``."""
        return first_per_dataset([i for i in instances if self.applies_to(i)], self.max_per_dataset)


def participant_names(inst: Instance) -> list[str]:
    names = [p.name for p in inst.metadata.participants]
    for t in inst.history:
        if t.speaker not in names:
            names.append(t.speaker)
    return names
