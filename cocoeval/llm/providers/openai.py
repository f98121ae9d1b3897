"""OpenAI chat completions: ``openai/``, ``azure/``, ``openai-compatible/`` (vLLM, Ollama, any
OpenAI-wire server) and ``llama-cpp-server/`` (llama-cpp-python's server, which takes JSON
schemas as ``json_object`` + ``schema``). The ``openai`` SDK is imported on first use."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

from ...errors import ConfigError
from ..base import (
    BatchInfo,
    CallError,
    GenerateRequest,
    GenerateResponse,
    Provider,
    Usage,
    provider,
)
from ._errors import classify_error, post_json, sdk_call

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


def aiohttp_client(sdk: Any) -> Any:
    """The SDK's aiohttp transport (its documented choice for high concurrency: httpx's pool
    costs ~2 ms of CPU per request at 64 connections), or None for the default."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return None
    return sdk.DefaultAioHttpClient() if hasattr(sdk, "DefaultAioHttpClient") else None


def parse_chat_completion(body: Any, latency: float | None) -> GenerateResponse:
    """Normalise an OpenAI chat-completion JSON body."""
    try:
        choice = body["choices"][0]
        message = choice.get("message") or {}
        usage = body.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        finish = choice.get("finish_reason")
        text = message.get("content") or ""
        refusal = message.get("refusal")
        resp = GenerateResponse(
            text=text if isinstance(text, str) else str(text), finish_reason=finish,
            usage=Usage(input_tokens=usage.get("prompt_tokens") or 0,
                        cached_input_tokens=details.get("cached_tokens") or 0,
                        output_tokens=usage.get("completion_tokens") or 0),
            latency_s=latency, request_id=body.get("id"), model=body.get("model"))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        raise CallError("malformed_response", f"unexpected chat-completion body: {e!r}") from None
    if finish == "content_filter":
        raise CallError("content_filter", "the provider's content filter stopped the answer")
    if refusal:
        raise CallError("refusal", str(refusal))
    return resp


@provider("openai")
class OpenAIProvider(Provider):
    key_env = "OPENAI_API_KEY"
    key_required = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client_obj: Any = None

    # -- configuration ------------------------------------------------------------------
    def api_key(self) -> str | None:
        return os.environ.get(self.key_env)

    def check_ready(self) -> None:
        if self.key_required and not self.api_key():
            raise ConfigError(f"{self.name}/{self.spec.model} needs an API key: {self.key_env} is not set",
                              hint=f"export {self.key_env}=... (keys are read from the environment only)")

    def make_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(api_key=self.api_key() or "not-needed", base_url=self.spec.base_url,
                                  max_retries=self.max_retries, timeout=self.timeout_s,
                                  http_client=aiohttp_client(openai))

    @property
    def reasoning(self) -> bool:
        return bool(_REASONING.match(self.spec.model.split("/")[-1]))

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
        return {"type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True}}

    def kwargs(self, request: GenerateRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.spec.model,
                              "messages": [m.model_dump() for m in request.messages]}
        if request.max_tokens is not None:
            kw["max_completion_tokens" if self.reasoning else "max_tokens"] = request.max_tokens
        for f in ("temperature", "presence_penalty", "stop", "reasoning_effort", "seed"):
            if getattr(request, f) is not None:
                kw[f] = getattr(request, f)
        if request.json_schema is not None:
            kw["response_format"] = self.response_format(request)
        return kw

    # -- the call -------------------------------------------------------------------------
    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        import openai

        if self._client_obj is None:
            self._client_obj = self.make_client()
        body, latency = await post_json(self, "/chat/completions", self.kwargs(request), openai.APIError)
        return parse_chat_completion(body, latency)

    # -- the Batch API: JSONL upload, batches.create, polling, output/error files --------------
    batch_limits = (50_000, 200 * 1024 * 1024)
    batch_url = "/v1/chat/completions"
    BATCH_ENDED = ("completed", "expired", "cancelled", "failed")

    async def _sdk(self, call: Any) -> Any:
        import openai

        return await sdk_call(self, call, openai.APIError)

    def _client(self) -> Any:
        if self._client_obj is None:
            self._client_obj = self.make_client()
        return self._client_obj

    async def batch_create(self, items: list[tuple[str, GenerateRequest]],
                           on_upload: Callable[[str], None]) -> str:
        lines = [json.dumps({"custom_id": key, "method": "POST", "url": self.batch_url,
                             "body": self.kwargs(req)}, ensure_ascii=False) for key, req in items]
        data = ("\n".join(lines) + "\n").encode()
        f = await self._sdk(self._client().files.create(
            file=("cocoeval-batch.jsonl", data, "application/jsonl"), purpose="batch"))
        on_upload(f.id)
        return await self._create_from(f.id)

    async def _create_from(self, file_id: str) -> str:
        b = await self._sdk(self._client().batches.create(
            input_file_id=file_id, endpoint=self.batch_url, completion_window="24h",
            metadata={"cocoeval_input_file": file_id}))
        return b.id

    async def batch_adopt(self, upload_ref: str) -> str:
        async def find() -> str | None:
            async for b in self._client().batches.list(limit=100):
                if b.input_file_id == upload_ref:
                    return b.id
            return None

        found = await self._sdk(find())
        return found or await self._create_from(upload_ref)

    async def batch_get(self, batch_id: str) -> BatchInfo:
        b = await self._sdk(self._client().batches.retrieve(batch_id))
        rc = b.request_counts
        error = None
        if b.status == "failed":
            errs = (b.errors.data if b.errors and b.errors.data else None) or []
            error = "; ".join(f"line {e.line}: {e.message}" if e.line else str(e.message) for e in errs[:5])
            error = error or "the provider gave no reason"
        return BatchInfo(id=b.id, status=b.status, ended=b.status in self.BATCH_ENDED, error=error,
                         done=(rc.completed + rc.failed) if rc else 0, total=rc.total if rc else 0)

    async def batch_cancel(self, batch_id: str) -> str:
        return (await self._sdk(self._client().batches.cancel(batch_id))).status

    async def batch_results(self, batch_id: str) -> dict[str, GenerateResponse | Exception]:
        client = self._client()
        b = await self._sdk(client.batches.retrieve(batch_id))
        out: dict[str, GenerateResponse | Exception] = {}
        for file_id in (b.output_file_id, b.error_file_id):
            if not file_id:
                continue
            content = await self._sdk(client.files.content(file_id))
            for n, line in enumerate(content.text.splitlines(), 1):
                if line.strip():
                    key, result = self._batch_line(line, file_id, n)
                    out[key] = result
        return out

    def _batch_line(self, line: str, file_id: str, n: int) -> tuple[str, GenerateResponse | Exception]:
        try:
            rec = json.loads(line)
            key = rec["custom_id"]
        except (ValueError, KeyError, TypeError) as e:
            raise CallError("malformed_response", f"batch file {file_id} line {n}: {e!r}") from None
        resp, err = rec.get("response") or {}, rec.get("error") or {}
        if resp.get("status_code") == 200:
            try:
                out: GenerateResponse | Exception = parse_chat_completion(resp.get("body"), None)
            except CallError as e:
                out = e
        elif err:
            code = str(err.get("code") or "batch_error")
            out = CallError(code if code.startswith("batch_") else f"batch_{code}", str(err.get("message") or ""))
        else:
            body = resp.get("body")
            msg = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else str(body)
            out = classify_error(resp.get("status_code"), body, str(msg), provider=self.name,
                                 model=self.spec.model, key_env=self.key_env)
        return key, out

    async def aclose(self) -> None:
        if self._client_obj is not None:
            await self._client_obj.close()
            self._client_obj = None


@provider("azure")
class AzureOpenAIProvider(OpenAIProvider):
    """``azure/<deployment>``: endpoint from AZURE_OPENAI_ENDPOINT (or ``@URL``), API version
    from OPENAI_API_VERSION, key from AZURE_OPENAI_API_KEY."""

    key_env = "AZURE_OPENAI_API_KEY"
    default_api_version = "2024-10-21"
    batch_url = "/chat/completions"  # Azure's batch line url (a global-batch deployment)

    def check_ready(self) -> None:
        super().check_ready()
        if not (self.spec.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")):
            raise ConfigError("azure needs an endpoint: AZURE_OPENAI_ENDPOINT is not set",
                              hint="export AZURE_OPENAI_ENDPOINT=https://NAME.openai.azure.com "
                                   "or write azure/DEPLOYMENT@https://...")

    def cache_identity(self) -> dict[str, Any]:
        return {**super().cache_identity(),
                "base_url": self.spec.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")}

    def make_client(self) -> Any:
        import openai

        return openai.AsyncAzureOpenAI(
            api_key=self.api_key(), azure_endpoint=self.spec.base_url or os.environ["AZURE_OPENAI_ENDPOINT"],
            api_version=os.environ.get("OPENAI_API_VERSION", self.default_api_version),
            max_retries=self.max_retries, timeout=self.timeout_s, http_client=aiohttp_client(openai))


@provider("openai-compatible")
class OpenAICompatibleProvider(OpenAIProvider):
    """Any server speaking the OpenAI wire format: ``openai-compatible/<model>@http://host/v1``.
    Key from OPENAI_COMPATIBLE_API_KEY when the server wants one."""

    key_env = "OPENAI_COMPATIBLE_API_KEY"
    key_required = False
    unsupported_schema_keys = ()  # vLLM and llama.cpp grammars take them

    batch_limits = None  # vLLM, Ollama and llama.cpp servers have no Batch API: sent live

    def check_ready(self) -> None:
        if not self.spec.base_url:
            raise ConfigError(f"{self.name}/{self.spec.model} needs a server URL",
                              hint=f"write {self.name}/{self.spec.model}@http://HOST:PORT/v1")

    @property
    def reasoning(self) -> bool:
        return False  # self-hosted models take the sampling parameters


@provider("llama-cpp-server")
class LlamaCppServerProvider(OpenAICompatibleProvider):
    """llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``)."""

    def response_format(self, request: GenerateRequest) -> dict[str, Any]:
        return {"type": "json_object", "schema": request.json_schema}
