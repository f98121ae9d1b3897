"""OpenAI chat completions: ``openai/``, ``azure/``, ``openai-compatible/`` (vLLM, Ollama, any
OpenAI-wire server) and ``llama-cpp-server/`` (llama-cpp-python's server, which takes JSON
schemas as ``json_object`` + ``schema``). The ``openai`` SDK is imported on first use."""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from ..base import (
    CallError,
    GenerateRequest,
    GenerateResponse,
    PromptCaching,
    Usage,
    checked_usage,
    provider,
)
from ..errors import ConfigError
from ..secrets import host_of
from ._batches import OpenAIBatches
from ._http import HTTPProvider

_REASONING = re.compile(r"^(o\d|gpt-5(?!.*chat))")


def _strip_keys(schema: Any, keys: tuple[str, ...]) -> tuple[Any, set[str]]:
    removed: set[str] = set()

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k in keys and not isinstance(v, dict):
                    removed.add(k)
                    continue
                out[k] = walk(v)
            return out
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(schema), removed


def parse_chat_completion(body: Any, latency: float | None) -> GenerateResponse:
    """Normalise an OpenAI chat-completion JSON body."""
    try:
        choice = body["choices"][0]
        message = choice.get("message") or {}
        usage = body.get("usage")
        details = (usage.get("prompt_tokens_details") if usage else None) or {}
        out_details = (usage.get("completion_tokens_details") if usage else None) or {}
        counts, unknown = checked_usage(
            None
            if not usage
            else {
                "prompt_tokens": usage.get("prompt_tokens"),
                "completion_tokens": usage.get("completion_tokens"),
                "cached_tokens": details.get("cached_tokens"),
                "reasoning_tokens": out_details.get("reasoning_tokens"),
            },
            required=("prompt_tokens", "completion_tokens"),
        )
        finish = choice.get("finish_reason")
        text = message.get("content") or ""
        refusal = message.get("refusal")
        resp = GenerateResponse(
            text=text if isinstance(text, str) else str(text),
            finish_reason=finish,
            usage=Usage(
                input_tokens=counts.get("prompt_tokens", 0),
                cached_input_tokens=counts.get("cached_tokens", 0),
                output_tokens=counts.get("completion_tokens", 0),
                reasoning_tokens=counts.get("reasoning_tokens", 0),
                unknown=unknown,
            ),
            latency_s=latency,
            request_id=body.get("id"),
            model=body.get("model"),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        raise CallError("malformed_response", f"unexpected chat-completion body: {e!r}") from None
    if finish == "content_filter":  # billed all the same: the usage goes with the failure
        raise CallError("content_filter", "the provider's content filter stopped the answer", usage=resp.usage)
    if refusal:
        raise CallError("refusal", str(refusal), usage=resp.usage)
    return resp


@provider("openai")
class OpenAIProvider(OpenAIBatches, HTTPProvider):
    """``openai/<model>``: OPENAI_API_KEY goes to api.openai.com only (or where OPENAI_BASE_URL
    points the SDK); another ``@URL`` needs ``?key_env=VAR`` (see ``secrets.key_env_for``)."""

    prompt_caching: ClassVar[PromptCaching] = "openai_prefix"
    key_env = "OPENAI_API_KEY"
    key_hosts: tuple[str, ...] = ("api.openai.com",)
    key_other: str | None = "openai-compatible"
    sdk_module = "openai"
    client_class = "AsyncOpenAI"
    path = "/chat/completions"

    # -- configuration ------------------------------------------------------------------
    def client_args(self) -> dict[str, Any]:
        return {"api_key": self.api_key() or "not-needed", "base_url": self.spec.base_url}

    @property
    def reasoning(self) -> bool:
        return bool(_REASONING.match(self.spec.model.split("/")[-1]))

    sends_cache_key = True
    """Send ``prompt_cache_key`` (a call's ``cache_group``): OpenAI and Azure route the calls of a
    shared prefix to the same cache with it; self-hosted servers are not sent it."""

    unsupported_schema_keys: tuple[str, ...] = ("maxLength", "minLength", "minItems", "maxItems")
    """JSON-schema keywords OpenAI's strict structured outputs reject; dropped and recorded."""

    def prepare(self, request: GenerateRequest) -> tuple[GenerateRequest, list[str]]:
        drop = []
        if self.reasoning:
            drop = [f for f in ("temperature", "presence_penalty", "stop") if getattr(request, f) is not None]
        elif request.reasoning_effort is not None:
            drop = ["reasoning_effort"]
        update: dict[str, Any] = dict.fromkeys(drop)
        if request.json_schema is not None and self.unsupported_schema_keys:
            schema, removed = _strip_keys(request.json_schema, self.unsupported_schema_keys)
            if removed:
                update["json_schema"] = schema
                drop += [f"json_schema.{k}" for k in sorted(removed)]
        return request.model_copy(update=update), drop

    def response_format(self, request: GenerateRequest) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True},
        }

    def kwargs(self, request: GenerateRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.spec.model, "messages": [m.model_dump() for m in request.messages]}
        if request.max_tokens is not None:
            kw["max_completion_tokens" if self.reasoning else "max_tokens"] = request.max_tokens
        for f in ("temperature", "presence_penalty", "stop", "reasoning_effort", "seed"):
            if getattr(request, f) is not None:
                kw[f] = getattr(request, f)
        if request.json_schema is not None:
            kw["response_format"] = self.response_format(request)
        if request.cache_group and self.sends_cache_key:
            kw["prompt_cache_key"] = request.cache_group  # routes a shared prefix to one cache
        return kw

    def parse(self, body: Any, latency: float | None) -> GenerateResponse:
        return parse_chat_completion(body, latency)


@provider("azure")
class AzureOpenAIProvider(OpenAIProvider):
    """``azure/<deployment>``: endpoint from AZURE_OPENAI_ENDPOINT (or ``@URL``), API version
    from OPENAI_API_VERSION, key from AZURE_OPENAI_API_KEY. The key goes to the endpoint the user
    set in AZURE_OPENAI_ENDPOINT (their own choice, in their environment) and to Azure's own
    hosts (https ``*.openai.azure.com``, ``*.cognitiveservices.azure.com``,
    ``*.services.ai.azure.com``); another ``@URL`` needs ``?key_env=VAR``."""

    key_env = "AZURE_OPENAI_API_KEY"
    key_hosts = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
    default_api_version = "2024-10-21"
    batch_url = "/chat/completions"  # Azure's batch line url (a global-batch deployment)
    batch_wait_for_file = True  # Azure processes an uploaded file before a batch may use it
    client_class = "AsyncAzureOpenAI"

    def check_ready(self) -> None:
        super().check_ready()
        if not (self.spec.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")):
            raise ConfigError(
                "azure needs an endpoint: AZURE_OPENAI_ENDPOINT is not set",
                hint="export AZURE_OPENAI_ENDPOINT=https://NAME.openai.azure.com or write azure/DEPLOYMENT@https://...",
            )

    def cache_identity(self) -> dict[str, Any]:
        return {**super().cache_identity(), "base_url": self.spec.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")}

    def key_base_url(self) -> str | None:
        url, configured = self.spec.base_url, os.environ.get("AZURE_OPENAI_ENDPOINT")
        if url and configured and host_of(url) == host_of(configured) and host_of(url):
            return None  # the endpoint the user configured
        return url

    def client_args(self) -> dict[str, Any]:
        return {
            "api_key": self.api_key(),
            "azure_endpoint": self.spec.base_url or os.environ["AZURE_OPENAI_ENDPOINT"],
            "api_version": os.environ.get("OPENAI_API_VERSION", self.default_api_version),
        }


@provider("openai-compatible")
class OpenAICompatibleProvider(OpenAIProvider):
    """Any server speaking the OpenAI wire format: ``openai-compatible/<model>@http://host/v1``.
    Key from OPENAI_COMPATIBLE_API_KEY when the server wants one."""

    key_env = "OPENAI_COMPATIBLE_API_KEY"
    key_hosts = ()
    key_any_host = True  # its own variable, meant for such servers
    key_required = False
    key_other = None
    unsupported_schema_keys = ()  # vLLM and llama.cpp grammars take them
    sends_cache_key = False  # not part of every OpenAI-compatible server's schema

    batch = False  # vLLM, Ollama and llama.cpp servers have no Batch API: sent live
    batch_limits = None
    prompt_caching = None  # a server's own prefix cache, if any, is not billed as cached input

    def check_ready(self) -> None:
        if not self.spec.base_url:
            raise ConfigError(
                f"{self.name}/{self.spec.model} needs a server URL",
                hint=f"write {self.name}/{self.spec.model}@http://HOST:PORT/v1",
            )
        self.check_key()

    @property
    def reasoning(self) -> bool:
        return False  # self-hosted models take the sampling parameters


@provider("llama-cpp-server")
class LlamaCppServerProvider(OpenAICompatibleProvider):
    """llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``)."""

    billing = "free"  # self-hosted: no per-token bill

    def response_format(self, request: GenerateRequest) -> dict[str, Any]:
        return {"type": "json_object", "schema": request.json_schema}
