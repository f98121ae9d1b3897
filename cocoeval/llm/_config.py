"""The runner's settings (``LLMConfig``) and the shapes of a call and its result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import GenerateRequest, GenerateResponse, Usage
from .cache import CachePolicy


class LLMConfig(BaseModel):
    """How calls are run. Every field can be set in a params file's ``llm:`` section."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int = Field(8, ge=1, le=10_000, strict=True)
    """Most calls in flight at once (1 to 10,000)."""
    rpm: int | None = Field(None, ge=1, le=10_000_000, strict=True)
    """Requests-per-minute limit (None: none; at most 10,000,000)."""
    tpm: int | None = Field(None, ge=1, le=10_000_000_000, strict=True)
    """Tokens-per-minute limit on estimated input + max output tokens (None: none; at most 10^10)."""
    max_retries: int = Field(5, ge=0, le=100, strict=True)
    """Retries (0 to 100) the provider SDK makes on 408/409/429/5xx and dropped connections, honouring
    retry-after; there is no second retry loop."""
    timeout_s: float = Field(120.0, gt=0)
    """Per-request timeout."""
    cache: str | None = ".cocoeval/cache.sqlite"
    """Path of the SQLite call cache (None: no cache)."""
    cache_policy: CachePolicy = "read_write"
    """read_write, read_only, refresh or off."""
    prices: str | None = None
    """A price table YAML replacing cocoeval/llm/prices.yaml."""
    progress: bool = True
    """Show a tqdm progress bar."""
    processes: int = Field(1, ge=1, le=64, strict=True)
    """Processes sending live calls: 1 sends from this process; N > 1 starts N worker processes
    (with the first live call, kept for the Runner's later runs) that share the sending, and with
    it the provider SDK's CPU time per request (about 1.5 ms on a 2-core machine). Worth it for a fast server at high concurrency (vLLM, llama.cpp on a GPU);
    remote APIs answering in seconds rarely need it. Limits, cache and accounting stay here;
    in-process models (local/) always run here."""
    batch: bool = False
    """Send the calls that do not depend on an earlier answer (judging, whole-continuation
    simulation, metadata, summaries) through the provider's batch API (OpenAI Batch, Anthropic
    Message Batches: half price, answers within 24 h) and write the answers into the call cache.
    Providers without a batch API (local, openai-compatible, llama-cpp-server) run live."""
    batch_dependent: Literal["live", "rounds"] = "live"
    """In batch mode, calls built from an earlier answer of the run (the steps of 1- and
    k-turn-per-call simulation, judge re-asks): 'live', or 'rounds' of batches (one per step)."""
    batch_poll_s: float = Field(30.0, gt=0)
    """Seconds between polls of a running batch."""
    batch_max_requests: int | None = Field(None, ge=1, le=1_000_000, strict=True)
    """Most requests per batch (None: the provider's limit, 50,000 OpenAI / 100,000 Anthropic; at most 1,000,000)."""


class Call(BaseModel):
    """One request to run."""

    model: str
    """Model spec, e.g. openai/gpt-4.1."""
    request: GenerateRequest
    stage: str = "default"
    """Accounting bucket: simulate, judge, metadata, summary..."""
    tag: str | None = None
    """The caller's label (instance id, turn...)."""
    dependent: bool = False
    """Built from an earlier answer of the run (a simulation step, a judge re-ask): in batch
    mode it runs live unless ``batch_dependent`` is 'rounds'."""


class CallResult(BaseModel):
    key: str
    model: str
    stage: str
    tag: str | None = None
    status: Literal["ok", "failed"]
    response: GenerateResponse | None = None
    reason: str | None = None
    """Why the call failed (context_length, content_filter, rate_limited, timeout...)."""
    detail: str | None = None
    cache_hit: bool = False
    cost_usd: float | None = None
    """What the call cost (0 for a cache hit; None when the model's price is unknown)."""
    failed_usage: Usage | None = None
    """What the provider billed for a failed call's answer (a refusal, a content filter), when it said."""

    @property
    def usage(self) -> Usage:
        """The tokens of the call's answer: the response's, a failed call's billed ones, or none."""
        return self.response.usage if self.response is not None else (self.failed_usage or Usage())
