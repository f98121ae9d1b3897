"""The build's configuration: which windows become instances (``BuildConfig``, with
``ChatSelection`` for the human–AI chats), which models make M, S and the clean-up
(``LLMContextOptions``), and the ``build:`` section of a params file (``BuildSection``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cocoeval.core.schema import Conversation, is_human_ai


class ChatSelection(BaseModel):
    """Which human–AI chats become instances (paper D.1, Table 13: 25 ShareChat conversations
    with more than 60 turns; x = 30 turns, r = the next 30, only user turns judged)."""

    model_config = ConfigDict(extra="forbid")

    min_turns: int = Field(61, ge=2, le=1_000_000, strict=True)
    """Fewest turns a chat must have (the paper: more than 60). The window sits after at least
    min_turns − history_turns − reference_turns turns (1 by default), left for S."""
    conversations: int = Field(25, ge=0, le=1_000_000, strict=True)
    """Chats per chat dataset, one instance each, all in the eval split (the paper: 25)."""
    ids: list[str] | None = None
    """Only these conversation ids (the paper hand-picked natural chats, leaving out coding tasks
    and sessions of isolated questions); None: a seeded random choice among the long ones."""


class BuildConfig(BaseModel):
    """Options of ``cocoeval build``."""

    model_config = ConfigDict(extra="forbid")

    history_turns: int = Field(30, ge=1, le=100_000, strict=True)
    """Turns in the history x shown to the simulator."""
    reference_turns: int = Field(30, ge=1, le=100_000, strict=True)
    """Turns in the human reference r (and so in every continuation)."""
    min_prior_turns: int = Field(10, ge=0, le=1_000_000, strict=True)
    """Turns that must precede x, left for the summary S."""
    per_dataset: int = Field(50, ge=0, le=1_000_000, strict=True)
    """Eval instances per dataset (the paper: 50)."""
    train_per_dataset: int | None = Field(None, ge=0, le=10_000_000, strict=True)
    """Train instances per dataset; None takes every window of the train conversations."""
    eval_share: float = Field(0.5, gt=0, le=1)
    """Share of a dataset's usable conversations held out for eval; grown, one conversation at
    a time, when their windows cannot provide ``per_dataset`` instances (one conversation always
    stays for train when there are two or more)."""
    max_windows_per_conversation: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    """Cap on instances cut from one conversation (None: as many as fit)."""
    min_speakers: int = Field(2, ge=1, le=1_000, strict=True)
    """Fewest distinct speakers a window (x + r) must have."""
    merge_same_speaker: bool = False
    """Merge consecutive turns of the same speaker before windowing."""
    seed: int = Field(0, strict=True)
    """Seed of every random choice; same inputs and seed give byte-identical output."""
    chat: ChatSelection = Field(default_factory=ChatSelection)
    """Chat datasets (source kind chat): the generalization study's selection."""

    @property
    def window(self) -> int:
        return self.history_turns + self.reference_turns

    def for_chats(self) -> BuildConfig:
        """The options applied to a chat dataset: one window per chat, after at least
        ``chat.min_turns - window`` turns, ``chat.conversations`` of them (at most ``per_dataset``,
        the cap of every dataset), all eval."""
        return self.model_copy(
            update={
                "min_prior_turns": max(0, self.chat.min_turns - self.window),
                "per_dataset": min(self.chat.conversations, self.per_dataset),
                "train_per_dataset": 0,
                "eval_share": 1.0,
                "max_windows_per_conversation": 1,
            }
        )

    def need(self, conv: Conversation) -> int:
        """Fewest turns ``conv`` must have to give an instance."""
        cfg = self.for_chats() if is_human_ai(conv) else self
        return cfg.min_prior_turns + cfg.window


class LLMContextOptions(BaseModel):
    """Models for LLM-made benchmark inputs (params ``build.context``; ``cocoeval build
    --metadata/--summary/--clean``). None: the offline default (extractive M/S, rule-based
    artefact removal), labelled as such in every instance."""

    model_config = ConfigDict(extra="forbid")

    metadata: str | None = None
    """Model spec for M (goals, participants with roles) from the whole conversation (the paper:
    openai/o4-mini-2025-04-16, C.1)."""
    summary: str | None = None
    """Model spec for S, a paragraph about the turns before the history (the paper: o4-mini)."""
    clean: str | None = None
    """Model spec for the clean-up of disfluencies, fillers, repetitions and special tokens,
    before windowing (the paper: o4-mini, QMSum Product and Academic only)."""
    clean_datasets: list[str] = Field(default_factory=lambda: ["qmsum_product", "qmsum_academic"])
    """Datasets whose turns the clean-up rewrites; every other dataset keeps its source text."""
    clean_turns_per_call: int = Field(30, ge=1, le=1_000, strict=True)
    """Consecutive turns sent per clean-up call."""
    clean_max_chars: int = Field(12_000, ge=500, le=10_000_000, strict=True)
    """About this many characters of source text per clean-up call at most."""
    clean_max_tokens: int = Field(16_000, ge=256, le=1_000_000, strict=True)
    """Output budget of a clean-up call (a reasoning model's reasoning counts in it)."""
    metadata_max_tokens: int = Field(8_000, ge=256, le=1_000_000, strict=True)
    summary_max_tokens: int = Field(4_000, ge=256, le=1_000_000, strict=True)
    max_transcript_chars: int = Field(400_000, ge=1_000, le=100_000_000, strict=True)
    """Longest transcript sent for M or S (~100k tokens); a longer one is cut (M keeps the start,
    S the end) and the prompt says so."""
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    """For reasoning models (o4-mini); None: the provider's default."""
    on_failure: Literal["skip", "extractive"] = "skip"
    """An M or S that cannot be made: leave the instance out (skip) or keep the extractive one;
    either way it is listed in the report. A failed clean-up always leaves its conversation out."""
    clean_prompt: str = "clean"
    metadata_prompt: str = "metadata"
    summary_prompt: str = "summary"
    """Prompt names or paths (cocoeval/prompts/)."""

    @property
    def any(self) -> bool:
        return bool(self.metadata or self.summary or self.clean)


class BuildSection(BaseModel):
    """Build the benchmark as part of the run (instead of ``bench:``)."""

    model_config = ConfigDict(extra="forbid")

    sources: list[str] = Field(default_factory=list)
    """KIND:PATH[#DATASET] sources, as for cocoeval build."""
    demo_data: bool = False
    """Also use the demo's data: the QMSum sample shipped with cocoeval (real meetings) and the
    generated debate and chat conversations (datasets generated_debates, generated_chat)."""
    options: BuildConfig = Field(default_factory=BuildConfig)
    """Builder options (history_turns, per_dataset, seed, chat: {min_turns, conversations, ids}...)."""
    context: LLMContextOptions | None = None
    """M, S and the clean-up made by models, as the paper made them ({metadata, summary, clean:
    MODEL, clean_datasets, on_failure...}; see params/paper.yaml); absent: extractive M/S and
    rule-based cleaning, offline. Its calls go through the run's llm: settings and cache."""

    def models(self) -> set[str]:
        """The models the build calls (clean-up, M, S)."""
        ctx = self.context
        return {m for m in (ctx.metadata, ctx.summary, ctx.clean) if m} if ctx else set()
