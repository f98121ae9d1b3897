"""What every kind of setup has (``SetupBase``: its name, the instances it simulates) and how a
setup id is made (``setup_hash``). The kinds themselves are in ``setup`` (the paper's simulator,
imported continuations) and ``plugins`` (a simulator plugin's setup, beside the plugin API)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cocoeval.core.schema import Instance, first_per_dataset, is_human_ai
from cocoeval.core.taxonomy import Taxonomy
from cocoeval.llm.base import canonical_json


class SetupBase(BaseModel):
    """What every kind of setup has: its name and the instances it simulates."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Label used in files (continuations/<name>.jsonl), tables and charts; in a params file a safe
    file name (``cocoeval.core.names``), not 'reference'."""
    kind: Literal["multiparty", "human_ai"] = "multiparty"
    """multiparty meetings/debates, or human_ai (the simulator plays the user of a chatbot)."""
    datasets: list[str] | None = None
    """Only simulate instances of these datasets (None: every compatible instance)."""
    max_per_dataset: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    """Only the first N instances of each dataset (in the run's order; None: all): a pilot on a
    subset. Like ``datasets``, it chooses instances and is not part of the setup id."""

    source: Literal["simulated", "plugin", "imported"] = "simulated"
    """What made the continuations (set by the class; not a params key)."""

    def setup_id(self, taxonomy: Taxonomy | None = None) -> str:
        raise NotImplementedError

    def model_specs(self) -> dict[str, str]:
        """{params key: model spec} of every model this setup calls (none for an imported one)."""
        return {}

    def prompt_names(self) -> list[str]:
        """The prompt files its calls use (their versions are listed in the manifest)."""
        return []

    def applies_to(self, inst: Instance) -> bool:
        if self.datasets is not None and inst.dataset not in self.datasets:
            return False
        is_chat = is_human_ai(inst)
        return is_chat if self.kind == "human_ai" else not is_chat

    def select(self, instances: Sequence[Instance]) -> list[Instance]:
        """The instances this setup simulates: those it applies to, capped by ``max_per_dataset``."""
        return first_per_dataset([i for i in instances if self.applies_to(i)], self.max_per_dataset)


def setup_hash(data: dict[str, Any]) -> str:
    """A setup id: the first 12 hex digits of the sha256 of ``data``'s canonical JSON."""
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:12]
