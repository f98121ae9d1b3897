"""The runner's settings (``LLMConfig``) and the shapes of a call and its result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .base import GenerateRequest, GenerateResponse, Usage, parse_model_spec
from .cache import CachePolicy
from .errors import ConfigError
from .usage import Price, PriceTable


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
    price: dict[str, Price] = Field(default_factory=dict)
    """Prices of models the table does not name (an openai-compatible server, a self-hosted model,
    an Azure deployment named otherwise): {model spec: {input, cached_input, output[, cache_write]}},
    USD per 1M input / cached input / output tokens. A spec given here is priced by it, before the
    table; the key is the spec as written in a setup or judge, or its PROVIDER/MODEL part alone
    (without ``@URL`` and ``?key_env=``), which then prices that model at every URL."""
    max_usd: float | None = Field(None, gt=0, le=1e9)
    """A cap on what the run directory's invocations pay together (``cocoeval run --max-usd``): once
    the spend reaches it, no further request is sent; the calls in flight finish and are kept, and
    the run stops (``CostCapReached``). None: no cap. Refused with a model of unknown price, with
    ``batch`` (a submitted batch cannot be stopped part-way), and without a call cache that is read
    and written (``cache`` None, ``cache_policy`` other than read_write): going on after the cap
    takes every completed answer from the cache, so without one they would all be paid again."""
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

    @field_validator("price")
    @classmethod
    def _price_specs(cls, v: dict[str, Price]) -> dict[str, Price]:
        for spec in v:
            try:
                parse_model_spec(spec)  # a key names a model as a setup would (PROVIDER/MODEL[@URL])
            except ConfigError as e:
                raise ValueError(f"price: {e}") from None
        return v

    @model_validator(mode="after")
    def _cap_and_batch(self) -> LLMConfig:
        if self.max_usd is not None and self.batch:
            raise ValueError(
                "max_usd (--max-usd) and batch (--batch) together: a submitted batch cannot be stopped part-way, "
                "so its cost cannot be capped; run live with the cap, or through batches without it"
            )
        if self.max_usd is not None and (self.cache is None or self.cache_policy != "read_write"):
            what = "no call cache (cache: null)" if self.cache is None else f"cache_policy {self.cache_policy}"
            raise ValueError(
                f"max_usd (--max-usd) with {what}: going on after the cap stops a run takes every completed answer "
                "from the call cache, so without a cache that is read and written they would all be paid again; "
                "use cache_policy read_write (the default) with the cap, or leave the cap out"
            )
        return self

    def price_table(self) -> PriceTable:
        """The price table of ``prices`` (the packaged one when None) with ``price`` on top."""
        return PriceTable.load(self.prices).with_specs(self.price)


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
