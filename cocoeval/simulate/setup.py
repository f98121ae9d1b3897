"""A simulation setup: one simulator of a params file, its id (a hash of everything that changes
the output) and the instances it simulates. Three kinds (``AnySetup``, told apart by their keys):

- ``Setup``: the paper's simulator, one LLM writing every participant's turns, k turns per call
  (model × prompt × turns per call × sampling);
- ``PluginSetup`` (``simulator: NAME``): a simulator plugin (``cocoeval.simulate.plugins``), e.g.
  the built-in ``agents`` (one agent per participant);
- ``ImportedSetup`` (``continuations: FILE``): continuations written elsewhere, imported from a
  JSONL file (``cocoeval.simulate.exchange``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from cocoeval.core.errors import InputError
from cocoeval.core.schema import Instance, first_per_dataset, is_human_ai
from cocoeval.core.taxonomy import Taxonomy, load_taxonomy
from cocoeval.llm.base import canonical_json
from cocoeval.prompts.files import load_prompt
from cocoeval.prompts.render import CHATBOT_SYSTEM_PROMPT

COPY_PROMPTS = ("copy_then_continue", "taxonomy_copy_then_continue")
"""The presence-penalty variants (C.2): the model begins its response with the ``n_copy`` most
recent turns, copied (checked and stripped), and presence_penalty defaults to 2.0."""


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


def _hash(data: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:12]


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
        return _hash(data)


class PluginSetup(SetupBase):
    """A simulator plugin (``cocoeval.simulate.plugins``), e.g. the built-in ``agents``. Its id
    hashes the plugin's name and version, the model, the options, the plugin's prompt files and
    the replicate index."""

    source: Literal["plugin"] = "plugin"
    simulator: str
    """The plugin's registered name: built in (``agents``) or an installed package's
    ``cocoeval.simulators`` entry point."""
    model: str | None = None
    """The model the plugin calls (PROVIDER/MODEL), if it calls one; some plugins need one."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The plugin's own settings, checked against its ``Options`` when the params are read."""
    sample: int = Field(0, ge=0, le=1_000_000, strict=True)
    """Replicate index: the same setup sampled again gets new calls (0 to 1,000,000)."""
    step_timeout_s: float = Field(60.0, gt=0, le=86_400)
    """The longest a piece of the plugin's own code may run without returning or awaiting
    ``ctx.llm`` (LLM calls are not counted), in seconds; past it the continuation is invalid and
    the plugin is stopped (``plugins.STEP_TIME_LIMIT_S``). Not part of the setup id."""

    @model_validator(mode="after")
    def _plugin(self) -> PluginSetup:
        from cocoeval.core.errors import ConfigError

        try:
            self.options = self._hook("check_options")
        except ConfigError as e:
            raise ValueError(e.message + (f" ({e.hint})" if e.hint else "")) from None
        return self

    def _hook(self, name: str) -> dict[str, Any]:
        """A class hook of the plugin (check_options, model_specs, prompt_refs) called on a copy of
        this setup, bounded and checked (``plugins.plugin_call``): it must return a JSON object,
        and for the specs and refs, one of text to text."""
        import json

        from cocoeval.core.errors import ConfigError

        from .plugins import get_simulator, label, plugin_call

        cls = get_simulator(self.simulator)  # an unknown name: the known ones are named
        own = self.model_copy(deep=True)
        got = plugin_call(label(cls), name, lambda: getattr(cls, name)(own), self.step_timeout_s)
        try:
            ok = isinstance(got, dict) and bool(json.dumps(got, allow_nan=False)) and (
                name == "check_options" or all(isinstance(k, str) and isinstance(v, str) for k, v in got.items()))
        except (TypeError, ValueError, RecursionError):
            ok = False
        if not ok:
            raise ConfigError(f"{label(cls)}: {name} returned a {type(got).__name__} that is not "
                              + ("a JSON object" if name == "check_options" else "a mapping of text to text"),
                              hint="see the hook in cocoeval.simulate.plugins.Simulator")
        return got

    def model_specs(self) -> dict[str, str]:
        return dict(self._hook("model_specs"))

    def prompt_names(self) -> list[str]:
        return list(self._hook("prompt_refs"))

    def setup_id(self, taxonomy: Taxonomy | None = None) -> str:
        from .plugins import get_simulator

        cls = get_simulator(self.simulator)
        data = {"simulator": self.simulator, "version": cls.version, "model": self.model, "options": self.options,
                "sample": self.sample, "kind": self.kind,
                "prompts": self._hook("prompt_refs"), "taxonomy": (taxonomy or load_taxonomy()).hash}
        return _hash(data)


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

        hint = ("fix the setup's continuations: path (relative paths are read from the params file's folder); "
                f"it names a regular JSONL file of at most {MAX_IMPORT_BYTES >> 20} MiB")
        try:
            return hashlib.sha256(read_bounded(self.continuations, MAX_IMPORT_BYTES, hint=hint)).hexdigest()
        except InputError as e:
            raise InputError(f"cannot read the continuations of imported setup {self.name!r}: {e.problem}",
                             file=e.file, hint=e.hint) from None

    def setup_id(self, taxonomy: Taxonomy | None = None) -> str:
        return _hash({"imported": self.file_sha256(), "description": self.description, "kind": self.kind})


def _setup_tag(v: Any) -> str:
    if isinstance(v, dict):
        return "imported" if "continuations" in v else "plugin" if "simulator" in v else "simulated"
    return getattr(v, "source", "simulated")


AnySetup = Annotated[
    Annotated[Setup, Tag("simulated")] | Annotated[PluginSetup, Tag("plugin")]
    | Annotated[ImportedSetup, Tag("imported")],
    Discriminator(_setup_tag),
]
"""A setup of a params file: ``continuations:`` makes it imported, ``simulator:`` a plugin, else
the paper's LLM simulator."""

