"""The provider interface: one request/response shape and one ``generate()`` per provider.

Providers are registered by name with ``@provider("name")`` and import their SDK lazily. A model
is named by a spec string ``PROVIDER/MODEL[@BASE_URL][?key_env=VAR]``: ``openai/gpt-4.1``,
``azure/<deployment>``, ``anthropic/claude-opus-4-20250514``,
``openai-compatible/<model>@http://host:port/v1``, ``local/smollm2``, ``local/<path.gguf>``.
``?key_env=VAR`` names the environment variable holding the key for that endpoint (see
``secrets.key_env_for`` for where a provider's own key may go).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigError
from .registry import NotOfKind, Registry
from .secrets import redact, redact_url, url_secrets


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class GenerateRequest(BaseModel):
    """What to ask a model. Every field that can change the output enters the cache key; the
    prompt-cache hints (``TRANSPORT_ONLY``) do not."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message]
    """The conversation; a leading system message is passed the provider's way."""
    max_tokens: int | None = Field(1024, ge=1)
    """Most output tokens."""
    temperature: float | None = Field(None, ge=0, le=2)
    """Sampling temperature, 0 to 2 (None: the provider's default)."""
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    """OpenAI-style presence penalty; dropped (and recorded) where unsupported."""
    stop: list[str] | None = None
    """Stop sequences."""
    json_schema: dict[str, Any] | None = None
    """Ask for structured output matching this JSON schema."""
    schema_name: str = "answer"
    """Name of the schema (OpenAI json_schema name / Anthropic tool name)."""
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    """For reasoning models; dropped for others."""
    seed: int | None = None
    """Sampling seed where the provider supports one."""
    sample: int = Field(0, ge=0)
    """Sample index: repeated samples of one prompt are cached apart."""
    cache_prefix_messages: int = Field(0, ge=0)
    """Number of leading messages forming a constant prefix (an Anthropic cache breakpoint at its
    end); ``cache_points`` supersedes it. Transport only: not in the cache key."""
    cache_points: list[tuple[int, int]] = Field(default_factory=list)
    """Where prefixes other calls share end, as (message index, character offset in its content),
    shortest first: Anthropic cache breakpoints go there (``providers/anthropic.py``). Transport
    only: not in the cache key."""
    cache_group: str | None = None
    """Names the prefix this call shares with others (OpenAI's ``prompt_cache_key``; the runner
    sends the first call of a group alone before the rest). Transport only: not in the cache key."""


class Usage(BaseModel):
    input_tokens: int = 0
    """All input tokens, cached and cache-written ones included."""
    cached_input_tokens: int = 0
    """Input tokens read from the provider's prompt cache (billed at the cached rate)."""
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache (Anthropic: billed at the cache-write rate)."""
    output_tokens: int = 0
    """All output tokens, reasoning tokens included."""
    reasoning_tokens: int = 0
    """Of the output tokens, those a reasoning model spent thinking (as the provider reports them)."""
    unknown: str | None = None
    """None: the counts are what the provider reported. Otherwise why they are unknown (it
    reported no usage, or a negative or absurd count): the counts are then 0 placeholders, never
    added to a ledger, and the call's cost is unknown (None), never $0 (``checked_usage``)."""


MAX_TOKENS_PER_CALL = 10**9
"""More tokens than any one call can use: a count above it is a provider's bug, not usage."""


def checked_usage(raw: dict[str, Any] | None, required: tuple[str, ...]) -> tuple[dict[str, int], str | None]:
    """A provider's token counts (by its own names; None: it reported none) as whole numbers, and
    why they are unknown (None when they are all valid). ``required``: the counts that must be
    there (input and output tokens); a missing optional one (cache details) is 0. A negative, a
    non-integer or an absurd count (> ``MAX_TOKENS_PER_CALL``) makes the whole usage unknown, as
    does a missing required one: recorded as given, it would be a wrong bill."""
    if raw is None:
        return {}, "the provider reported no usage"
    clean: dict[str, int] = {}
    for name, v in raw.items():
        if v is None:
            if name in required:
                return {}, f"the provider reported no {name}"
            clean[name] = 0
        elif isinstance(v, bool) or not isinstance(v, int):
            return {}, f"the provider reported {name}={v!r}, not a whole number"
        elif v < 0:
            return {}, f"the provider reported a negative {name} ({v})"
        elif v > MAX_TOKENS_PER_CALL:
            return {}, f"the provider reported an absurd {name} ({v}, more than {MAX_TOKENS_PER_CALL} for one call)"
        else:
            clean[name] = v
    return clean, None


class GenerateResponse(BaseModel):
    """A normalised model answer."""

    text: str
    finish_reason: str | None = None
    """stop, length, content_filter, tool_use, refusal... as the provider says it."""
    usage: Usage = Field(default_factory=Usage)
    latency_s: float | None = None
    request_id: str | None = None
    model: str | None = None
    """The model id the provider reports."""
    dropped_params: list[str] = Field(default_factory=list)
    """Request parameters this model does not accept, left out of the call."""
    batch_id: str | None = None
    """The provider batch that answered this request (None: answered live)."""


class BatchInfo(BaseModel):
    """A provider batch as last seen."""

    id: str
    status: str
    """The provider's own word: validating, in_progress, completed, expired, ended..."""
    ended: bool
    """No more results will come: collect them."""
    done: int = 0
    """Requests finished so far (answered or failed)."""
    total: int = 0
    error: str | None = None
    """Why the whole batch failed (e.g. OpenAI input validation), else None."""


class CallError(Exception):
    """A call that failed for a reason a retry will not fix for this one request
    (context length, content filter, malformed answer, retries exhausted). The detail is
    redacted (``secrets.redact``): a provider or proxy may echo the key in its error text, and
    this text goes into run records. ``usage``: what the provider billed for the answer that
    failed (a refusal, a content filter), when it said so; None when it did not."""

    def __init__(self, reason: str, detail: str = "", usage: Usage | None = None) -> None:
        detail = redact(detail)
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.usage = usage


class ModelSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    model: str
    base_url: str | None = None
    key_env: str | None = None
    """The variable holding this endpoint's key (``?key_env=VAR``); None: the provider's own."""

    def __str__(self) -> str:
        return (
            f"{self.provider}/{self.model}"
            + (f"@{self.base_url}" if self.base_url else "")
            + (f"?key_env={self.key_env}" if self.key_env else "")
        )


_KEY_ENV = re.compile(r"\?key_env=([A-Za-z_][A-Za-z0-9_]*)$")


def parse_model_spec(spec: str) -> ModelSpec:
    if bad := [c for c in spec if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]:
        raise ConfigError(
            f"model spec {spec[:120]!r} holds {len(bad)} control or invisible character(s) "
            f"(first U+{ord(bad[0]):04X}): no model name or URL has one",
            hint="write the spec as PROVIDER/MODEL[@URL] without them (e.g. openai/gpt-4.1)",
        )
    provider, sep, rest = spec.partition("/")
    if not sep or not rest:
        raise ConfigError(
            f"model spec {spec!r} is not PROVIDER/MODEL",
            hint=f"e.g. openai/gpt-4.1, local/smollm2; providers: {', '.join(available_providers())}",
        )
    if provider_class(provider) is None:
        raise ConfigError(
            f"unknown provider {provider!r} in model spec {spec!r}",
            hint=f"use one of: {', '.join(available_providers())}",
        )
    key_env = None
    if "?key_env=" in rest:
        m = _KEY_ENV.search(rest)
        if m is None:
            raise ConfigError(
                f"model spec {spec!r}: ?key_env= must end the spec and name a variable",
                hint="e.g. openai-compatible/MODEL@https://host/v1?key_env=MY_SERVER_KEY",
            )
        rest, key_env = rest[: m.start()], m.group(1)
    model, _, base_url = rest.partition("@") if "@http" in rest else (rest, "", "")
    if base_url:
        _refuse_userinfo(spec, base_url)
    _refuse_key_in_url(spec, model, base_url)
    return ModelSpec(provider=provider, model=model, base_url=base_url or None, key_env=key_env)


def _refuse_userinfo(spec: str, base_url: str) -> None:
    """A user name or key in the URL (``http://KEY@host``, ``http://user:KEY@host``) would be stored
    with the spec in manifest.json, usage.json and every call record: refused, never echoed."""
    netloc = urlsplit(base_url).netloc
    if "@" not in netloc:
        return
    shown = spec.replace(netloc, "***@" + netloc.rpartition("@")[2])
    raise ConfigError(
        f"model spec {shown!r} has a user name or key in its URL (before the @ of the host), "
        "which would be written into the run's files",
        hint="take it out of the URL and put the key in an environment variable named by "
        "?key_env=VAR, e.g. openai-compatible/MODEL@https://host/v1?key_env=MY_SERVER_KEY "
        "with MY_SERVER_KEY set in the environment",
    )


def _refuse_key_in_url(spec: str, model: str, base_url: str) -> None:
    """What looks like a key in the URL's path or query, or in the model name
    (``secrets.url_secrets``: ``?api_key=...``, ``/v1/sk-...``) would be stored with the spec in
    manifest.json, usage.json, the usage journal and the call cache: refused, never echoed."""
    where = [f"model name: {w}" for w in url_secrets(f"http://model/{model}")]
    where += url_secrets(base_url) if base_url else []
    if not where:
        return
    shown = spec.replace(base_url, redact_url(base_url)) if base_url else spec
    shown = shown.replace(model, redact_url(f"http://model/{model}").removeprefix("http://model/"), 1)
    raise ConfigError(
        f"model spec {shown!r} holds what looks like a key ({', '.join(where)}), which would be "
        "written into the run's files (manifest, usage, the call cache)",
        hint="take it out of the spec and put the key in an environment variable named by "
        "?key_env=VAR, e.g. openai-compatible/MODEL@https://host/v1?key_env=MY_SERVER_KEY "
        "with MY_SERVER_KEY set in the environment (it is sent as a header); docs/llm.md "
        "says what counts as a key",
    )


PromptCaching = Literal["openai_prefix", "anthropic_breakpoints"] | None
Billing = Literal["per_token", "free"]
ENTRY_POINT_GROUP = "cocoeval.providers"
"""Other packages add providers under this entry-point group: ``name = "module:ProviderClass"``."""


class Provider(ABC):
    """One LLM provider. Subclasses implement ``generate`` (and ``prepare`` to drop parameters
    the model does not accept). Instances are created per run, inside its event loop."""

    name: str = ""
    # -- capabilities: class attributes, read by the estimate, the price table, the runner --------
    prompt_caching: ClassVar[PromptCaching] = None
    """How the provider caches prompts (what the cost forecast credits): ``"openai_prefix"``
    (the longest common prefix of recent requests), ``"anthropic_breakpoints"`` (explicit
    cache breakpoints), None (no prompt-cache credit)."""
    billing: ClassVar[Billing] = "per_token"
    """``"per_token"`` (priced by prices.yaml) or ``"free"`` (in-process / self-hosted)."""
    batch: ClassVar[bool] = False
    """Whether it has a batch API (then ``batch_limits`` and the ``batch_*`` methods); without
    one, batch mode sends its calls live."""
    in_process: ClassVar[bool] = False
    """The model runs in this process (loaded once): worker processes (``LLMConfig.processes``
    > 1) never send its calls."""

    def __init__(self, spec: ModelSpec, max_retries: int = 5, timeout_s: float = 120.0) -> None:
        self.spec = spec
        self.max_retries = max_retries
        self.timeout_s = timeout_s

    def prepare(self, request: GenerateRequest) -> tuple[GenerateRequest, list[str]]:
        """The request as this model will receive it, and the names of dropped parameters."""
        return request, []

    @abstractmethod
    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        """Send one prepared request. Raise FatalLLMError or CallError on failure."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Get ready to send (import the SDK, create the client): a worker process calls it before
        it takes this provider's calls, so that no call waits on an import."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release clients."""

    def check_ready(self) -> None:  # noqa: B027 - optional hook
        """Raise ConfigError if the provider cannot run (missing key, missing file)."""

    # -- batch API (optional): providers with one override all of these -----------------------
    batch_limits: ClassVar[tuple[int, int] | None] = None
    """(most requests, most bytes) per batch of the provider's batch API; None: it has none and
    batch mode sends its calls live."""

    async def batch_stage(self, items: list[tuple[str, GenerateRequest]]) -> str:
        """Prepare a batch of prepared requests named by custom id (the cache key) without creating
        it; returns a reference recorded before the batch is created: OpenAI uploads the JSONL
        input file (``upload:<file id>``); Anthropic sends nothing yet (``pending:<uuid>``)."""
        raise NotImplementedError(f"{self.name} has no batch API")

    async def batch_start(self, ref: str, items: list[tuple[str, GenerateRequest]]) -> str:
        """Create the batch of a staged reference; returns its id. Not retried by the SDK: were
        the answer lost, a retry would create a second, paid batch (see ``batch_find``)."""
        raise NotImplementedError(f"{self.name} has no batch API")

    async def batch_find(self, ref: str, *, since: float, requests: int, exclude: set[str]) -> str | None:
        """The batch an earlier ``batch_start`` of ``ref`` created, if any (by its input file, or
        by creation time and size), so that a lost answer or a killed process costs no second batch."""
        raise NotImplementedError(f"{self.name} has no batch API")

    async def batch_get(self, batch_id: str) -> BatchInfo:
        raise NotImplementedError(f"{self.name} has no batch API")

    async def batch_cancel(self, batch_id: str) -> str:
        """Ask the provider to cancel a batch; returns its status after the request."""
        raise NotImplementedError(f"{self.name} has no batch API")

    async def batch_results(self, batch_id: str) -> dict[str, GenerateResponse | Exception]:
        """Every result an ended batch has, by custom id: a response, or why that request failed
        (CallError; FatalLLMError when the answer says the run cannot go on, e.g. no credit)."""
        raise NotImplementedError(f"{self.name} has no batch API")

    def cache_identity(self) -> dict[str, Any]:
        """What, beside the request, determines the output: provider, model, endpoint."""
        return {"provider": self.name, "model": self.spec.model, "base_url": self.spec.base_url}


def _provider_entry(name: str, cls: Any) -> type[Provider]:
    """A provider class, given the name it is registered under (``Provider.name``)."""
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise NotOfKind(
            "is not a Provider subclass", "the entry point must name a class deriving cocoeval.llm.Provider"
        )
    cls.name = name
    return cls


PROVIDERS: Registry[type[Provider]] = Registry(
    "provider",
    group=ENTRY_POINT_GROUP,
    builtins="cocoeval.llm.providers",
    make=_provider_entry,
    unknown=("unknown provider {name!r}", "use one of: {known}"),
)
"""The providers by name: the built-in ones (``cocoeval.llm.providers``, imported at the first
look-up, so that importing the LLM layer's errors or base alone does not load them) and those of
installed packages' ``cocoeval.providers`` entry points."""


def provider(name: str) -> Callable[[type[Provider]], type[Provider]]:
    """Class decorator registering a provider under ``name``."""
    return PROVIDERS.register(name)


def provider_class(name: str) -> type[Provider] | None:
    """The provider class registered as ``name``: built in, or from an installed package's
    ``cocoeval.providers`` entry point (loaded at first lookup); None when there is none."""
    return PROVIDERS.find(name)


def available_providers() -> list[str]:
    return sorted(PROVIDERS.names())


def get_provider(spec: str | ModelSpec, **kwargs: Any) -> Provider:
    s = parse_model_spec(spec) if isinstance(spec, str) else spec
    return PROVIDERS.get(s.provider)(s, **kwargs)


TRANSPORT_ONLY = {"cache_prefix_messages", "cache_points", "cache_group"}
"""Request fields that only say how to send a call (prompt-cache hints), never what it asks:
left out of the cache key, so they never invalidate a cached answer."""


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(identity: dict[str, Any], request: GenerateRequest) -> str:
    """Content address of a call: sha256 of the canonical JSON of the provider identity and the
    prepared request (never a key or header)."""
    return keyed_request(canonical_json(identity), request)[0]


def keyed_request(identity_json: str, request: GenerateRequest) -> tuple[str, str]:
    """(key, the request's canonical JSON) from the identity's canonical JSON: the same key as
    ``request_key``, with the JSON the cache stores made once."""
    req = canonical_json(request.model_dump(mode="json", exclude=TRANSPORT_ONLY))
    return hashlib.sha256(f'{{"identity":{identity_json},"request":{req}}}'.encode()).hexdigest(), req
