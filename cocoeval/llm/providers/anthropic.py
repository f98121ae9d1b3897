"""Anthropic Messages API: ``anthropic/<model>[@BASE_URL]``. Key from ANTHROPIC_API_KEY, sent
to api.anthropic.com only (or where ANTHROPIC_BASE_URL points the SDK); another ``@URL`` needs
``?key_env=VAR`` (see ``secrets.key_env_for``).

Prompt caching: breakpoints (``cache_control``) at the request's ``cache_points`` whose prefix
reaches the model's minimum cacheable length, at most 4; a message with a breakpoint inside it is
sent as several text blocks cut there.

Structured output goes through a forced tool call whose input schema is the JSON schema.
presence_penalty, seed and reasoning_effort are not accepted and are dropped (and recorded)."""

from __future__ import annotations

import json
from typing import Any

from ..base import CallError, GenerateRequest, GenerateResponse, Usage, checked_usage, provider
from ..promptcache import ANTHROPIC_MAX_BREAKPOINTS, anthropic_min_tokens
from ..usage import count_tokens
from ._batches import AnthropicBatches
from ._http import HTTPProvider


def parse_message(body: Any, latency: float | None) -> GenerateResponse:
    """Normalise an Anthropic Messages JSON body (tool_use input becomes the JSON text)."""
    try:
        stop = body.get("stop_reason")
        parts = []
        for block in body.get("content") or []:
            if block.get("type") == "text":
                parts.append(block.get("text") or "")
            elif block.get("type") == "tool_use":
                parts.append(json.dumps(block.get("input"), ensure_ascii=False))
        u = body.get("usage")
        c, unknown = checked_usage(
            None
            if not u
            else {
                k: u.get(k)
                for k in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
            },
            required=("input_tokens", "output_tokens"),
        )
        cached, created = c.get("cache_read_input_tokens", 0), c.get("cache_creation_input_tokens", 0)
        resp = GenerateResponse(
            text="".join(parts),
            finish_reason=stop,
            usage=Usage(
                input_tokens=c.get("input_tokens", 0) + cached + created,
                cached_input_tokens=cached,
                cache_write_tokens=created,
                output_tokens=c.get("output_tokens", 0),
                unknown=unknown,
            ),
            latency_s=latency,
            request_id=body.get("id"),
            model=body.get("model"),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise CallError("malformed_response", f"unexpected messages body: {e!r}") from None
    if stop == "refusal":  # billed all the same: the usage goes with the failure
        raise CallError("content_filter", "the model refused (stop_reason: refusal)", usage=resp.usage)
    return resp


def _blocks(text: str, cuts: list[int]) -> list[dict[str, Any]]:
    """A text as content blocks cut at the given offsets, each block that ends at a cut with a
    cache breakpoint (adjacent text blocks of one message are one text to the model)."""
    out: list[dict[str, Any]] = []
    at = 0
    for cut in sorted(set(cuts)):
        if cut > at:
            out.append({"type": "text", "text": text[at:cut], "cache_control": {"type": "ephemeral"}})
            at = cut
    if at < len(text) or not out:
        out.append({"type": "text", "text": text[at:]})
    return out


@provider("anthropic")
class AnthropicProvider(AnthropicBatches, HTTPProvider):
    prompt_caching = "anthropic_breakpoints"
    key_env = "ANTHROPIC_API_KEY"
    key_hosts = ("api.anthropic.com",)
    sdk_module = "anthropic"
    client_class = "AsyncAnthropic"
    path = "/v1/messages"

    def prepare(self, request: GenerateRequest) -> tuple[GenerateRequest, list[str]]:
        drop = [f for f in ("presence_penalty", "seed", "reasoning_effort") if getattr(request, f) is not None]
        return request.model_copy(update=dict.fromkeys(drop)), drop

    def breakpoints(self, request: GenerateRequest) -> list[tuple[int, int]]:
        """The cache breakpoints of a request, as (message index, character offset): its
        ``cache_points`` (or the end of its ``cache_prefix_messages``), without those whose prefix
        is under the model's minimum cacheable length (they would not be cached), at most 4: the
        longest prefixes."""
        msgs = request.messages
        points = list(request.cache_points)
        if not points and request.cache_prefix_messages:
            n = min(request.cache_prefix_messages, len(msgs))
            points = [(n - 1, len(msgs[n - 1].content))]
        minimum = anthropic_min_tokens(self.spec.model)
        keep: list[tuple[int, int]] = []
        for i, off in sorted({(i, min(off, len(msgs[i].content))) for i, off in points if 0 <= i < len(msgs)}):
            if off <= 0:
                continue
            before = sum(count_tokens(m.content) + 4 for m in msgs[:i]) + count_tokens(msgs[i].content[:off])
            if before >= minimum:
                keep.append((i, off))
        return keep[-ANTHROPIC_MAX_BREAKPOINTS:]

    def kwargs(self, request: GenerateRequest) -> dict[str, Any]:
        points = self.breakpoints(request)
        system = [(i, m) for i, m in enumerate(request.messages) if m.role == "system"]
        rest = [(i, m) for i, m in enumerate(request.messages) if m.role != "system"]
        msgs: list[dict[str, Any]] = []
        for i, m in rest:
            cuts = [off for j, off in points if j == i]
            msgs.append({"role": m.role, "content": _blocks(m.content, cuts) if cuts else m.content})
        kw: dict[str, Any] = {"model": self.spec.model, "max_tokens": request.max_tokens or 1024, "messages": msgs}
        if system:
            cuts, at = [], 0
            for i, m in system:  # several system messages are sent as one text
                cuts += [at + off for j, off in points if j == i]
                at += len(m.content) + 2
            kw["system"] = _blocks("\n\n".join(m.content for _, m in system), cuts)
        if request.temperature is not None:
            kw["temperature"] = request.temperature
        if request.stop:
            kw["stop_sequences"] = request.stop
        if request.json_schema is not None:
            kw["tools"] = [
                {
                    "name": request.schema_name,
                    "description": "Give the answer in this form.",
                    "input_schema": request.json_schema,
                }
            ]
            kw["tool_choice"] = {"type": "tool", "name": request.schema_name}
        return kw

    def parse(self, body: Any, latency: float | None) -> GenerateResponse:
        return parse_message(body, latency)
